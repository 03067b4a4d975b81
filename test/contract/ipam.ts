/**
 * The contract every Ipam adapter keeps: the in-memory twin (test/unit/memory-ipam.test.ts) and the DynamoDB
 * adapter against dynalite (test/integration/dynamo-ipam-contract.test.ts) run these same tests. The Leases
 * contract is test/contract/leases.ts.
 * Order within a phase is not part of the contract (the DynamoDB allocator spreads concurrent allocators on
 * purpose); eligibility, idempotency, owner checks and the reuse policy are.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  allocatableRanges,
  formatAddress,
  parseAddress,
  staticAddressProblem,
} from '../../shared/domain/addressing.js';
import {
  AddressConflictError,
  AddressOutOfRangeError,
  NoAvailableAddressError,
} from '../../shared/domain/errors.js';
import type { Allocation, Ipam, Owner, Pool } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';

export interface ContractSubject {
  ipam: Ipam;
}

/** Builds a fresh, empty subject on the given clock (a new table, a new object…). */
export type SubjectFactory = (clock: ManualClock) => Promise<ContractSubject>;

const owner = (n: number | string): Owner => ({ uid: `uid-${n}`, name: `eip-${n}` });

const v4: Pool = { subnet: 'ext', family: 4, cidr: '10.0.0.0/28', gateway: '10.0.0.1', exclude: [] };
const v6: Pool = { subnet: 'ext', family: 6, cidr: 'fd00::/125', gateway: 'fd00::1', exclude: [] };

/** Every address claimAny may hand out, by the domain's arithmetic. */
function eligible(pool: Pool): string[] {
  const out: string[] = [];
  for (const r of allocatableRanges(pool))
    for (let v = r.start; v <= r.end; v++) out.push(formatAddress(pool.family, v));
  return out;
}

/** Claims for new owners until the pool is exhausted, as the add does: first attempts (ADR 0043). */
async function fill(ipam: Ipam, pool: Pool, prefix: string, avoid?: string[]): Promise<Allocation[]> {
  const got: Allocation[] = [];
  for (let i = 0; ; i++) {
    try {
      got.push(await ipam.claimAny(pool, owner(`${prefix}-${i}`), undefined, { firstAttempt: true, avoid }));
    } catch (e) {
      if (e instanceof NoAvailableAddressError) return got;
      throw e;
    }
  }
}

