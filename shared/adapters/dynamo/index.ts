/**
 * DynamoDB adapters: the Ipam, PolicyHolds and Leases ports on one table (infra/dynamodb-table.yml).
 * Item types and access patterns: README.md in this directory.
 *
 * @example
 *   const client = new DynamoDBClient({});            // AWS_ENDPOINT_URL_DYNAMODB points it at dynalite locally
 *   await ensureTable(client, 'eip-lambdas-dev-ipam');  // local stack and tests only; CloudFormation on AWS
 *   const ipam = createDynamoIpam({ client, tableName: 'eip-lambdas-dev-ipam', log, metrics });
 *   const a = await ipam.claimAny(pool, { uid: eip.metadata.uid, name: eip.metadata.name });
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Clock, Leases, Logger, Metrics, PolicyHolds, RedoLedger } from '../../ports.js';
import { DynamoHolds } from './holds.js';
import { DynamoIpam, type IpamTuning } from './ipam.js';
import { DynamoLeases } from './leases.js';
import { DynamoRedoLedger } from './redo-ledger.js';
import { Store } from './store.js';

export type { IpamTuning } from './ipam.js';
export { DynamoIpam } from './ipam.js';
export { DYNAMO_MAX_ATTEMPTS } from './store.js';

const systemClock: Clock = { now: () => Date.now() };

export interface DynamoIpamOptions {
  client: DynamoDBClient;
  tableName: string;
  log?: Logger;
  metrics?: Metrics;
  clock?: Clock;
  tuning?: Partial<IpamTuning>;
}

export function createDynamoIpam(options: DynamoIpamOptions): DynamoIpam {
  const store = new Store(options);
  return new DynamoIpam(store, options.clock ?? systemClock, options.log, options.metrics, options.tuning);
}

export function createDynamoLeases(options: {
  client: DynamoDBClient;
  tableName: string;
  clock?: Clock;
  metrics?: Metrics;
  log?: Logger;
}): Leases {
  return new DynamoLeases(new Store(options), options.clock ?? systemClock, options.metrics);
}

export function createDynamoHolds(options: {
  client: DynamoDBClient;
  tableName: string;
  log?: Logger;
  metrics?: Metrics;
}): PolicyHolds {
  return new DynamoHolds(new Store(options));
}

/** The RedoLedger on the same table (docs/adr/0111-gateway-redo-in-one-sweep.md). */
export function createDynamoRedoLedger(options: {
  client: DynamoDBClient;
  tableName: string;
  clock?: Clock;
}): RedoLedger {
  return new DynamoRedoLedger(new Store(options), options.clock ?? systemClock);
}
