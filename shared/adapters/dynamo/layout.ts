/**
 * Key layout of the table and the geometry of a pool: how an address maps to an item key, and how the
 * allocatable addresses of a pool are numbered into slots and grouped into segments.
 * See README.md next to this file for the item types and the access pattern each serves.
 */
import { createHash } from 'node:crypto';
import { allocatableRanges, type Family, formatAddress, type Range } from '../../domain/addressing.js';
import type { Pool } from '../../ports.js';

export const TABLE_KEYS = { pk: 'pk', sk: 'sk' } as const;
export const INDEX = { byOwner: 'byOwner', byFree: 'byFree' } as const;

/** Sort key of a pool's cursor item, in the pool's partition. Sorts after every `A#…` address key. */
export const META_SK = 'META';
export const LEASE_SK = 'LEASE';

/** Partition of one address family of one subnet: all its address items and its cursor item. */
export function poolPk(subnet: string, family: Family): string {
  return `IP#${subnet}#v${family}`;
}

/** Sort key of an address: fixed-width hex, so that key order is address order (range queries by segment). */
export function addressSk(family: Family, value: bigint): string {
  return `A#${value.toString(16).padStart(family === 4 ? 8 : 32, '0')}`;
}

export function valueOfSk(sk: string): bigint | undefined {
  if (!sk.startsWith('A#')) return undefined;
  return BigInt(`0x${sk.slice(2)}`);
}

/** Sort key of a full-segment marker, in the pool's partition (`F#` sorts after `A#`, before `META`). */
export function fullSk(seg: bigint): string {
  return `F#${seg.toString(16).padStart(32, '0')}`;
}

export function segmentOfFullSk(sk: string): bigint | undefined {
  if (!sk.startsWith('F#')) return undefined;
  return BigInt(`0x${sk.slice(2)}`);
}

export function leasePk(key: string): string {
  return `LEASE#${key}`;
}

/**
 * The slots of a pool: its allocatable addresses (shared/domain/addressing.ts decides which) numbered 0…capacity−1
 * in address order, grouped into segments of `segmentSize` consecutive slots. A /16 is one or a few ranges;
 * slot↔address is arithmetic over them, never a list of addresses.
 */
export class PoolGeometry {
  readonly pool: Pool;
  readonly pk: string;
  readonly ranges: readonly Range[];
  /** First slot of each range. */
  private readonly firstSlot: readonly bigint[];
  readonly capacity: bigint;
  readonly segmentSize: bigint;
  readonly segmentCount: bigint;
  /** Changes whenever the set of allocatable addresses changes (CIDR, gateway, excludeIps). */
  readonly fingerprint: string;

  constructor(pool: Pool) {
    this.pool = pool;
    this.pk = poolPk(pool.subnet, pool.family);
    this.ranges = allocatableRanges(pool);
    const first: bigint[] = [];
    let n = 0n;
    for (const r of this.ranges) {
      first.push(n);
      n += r.end - r.start + 1n;
    }
    this.firstSlot = first;
    this.capacity = n;
    this.segmentSize = segmentSizeFor(n);
    this.segmentCount = (n + this.segmentSize - 1n) / this.segmentSize;
    this.fingerprint = createHash('sha256')
      .update(JSON.stringify(this.ranges.map((r) => [r.start.toString(16), r.end.toString(16)])))
      .digest('hex')
      .slice(0, 16);
  }

  valueOf(slot: bigint): bigint {
    for (let i = this.ranges.length - 1; i >= 0; i--) {
      const f = this.firstSlot[i]!;
      if (slot >= f) return this.ranges[i]!.start + (slot - f);
    }
    throw new RangeError(`slot ${slot} outside pool ${this.pk}`);
  }

  /** Slot of an address value, or undefined when the address is not allocatable in this pool. */
  slotOf(value: bigint): bigint | undefined {
    for (let i = 0; i < this.ranges.length; i++) {
      const r = this.ranges[i]!;
      if (value >= r.start && value <= r.end) return this.firstSlot[i]! + (value - r.start);
    }
    return undefined;
  }

  addressOf(slot: bigint): string {
    return formatAddress(this.pool.family, this.valueOf(slot));
  }

  skOf(slot: bigint): string {
    return addressSk(this.pool.family, this.valueOf(slot));
  }

  /** Inclusive slot bounds of a segment. */
  segment(seg: bigint): { first: bigint; last: bigint } {
    const first = seg * this.segmentSize;
    const last = first + this.segmentSize - 1n;
    return { first, last: last < this.capacity ? last : this.capacity - 1n };
  }
}

/**
 * Small pools get small segments so that concurrent allocators still spread over many of them; large ones
 * get 64-slot segments (one Query page of keys each).
 */
export function segmentSizeFor(capacity: bigint): bigint {
  if (capacity <= 512n) return 8n;
  if (capacity <= 2048n) return 16n;
  if (capacity <= 8192n) return 32n;
  return 64n;
}

const geometryCache = new Map<string, PoolGeometry>();

/** Geometry of a pool, memoised by its definition (pools are re-sent on every call, their ranges rarely change). */
export function geometryOf(pool: Pool): PoolGeometry {
  const key = JSON.stringify(pool);
  let g = geometryCache.get(key);
  if (!g) {
    if (geometryCache.size > 256) geometryCache.clear();
    g = new PoolGeometry(pool);
    geometryCache.set(key, g);
  }
  return g;
}
