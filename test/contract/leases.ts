/**
 * The contract every Leases adapter keeps (the port in shared/ports.ts, the limits in shared/domain/lease.ts): the
 * in-memory twin (test/unit/memory-leases.test.ts) and the DynamoDB adapter on dynalite
 * (test/integration/dynamo-leases-contract.test.ts) run these same checks.
 *
 * - acquire takes a key that is free, expired by the caller's clock (a lease lasts until `expiresAt`, exclusive),
 *   or already the caller's (then the new expiry replaces the old); otherwise it throws a retryable
 *   LeaseHeldError naming the holder and its expiry, and changes nothing;
 * - of concurrent acquires on a free key exactly one wins, also across two adapter instances on one store;
 * - an expiry must lie in the future (DeadlineError) and is cut to LEASE_MAX_MS; key and holder must be given;
 * - release frees the key only while the lease's holder still holds it: a former holder whose lease was taken over,
 *   or anyone else, changes nothing; releasing twice, or an expired lease, is harmless.
 *
 * The checks are data (`leasesChecks`) so that test/unit/leases-contract.test.ts can run them against broken twins
 * and show that each kind of breakage fails at least one of them.
 */
import { describe, expect, it } from 'vitest';
import { DeadlineError, InvalidSpecError, LeaseHeldError } from '../../shared/domain/errors.js';
import { LEASE_MAX_MS } from '../../shared/domain/lease.js';
import type { Lease, Leases } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';

export interface LeasesSubject {
  leases: Leases;
  /** Another adapter instance on the same store (another Lambda container); the same object for a twin that has one store per object. */
  peer: Leases;
}

/** Builds a fresh, empty subject on the given clock (a new table, a new object…). */
export type LeasesFactory = (clock: ManualClock) => Promise<LeasesSubject>;

interface World extends LeasesSubject {
  clock: ManualClock;
}

export interface LeasesCheck {
  name: string;
  run(w: World): Promise<void>;
}

const SEC = 1_000;

/** What acquire threw, as a LeaseHeldError (fails when it succeeded or threw something else). */
async function refused(p: Promise<Lease>): Promise<LeaseHeldError> {
  const e = await p.then(
    (l) => l,
    (x: unknown) => x,
  );
  expect(e, 'acquire should have been refused').toBeInstanceOf(LeaseHeldError);
  return e as LeaseHeldError;
}

/** The key is held by `holder` until `until`: another holder is refused, naming both. */
async function heldBy(w: World, key: string, holder: string, until: number): Promise<void> {
  const e = await refused(w.peer.acquire(key, 'probe', w.clock.now() + SEC));
  expect({ holder: e.holder, expiresAt: e.expiresAt }).toEqual({ holder, expiresAt: until });
}

/** The key is free: a new holder gets it (and holds it from then on). */
async function free(w: World, key: string, newHolder: string): Promise<void> {
  const l = await w.peer.acquire(key, newHolder, w.clock.now() + SEC);
  expect(l.holder).toBe(newHolder);
}

