/**
 * The Leases contract (test/contract/leases.ts) on the in-memory twin (local/memory/leases.ts), and the proof that
 * the contract can fail: each twin below breaks one promise of the port, and the check named beside it (among
 * others, perhaps) must fail on it.
 */
import { describe, expect, it } from 'vitest';
import { MemoryLeases } from '../../local/memory/leases.js';
import { LeaseHeldError } from '../../shared/domain/errors.js';
import type { Clock, Lease } from '../../shared/ports.js';
import { describeLeasesContract, type LeasesFactory, leasesChecks, leasesWorld } from '../contract/leases.js';

describeLeasesContract('in-memory', async (clock) => {
  const leases = new MemoryLeases({ clock });
  return { leases, peer: leases };
});

/** A MemoryLeases that knows its clock, for the broken twins to judge expiry with. */
class Twin extends MemoryLeases {
  constructor(readonly clockOf: Clock) {
    super({ clock: clockOf });
  }
  protected other(key: string, holder: string): Lease | undefined {
    const l = this.held.get(key);
    return l && l.holder !== holder ? l : undefined;
  }
}

const flaws: { flaw: string; caughtBy: string; make: LeasesFactory }[] = [
  {
    flaw: 'acquire ignores an unexpired holder',
    caughtBy: 'refuses a second holder with a retryable LeaseHeldError naming the holder and its expiry',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override acquire(key: string, holder: string, expiresAt: number) {
          this.held.delete(key);
          return super.acquire(key, holder, expiresAt);
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'a lease never expires',
    caughtBy: 'lets another holder take an expired lease over, and then refuses the former holder',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async acquire(key: string, holder: string, expiresAt: number) {
          const o = this.other(key, holder);
          if (o) throw new LeaseHeldError('held', o.holder, o.expiresAt);
          return super.acquire(key, holder, expiresAt);
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'a lease is still held at its expiry (off by one)',
    caughtBy: 'holds the lease until its expiry by the clock: refused one millisecond before, free at it',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async acquire(key: string, holder: string, expiresAt: number) {
          const o = this.other(key, holder);
          if (o && o.expiresAt >= this.clockOf.now()) throw new LeaseHeldError('held', o.holder, o.expiresAt);
          return super.acquire(key, holder, expiresAt);
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'a renewal keeps the old expiry',
    caughtBy:
      'renews when the holder acquires again: the new expiry counts, for others and on the other instance',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async acquire(key: string, holder: string, expiresAt: number) {
          const l = this.held.get(key);
          if (l && l.holder === holder && l.expiresAt > this.clockOf.now()) return l;
          return super.acquire(key, holder, expiresAt);
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'two instances do not share one store',
    caughtBy: 'lets exactly one of many concurrent acquires on a free key win, across two instances',
    make: async (clock) => ({ leases: new MemoryLeases({ clock }), peer: new MemoryLeases({ clock }) }),
  },
  {
    flaw: 'acquire reads, then writes after an await (no conditional write)',
    caughtBy: 'lets exactly one of many concurrent acquires on a free key win, across two instances',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async acquire(key: string, holder: string, expiresAt: number) {
          const o = this.other(key, holder);
          await new Promise((r) => setImmediate(r));
          if (o && o.expiresAt > this.clockOf.now()) throw new LeaseHeldError('held', o.holder, o.expiresAt);
          this.held.delete(key);
          return super.acquire(key, holder, expiresAt);
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'release frees the key whoever asks',
    caughtBy: 'ignores a release by anyone but the holder',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async release(lease: Lease) {
          this.held.delete(lease.key);
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'release never frees the key',
    caughtBy: 'frees the key at once when the holder releases it; a second release is harmless',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async release() {}
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'release compares the whole lease, so a renewed lease survives the release of the first one',
    caughtBy: 'releases the renewed lease when the holder gives up the lease object of its first acquire',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async release(lease: Lease) {
          if (this.held.get(lease.key)?.expiresAt === lease.expiresAt) await super.release(lease);
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'an expiry beyond the maximum is kept',
    caughtBy: 'cuts an expiry beyond the lease maximum to LEASE_MAX_MS from now',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async acquire(key: string, holder: string, expiresAt: number) {
          await super.acquire(key, holder, expiresAt);
          const l = { key, holder, expiresAt };
          this.held.set(key, l);
          return l;
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
  {
    flaw: 'an expiry in the past is accepted',
    caughtBy: 'refuses an expiry that is not in the future with a DeadlineError, and takes nothing',
    make: async (clock) => {
      const leases = new (class extends Twin {
        override async acquire(key: string, holder: string, expiresAt: number) {
          if (!(expiresAt > this.clockOf.now())) {
            const l = { key, holder, expiresAt };
            this.held.set(key, l);
            return l;
          }
          return super.acquire(key, holder, expiresAt);
        }
      })(clock);
      return { leases, peer: leases };
    },
  },
];

describe('the Leases contract fails a twin that breaks the port', () => {
  it.each(flaws)('$flaw', async ({ caughtBy, make }) => {
    expect(leasesChecks.map((c) => c.name)).toContain(caughtBy);
    const failed: string[] = [];
    for (const check of leasesChecks) {
      const ok = await check.run(await leasesWorld(make)).then(
        () => true,
        () => false,
      );
      if (!ok) failed.push(check.name);
    }
    expect(failed).toContain(caughtBy);
  });
});
