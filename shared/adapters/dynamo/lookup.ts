/**
 * findByOwner (ADR 0085): an owner's allocations, read where they are rather than through the owner index alone.
 * The `byOwner` index is eventually consistent on AWS, and dynalite writes an index entry apart from its item, so a
 * crash between the two can leave an item its index does not show: the index is a hint. The places the caller's
 * OwnerRecords name are read consistently — one GetItem per address named (the same request that confirms an index
 * hit for it), and, for a pool where nothing was found that way, one consistent Query of the owner's home block,
 * where claimAny puts its claims or the pointer to them (ADR 0026, ADR 0043). A maintained EIP whose index entry is
 * visible costs what it did (one Query of the index, one GetItem); one it hides costs nothing more; a deletion right
 * after a claim adds at most the block Query per pool.
 */
import { parseAddress } from '../../domain/addressing.js';
import type { Allocation, OwnerRecord, Pool } from '../../ports.js';
import { byPool, getItem, type Item, names, toAllocation } from './items.js';
import type { PoolKnowledge } from './knowledge.js';
import { addressSk, geometryOf, homeBlock, homeOfHint, INDEX, poolPk } from './layout.js';
import type { Store } from './store.js';

export class OwnerLookup {
  constructor(
    private readonly store: Store,
    private readonly known: PoolKnowledge,
  ) {}

  async held(ownerUid: string, where: readonly OwnerRecord[] = []): Promise<Allocation[]> {
    if (!ownerUid) return [];
    // Every key to read: the index's hits, and each address the records name in their subnet.
    const keys = new Map<string, { pk: string; sk: string }>();
    for await (const it of this.byOwner(ownerUid))
      if (it.pk?.S && it.sk?.S) keys.set(`${it.pk.S}|${it.sk.S}`, { pk: it.pk.S, sk: it.sk.S });
    for (const k of namedKeys(where)) keys.set(`${k.pk}|${k.sk}`, k);
    const found = new Map<string, Allocation>();
    await Promise.all(
      [...keys].map(async ([k, { pk, sk }]) => {
        const it = await getItem(this.store, pk, sk);
        if (it?.ownerUid?.S === ownerUid && it.address?.S) found.set(k, toAllocation(it));
      }),
    );
    for (const r of where) await this.fromHomes(ownerUid, r, found);
    return [...found.values()].sort(byPool);
  }

  /** A pool of the record's with nothing found yet: its home block, where a claim not yet named on the EIP is. */
  private async fromHomes(ownerUid: string, r: OwnerRecord, found: Map<string, Allocation>): Promise<void> {
    for (const pool of r.pools ?? []) {
      const has = [...found.values()].some((a) => a.subnet === pool.subnet && a.family === pool.family);
      if (has) continue;
      const a = await this.atHome(ownerUid, pool, r.home);
      if (a) found.set(`${poolPk(a.subnet, a.family)}|${a.address}`, a);
    }
  }

  /** The owner's claim in its home block of `pool` (or behind the pointer kept there), confirmed on the item. */
  private async atHome(uid: string, pool: Pool, hint: string | undefined): Promise<Allocation | undefined> {
    const g = geometryOf(pool);
    const view = await this.known.readBlock(g, homeBlock(g, uid, homeOfHint(g, hint)), uid);
    const target = view.mine[0]?.sk?.S ?? view.pointer?.ptrSk?.S;
    if (!target) return undefined;
    const it: Item | undefined = await getItem(this.store, g.pk, target);
    return it?.ownerUid?.S === uid ? toAllocation(it) : undefined;
  }

  private byOwner(ownerUid: string): AsyncIterable<Item> {
    return this.store.queryItems({
      IndexName: INDEX.byOwner,
      KeyConditionExpression: '#ownerUid = :uid',
      ExpressionAttributeNames: names('ownerUid'),
      ExpressionAttributeValues: { ':uid': { S: ownerUid } },
    });
  }
}

/** The address items the records name: each address in its record's subnet. */
function namedKeys(where: readonly OwnerRecord[]): { pk: string; sk: string }[] {
  return where.flatMap((r) =>
    r.addresses.flatMap((text) => {
      const a = parseAddress(text);
      return a ? [{ pk: poolPk(r.subnet, a.family), sk: addressSk(a.family, a.value) }] : [];
    }),
  );
}
