/**
 * One in-process dynalite per test file, a fresh table per test (ensureTable from infra/dynamodb-table.yml),
 * and a request counter on the client (a middleware: the real requests, as the SDK sends them).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { localDynamoClient, startLocalDynamo } from '../../local/dynamo.js';
import { ensureTable } from '../../local/table.js';
import { createDynamoIpam, createDynamoLeases, type DynamoIpam } from '../../shared/adapters/dynamo/index.js';
import type { Clock, Leases, Metrics } from '../../shared/ports.js';

export interface DynamoFixture {
  endpoint: string;
  client(): CountingClient;
  freshTable(options?: { clock?: Clock; metrics?: Metrics }): Promise<{
    tableName: string;
    client: CountingClient;
    ipam: DynamoIpam;
    leases: Leases;
    /** Another adapter instance on the same table (another Lambda container). */
    another(): DynamoIpam;
  }>;
  close(): Promise<void>;
}

/** ClaimOptions of an owner's first claim (the caller knows it holds nothing yet, ADR 0043). */
export const FIRST = { firstAttempt: true } as const;

export type CountingClient = DynamoDBClient & { requests: Map<string, number>; total(): number };

let tables = 0;

export async function startDynamoFixture(): Promise<DynamoFixture> {
  const local = await startLocalDynamo();
  const clients: DynamoDBClient[] = [];
  const client = (): CountingClient => {
    const c = localDynamoClient(local.endpoint, { maxAttempts: 1 }) as CountingClient;
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
  return {
    endpoint: local.endpoint,
    client,
    async freshTable(options = {}) {
      const tableName = `ipam-test-${process.pid}-${++tables}`;
      const c = client();
      await ensureTable(c, tableName);
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
      for (const c of clients) c.destroy();
      await local.close();
    },
  };
}
