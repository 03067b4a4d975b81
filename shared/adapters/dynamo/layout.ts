/**
 * Key layout of the table and the geometry of a pool: how an address maps to an item key, and how the
 * allocatable addresses of a pool are numbered into slots and grouped into segments.
 * See README.md next to this file for the item types and the access pattern each serves.
 */
import { createHash } from 'node:crypto';
import {
  allocatableRanges,
  type Family,
  formatAddress,
  parseAddress,
  type Range,
} from '../../domain/addressing.js';
import type { Pool } from '../../ports.js';

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

/** The address value of an address key; undefined for any other key (a pointer key `A#<hex>#P#<uid>` too). */
export function valueOfSk(sk: string): bigint | undefined {
  if (!sk.startsWith('A#') || sk.indexOf('#', 2) !== -1) return undefined;
  return BigInt(`0x${sk.slice(2)}`);
}

/** Addresses per home block: one consistent Query of at most this many address keys (plus pointers). */
export const BLOCK_SIZE = 64n;
/** A pool whose eligible addresses span at most this many values is one block (a /24 is read whole). */
export const SINGLE_BLOCK_MAX = 256n;

/**
 * An owner's home block (ADR 0026): an aligned block of BLOCK_SIZE address values, picked by a hash of the owner
 * uid among the blocks between the pool's first and last eligible address, or that whole hull when it spans at
 * most SINGLE_BLOCK_MAX values (then concurrent owners see every free address, not a quarter of them). It depends
 * on the uid and the hull only, so every claim and retry of one owner looks at the same block. `first` is the
 * owner's first candidate.
 */
export interface HomeBlock {
  start: bigint;
  end: bigint;
  /** Eligible addresses of the block, ascending. */
  eligible: bigint[];
  first: bigint | undefined;
}

export function homeBlock(g: PoolGeometry, uid: string, at?: bigint): HomeBlock {
  const h = createHash('sha256').update(uid).digest();
  const hi = h.readBigUInt64BE(0);
  const lo = h.readBigUInt64BE(8);
  if (g.capacity === 0n) return { start: 0n, end: 0n, eligible: [], first: undefined };
  let start = g.valueOf(0n);
  let end = g.valueOf(g.capacity - 1n);
  const range = blockRange(g);
  if (range) {
    start = at ?? range.first + (hi % ((range.last - range.first) / BLOCK_SIZE + 1n)) * BLOCK_SIZE;
    end = start + BLOCK_SIZE - 1n;
  }
  const eligible: bigint[] = [];
  for (let v = start; v <= end; v++) if (g.slotOf(v) !== undefined) eligible.push(v);
  const first = eligible.length > 0 ? eligible[Number(lo % BigInt(eligible.length))] : undefined;
  return { start, end, eligible, first };
}

/**
 * The starts of the blocks a home may be placed at (ADR 0043): every aligned block of a multi-block pool; none for
 * a pool read whole (its one block is everybody's home).
 */
export function blockRange(g: PoolGeometry): { first: bigint; last: bigint } | undefined {
  if (g.capacity === 0n) return undefined;
  const lowest = g.valueOf(0n);
  const highest = g.valueOf(g.capacity - 1n);
  if (highest - lowest + 1n <= SINGLE_BLOCK_MAX) return undefined;
  return { first: (lowest / BLOCK_SIZE) * BLOCK_SIZE, last: (highest / BLOCK_SIZE) * BLOCK_SIZE };
}

/**
 * The block start a home hint names (ClaimOptions.home: the block's first address, as text), if it is one of the
 * pool's blocks; anything else (another family, unaligned, outside the pool, a single-block pool) is undefined.
 */
export function homeOfHint(g: PoolGeometry, hint: string | undefined): bigint | undefined {
  const range = blockRange(g);
  if (!hint || !range || hint.length > 64) return undefined;
  const a = parseAddress(hint);
  if (!a || a.family !== g.pool.family || a.value % BLOCK_SIZE !== 0n) return undefined;
  return a.value >= range.first && a.value <= range.last ? a.value : undefined;
}

/** Key of an owner's pointer item: in its home block's key range, right after the block's first address key. */
export function pointerSk(g: PoolGeometry, home: HomeBlock, uid: string): string {
  return `${addressSk(g.pool.family, home.start)}#P#${uid}`;
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
