/**
 * The composition root: real adapters built once per cold start from validated configuration. Handlers call
 * `liveDeps()` (memoised); `npm run invoke` and the local stack call `buildDeps(config)` directly.
 *
 * Nothing here imports @kubernetes/client-node or reads a kubeconfig (ADR 0027): on EKS the adapters get a
 * KubeEndpoint (endpoint, CA, a token minted from the role); a local run loads its kubeconfig itself
 * (local/kubeconfig.ts) and passes it as `kubeConfig`. Every setting comes from the validated Config.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type Config, ConfigError, loadConfig } from '../config/config.js';
import { jsonLogger } from '../observability/log.js';
import { EmfMetrics, TallyMetrics } from '../observability/metrics.js';
import type { Deps, Logger, Metrics } from '../ports.js';
import { cachedEksToken } from './aws/eks-token.js';
import {
  createDynamoHolds,
  createDynamoIpam,
  createDynamoLeases,
  createDynamoRedoLedger,
  DYNAMO_MAX_ATTEMPTS,
} from './dynamo/index.js';
import { createK8sCluster, createK8sGateway, createK8sInspector } from './k8s/index.js';
import type { KubeEndpoint, KubeSource } from './k8s/rest.js';

/** EKS: endpoint and CA from configuration, a bearer token minted from the Lambda role (cached until near expiry). */
export function eksEndpoint(access: Extract<Config['kube'], { kind: 'eks' }>): KubeEndpoint {
  const token = cachedEksToken({ clusterName: access.clusterName, region: access.region });
  return {
    server: access.endpoint,
    ca: Buffer.from(access.caData, 'base64'),
    headers: async () => ({ Authorization: `Bearer ${await token()}` }),
  };
}

/**
 * Where the adapters reach the API server: `given` (a local run's kubeconfig, a test's), else the EKS access of the
 * configuration. A kubeconfig named in the configuration is for local runs, and the caller loads it.
 * @throws ConfigError when the configuration names a kubeconfig and none is given
 */
export function kubeConfigOf(config: Config, given?: KubeSource): KubeSource {
  if (given) return given;
  if (config.kube.kind === 'eks') return eksEndpoint(config.kube);
  throw new ConfigError([
    `KUBECONFIG (${config.kube.path}) is for local runs, which load it themselves; in Lambda set EKS_CLUSTER_NAME, EKS_ENDPOINT and EKS_CA_DATA`,
  ]);
}

export function dynamoClientOf(config: Config): DynamoDBClient {
  return new DynamoDBClient({
    region: config.dynamo.region,
    // The SDK's standard retry strategy is the only retry loop for DynamoDB requests (store.ts).
    maxAttempts: DYNAMO_MAX_ATTEMPTS,
    retryMode: 'standard',
    ...(config.dynamo.endpoint && { endpoint: config.dynamo.endpoint }),
    // Local endpoints (dynalite) accept any credentials; use placeholders so no credential chain is consulted.
    ...(config.dynamo.placeholderCredentials && {
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    }),
  });
}

export interface BuildOptions {
  log?: Logger;
  metrics?: Metrics;
  /** A client-node KubeConfig or a KubeEndpoint; default: the configuration's EKS access (kubeConfigOf). */
  kubeConfig?: KubeSource;
  dynamo?: DynamoDBClient;
}

export function buildDeps(config: Config, options: BuildOptions = {}): Deps {
  const log = options.log ?? jsonLogger({ level: config.logLevel, fields: { service: config.service } });
  const metrics =
    options.metrics ??
    (config.inLambda
      ? new EmfMetrics(config.service, undefined, undefined, config.metricsNamespace)
      : new TallyMetrics());
  const kubeConfig = kubeConfigOf(config, options.kubeConfig);
  const client = options.dynamo ?? dynamoClientOf(config);
  const clock = { now: () => Date.now() };
  return {
    cluster: createK8sCluster({
      kubeConfig,
      namespace: config.namespace,
      cacheTtlMs: config.readCacheMs,
      reportingInstance: config.service,
      ...(config.kubeOvnRelease && { kubeOvnRelease: config.kubeOvnRelease }),
    }),
    gateway: createK8sGateway({ kubeConfig, timeoutMs: config.execTimeoutMs }),
    inspector: createK8sInspector({ kubeConfig, timeoutMs: config.execTimeoutMs }),
    ipam: createDynamoIpam({ client, tableName: config.dynamo.tableName, log, metrics }),
    holds: createDynamoHolds({ client, tableName: config.dynamo.tableName, log, metrics }),
    leases: createDynamoLeases({ client, tableName: config.dynamo.tableName, clock }),
    redoLedger: createDynamoRedoLedger({ client, tableName: config.dynamo.tableName, clock }),
    clock,
    log,
    metrics,
    newId: () => randomUUID(),
    ...(config.kubeOvnRelease && { kubeOvnRelease: config.kubeOvnRelease }),
    batching: { execTimeoutMs: config.execTimeoutMs, lanes: config.execLanes },
  };
}

let config: Readonly<Config> | undefined;

/** The handlers' configuration: read from the environment and validated once per cold start. */
export function liveConfig(): Readonly<Config> {
  config ??= loadConfig(process.env);
  return config;
}

let cached: Promise<Deps> | undefined;

/** Deps for the Lambda handlers: built once, at the first invocation of a cold start, from liveConfig(). */
export function liveDeps(): Promise<Deps> {
  cached ??= Promise.resolve().then(() => buildDeps(liveConfig()));
  return cached;
}
