/**
 * Small pieces the IPAM's files share (ipam.ts, claim.ts, claim-writes.ts, knowledge.ts, release.ts): item keys and
 * attribute names, an address item as an Allocation, the claimant of a claim, and the bounded maps and random
 * choices the allocator's memory uses. Item types and access patterns: README.md next to this file.
 */
import { type AttributeValue, GetItemCommand, type GetItemCommandOutput } from '@aws-sdk/client-dynamodb';
import type { Family } from '../../domain/addressing.js';
import { parseAddress } from '../../domain/addressing.js';
import { InvalidSpecError } from '../../domain/errors.js';
import type { Allocation, Owner, Placement, Pool } from '../../ports.js';
import type { HomeBlock, PoolGeometry } from './layout.js';
import { placementOfItem } from './placement.js';
import type { Store } from './store.js';

export { placementAttributes } from './placement.js';

export type Item = Record<string, AttributeValue>;

export function key(pk: string, sk: string): Item {
  return { pk: { S: pk }, sk: { S: sk } };
}

export function names(...attrs: string[]): Record<string, string> {
  return Object.fromEntries(attrs.map((a) => [`#${a}`, a]));
}

export function toAllocation(it: Item): Allocation {
  const placement = placementOfItem(it);
  return {
    subnet: it.subnet!.S!,
    family: Number(it.family!.N) as Family,
    address: it.address!.S!,
    owner: { uid: it.ownerUid!.S!, name: it.ownerName?.S ?? '' },
    ...(placement && { placement }),
  };
}

/** Allocations in the port's order: by subnet and family. */
export function byPool(a: Allocation, b: Allocation): number {
  return a.subnet + a.family < b.subnet + b.family ? -1 : 1;
}

/** One GetItem, strongly consistent unless told otherwise. */
export async function getItem(
  store: Store,
  pk: string,
  sk: string,
  consistent = true,
): Promise<Item | undefined> {
  const r = await store.send<GetItemCommandOutput>(
    new GetItemCommand({ TableName: store.tableName, Key: key(pk, sk), ConsistentRead: consistent }),
  );
  return r.Item;
}

/** An owner, and where its new claim is to be configured (recorded in the claim's own write, ADR 0041). */
export interface Claimant extends Owner {
  placement?: Placement;
  /** Values never to hand out (ClaimOptions.avoid). */
  avoid: ReadonlySet<bigint>;
}

/** The values of the addresses of `pool`'s family in `avoid`; others (and what does not parse) are ignored. */
export function avoidedValues(pool: Pool, avoid: readonly string[] | undefined): ReadonlySet<bigint> {
  const out = new Set<bigint>();
  for (const text of avoid ?? []) {
    const a = parseAddress(text);
    if (a && a.family === pool.family) out.add(a.value);
  }
  return out;
}

/** Identity of a home block in memory: the pool's partition and geometry (a subnet edit moves blocks) and start. */
export function blockId(g: PoolGeometry, home: HomeBlock): string {
  return `${g.pk}|${g.fingerprint}|${home.start}`;
}

/** Identity of a pool in memory: its partition and geometry. */
export function poolId(g: PoolGeometry): string {
  return `${g.pk}|${g.fingerprint}`;
}

export function assertOwner(owner: Owner): void {
  if (!owner.uid) throw new InvalidSpecError('an allocation needs an owner uid');
}

/**
 * Sets `key` to `value` as the map's newest entry (a map's order is its eviction order here) and drops the oldest
 * entries beyond `max`: the per-container memories of the allocator stay bounded however many pools and blocks it
 * meets.
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max = 256): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value as K);
}

/** A uniformly random bigint in [0, n). */
export function randomBelow(n: bigint): bigint {
  if (n <= BigInt(Number.MAX_SAFE_INTEGER)) return BigInt(Math.floor(Math.random() * Number(n)));
  const hi = BigInt(Math.floor(Math.random() * 2 ** 52));
  const lo = BigInt(Math.floor(Math.random() * 2 ** 52));
  return ((hi << 52n) | lo) % n;
}

export function shuffled<T>(a: readonly T[]): T[] {
  const out = [...a];
  shuffle(out);
  return out;
}

export function shuffle<T>(a: T[]): void {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
}
