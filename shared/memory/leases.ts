/** In-memory Leases: the same rules as the DynamoDB adapter (take when free, expired or already ours). */
import { LeaseHeldError } from '../domain/errors.js';
import type { Clock, Lease, Leases } from '../ports.js';

export class MemoryLeases implements Leases {
  readonly held = new Map<string, Lease>();
  private readonly clock: Clock;

  constructor(options: { clock?: Clock } = {}) {
    this.clock = options.clock ?? { now: () => Date.now() };
  }

  async acquire(key: string, holder: string, expiresAt: number): Promise<Lease> {
    const current = this.held.get(key);
    if (current && current.holder !== holder && current.expiresAt > this.clock.now()) {
      throw new LeaseHeldError(
        `lease ${key} is held by ${current.holder}`,
        current.holder,
        current.expiresAt,
      );
    }
    const lease: Lease = { key, holder, expiresAt };
    this.held.set(key, lease);
    return lease;
  }

  async release(lease: Lease): Promise<void> {
    if (this.held.get(lease.key)?.holder === lease.holder) this.held.delete(lease.key);
  }
}
