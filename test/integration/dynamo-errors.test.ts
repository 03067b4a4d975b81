/**
 * How DynamoDB failures reach the rest of the product. A small HTTP proxy in front of dynalite answers some
 * requests itself with DynamoDB's own error responses (the seam is the wire, not the client). Retries are the SDK
 * client's own (standard mode, as shared/adapters/live.ts configures it); the adapter adds none and counts them.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDynamoClient } from '../../local/dynamo.js';
import {
  createDynamoIpam,
  createDynamoLeases,
  DYNAMO_MAX_ATTEMPTS,
} from '../../shared/adapters/dynamo/index.js';
import { StoreUnavailableError } from '../../shared/domain/errors.js';
import { TallyMetrics } from '../../shared/observability/metrics.js';
import type { Pool } from '../../shared/ports.js';
import { type DynamoFixture, PRODUCT_RETRIES, startDynamoFixture } from '../support/dynamo.js';

let fx: DynamoFixture;
let proxy: Server;
let proxyUrl: string;
/** Errors the proxy answers with, in order, before it forwards again. */
const pending: { status: number; type: string; message: string }[] = [];
let answered = 0;
let forwarded = 0;

beforeAll(async () => {
  fx = await startDynamoFixture();
  const target = new URL(fx.endpoint);
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const fail = pending.shift();
      if (fail) {
        answered++;
        const body = JSON.stringify({
          __type: `com.amazonaws.dynamodb.v20120810#${fail.type}`,
          message: fail.message,
        });
        res.writeHead(fail.status, {
          'content-type': 'application/x-amz-json-1.0',
          'x-amzn-requestid': 'proxy',
        });
        res.end(body);
        return;
      }
      forwarded++;
      const up = request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 500, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', (e) => res.destroy(e));
      up.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterAll(async () => {
  proxy?.closeAllConnections();
  await new Promise((r) => proxy?.close(r));
  await fx?.close();
});

const pool: Pool = { subnet: 'ext', family: 4, cidr: '10.30.0.0/24', gateway: '10.30.0.1', exclude: [] };
const throttled = {
  status: 400,
  type: 'ProvisionedThroughputExceededException',
  message: 'Rate of requests exceeds the allowed throughput.',
};
const serverError = { status: 500, type: 'InternalServerError', message: 'Internal server error' };

async function setup() {
  const { tableName } = await fx.freshTable();
  const client = localDynamoClient(proxyUrl, PRODUCT_RETRIES);
  const metrics = new TallyMetrics();
  pending.length = 0;
  answered = 0;
  forwarded = 0;
  return {
    client,
    metrics,
    ipam: createDynamoIpam({ client, tableName, metrics }),
    leases: createDynamoLeases({ client, tableName, metrics }),
  };
}

describe('DynamoDB errors at the adapter', () => {
  it.each([
    ['throttling', throttled],
    ['a server error', serverError],
  ])('retries %s with backoff and then succeeds', async (_what, failure) => {
    const { ipam, metrics, client } = await setup();
    pending.push(failure, failure);
    const a = await ipam.claimAddress(pool, '10.30.0.5', { uid: 'u1', name: 'e1' });
    expect(a.address).toBe('10.30.0.5');
    expect(answered).toBe(2);
    expect(metrics.total('IpamStoreRetries')).toBe(2);
    client.destroy();
  });

  it('surfaces persistent throttling as a retryable StoreUnavailableError after a bounded number of attempts', async () => {
    const { leases, client } = await setup();
    pending.push(...Array.from({ length: 10 }, () => throttled));
    const e = await leases.acquire('eip#a', 'inv', Date.now() + 10_000).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(StoreUnavailableError);
    expect((e as StoreUnavailableError).retryable).toBe(true);
    expect((e as Error).message).toMatch(/ProvisionedThroughputExceededException/);
    expect(answered).toBe(DYNAMO_MAX_ATTEMPTS); // the client's attempts, no second loop on top
    expect(forwarded).toBe(0);
    client.destroy();
  });

  it('does not retry a deployment fault (missing table) and keeps the SDK error as the cause', async () => {
    const client = localDynamoClient(proxyUrl, { maxAttempts: 1 });
    pending.length = 0;
    forwarded = 0;
    const ipam = createDynamoIpam({ client, tableName: 'no-such-table' });
    const e = await ipam.findByOwner('u1').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(StoreUnavailableError);
    expect(((e as Error).cause as Error).name).toBe('ResourceNotFoundException');
    expect(forwarded).toBe(1);
    client.destroy();
  });
});
