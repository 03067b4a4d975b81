/**
 * The peer baseline of the ipam benchmark: a subnet-lock allocator in the style of Whereabouts, which holds one
 * lease per IP range around each allocation. Same table, same address items and same reuse policy as the real
 * allocator (so the two differ only in how they coordinate): under the subnet's lock it reads a "next
 * never-used slot" cursor, writes the address item, advances the cursor, then gives the lock back; once the
 * never-used slots are gone it takes the oldest released address. Waiting for the lock backs off with jitter
 * (5 ms doubling to 100 ms).
 *
 * Whereabouts itself keeps every allocation of a range in one object that it rewrites on each allocation; on
 * DynamoDB that would not even fit a /16 in one item (400 KB), so this baseline is kinder to it than a literal
 * port would be.
 */
import { randomUUID } from 'node:crypto';
import {
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { geometryOf, INDEX, type PoolGeometry } from '../shared/adapters/dynamo/layout.js';
import { NoAvailableAddressError } from '../shared/domain/errors.js';
import type { Allocation, Owner, Pool } from '../shared/ports.js';

export const LOCK_CURSOR_SK = 'LOCKCURSOR';

export class SubnetLockAllocator {
  private readonly holder = randomUUID();
  /** Lock attempts that found the lock taken, over the allocator's life. */
  lockWaits = 0;

  constructor(
    private readonly client: DynamoDBClient,
    private readonly table: string,
  ) {}

  async claimAny(pool: Pool, owner: Owner): Promise<Allocation> {
    const g = geometryOf(pool);
    // The same retry check as the real allocator: an owner's allocation in this pool is the answer.
    const mine = await this.client.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: INDEX.byOwner,
        KeyConditionExpression: 'ownerUid = :u',
        ExpressionAttributeValues: { ':u': { S: owner.uid } },
      }),
    );
    const found = (mine.Items ?? []).find((it) => it.subnet?.S === pool.subnet);
    if (found) return allocationOf(pool, found.address!.S!, owner);
    await this.lock(g);
    try {
      return await this.allocateLocked(g, owner);
    } finally {
      await this.client
        .send(
          new DeleteItemCommand({
            TableName: this.table,
            Key: { pk: { S: `LOCK#${g.pk}` }, sk: { S: 'LOCK' } },
            ConditionExpression: 'holder = :h',
            ExpressionAttributeValues: { ':h': { S: this.holder } },
          }),
        )
        .catch(() => undefined);
    }
  }

  private async lock(g: PoolGeometry): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const now = Date.now();
      try {
        await this.client.send(
          new PutItemCommand({
            TableName: this.table,
            Item: {
              pk: { S: `LOCK#${g.pk}` },
              sk: { S: 'LOCK' },
              holder: { S: this.holder },
              expiresAt: { N: String(now + 10_000) },
            },
            ConditionExpression: 'attribute_not_exists(pk) OR expiresAt < :now',
            ExpressionAttributeValues: { ':now': { N: String(now) } },
          }),
        );
        return;
      } catch (e) {
        if ((e as Error).name !== 'ConditionalCheckFailedException') throw e;
        this.lockWaits++;
        const cap = Math.min(100, 5 * 2 ** attempt);
        await new Promise((r) => setTimeout(r, Math.random() * cap));
      }
    }
  }

  private async allocateLocked(g: PoolGeometry, owner: Owner): Promise<Allocation> {
    const cur = await this.client.send(
      new GetItemCommand({
        TableName: this.table,
        Key: { pk: { S: g.pk }, sk: { S: LOCK_CURSOR_SK } },
        ConsistentRead: true,
      }),
    );
    let next = BigInt(cur.Item?.next?.N ?? '0');
    const now = String(Date.now());
    const ownerAttrs = {
      ownerUid: { S: owner.uid },
      ownerName: { S: owner.name },
      claimId: { S: randomUUID() },
      claimedAt: { N: now },
    };
    while (next < g.capacity) {
      const slot = next++;
      try {
        await this.client.send(
          new PutItemCommand({
            TableName: this.table,
            Item: {
              pk: { S: g.pk },
              sk: { S: g.skOf(slot) },
              subnet: { S: g.pool.subnet },
              family: { N: String(g.pool.family) },
              address: { S: g.addressOf(slot) },
              ...ownerAttrs,
            },
            ConditionExpression: 'attribute_not_exists(pk)',
          }),
        );
        await this.client.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: { pk: { S: g.pk }, sk: { S: LOCK_CURSOR_SK } },
            UpdateExpression: 'SET #n = :n',
            ExpressionAttributeNames: { '#n': 'next' },
            ExpressionAttributeValues: { ':n': { N: next.toString() } },
          }),
        );
        return allocationOf(g.pool, g.addressOf(slot), owner);
      } catch (e) {
        if ((e as Error).name !== 'ConditionalCheckFailedException') throw e;
      }
    }
    for (;;) {
      const free = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          IndexName: INDEX.byFree,
          KeyConditionExpression: 'freePool = :p',
          ExpressionAttributeValues: { ':p': { S: g.pk } },
          Limit: 1,
        }),
      );
      const it = free.Items?.[0];
      if (!it) throw new NoAvailableAddressError(`no available address in subnet ${g.pool.subnet}`);
      try {
        const r = await this.client.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: { pk: it.pk!, sk: it.sk! },
            UpdateExpression:
              'SET ownerUid = :u, ownerName = :n, claimId = :c, claimedAt = :t REMOVE freePool, releasedAt',
            ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(ownerUid)',
            ExpressionAttributeValues: {
              ':u': ownerAttrs.ownerUid,
              ':n': ownerAttrs.ownerName,
              ':c': ownerAttrs.claimId,
              ':t': ownerAttrs.claimedAt,
            },
            ReturnValues: 'ALL_NEW',
          }),
        );
        return allocationOf(g.pool, r.Attributes!.address!.S!, owner);
      } catch (e) {
        if ((e as Error).name !== 'ConditionalCheckFailedException') throw e;
      }
    }
  }
}

function allocationOf(pool: Pool, address: string, owner: Owner): Allocation {
  return { subnet: pool.subnet, family: pool.family, address, owner };
}