export function describeIpamContract(name: string, make: SubjectFactory): void {
  describe(`Ipam contract: ${name}`, () => {
    const fresh = async () => {
      const clock = new ManualClock();
      return { clock, ...(await make(clock)) };
    };

    describe('claimAddress', () => {
      it('gives a free address to its owner and returns the same allocation when the owner claims it again', async () => {
        const { ipam } = await fresh();
        const a = await ipam.claimAddress(v4, '10.0.0.5', owner(1));
        expect(a).toEqual({ subnet: 'ext', family: 4, address: '10.0.0.5', owner: owner(1) });
        expect(await ipam.claimAddress(v4, '10.0.0.5', owner(1))).toEqual(a);
        expect(await ipam.findByOwner('uid-1')).toEqual([a]);
      });

      it('refuses an address held by another owner with a conflict naming the holder', async () => {
        const { ipam } = await fresh();
        await ipam.claimAddress(v4, '10.0.0.5', owner(1));
        const e = await ipam.claimAddress(v4, '10.0.0.5', owner(2)).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(AddressConflictError);
        expect((e as AddressConflictError).holderUid).toBe('uid-1');
        expect((e as AddressConflictError).retryable).toBe(false);
        expect((e as Error).message).toContain('eip-1');
      });

      it('refuses the network, broadcast, gateway, excluded, out-of-subnet and other-family addresses', async () => {
        const { ipam } = await fresh();
        const pool: Pool = { ...v4, exclude: ['10.0.0.8..10.0.0.9', '10.0.0.12'] };
        for (const bad of [
          '10.0.0.0',
          '10.0.0.15',
          '10.0.0.1',
          '10.0.0.8',
          '10.0.0.9',
          '10.0.0.12',
          '10.0.1.5',
          'fd00::2',
        ]) {
          await expect(ipam.claimAddress(pool, bad, owner(1)), bad).rejects.toBeInstanceOf(
            AddressOutOfRangeError,
          );
        }
        expect(await ipam.findByOwner('uid-1')).toEqual([]);
      });

      it('normalises the address text, so one address has one holder however it is written', async () => {
        const { ipam } = await fresh();
        const a = await ipam.claimAddress(v6, 'FD00:0:0:0:0:0:0:3', owner(1));
        expect(a.address).toBe('fd00::3');
        await expect(ipam.claimAddress(v6, 'fd00::3', owner(2))).rejects.toBeInstanceOf(AddressConflictError);
      });
    });

    describe('claimAny', () => {
      it('hands out every eligible address exactly once and then reports the subnet exhausted', async () => {
        const { ipam } = await fresh();
        const pool: Pool = { ...v4, exclude: ['10.0.0.4..10.0.0.6', '10.0.0.10', 'fd00::7'] };
        const got = await fill(ipam, pool, 'f');
        expect(got.map((a) => a.address).sort()).toEqual(eligible(pool).sort());
        const e = await ipam.claimAny(pool, owner('late')).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(NoAvailableAddressError);
        expect((e as NoAvailableAddressError).retryable).toBe(false);
      });

      it('returns the address an owner already holds when the same owner asks again', async () => {
        const { ipam } = await fresh();
        const a = await ipam.claimAny(v4, owner(1), undefined, { firstAttempt: true });
        const b = await ipam.claimAny(v4, owner(1));
        expect(b).toEqual(a);
        expect(await ipam.findByOwner('uid-1')).toEqual([a]);
      });

      it('never hands out an avoided address, never-used or released, and counts it out of the pool', async () => {
        const { ipam } = await fresh();
        const pool: Pool = { ...v4, cidr: '10.0.0.0/29' }; // .2 … .6
        const avoid = ['10.0.0.3', '10.0.0.5', 'fd00::3'];
        const got = await fill(ipam, pool, 'a', avoid);
        expect(got.map((a) => a.address).sort()).toEqual(['10.0.0.2', '10.0.0.4', '10.0.0.6']);
        // An avoided address that was used and released is not reused either; without `avoid` it is.
        const held = await ipam.claimAddress(pool, '10.0.0.3', owner('static'));
        expect(await ipam.release('ext', held.address, held.owner.uid)).toBe(true);
        const e = await ipam.claimAny(pool, owner('late'), undefined, { avoid }).catch((x: unknown) => x);
        expect(e).toBeInstanceOf(NoAvailableAddressError);
        expect((await ipam.claimAny(pool, owner('late'), undefined, { avoid: ['10.0.0.5'] })).address).toBe(
          '10.0.0.3',
        );
      });

      it('gives a dual-stack subnet one v4 and one v6 address for the same owner', async () => {
        const { ipam } = await fresh();
        const a4 = await ipam.claimAny(v4, owner(1));
        const a6 = await ipam.claimAny(v6, owner(1));
        expect(parseAddress(a4.address)?.family).toBe(4);
        expect(parseAddress(a6.address)?.family).toBe(6);
        expect(staticAddressProblem(v6, a6.address)).toBeUndefined();
        const held = await ipam.findByOwner('uid-1');
        expect(held.map((a) => a.address).sort()).toEqual([a4.address, a6.address].sort());
      });

      it('reuses a released address only after every never-used one is gone', async () => {
        const { ipam } = await fresh();
        const pool: Pool = { ...v4, cidr: '10.0.0.0/29' }; // .2 … .6: five addresses
        const first = await ipam.claimAny(pool, owner(1));
        expect(await ipam.release('ext', first.address, 'uid-1')).toBe(true);
        const next4 = [];
        for (let i = 2; i <= 5; i++) next4.push((await ipam.claimAny(pool, owner(i))).address);
        expect(next4).not.toContain(first.address);
        expect((await ipam.claimAny(pool, owner(6))).address).toBe(first.address);
      });

      it('never hands out an address that became excluded after it was released', async () => {
        const { ipam } = await fresh();
        const pool: Pool = { ...v4, cidr: '10.0.0.0/29' };
        const all = await fill(ipam, pool, 'a');
        for (const a of all) await ipam.release(a.subnet, a.address, a.owner.uid);
        const narrowed: Pool = { ...pool, exclude: ['10.0.0.2..10.0.0.3'] };
        const again = await fill(ipam, narrowed, 'b');
        expect(again.map((a) => a.address).sort()).toEqual(eligible(narrowed).sort());
      });

      it('keeps every handed-out address inside the subnet and off its reserved addresses (property)', async () => {
        await fc.assert(
          fc.asyncProperty(
            fc.integer({ min: 27, max: 30 }),
            fc.integer({ min: 0, max: 255 }),
            fc.uniqueArray(fc.integer({ min: 0, max: 31 }), { maxLength: 6 }),
            fc.boolean(),
            async (prefix, gwOffset, excluded, asRange) => {
              const size = 2 ** (32 - prefix);
              const gw = `10.1.2.${gwOffset % size}`;
              const exclude = excluded
                .filter((x) => x < size)
                .map((x, i) =>
                  asRange && i === 0 ? `10.1.2.${x}..10.1.2.${Math.min(size - 1, x + 2)}` : `10.1.2.${x}`,
                );
              const pool: Pool = {
                subnet: `p${prefix}`,
                family: 4,
                cidr: `10.1.2.0/${prefix}`,
                gateway: gw,
                exclude,
              };
              const { ipam } = await fresh();
              const got = await fill(ipam, pool, 'p');
              for (const a of got) expect(staticAddressProblem(pool, a.address), a.address).toBeUndefined();
              expect(new Set(got.map((a) => a.address)).size).toBe(got.length);
              expect(got.length).toBe(eligible(pool).length);
            },
          ),
          { numRuns: 12 },
        );
      });
    });

    describe('release', () => {
      it('frees an address only for the owner that holds it', async () => {
        const { ipam } = await fresh();
        await ipam.claimAddress(v4, '10.0.0.7', owner(1));
        expect(await ipam.release('ext', '10.0.0.7', 'uid-2')).toBe(false);
        await expect(ipam.claimAddress(v4, '10.0.0.7', owner(2))).rejects.toBeInstanceOf(
          AddressConflictError,
        );
        expect(await ipam.release('ext', '10.0.0.7', 'uid-1')).toBe(true);
        expect(await ipam.release('ext', '10.0.0.7', 'uid-1')).toBe(false);
        expect(await ipam.findByOwner('uid-1')).toEqual([]);
      });

      it('lets a stale release change nothing once the address has been claimed by someone else', async () => {
        const { ipam } = await fresh();
        await ipam.claimAddress(v4, '10.0.0.7', owner(1));
        expect(await ipam.release('ext', '10.0.0.7', 'uid-1')).toBe(true);
        await ipam.claimAddress(v4, '10.0.0.7', owner(2));
        // owner 1's delete handler runs again (a retry): it must not free owner 2's address
        expect(await ipam.release('ext', '10.0.0.7', 'uid-1')).toBe(false);
        expect(await ipam.findByOwner('uid-1')).toEqual([]);
        expect((await ipam.findByOwner('uid-2')).map((a) => a.address)).toEqual(['10.0.0.7']);
      });

      it('finds every allocation of an owner, in every family, and nobody else’s; releasing them frees them', async () => {
        const { ipam } = await fresh();
        const a4 = await ipam.claimAny(v4, owner(1));
        const a6 = await ipam.claimAny(v6, owner(1));
        const other = await ipam.claimAny(v4, owner(2));
        const mine = await ipam.findByOwner('uid-1');
        expect(mine.map((a) => a.address).sort()).toEqual([a4.address, a6.address].sort());
        for (const a of mine) expect(await ipam.release(a.subnet, a.address, 'uid-1')).toBe(true);
        expect(await ipam.findByOwner('uid-1')).toEqual([]);
        expect(await ipam.findByOwner('uid-2')).toEqual([other]);
        for (const a of mine) expect(await ipam.release(a.subnet, a.address, 'uid-1')).toBe(false);
      });

      it('records where an address is configured, for its holder only, and forgets it on release', async () => {
        const { ipam } = await fresh();
        const a = await ipam.claimAddress(v4, '10.0.0.7', owner(1));
        expect(a.placement).toBeUndefined();
        expect(await ipam.place('ext', '10.0.0.7', 'uid-2', { gateway: 'gw9', prefix: 24 })).toBe(false);
        expect(await ipam.place('ext', '10.0.0.7', 'uid-1', { gateway: 'gw1', prefix: 24 })).toBe(true);
        expect((await ipam.findByOwner('uid-1'))[0]?.placement).toEqual({ gateway: 'gw1', prefix: 24 });
        // a repeated claim by the holder keeps the placement; a new placement replaces it
        expect((await ipam.claimAddress(v4, '10.0.0.7', owner(1))).placement).toEqual({
          gateway: 'gw1',
          prefix: 24,
        });
        expect(await ipam.place('ext', '10.0.0.7', 'uid-1', { gateway: 'gw2', prefix: 24 })).toBe(true);
        expect((await ipam.findByOwner('uid-1'))[0]?.placement?.gateway).toBe('gw2');
        // released and claimed by someone else: the old placement is not theirs
        expect(await ipam.release('ext', '10.0.0.7', 'uid-1')).toBe(true);
        expect(await ipam.place('ext', '10.0.0.7', 'uid-1', { gateway: 'gw1', prefix: 24 })).toBe(false);
        expect((await ipam.claimAddress(v4, '10.0.0.7', owner(2))).placement).toBeUndefined();
      });

      it('records a placement given with a claim in the claim itself; a repeat keeps the one it has', async () => {
        const { ipam } = await fresh();
        const gw1 = { gateway: 'gw1', prefix: 24 };
        const a = await ipam.claimAddress(v4, '10.0.0.7', owner(1), gw1);
        expect(a.placement).toEqual(gw1);
        expect((await ipam.findByOwner('uid-1'))[0]?.placement).toEqual(gw1);
        // the same owner again, with another placement: its allocation as it is (place moves it)
        expect(
          (await ipam.claimAddress(v4, '10.0.0.7', owner(1), { gateway: 'gw2', prefix: 24 })).placement,
        ).toEqual(gw1);
        const b = await ipam.claimAny(v4, owner(2), gw1);
        expect(b.placement).toEqual(gw1);
        expect((await ipam.claimAny(v4, owner(2), { gateway: 'gw2', prefix: 24 })).placement).toEqual(gw1);
        expect((await ipam.findByOwner('uid-2'))[0]?.placement).toEqual(gw1);
        // without one, none
        expect((await ipam.claimAny(v4, owner(3))).placement).toBeUndefined();
        // released addresses handed out again carry only the new claim's placement
        const all = [...(await fill(ipam, v4, 'f')), a, b];
        for (const x of all) await ipam.release(x.subnet, x.address, x.owner.uid);
        const again = await ipam.claimAny(v4, owner(4), { gateway: 'gw3', prefix: 24 });
        expect(again.placement).toEqual({ gateway: 'gw3', prefix: 24 });
        expect((await ipam.findByOwner('uid-4'))[0]?.placement).toEqual({ gateway: 'gw3', prefix: 24 });
        const plain = await ipam.claimAny(v4, owner(5));
        expect(plain.placement).toBeUndefined();
      });

      it('records the namespace and the pods of a placement, replaces them whole, and a claim records no pods', async () => {
        const { ipam } = await fresh();
        const pods = {
          'u-a': { name: 'vpc-nat-gw-gw1-a', token: 't1' },
          'u-b': { name: 'vpc-nat-gw-gw1-b', token: 't2' },
        };
        const full = { gateway: 'gw1', prefix: 24, qos: 'q1', namespace: 'ns1', pods };
        // A claim keeps the namespace and drops the pods: it precedes every exec.
        const a = await ipam.claimAddress(v4, '10.0.0.7', owner(1), full);
        expect(a.placement).toEqual({ gateway: 'gw1', prefix: 24, qos: 'q1', namespace: 'ns1' });
        const b = await ipam.claimAny(v4, owner(2), full, { firstAttempt: true });
        expect(b.placement?.pods).toBeUndefined();
        expect(b.placement?.namespace).toBe('ns1');
        // place writes them; the caller's later edits of its map do not reach the record
        expect(await ipam.place('ext', '10.0.0.7', 'uid-1', full)).toBe(true);
        pods['u-a'].token = 'changed';
        expect((await ipam.findByOwner('uid-1'))[0]?.placement).toEqual({
          ...full,
          pods: {
            'u-a': { name: 'vpc-nat-gw-gw1-a', token: 't1' },
            'u-b': { name: 'vpc-nat-gw-gw1-b', token: 't2' },
          },
        });
        // replaced whole: an entry dropped is gone, and a placement without pods or namespace removes them
        const one = { 'u-b': { name: 'vpc-nat-gw-gw1-b', token: 't3' } };
        expect(await ipam.place('ext', '10.0.0.7', 'uid-1', { ...full, pods: one })).toBe(true);
        expect((await ipam.findByOwner('uid-1'))[0]?.placement?.pods).toEqual(one);
        if (ipam.heldAt)
          expect((await ipam.heldAt('ext', ['10.0.0.7'])).get('10.0.0.7')?.placement?.pods).toEqual(one);
        expect(await ipam.place('ext', '10.0.0.7', 'uid-1', { gateway: 'gw1', prefix: 24 })).toBe(true);
        expect((await ipam.findByOwner('uid-1'))[0]?.placement).toEqual({ gateway: 'gw1', prefix: 24 });
        // an empty map is a record too (every pod gone), not "unknown"
        expect(await ipam.place('ext', '10.0.0.7', 'uid-1', { gateway: 'gw1', prefix: 24, pods: {} })).toBe(
          true,
        );
        expect((await ipam.findByOwner('uid-1'))[0]?.placement).toEqual({
          gateway: 'gw1',
          prefix: 24,
          pods: {},
        });
      });

      it('transfers an address to another owner only from its holder, without its placement', async () => {
        const { ipam } = await fresh();
        const placed = { gateway: 'gw1', prefix: 24, qos: '', namespace: 'ns1' };
        await ipam.claimAddress(v4, '10.0.0.7', owner(1), placed);
        const pod = { uid: 'pod:u-a', name: 'ns1/vpc-nat-gw-gw1-a' };
        expect(await ipam.transfer('ext', '10.0.0.7', 'uid-2', pod)).toBe(false);
        expect(await ipam.transfer('ext', '10.0.0.9', 'uid-1', pod)).toBe(false);
        expect(await ipam.transfer('ext', '10.0.0.7', 'uid-1', pod)).toBe(true);
        expect(await ipam.findByOwner('uid-1', [{ subnet: 'ext', addresses: ['10.0.0.7'] }])).toEqual([]);
        const now = await ipam.findByOwner('pod:u-a', [{ subnet: 'ext', addresses: ['10.0.0.7'] }]);
        expect(now).toEqual([{ subnet: 'ext', family: 4, address: '10.0.0.7', owner: pod }]);
        // the old holder can neither release nor place it; the new one releases it
        expect(await ipam.release('ext', '10.0.0.7', 'uid-1')).toBe(false);
        expect(await ipam.place('ext', '10.0.0.7', 'uid-1', placed)).toBe(false);
        expect(await ipam.transfer('ext', '10.0.0.7', 'uid-1', owner(3))).toBe(false);
        await expect(ipam.claimAddress(v4, '10.0.0.7', owner(4))).rejects.toBeInstanceOf(
          AddressConflictError,
        );
        expect(await ipam.release('ext', '10.0.0.7', 'pod:u-a')).toBe(true);
        expect((await ipam.claimAddress(v4, '10.0.0.7', owner(4))).owner.uid).toBe('uid-4');
      });

      it('tells who holds given addresses, with their placement, and leaves out free, released and malformed ones', async () => {
        const { ipam } = await fresh();
        if (!ipam.heldAt) return void expect(ipam.heldAt).toBeUndefined();
        const gw1 = { gateway: 'gw1', prefix: 28 };
        const a = await ipam.claimAddress(v4, '10.0.0.7', owner(1), gw1);
        const b = await ipam.claimAny(v4, owner(2));
        // A static address the random claim did not take (it may take any free one).
        const free = ['10.0.0.9', '10.0.0.10', '10.0.0.12'].find((x) => x !== b.address)!;
        const c = await ipam.claimAddress(v4, free, owner(3));
        await ipam.release(c.subnet, c.address, 'uid-3');
        const asked = [a.address, b.address, c.address, '10.0.0.11', 'not-an-address', 'fd00::2'];
        const held = await ipam.heldAt(v4.subnet, asked);
        expect([...held.keys()].sort()).toEqual([a.address, b.address].sort());
        expect(held.get(a.address)).toMatchObject({ owner: { uid: 'uid-1' }, placement: gw1, family: 4 });
        expect(held.get(b.address)?.owner.uid).toBe('uid-2');
        expect(held.get(b.address)?.placement).toBeUndefined();
        // Another subnet's pool holds nothing of these.
        expect((await ipam.heldAt('other', asked)).size).toBe(0);
        // More addresses than one DynamoDB request carries (100 keys).
        const big: Pool = { subnet: 'big', family: 4, cidr: '10.1.0.0/25', gateway: '10.1.0.1', exclude: [] };
        const many = await fill(ipam, big, 'm');
        expect(many.length).toBeGreaterThan(100);
        const all = await ipam.heldAt(big.subnet, [...many.map((x) => x.address), '10.1.0.1']);
        expect([...all.keys()].sort()).toEqual(many.map((x) => x.address).sort());
      });

      it('finds nothing for an owner that never claimed', async () => {
        const { ipam } = await fresh();
        expect(await ipam.findByOwner('nobody')).toEqual([]);
      });
    });
  });
}