export const leasesChecks: LeasesCheck[] = [
  {
    name: 'gives a free key to the first holder and returns the lease it took',
    async run({ leases, clock }) {
      const l = await leases.acquire('eip#a', 'inv-1', clock.now() + 10 * SEC);
      expect(l).toEqual({ key: 'eip#a', holder: 'inv-1', expiresAt: clock.now() + 10 * SEC });
    },
  },
  {
    name: 'refuses a second holder with a retryable LeaseHeldError naming the holder and its expiry',
    async run(w) {
      const until = w.clock.now() + 10 * SEC;
      await w.leases.acquire('eip#a', 'inv-1', until);
      const e = await refused(w.leases.acquire('eip#a', 'inv-2', w.clock.now() + 60 * SEC));
      expect(e.holder).toBe('inv-1');
      expect(e.expiresAt).toBe(until);
      expect(e.retryable).toBe(true);
      // The refusal changed nothing: the first holder still holds it, until the same time.
      await heldBy(w, 'eip#a', 'inv-1', until);
    },
  },
  {
    name: 'keeps keys independent',
    async run(w) {
      await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + 10 * SEC);
      await free(w, 'eip#b', 'inv-2');
      await heldBy(w, 'eip#a', 'inv-1', w.clock.now() + 10 * SEC);
    },
  },
  {
    name: 'lets exactly one of many concurrent acquires on a free key win, across two instances',
    async run(w) {
      const until = w.clock.now() + 10 * SEC;
      const attempts = Array.from({ length: 8 }, (_, i) =>
        (i % 2 ? w.peer : w.leases).acquire('eip#race', `inv-${i}`, until),
      );
      const results = await Promise.allSettled(attempts);
      const won = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      expect(won).toHaveLength(1);
      const winner = won[0]!.holder;
      for (const r of results) {
        if (r.status === 'fulfilled') continue;
        expect(r.reason).toBeInstanceOf(LeaseHeldError);
        expect((r.reason as LeaseHeldError).holder).toBe(winner);
      }
      await heldBy(w, 'eip#race', winner, until);
    },
  },
  {
    name: 'holds the lease until its expiry by the clock: refused one millisecond before, free at it',
    async run(w) {
      await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + SEC);
      w.clock.advance(SEC - 1);
      await heldBy(w, 'eip#a', 'inv-1', w.clock.now() + 1);
      w.clock.advance(1);
      await free(w, 'eip#a', 'inv-2');
    },
  },
  {
    name: 'renews when the holder acquires again: the new expiry counts, for others and on the other instance',
    async run(w) {
      await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + SEC);
      const renewed = await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + 5 * SEC);
      expect(renewed).toEqual({ key: 'eip#a', holder: 'inv-1', expiresAt: w.clock.now() + 5 * SEC });
      w.clock.advance(2 * SEC); // past the first expiry
      await heldBy(w, 'eip#a', 'inv-1', renewed.expiresAt);
      w.clock.advance(3 * SEC); // at the renewed one
      await free(w, 'eip#a', 'inv-2');
    },
  },
  {
    name: 'gives an expired lease back to its own holder when nobody took it over',
    async run(w) {
      await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + SEC);
      w.clock.advance(5 * SEC);
      const again = await w.peer.acquire('eip#a', 'inv-1', w.clock.now() + SEC);
      expect(again.expiresAt).toBe(w.clock.now() + SEC);
      await heldBy(w, 'eip#a', 'inv-1', again.expiresAt);
    },
  },
  {
    name: 'lets another holder take an expired lease over, and then refuses the former holder',
    async run(w) {
      await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + SEC);
      w.clock.advance(SEC);
      const taken = await w.peer.acquire('eip#a', 'inv-2', w.clock.now() + 10 * SEC);
      expect(taken.holder).toBe('inv-2');
      const e = await refused(w.leases.acquire('eip#a', 'inv-1', w.clock.now() + SEC));
      expect(e.holder).toBe('inv-2');
    },
  },
  {
    name: 'frees the key at once when the holder releases it; a second release is harmless',
    async run(w) {
      const l = await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + 60 * SEC);
      await w.leases.release(l);
      await w.leases.release(l);
      await free(w, 'eip#a', 'inv-2');
    },
  },
  {
    name: 'releases the renewed lease when the holder gives up the lease object of its first acquire',
    async run(w) {
      const first = await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + SEC);
      await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + 60 * SEC);
      await w.leases.release(first);
      await free(w, 'eip#a', 'inv-2');
    },
  },
  {
    name: 'ignores a release by anyone but the holder',
    async run(w) {
      const until = w.clock.now() + 60 * SEC;
      await w.leases.acquire('eip#a', 'inv-1', until);
      await w.peer.release({ key: 'eip#a', holder: 'inv-2', expiresAt: until });
      await heldBy(w, 'eip#a', 'inv-1', until);
    },
  },
  {
    name: 'ignores a release by a former holder whose expired lease was taken over',
    async run(w) {
      const old = await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + SEC);
      w.clock.advance(1.5 * SEC);
      const taken = await w.peer.acquire('eip#a', 'inv-2', w.clock.now() + 10 * SEC);
      await w.leases.release(old);
      await heldBy(w, 'eip#a', 'inv-2', taken.expiresAt);
    },
  },
  {
    name: 'accepts the release of an expired lease nobody took over, and the key stays free',
    async run(w) {
      const l = await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + SEC);
      w.clock.advance(2 * SEC);
      await w.leases.release(l);
      await free(w, 'eip#a', 'inv-2');
    },
  },
  {
    name: 'accepts the release of a key that was never taken',
    async run(w) {
      await w.leases.release({ key: 'eip#never', holder: 'inv-1', expiresAt: w.clock.now() + SEC });
      await free(w, 'eip#never', 'inv-2');
    },
  },
  {
    name: 'refuses an expiry that is not in the future with a DeadlineError, and takes nothing',
    async run(w) {
      const now = w.clock.now();
      for (const expiresAt of [now, now - SEC, Number.NaN])
        await expect(w.leases.acquire('eip#a', 'inv-1', expiresAt), String(expiresAt)).rejects.toBeInstanceOf(
          DeadlineError,
        );
      await free(w, 'eip#a', 'inv-2');
    },
  },
  {
    name: 'cuts an expiry beyond the lease maximum to LEASE_MAX_MS from now',
    async run(w) {
      const l = await w.leases.acquire('eip#a', 'inv-1', w.clock.now() + 60 * 60 * SEC);
      expect(l.expiresAt).toBe(w.clock.now() + LEASE_MAX_MS);
      await heldBy(w, 'eip#a', 'inv-1', w.clock.now() + LEASE_MAX_MS);
      w.clock.advance(LEASE_MAX_MS);
      await free(w, 'eip#a', 'inv-2');
    },
  },
  {
    name: 'refuses an empty key or holder with an InvalidSpecError',
    async run({ leases, clock }) {
      await expect(leases.acquire('', 'inv-1', clock.now() + SEC)).rejects.toBeInstanceOf(InvalidSpecError);
      await expect(leases.acquire('eip#a', '', clock.now() + SEC)).rejects.toBeInstanceOf(InvalidSpecError);
    },
  },
];

/** A fresh subject on a new ManualClock. */
export async function leasesWorld(make: LeasesFactory): Promise<World> {
  const clock = new ManualClock();
  return { clock, ...(await make(clock)) };
}

export function describeLeasesContract(name: string, make: LeasesFactory): void {
  describe(`Leases contract: ${name}`, () => {
    for (const check of leasesChecks) it(check.name, async () => check.run(await leasesWorld(make)));
  });
}
