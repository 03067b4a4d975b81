/** The one table definition (infra/dynamodb-table.yml), ensureTable, and the local dynalite. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DescribeTableCommand,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { localDynamoClient, startLocalDynamo } from '../../local/dynamo.js';
import { ensureTable, loadTableDefinition } from '../../local/table.js';
import { StoreUnavailableError } from '../../shared/domain/errors.js';
import { useDynamo } from '../support/dynamo.js';

const fx = useDynamo();

describe('the table definition', () => {
  it('declares an on-demand table with point-in-time recovery, a lease TTL and retention on stack deletion', async () => {
    const def = await loadTableDefinition();
    expect(def.Type).toBe('AWS::DynamoDB::Table');
    expect(def).toMatchObject({ DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
    expect(def.Properties).toMatchObject({
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      TimeToLiveSpecification: { AttributeName: 'expiresAtSec', Enabled: true },
    });
  });

  it('is what ensureTable creates: keys pk/sk, a sparse owner index and a sparse released-address index', async () => {
    const client = fx.client();
    await ensureTable(client, 'shape-check');
    const t = (await client.send(new DescribeTableCommand({ TableName: 'shape-check' }))).Table!;
    expect(t.TableStatus).toBe('ACTIVE');
    expect(t.KeySchema).toEqual([
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ]);
    const gsis = Object.fromEntries((t.GlobalSecondaryIndexes ?? []).map((g) => [g.IndexName, g.KeySchema]));
    expect(gsis).toEqual({
      byOwner: [{ AttributeName: 'ownerUid', KeyType: 'HASH' }],
      byFree: [
        { AttributeName: 'freePool', KeyType: 'HASH' },
        { AttributeName: 'releasedAt', KeyType: 'RANGE' },
      ],
    });
    await ensureTable(client, 'shape-check'); // a second call finds it and changes nothing
  });

  it('refuses an existing table of another shape instead of writing into it', async () => {
    const client = fx.client();
    await client.send(
      new CreateTableCommand({
        TableName: 'other-shape',
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      }),
    );
    const e = await ensureTable(client, 'other-shape').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(StoreUnavailableError);
    expect((e as Error).message).toMatch(/key schema differs.*byOwner is missing/);
  });
});

describe('startLocalDynamo', () => {
  it('keeps the data in dataDir across a restart', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'eip-dynamo-'));
    try {
      const first = await startLocalDynamo({ dataDir: dir });
      const c1 = localDynamoClient(first.endpoint);
      await ensureTable(c1, 'kept');
      await c1.send(
        new PutItemCommand({ TableName: 'kept', Item: { pk: { S: 'x' }, sk: { S: 'y' }, v: { N: '42' } } }),
      );
      c1.destroy();
      await first.close();
      await first.close(); // closing twice is harmless

      const second = await startLocalDynamo({ dataDir: dir });
      const c2 = localDynamoClient(second.endpoint);
      const got = await c2.send(
        new GetItemCommand({ TableName: 'kept', Key: { pk: { S: 'x' }, sk: { S: 'y' } } }),
      );
      expect(got.Item?.v).toEqual({ N: '42' });
      c2.destroy();
      await second.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('listens on an ephemeral loopback port by default', async () => {
    const a = await startLocalDynamo();
    const b = await startLocalDynamo();
    expect(a.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(a.endpoint).not.toBe(b.endpoint);
    await Promise.all([a.close(), b.close()]);
  });
});
