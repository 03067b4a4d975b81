/**
 * In-memory Leases: the same rules as the DynamoDB adapter (shared/adapters/dynamo/leases.ts): take when free,
 * expired or already ours; an expiry must lie in the future and is cut to LEASE_MAX_MS (shared/domain/lease.ts);
 * release only by the holder.
 */
import { DeadlineError, InvalidSpecError, LeaseHeldError } from '../../shared/domain/errors.js';
import { LEASE_MAX_MS } from '../../shared/domain/lease.js';
import type { Clock, Lease, Leases } from '../../shared/ports.js';

export class MemoryLeases implements Leases {
  readonly held = new Map<string, Lease>();
  private readonly clock: Clock;

  constructor(options: { clock?: Clock } = {}) {
    this.clock = options.clock ?? { now: () => Date.now() };
  }

  async acquire(key: string, holder: string, expiresAt: number): Promise<Lease> {
    if (!key || !holder) throw new InvalidSpecError('a lease needs a key and a holder');
    const now = this.clock.now();
    if (!Number.isFinite(expiresAt) || expiresAt <= now)
      throw new DeadlineError(`no time left to hold lease ${key} (expiry ${expiresAt} is not after ${now})`);
    const current = this.held.get(key);
    if (current && current.holder !== holder && current.expiresAt > now) {
      throw new LeaseHeldError(
        `lease ${key} is held by ${current.holder}`,
        current.holder,
        current.expiresAt,
      );
    }
    const lease: Lease = { key, holder, expiresAt: Math.min(Math.floor(expiresAt), now + LEASE_MAX_MS) };
    this.held.set(key, lease);
    return lease;
  }

  async release(lease: Lease): Promise<void> {
    if (this.held.get(lease.key)?.holder === lease.holder) this.held.delete(lease.key);
  }
}
