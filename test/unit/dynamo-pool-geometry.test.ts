/**
 * Address arithmetic of the DynamoDB allocator (shared/adapters/dynamo/layout.ts), as properties: every slot is an
 * address inside the subnet that may be handed out, slots and addresses map one-to-one, and key order is address
 * order (segment reads are sort-key ranges).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addressSk, PoolGeometry, valueOfSk } from '../../shared/adapters/dynamo/layout.js';
import { capacity, cidrBounds, formatAddress, staticAddressProblem } from '../../shared/domain/addressing.js';
import type { Pool } from '../../shared/ports.js';

const v4Pool = fc
  .record({
    prefix: fc.integer({ min: 16, max: 30 }),
    gw: fc.nat(),
    excl: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 40 })), { maxLength: 5 }),
    only: fc.option(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 300 })), { nil: undefined }),
  })
  .map(({ prefix, gw, excl, only }): Pool => {
    const size = 2 ** (32 - prefix);
    const base = 0x0a000000; // 10.0.0.0
    const at = (n: number) => formatAddress(4, BigInt(base + (n % size)));
    // A range never wraps past the end of the subnet: a reversed range is refused, as kube-ovn refuses it.
    const range = (s: number, len: number) => `${at(s)}..${at(Math.min((s % size) + len, size - 1))}`;
    const pool: Pool = {
      subnet: 'p',
      family: 4,
      cidr: `10.0.0.0/${prefix}`,
      gateway: at(gw),
      exclude: excl.map(([s, len]) => (len === 0 ? at(s) : range(s, len))),
    };
    if (only) pool.only = [range(only[0], only[1])];
    return pool;
  });

const v6Pool = fc
  .record({
    prefix: fc.integer({ min: 64, max: 124 }),
    excl: fc.array(fc.bigInt({ min: 0n, max: 4096n }), { maxLength: 4 }),
  })
  .map(
    ({ prefix, excl }): Pool => ({
      subnet: 'p6',
      family: 6,
      cidr: `fd00:1::/${prefix}`,
      gateway: 'fd00:1::1',
      exclude: excl.map((x) => formatAddress(6, (0xfd000001n << 96n) + (x % 2n ** BigInt(128 - prefix)))),
    }),
  );

/** Slots to look at: the ends, the segment boundaries near them, and random ones (a /64 has 2^64). */
const probes = (g: PoolGeometry, picks: bigint[]): bigint[] => {
  const c = g.capacity;
  if (c === 0n) return [];
  const s = g.segmentSize;
  return [0n, 1n, s - 1n, s, c - 1n, c - s, ...picks.map((p) => p % c)].filter((x) => x >= 0n && x < c);
};

describe('pool geometry', () => {
  it('maps every slot to an address the pool may hand out, and back (v4, with excludes and a dedicated range)', () => {
    fc.assert(
      fc.property(
        v4Pool,
        fc.array(fc.bigInt({ min: 0n, max: 1n << 40n }), { maxLength: 20 }),
        (pool, picks) => {
          const g = new PoolGeometry(pool);
          expect(g.capacity).toBe(capacity(pool));
          const b = cidrBounds(pool.cidr);
          let last = -1n;
          for (const slot of probes(g, picks).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))) {
            const v = g.valueOf(slot);
            expect(v > b.start && v < b.end).toBe(true);
            expect(staticAddressProblem(pool, g.addressOf(slot))).toBeUndefined();
            expect(g.slotOf(v)).toBe(slot);
            expect(v >= last).toBe(true);
            last = v;
          }
          // reserved addresses have no slot
          expect(g.slotOf(b.start)).toBeUndefined();
          expect(g.slotOf(b.end)).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });

  it('does the same for IPv6 pools up to a /64 without enumerating them', () => {
    fc.assert(
      fc.property(
        v6Pool,
        fc.array(fc.bigInt({ min: 0n, max: 1n << 70n }), { maxLength: 20 }),
        (pool, picks) => {
          const g = new PoolGeometry(pool);
          expect(g.capacity).toBe(capacity(pool));
          for (const slot of probes(g, picks)) {
            expect(staticAddressProblem(pool, g.addressOf(slot))).toBeUndefined();
            expect(g.slotOf(g.valueOf(slot))).toBe(slot);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('splits the slots into segments that cover them exactly once', () => {
    fc.assert(
      fc.property(v4Pool, (pool) => {
        const g = new PoolGeometry(pool);
        let next = 0n;
        for (let seg = 0n; seg < g.segmentCount; seg++) {
          const { first, last } = g.segment(seg);
          expect(first).toBe(next);
          expect(last >= first && last - first < g.segmentSize).toBe(true);
          next = last + 1n;
        }
        expect(next).toBe(g.capacity);
      }),
      { numRuns: 200 },
    );
  });

  it('orders address sort keys as the addresses themselves', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<4 | 6>(4, 6),
        fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
        fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
        (family, a0, b0) => {
          const max = family === 4 ? (1n << 32n) - 1n : (1n << 128n) - 1n;
          const a = a0 & max;
          const b = b0 & max;
          const ka = addressSk(family, a);
          const kb = addressSk(family, b);
          expect(ka < kb).toBe(a < b);
          expect(valueOfSk(ka)).toBe(a);
        },
      ),
    );
  });
});
