/**
 * The four EIP operations, the entry points the edge (shared/lambda/eip-handler.ts) calls. Each takes the EIP's
 * lease (the prelude: lease, then one read), then converges; every one is safe to run twice, concurrently with a
 * sibling, or out of order. One file per operation, each read top-down (docs/architecture.md,
 * docs/adr/0014-event-path-top-down.md):
 *
 * - add, update: ./converge.ts — finalizer → allocation (durable) → address on the gateway → its placement
 *   recorded in IPAM → QoS → spec and labels → status (ADR 0002);
 * - reset: ./reset.ts — status.nat and labels;
 * - delete, and a terminating EIP seen by any of them: ./delete.ts — gateway clean-up where the address really
 *   is (the recorded placement) → release → finalizer removal;
 * - the lease prelude: ./prelude.ts (`underLease`); permanent errors become a recorded `rejected` outcome in one
 *   place: ./settle.ts (`settle`).
 */
import { converge } from './converge.js';
import { remove } from './delete.js';
import { underLease } from './prelude.js';
import { reset } from './reset.js';
import { type Operation, settle } from './settle.js';

export type { Operation } from './settle.js';
export { invalidEvent } from './settle.js';

export const addEip: Operation = settle((inv, deps) => underLease(inv, deps, converge));
export const updateEip: Operation = settle((inv, deps) => underLease(inv, deps, converge));
export const resetEip: Operation = settle((inv, deps) => underLease(inv, deps, reset));
export const deleteEip: Operation = settle(remove);

export const operations = { add: addEip, update: updateEip, reset: resetEip, delete: deleteEip } as const;
