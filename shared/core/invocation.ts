/**
 * One handler invocation: the parsed event, the abort signal middy fires shortly before Lambda's deadline, and
 * that deadline. Also the two mechanisms every operation shares: the per-EIP lease, and a metadata write that
 * re-reads and retries when it loses an optimistic-concurrency race.
 */
import { ConflictError, DeadlineError, LeaseHeldError } from '../domain/errors.js';
import type { IptablesEip } from '../domain/kube-ovn.js';
import { LEASE_MAX_MS, leaseKey } from '../domain/lease.js';
import type { EipEvent } from '../events.js';
import type { Deps, EipObjectChange, Logger } from '../ports.js';
import { batcherOf } from './batch.js';

export interface Invocation {
  event: EipEvent;
  signal: AbortSignal;
  /** Epoch ms by which the invocation must be done; the lease never outlives it. */
  deadline: number;
  log: Logger;
}

/**
 * Runs `fn` holding the EIP's lease (at most LEASE_MAX_MS, never past the deadline). A held lease throws
 * LeaseHeldError (retryable) at once: no spinning. Contention is counted here, once, for every Leases adapter.
 */
export async function withLease<T>(inv: Invocation, deps: Deps, fn: () => Promise<T>): Promise<T> {
  const now = deps.clock.now();
  const expiresAt = Math.min(inv.deadline, now + LEASE_MAX_MS);
  if (expiresAt <= now) throw new DeadlineError('no time left to take the lease');
  let lease: Awaited<ReturnType<Deps['leases']['acquire']>>;
  try {
    lease = await deps.leases.acquire(leaseKey(inv.event.object.name), deps.newId(), expiresAt);
  } catch (e) {
    if (e instanceof LeaseHeldError) deps.metrics.count('LeaseContention');
    throw e;
  }
  // The container's gateway batching (./batch.ts) keeps a gateway pod's lease while an invocation runs.
  const leave = batcherOf(deps).enter();
  try {
    return await fn();
  } finally {
    await deps.leases.release(lease).catch((e: unknown) => {
      // The lease expires on its own; a failed release only delays the next invocation.
      inv.log.warn('lease release failed', { error: String(e) });
    });
    await leave();
  }
}

export function checkDeadline(inv: Invocation): void {
  if (inv.signal.aborted)
    throw new DeadlineError('invocation deadline reached; the work done so far is safe to repeat');
}

/** Attempts of one metadata write before a lost race is given to the caller as a retryable ConflictError. */
export const META_WRITE_ATTEMPTS = 4;

/**
 * Writes spec/labels/finalizers computed from a fresh read, guarded by its resourceVersion. On a conflict it
 * re-reads and recomputes (a concurrent status write bumps the resourceVersion without touching what we change).
 * `compute` returns undefined when nothing needs writing. Returns the latest object (undefined if it is gone).
 */
export async function updateEipMeta(
  deps: Deps,
  name: string,
  current: IptablesEip,
  compute: (eip: IptablesEip) => EipObjectChange | undefined,
): Promise<IptablesEip | undefined> {
  let eip: IptablesEip | undefined = current;
  for (let attempt = 0; attempt < META_WRITE_ATTEMPTS && eip; attempt++) {
    const change = compute(eip);
    if (!change) return eip;
    try {
      return await deps.cluster.updateEip(name, eip.metadata.resourceVersion, change);
    } catch (e) {
      if (!(e instanceof ConflictError)) throw e;
      deps.metrics.count('WriteConflicts');
      eip = await deps.cluster.getEip(name);
      if (eip && eip.metadata.uid !== current.metadata.uid) return undefined;
    }
  }
  if (!eip) return undefined;
  throw new ConflictError(
    `iptables-eips "${name}" kept changing under ${META_WRITE_ATTEMPTS} consecutive writes`,
  );
}
