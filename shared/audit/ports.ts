/**
 * The seams an audit needs beyond the handlers' ports (shared/ports.ts): a read of the whole IPAM table, the state of
 * one address item, conditional deletion of an expired lease, and the record of orphan sightings that the grace
 * period of orphan removal is judged by (docs/adr/0039-drift-repair.md). DynamoDB: shared/adapters/dynamo/audit.ts.
 */
import type { Lease } from '../ports.js';
import type { AuditAllocation } from './model.js';

/** An address item as it is now: held (by whom), released (when), or never used (no item). */
export type AddressRecord =
  | { state: 'held'; ownerUid: string }
  | { state: 'released'; releasedAt: number }
  | { state: 'never-used' };

export interface AuditStore {
  /** Every held allocation (with its claim time) and every lease item, as stored now. */
  read(): Promise<{ allocations: AuditAllocation[]; leases: Lease[] }>;
  /** One consistent read of an address item. */
  addressRecord(subnet: string, address: string): Promise<AddressRecord>;
  /** Deletes the lease item only if it is still exactly `lease` (same holder and expiry); false otherwise. */
  deleteLease(lease: Lease): Promise<boolean>;
  /** When each orphan address on `gateway` was first seen, by address. */
  sightings(gateway: string): Promise<Map<string, number>>;
  /** Records the first sighting of an orphan (an existing record is kept: the first sighting is what counts). */
  recordSighting(gateway: string, address: string, at: number): Promise<void>;
  forgetSighting(gateway: string, address: string): Promise<void>;
}
