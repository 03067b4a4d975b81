/**
 * The allocations held at given addresses of one IPv4 pool (Ipam.heldAt): strongly consistent BatchGetItem of the
 * address items, 100 keys a request (DynamoDB's limit), keys DynamoDB left unprocessed asked again. A gateway redo
 * checks with it, for the few hundred EIPs of a gateway at once, that each is held where it is placed
 * (docs/adr/0111-gateway-redo-in-one-sweep.md).
 */
import {
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  type KeysAndAttributes,
} from '@aws-sdk/client-dynamodb';
import { parseAddress } from '../../domain/addressing.js';
import { StoreUnavailableError } from '../../domain/errors.js';
import type { Allocation } from '../../ports.js';
import { type Item, key, toAllocation } from './items.js';
import { addressSk, poolPk } from './layout.js';
import type { Store } from './store.js';

const KEYS_PER_REQUEST = 100;
/** Rounds of asking again for what DynamoDB left unprocessed (it does so under load). */
const UNPROCESSED_ROUNDS = 8;

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function heldAt(
  store: Store,
  subnet: string,
  addresses: readonly string[],
): Promise<Map<string, Allocation>> {
  const bySk = new Map<string, string>();
  for (const a of addresses) {
    const p = parseAddress(a);
    if (p?.family === 4) bySk.set(addressSk(4, p.value), a);
  }
  const pk = poolPk(subnet, 4);
  const out = new Map<string, Allocation>();
  const sks = [...bySk.keys()];
  for (let i = 0; i < sks.length; i += KEYS_PER_REQUEST) {
    for (const it of await getAll(
      store,
      sks.slice(i, i + KEYS_PER_REQUEST).map((sk) => key(pk, sk)),
    )) {
      const asked = bySk.get(it.sk?.S ?? '');
      if (asked && it.ownerUid?.S) out.set(asked, toAllocation(it));
    }
  }
  return out;
}

async function getAll(store: Store, keys: Item[]): Promise<Item[]> {
  const found: Item[] = [];
  let request: KeysAndAttributes | undefined = { Keys: keys, ConsistentRead: true };
  for (let round = 0; request?.Keys?.length; round++) {
    if (round >= UNPROCESSED_ROUNDS)
      throw new StoreUnavailableError(`${request.Keys.length} address items stayed unprocessed`);
    if (round > 0) await pause(20 * 2 ** round);
    const r: BatchGetItemCommandOutput = await store.send(
      new BatchGetItemCommand({ RequestItems: { [store.tableName]: request } }),
    );
    found.push(...(r.Responses?.[store.tableName] ?? []));
    request = r.UnprocessedKeys?.[store.tableName];
  }
  return found;
}
