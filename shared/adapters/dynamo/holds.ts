/**
 * The PolicyHolds port on the IPAM table (ADR 0087): one item per unshared QoS policy, all in one partition
 * (`QOSHOLD` / `<policy name>`), so the collector lists every hold with one consistent Query. Taken with a conditional
 * put (free, ours, or the holder being replaced), given back with a conditional delete; read consistently.
 */
import {
  type AttributeValue,
  DeleteItemCommand,
  GetItemCommand,
  type GetItemCommandOutput,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { ConflictError, InvalidSpecError } from '../../domain/errors.js';
import type { Owner, PolicyHolds } from '../../ports.js';
import type { Store } from './store.js';

/** The partition of every hold: holds are written only when an unshared policy is bound or let go of. */
export const HOLD_PK = 'QOSHOLD';

type Item = Record<string, AttributeValue>;

export class DynamoHolds implements PolicyHolds {
  constructor(private readonly store: Store) {}

  async hold(policy: string, owner: Owner, replacing?: string): Promise<Owner> {
    if (!policy || !owner.uid) throw new InvalidSpecError('a policy hold needs a policy and an owner uid');
    // A hold given back between the failed put and the read that names the holder: try again, a few times.
    for (let attempt = 0; attempt < 3; attempt++) {
      if (await this.put(policy, owner, replacing)) return { ...owner };
      // Someone else holds it (dynalite does not return the item that failed the condition: one read says who).
      const holder = await this.findHolder(policy);
      if (holder) return holder;
    }
    throw new ConflictError(`qos policy ${policy} was taken and given back while being held; try again`);
  }

  private async put(policy: string, owner: Owner, replacing: string | undefined): Promise<boolean> {
    const values: Item = { ':uid': { S: owner.uid } };
    let condition = 'attribute_not_exists(pk) OR #holderUid = :uid';
    if (replacing) {
      condition += ' OR #holderUid = :replacing';
      values[':replacing'] = { S: replacing };
    }
    const r = await this.store.sendConditional(
      new PutItemCommand({
        TableName: this.store.tableName,
        Item: {
          ...key(policy),
          policy: { S: policy },
          holderUid: { S: owner.uid },
          holderName: { S: owner.name },
        },
        ConditionExpression: condition,
        ExpressionAttributeNames: { '#holderUid': 'holderUid' },
        ExpressionAttributeValues: values,
      }),
    );
    return r.ok;
  }

  async findHolder(policy: string): Promise<Owner | undefined> {
    const r = await this.store.send<GetItemCommandOutput>(
      new GetItemCommand({ TableName: this.store.tableName, Key: key(policy), ConsistentRead: true }),
    );
    return r.Item ? holderOf(r.Item) : undefined;
  }

  async listHolds(): Promise<{ policy: string; holder: Owner }[]> {
    const out: { policy: string; holder: Owner }[] = [];
    for await (const it of this.store.queryItems({
      KeyConditionExpression: 'pk = :pk',
      ExpressionAttributeValues: { ':pk': { S: HOLD_PK } },
      ConsistentRead: true,
    })) {
      const holder = holderOf(it);
      if (it.sk?.S && holder) out.push({ policy: it.sk.S, holder });
    }
    return out;
  }

  async release(policy: string, ownerUid: string): Promise<boolean> {
    if (!policy || !ownerUid) return false;
    const r = await this.store.sendConditional(
      new DeleteItemCommand({
        TableName: this.store.tableName,
        Key: key(policy),
        ConditionExpression: '#holderUid = :uid',
        ExpressionAttributeNames: { '#holderUid': 'holderUid' },
        ExpressionAttributeValues: { ':uid': { S: ownerUid } },
      }),
    );
    return r.ok;
  }
}

function key(policy: string): Item {
  return { pk: { S: HOLD_PK }, sk: { S: policy } };
}

function holderOf(it: Item): Owner | undefined {
  const uid = it.holderUid?.S;
  return uid ? { uid, name: it.holderName?.S ?? '' } : undefined;
}
