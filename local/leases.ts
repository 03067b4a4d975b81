/**
 * Leases of the local stack carry the stack process's instance id as a holder prefix
 * (`local-stack:<instance>:<invocation>`), so that a restart can tell which leases its predecessor held. A stack
 * started on a --data-dir is the only process using that directory (dynalite's LevelDB lock refuses a second one), so
 * every lease with that prefix and another instance id was held by a previous process of the same stack, which is
 * dead: the restart deletes them instead of letting every EIP its predecessor was working on wait for the lease to
 * expire (docs/adr/0023-local-stack-restart-breaks-predecessor-leases.md). Leases of other holders (`npm run invoke`
 * against the stack) are left to expire.
 */
import { randomUUID } from 'node:crypto';
import {
  type AttributeValue,
  DeleteItemCommand,
  type DynamoDBClient,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { LEASE_SK } from '../shared/adapters/dynamo/layout.js';

export const STACK_HOLDER_PREFIX = 'local-stack:';

/** A new instance id and the lease-holder ids of this stack process. */
export function stackInstance(): { id: string; holderId: () => string } {
  const id = randomUUID().slice(0, 8);
  return { id, holderId: () => `${STACK_HOLDER_PREFIX}${id}:${randomUUID()}` };
}

/**
 * Deletes the leases held by earlier instances of this stack (holder prefix with an instance id other than
 * `current`). Each delete is conditional on the holder and expiry it read, so a lease taken over meanwhile stays.
 * Returns the keys it broke.
 */
export async function breakPredecessorLeases(
  client: DynamoDBClient,
  tableName: string,
  current: string,
): Promise<string[]> {
  const broken: string[] = [];
  let start: Record<string, never> | undefined;
  do {
    const page = await client.send(
      new ScanCommand({
        TableName: tableName,
        ConsistentRead: true,
        FilterExpression: '#sk = :sk AND begins_with(#holder, :prefix)',
        ExpressionAttributeNames: { '#sk': 'sk', '#holder': 'holder' },
        ExpressionAttributeValues: { ':sk': { S: LEASE_SK }, ':prefix': { S: STACK_HOLDER_PREFIX } },
        ...(start && { ExclusiveStartKey: start }),
      }),
    );
    for (const item of page.Items ?? []) {
      const holder = item.holder?.S ?? '';
      if (holder.startsWith(`${STACK_HOLDER_PREFIX}${current}:`)) continue;
      if (await deleteIfUnchanged(client, tableName, item, holder))
        broken.push(item.leaseKey?.S ?? item.pk?.S ?? '?');
    }
    start = page.LastEvaluatedKey as Record<string, never> | undefined;
  } while (start);
  return broken;
}

/** Deletes the lease item only if its holder and expiry are still what was read; false when it changed meanwhile. */
async function deleteIfUnchanged(
  client: DynamoDBClient,
  tableName: string,
  item: Record<string, AttributeValue>,
  holder: string,
): Promise<boolean> {
  try {
    await client.send(
      new DeleteItemCommand({
        TableName: tableName,
        Key: { pk: item.pk!, sk: item.sk! },
        ConditionExpression: '#holder = :holder AND #expiresAt = :expiresAt',
        ExpressionAttributeNames: { '#holder': 'holder', '#expiresAt': 'expiresAt' },
        ExpressionAttributeValues: { ':holder': { S: holder }, ':expiresAt': item.expiresAt! },
      }),
    );
    return true;
  } catch (e) {
    if ((e as { name?: string }).name !== 'ConditionalCheckFailedException') throw e;
    return false;
  }
}
