/**
 * The tests' DynamoDB: dynalite in-process (local/dynamo.ts), tables made from infra/dynamodb-table.yml
 * (ensureTable, local/table.ts), and clients with a request counter (a middleware: the real requests, as the SDK
 * sends them). Every test that needs DynamoDB starts it here; only the tests of local/dynamo.ts itself
 * (test/integration/local-dynamo.test.ts, the startLocalDynamo cases of dynamo-table.test.ts) start dynalite
 * themselves.
 *
 * `useDynamo()` gives a test file one dynalite for all its tests; `startDynamoFixture()` is the same for a set-up
 * that starts and stops it itself (with the local API and the stand-ins). `close()` destroys every client the
 * fixture made and stops dynalite.
 */
import type { DynamoDBClient, DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll } from 'vitest';
import { localDynamoClient, startLocalDynamo } from '../../local/dynamo.js';
import { ensureTable } from '../../local/table.js';
import {
  createDynamoIpam,
  createDynamoLeases,
  DYNAMO_MAX_ATTEMPTS,
  type DynamoIpam,
} from '../../shared/adapters/dynamo/index.js';
import type { Clock, Leases, Metrics } from '../../shared/ports.js';

export type CountingClient = DynamoDBClient & { requests: Map<string, number>; total(): number };

export interface FreshTable {
  tableName: string;
  client: CountingClient;
  ipam: DynamoIpam;
  leases: Leases;
  /** Another adapter instance on the same table (another Lambda container). */
  another(): DynamoIpam;
}

export interface DynamoFixture {
  /** http://127.0.0.1:<port>, for DYNAMODB_ENDPOINT. */
  readonly endpoint: string;
  /**
   * A new client. One attempt per request unless `config` says otherwise, so that request counts are exact and a
   * failure shows as it happens; the tests of the handlers pass PRODUCT_RETRIES.
   */
  client(config?: DynamoDBClientConfig): CountingClient;
  /** Creates `tableName` unless it exists and returns a new client (`config` as for client()). */
  table(tableName: string, config?: DynamoDBClientConfig): Promise<CountingClient>;
  /** A new table with a unique name, its client (request counts cleared) and the adapters on it. */
  freshTable(options?: { clock?: Clock; metrics?: Metrics }): Promise<FreshTable>;
  close(): Promise<void>;
}

/** The retries of the product's own client (`dynamoClientOf` in shared/adapters/live.ts). */
export const PRODUCT_RETRIES = { maxAttempts: DYNAMO_MAX_ATTEMPTS, retryMode: 'standard' } as const;

/** ClaimOptions of an owner's first claim (the caller knows it holds nothing yet, ADR 0043). */
export const FIRST = { firstAttempt: true } as const;

let tables = 0;

export async function startDynamoFixture(): Promise<DynamoFixture> {
  const local = await startLocalDynamo();
  const clients: DynamoDBClient[] = [];
  const client = (config: DynamoDBClientConfig = {}): CountingClient => {
    const c = localDynamoClient(local.endpoint, { maxAttempts: 1, ...config }) as CountingClient;
    c.requests = new Map();
    c.total = () => [...c.requests.values()].reduce((a, b) => a + b, 0);
    c.middlewareStack.add(
      (next, context) => async (args) => {
        const op = String(context.commandName ?? '').replace(/Command$/, '');
        c.requests.set(op, (c.requests.get(op) ?? 0) + 1);
        return next(args);
      },
      { step: 'finalizeRequest', name: 'countRequests' },
    );
    clients.push(c);
    return c;
  };
  const table = async (tableName: string, config?: DynamoDBClientConfig): Promise<CountingClient> => {
    const c = client(config);
    await ensureTable(c, tableName);
    return c;
  };
  return {
    endpoint: local.endpoint,
    client,
    table,
    async freshTable(options = {}) {
      const tableName = `ipam-test-${process.pid}-${++tables}`;
      const c = await table(tableName);
      c.requests.clear();
      const build = () =>
        createDynamoIpam({ client: c, tableName, clock: options.clock, metrics: options.metrics });
      return {
        tableName,
        client: c,
        ipam: build(),
        leases: createDynamoLeases({ client: c, tableName, clock: options.clock }),
        another: build,
      };
    },
    async close() {
      for (const c of clients.splice(0)) c.destroy();
      await local.close();
    },
  };
}

/** One dynalite for the calling test file: started before its first test, stopped after its last. */
export function useDynamo(): DynamoFixture {
  let fx: DynamoFixture | undefined;
  beforeAll(async () => {
    fx = await startDynamoFixture();
  });
  afterAll(async () => {
    await fx?.close();
  });
  const started = (): DynamoFixture => {
    if (!fx) throw new Error('useDynamo(): dynalite starts in beforeAll; use it inside a hook or a test');
    return fx;
  };
  return {
    get endpoint() {
      return started().endpoint;
    },
    client: (config) => started().client(config),
    table: (tableName, config) => started().table(tableName, config),
    freshTable: (options) => started().freshTable(options),
    close: () => started().close(),
  };
}
