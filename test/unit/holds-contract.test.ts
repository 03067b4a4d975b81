/**
 * The PolicyHolds contract (test/contract/holds.ts) on the in-memory twin (local/memory/holds.ts), and the proof that
 * the contract can fail: each twin below breaks one promise of the port, and the check named beside it must fail.
 */
import { describe, expect, it } from 'vitest';
import { MemoryHolds } from '../../local/memory/holds.js';
import type { Owner } from '../../shared/ports.js';
import { describeHoldsContract, type HoldsFactory, holdsChecks } from '../contract/holds.js';

describeHoldsContract('in-memory', async () => {
  const holds = new MemoryHolds();
  return { holds, peer: holds };
});

const one = (h: MemoryHolds) => async () => ({ holds: h, peer: h });

const flaws: { flaw: string; caughtBy: string; make: HoldsFactory }[] = [
  {
    flaw: 'hold ignores the holder (last writer wins)',
    caughtBy: 'answers another owner with the holder and changes nothing',
    make: one(
      new (class extends MemoryHolds {
        override async hold(policy: string, owner: Owner) {
          this.held.set(policy, owner);
          return owner;
        }
      })(),
    ),
  },
  {
    flaw: 'replacing takes over whoever holds it',
    caughtBy: 'takes over only the holder named as replacing',
    make: one(
      new (class extends MemoryHolds {
        override async hold(policy: string, owner: Owner, replacing?: string) {
          if (replacing) this.held.delete(policy);
          return super.hold(policy, owner);
        }
      })(),
    ),
  },
  {
    flaw: 'release frees the policy whoever asks',
    caughtBy: 'frees the policy for its holder only; a second release is harmless',
    make: one(
      new (class extends MemoryHolds {
        override async release(policy: string) {
          return this.held.delete(policy);
        }
      })(),
    ),
  },
  {
    flaw: 'hold reads, then writes after an await (no conditional write)',
    caughtBy: 'lets exactly one of many concurrent holds win, across two instances, and tells every caller',
    make: one(
      new (class extends MemoryHolds {
        override async hold(policy: string, owner: Owner) {
          const current = this.held.get(policy);
          await new Promise((r) => setImmediate(r));
          if (current && current.uid !== owner.uid) return current;
          this.held.set(policy, owner);
          return owner;
        }
      })(),
    ),
  },
];

describe('the PolicyHolds contract fails a twin that breaks the port', () => {
  it.each(flaws)('$flaw', async ({ caughtBy, make }) => {
    expect(holdsChecks.map((c) => c.name)).toContain(caughtBy);
    const check = holdsChecks.find((c) => c.name === caughtBy)!;
    const ok = await check.run(await make()).then(
      () => true,
      () => false,
    );
    expect(ok).toBe(false);
  });
});
