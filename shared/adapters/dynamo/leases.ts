/**
 * The Leases port on the IPAM table: one item per key (`LEASE#<key>` / `LEASE`), taken with a conditional
 * put and given up with a conditional delete. Expiry is judged with the caller's clock against `expiresAt`
 * (epoch ms) in the condition itself; the TTL attribute `expiresAtSec` only lets DynamoDB sweep old items.
 */
import {
  DeleteItemCommand,
  GetItemCommand,
  type GetItemCommandOutput,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { DeadlineError, InvalidSpecError, LeaseHeldError } from '../../domain/errors.js';
import { LEASE_MAX_MS } from '../../domain/lease.js';
import type { Clock, Lease, Leases, Metrics } from '../../ports.js';
import { LEASE_SK, leasePk } from './layout.js';
import type { Store } from './store.js';

/** Expired items linger this long before the TTL sweep may take them (useful when reading the table). */
const TTL_MARGIN_SEC = 3600;

export class DynamoLeases implements Leases {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    // Kept for callers that pass one; lease contention is counted by the core (ADR 0014).
    _metrics?: Metrics,
  ) {}

  async acquire(key: string, holder: string, expiresAt: number): Promise<Lease> {
    if (!key || !holder) throw new InvalidSpecError('a lease needs a key and a holder');
    const now = this.clock.now();
    if (!Number.isFinite(expiresAt) || expiresAt <= now)
      throw new DeadlineError(`no time left to hold lease ${key} (expiry ${expiresAt} is not after ${now})`);
    // A longer request is cut to the one lease maximum (shared/domain/lease.ts).
    const until = Math.min(Math.floor(expiresAt), now + LEASE_MAX_MS);
    const r = await this.store.sendConditional(
      new PutItemCommand({
        TableName: this.store.tableName,
        Item: {
          pk: { S: leasePk(key) },
          sk: { S: LEASE_SK },
          leaseKey: { S: key },
          holder: { S: holder },
          expiresAt: { N: String(until) },
          expiresAtSec: { N: String(Math.ceil(until / 1000) + TTL_MARGIN_SEC) },
        },
        // Free, ours already (then the expiry moves), or expired by our clock.
        ConditionExpression: 'attribute_not_exists(pk) OR #holder = :holder OR #expiresAt <= :now',
        ExpressionAttributeNames: { '#holder': 'holder', '#expiresAt': 'expiresAt' },
        ExpressionAttributeValues: { ':holder': { S: holder }, ':now': { N: String(now) } },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
    if (r.ok) return { key, holder, expiresAt: until };
    // Contention is counted once, by the core's withLease, whatever the adapter.
    // AWS returns the item that failed the condition; dynalite does not, so then one read tells who holds it.
    const current =
      r.item ??
      (
        await this.store.send<GetItemCommandOutput>(
          new GetItemCommand({
            TableName: this.store.tableName,
            Key: { pk: { S: leasePk(key) }, sk: { S: LEASE_SK } },
            ConsistentRead: true,
          }),
        )
      ).Item;
    const by = current?.holder?.S;
    const heldUntil = current?.expiresAt?.N ? Number(current.expiresAt.N) : undefined;
    throw new LeaseHeldError(`lease ${key} is held by ${by ?? 'another invocation'}`, by, heldUntil);
  }

  async release(lease: Lease): Promise<void> {
    // Only the holder deletes; if it expired and someone else took it over, this changes nothing.
    await this.store.sendConditional(
      new DeleteItemCommand({
        TableName: this.store.tableName,
        Key: { pk: { S: leasePk(lease.key) }, sk: { S: LEASE_SK } },
        ConditionExpression: '#holder = :holder',
        ExpressionAttributeNames: { '#holder': 'holder' },
        ExpressionAttributeValues: { ':holder': { S: lease.holder } },
      }),
    );
  }
}
