/**
 * The contract every PolicyHolds adapter keeps (the port in shared/ports.ts, ADR 0087): the in-memory twin
 * (test/unit/holds-contract.test.ts, with broken twins that must fail it) and the DynamoDB adapter on dynalite
 * (test/integration/dynamo-holds-contract.test.ts) run these same checks.
 *
 * - hold gives a free policy to its first owner, answers the same owner again with itself, and answers anyone else
 *   with the holder, changing nothing;
 * - a holder named as `replacing` is taken over; any other value of `replacing` takes nothing;
 * - of concurrent holds of one policy from many owners, across two instances on one store, exactly one wins and
 *   every caller is told that one;
 * - release frees the policy only for its holder; anyone else, or a second release, changes nothing;
 * - findHolder and listHolds say what is held, at once.
 */
import { describe, expect, it } from 'vitest';
import type { Owner, PolicyHolds } from '../../shared/ports.js';

export interface HoldsSubject {
  holds: PolicyHolds;
  /** Another adapter instance on the same store (another Lambda container). */
  peer: PolicyHolds;
}

export type HoldsFactory = () => Promise<HoldsSubject>;

export interface HoldsCheck {
  name: string;
  run(s: HoldsSubject): Promise<void>;
}

const A: Owner = { uid: 'uid-a', name: 'eip-a' };
const B: Owner = { uid: 'uid-b', name: 'eip-b' };

export const holdsChecks: HoldsCheck[] = [
  {
    name: 'gives a free policy to its first owner, and the same owner again',
    async run({ holds, peer }) {
      expect(await holds.hold('p', A)).toEqual(A);
      expect(await peer.hold('p', A)).toEqual(A);
      expect(await peer.findHolder('p')).toEqual(A);
    },
  },
  {
    name: 'answers another owner with the holder and changes nothing',
    async run({ holds, peer }) {
      await holds.hold('p', A);
      expect(await peer.hold('p', B)).toEqual(A);
      expect(await holds.findHolder('p')).toEqual(A);
    },
  },
  {
    name: 'takes over only the holder named as replacing',
    async run({ holds, peer }) {
      await holds.hold('p', A);
      expect(await peer.hold('p', B, 'uid-someone-else')).toEqual(A);
      expect(await peer.hold('p', B, A.uid)).toEqual(B);
      expect(await holds.findHolder('p')).toEqual(B);
    },
  },
  {
    name: 'lets exactly one of many concurrent holds win, across two instances, and tells every caller',
    async run({ holds, peer }) {
      const owners = Array.from({ length: 12 }, (_, i) => ({ uid: `uid-${i}`, name: `eip-${i}` }));
      const answers = await Promise.all(owners.map((o, i) => (i % 2 ? peer : holds).hold('p', o)));
      const winner = await holds.findHolder('p');
      expect(winner).toBeDefined();
      expect(answers.every((a) => a.uid === winner!.uid)).toBe(true);
    },
  },
  {
    name: 'frees the policy for its holder only; a second release is harmless',
    async run({ holds, peer }) {
      await holds.hold('p', A);
      expect(await peer.release('p', B.uid)).toBe(false);
      expect(await holds.findHolder('p')).toEqual(A);
      expect(await peer.release('p', A.uid)).toBe(true);
      expect(await holds.findHolder('p')).toBeUndefined();
      expect(await holds.release('p', A.uid)).toBe(false);
      expect(await holds.hold('p', B)).toEqual(B);
    },
  },
  {
    name: 'lists every hold, one per policy',
    async run({ holds, peer }) {
      await holds.hold('p1', A);
      await peer.hold('p2', B);
      await holds.hold('p2', A);
      const list = await peer.listHolds();
      expect(list.sort((x, y) => (x.policy < y.policy ? -1 : 1))).toEqual([
        { policy: 'p1', holder: A },
        { policy: 'p2', holder: B },
      ]);
    },
  },
];

export function describeHoldsContract(name: string, make: HoldsFactory): void {
  describe(`PolicyHolds contract: ${name}`, () => {
    for (const check of holdsChecks) it(check.name, async () => check.run(await make()));
  });
}
