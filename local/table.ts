/**
 * The table definition lives in one file, infra/dynamodb-table.yml (a CloudFormation resource fragment that
 * serverless.yml includes). ensureTable() creates the same table from that file in any DynamoDB endpoint —
 * dynalite for the local stack and the tests — so the two can never drift apart.
 */
import { readFile } from 'node:fs/promises';
import {
  type AttributeValue,
  BatchWriteItemCommand,
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DescribeTableCommandOutput,
  type DynamoDBClient,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { parse } from 'yaml';
import { StoreUnavailableError } from '../shared/domain/errors.js';

/**
 * Where the definition is, relative to this module (repo layout). A function, not a module constant: inside a
 * Lambda bundle (CJS) `import.meta.url` is empty, and building the URL at import time would crash the cold start of
 * every handler that imports the adapter (bench/lambda.ts caught it).
 */
export function tableDefinitionUrl(): URL {
  return new URL('../infra/dynamodb-table.yml', import.meta.url);
}

interface CfnTable {
  Type: string;
  Properties: {
    BillingMode?: string;
    AttributeDefinitions: CreateTableCommandInput['AttributeDefinitions'];
    KeySchema: CreateTableCommandInput['KeySchema'];
    GlobalSecondaryIndexes?: CreateTableCommandInput['GlobalSecondaryIndexes'];
    TimeToLiveSpecification?: { AttributeName: string; Enabled: boolean };
  };
}

/** Reads the fragment and returns its one AWS::DynamoDB::Table resource. */
export async function loadTableDefinition(url: URL = tableDefinitionUrl()): Promise<CfnTable> {
  const doc = parse(await readFile(url, 'utf8')) as Record<string, CfnTable>;
  const tables = Object.values(doc).filter((r) => r?.Type === 'AWS::DynamoDB::Table');
  if (tables.length !== 1)
    throw new Error(`${url.pathname}: expected exactly one AWS::DynamoDB::Table resource`);
  return tables[0]!;
}

/** The CreateTable request for `tableName` built from the definition file. */
export async function createTableInput(tableName: string, url?: URL): Promise<CreateTableCommandInput> {
  const p = (await loadTableDefinition(url)).Properties;
  return {
    TableName: tableName,
    BillingMode: (p.BillingMode ?? 'PAY_PER_REQUEST') as CreateTableCommandInput['BillingMode'],
    AttributeDefinitions: p.AttributeDefinitions,
    KeySchema: p.KeySchema,
    GlobalSecondaryIndexes: p.GlobalSecondaryIndexes,
  };
}

/**
 * Creates the table if it does not exist and waits until it is ACTIVE. An existing table must have the
 * defined key schema and indexes (otherwise this throws: the adapter would misbehave on it). TTL is switched
 * on where the endpoint supports it (dynalite does not; leases never rely on the sweep anyway).
 */
export async function ensureTable(
  client: DynamoDBClient,
  tableName: string,
  options: { definition?: URL; timeoutMs?: number } = {},
): Promise<void> {
  const def = await loadTableDefinition(options.definition);
  const input = await createTableInput(tableName, options.definition);
  let created = false;
  try {
    await client.send(new CreateTableCommand(input));
    created = true;
  } catch (e) {
    if ((e as Error).name !== 'ResourceInUseException') throw wrap(tableName, 'create', e);
  }
  const described = await untilActive(client, tableName, Date.now() + (options.timeoutMs ?? 60_000));
  if (!created) assertSameShape(tableName, input, described);
  const ttl = def.Properties.TimeToLiveSpecification;
  if (created && ttl?.Enabled) await enableTtl(client, tableName, ttl.AttributeName);
}

/** Describes the table until it and its indexes are ACTIVE; throws past `deadline`. */
async function untilActive(
  client: DynamoDBClient,
  tableName: string,
  deadline: number,
): Promise<DescribeTableCommandOutput> {
  for (;;) {
    const described = await client
      .send(new DescribeTableCommand({ TableName: tableName }))
      .catch((e: unknown) => {
        throw wrap(tableName, 'describe', e);
      });
    const gsisActive = (described.Table?.GlobalSecondaryIndexes ?? []).every(
      (g) => !g.IndexStatus || g.IndexStatus === 'ACTIVE',
    );
    if (described.Table?.TableStatus === 'ACTIVE' && gsisActive) return described;
    if (Date.now() > deadline)
      throw new StoreUnavailableError(`table ${tableName} did not become ACTIVE in time`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** TTL on, where the endpoint supports it (dynalite does not: UnknownOperationException; nothing depends on it). */
async function enableTtl(client: DynamoDBClient, tableName: string, attributeName: string): Promise<void> {
  try {
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: tableName,
        TimeToLiveSpecification: { AttributeName: attributeName, Enabled: true },
      }),
    );
  } catch (e) {
    if ((e as Error).name !== 'UnknownOperationException') throw wrap(tableName, 'enable TTL on', e);
  }
}

function assertSameShape(
  tableName: string,
  want: CreateTableCommandInput,
  got: DescribeTableCommandOutput,
): void {
  const keys = (k: { AttributeName?: string; KeyType?: string }[] | undefined) =>
    JSON.stringify((k ?? []).map((x) => [x.AttributeName, x.KeyType]));
  const problems: string[] = [];
  if (keys(want.KeySchema) !== keys(got.Table?.KeySchema)) problems.push('key schema differs');
  for (const g of want.GlobalSecondaryIndexes ?? []) {
    const have = got.Table?.GlobalSecondaryIndexes?.find((x) => x.IndexName === g.IndexName);
    if (!have) problems.push(`index ${g.IndexName} is missing`);
    else if (keys(have.KeySchema) !== keys(g.KeySchema)) problems.push(`index ${g.IndexName} has other keys`);
  }
  if (problems.length > 0)
    throw new StoreUnavailableError(
      `table ${tableName} exists but does not match infra/dynamodb-table.yml: ${problems.join('; ')}`,
    );
}

function wrap(tableName: string, what: string, e: unknown): StoreUnavailableError {
  return new StoreUnavailableError(
    `could not ${what} table ${tableName}: ${(e as Error).name}: ${(e as Error).message}`,
    {
      cause: e,
    },
  );
}

/**
 * An address item as a claim leaves it, held by `uid` since `claimedAt` (epoch ms), in the product's item shape
 * (shared/adapters/dynamo/layout.ts): for seeding a table in the benchmarks and tests. The owner's name and claim id
 * are its uid.
 */
export function heldAddressItem(h: {
  pk: string;
  sk: string;
  subnet: string;
  address: string;
  uid: string;
  claimedAt: number;
}): Record<string, AttributeValue> {
  return {
    pk: { S: h.pk },
    sk: { S: h.sk },
    subnet: { S: h.subnet },
    family: { N: '4' },
    address: { S: h.address },
    ownerUid: { S: h.uid },
    ownerName: { S: h.uid },
    claimId: { S: h.uid },
    claimedAt: { N: String(h.claimedAt) },
  };
}

/**
 * Puts `items` with BatchWriteItem, 25 per request and `width` requests in flight, sending again whatever DynamoDB
 * leaves unprocessed. For seeding (not atomic, unconditional).
 */
export async function putItems(
  client: DynamoDBClient,
  tableName: string,
  items: readonly Record<string, AttributeValue>[],
  width = 1,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let i = next; i < items.length; i = next) {
        next += 25;
        let batch = items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } }));
        while (batch.length > 0) {
          const r = await client.send(new BatchWriteItemCommand({ RequestItems: { [tableName]: batch } }));
          batch = (r.UnprocessedItems?.[tableName] ?? []) as typeof batch;
        }
      }
    }),
  );
}
