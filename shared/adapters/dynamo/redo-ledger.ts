/**
 * The RedoLedger port on the IPAM table: one item per gateway pod (`REDO#<namespace>/<pod>` / `REDO`), replaced
 * whole by whoever holds the pod's gateway lease (docs/adr/0111-gateway-redo-in-one-sweep.md). The keys of the calls
 * a redo made are 64-bit hex (shared/core/redo-coverage.ts), packed as binary, 8 bytes each: the three calls of each
 * of 1,000 EIPs take 24 KB, and an item carries up to 48,000 within DynamoDB's 400 KB item limit; a longer list is
 * cut (the EIPs whose calls are left out redo their own). TTL: a week after the last write.
 */
import { GetItemCommand, type GetItemCommandOutput, PutItemCommand } from '@aws-sdk/client-dynamodb';
import type { Clock, RedoLedger, RedoRecord } from '../../ports.js';
import type { Store } from './store.js';

const SK = 'REDO';
const KEY = /^[0-9a-f]{16}$/;
const MAX_KEYS = 48_000;
const TTL_SEC = 7 * 24 * 3600;

const pkOf = (pod: string): string => `REDO#${pod}`;

export class DynamoRedoLedger implements RedoLedger {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  async get(pod: string): Promise<RedoRecord | undefined> {
    const r = await this.store.send<GetItemCommandOutput>(
      new GetItemCommand({
        TableName: this.store.tableName,
        Key: { pk: { S: pkOf(pod) }, sk: { S: SK } },
        ConsistentRead: true,
      }),
    );
    const it = r.Item;
    if (!it?.run?.S) return undefined;
    const packed = Buffer.from(it.done?.B ?? new Uint8Array());
    const done: string[] = [];
    for (let at = 0; at + 8 <= packed.length; at += 8) done.push(packed.subarray(at, at + 8).toString('hex'));
    return { pod, run: it.run.S, done, complete: it.complete?.BOOL === true };
  }

  async put(record: RedoRecord): Promise<void> {
    const keys = record.done.filter((k) => KEY.test(k)).slice(0, MAX_KEYS);
    const now = this.clock.now();
    await this.store.send(
      new PutItemCommand({
        TableName: this.store.tableName,
        Item: {
          pk: { S: pkOf(record.pod) },
          sk: { S: SK },
          run: { S: record.run },
          complete: { BOOL: record.complete && keys.length === record.done.length },
          done: { B: Buffer.from(keys.join(''), 'hex') },
          count: { N: String(keys.length) },
          at: { N: String(now) },
          expiresAtSec: { N: String(Math.ceil(now / 1000) + TTL_SEC) },
        },
      }),
    );
  }
}
