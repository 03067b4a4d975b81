/**
 * The composition root: real adapters built once per cold start from validated configuration. Handlers call
 * `liveDeps()` (memoised); `npm run invoke` and the local stack call `buildDeps(config)` directly.
 *
 * Nothing here imports @kubernetes/client-node (ADR 0027): on EKS the adapters get a KubeEndpoint (endpoint, CA,
 * a token minted from the role); a kubeconfig file (local runs) is read through client-node, loaded only then,
 * through an import the Lambda bundler does not follow.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type Config, ConfigError, loadConfig } from '../config/config.js';
import { jsonLogger } from '../observability/log.js';
import { EmfMetrics, TallyMetrics } from '../observability/metrics.js';
import type { Deps, Logger, Metrics } from '../ports.js';
import { cachedEksToken } from './aws/eks-token.js';
import { createDynamoIpam, createDynamoLeases, DYNAMO_MAX_ATTEMPTS } from './dynamo/index.js';
// Not ./k8s/index.js: it re-exports the kubeconfig loader, which would bring client-node into the bundles.
import { createK8sCluster } from './k8s/cluster.js';
import { createK8sGateway } from './k8s/gateway.js';
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
 * Where the adapters reach the API server. A kubeconfig file is read at the first request, through client-node
 * (kubeconfig.ts): the specifier is computed so that esbuild leaves that module, and client-node, out of the
 * Lambda bundles, which only ever use EKS access.
 */
export function kubeConfigOf(config: Config): KubeSource {
  if (config.kube.kind === 'eks') return eksEndpoint(config.kube);
  const path = config.kube.path;
  const local = ['./k8s', 'kubeconfig.js'].join('/');
  return async () => {
    let m: typeof import('./k8s/kubeconfig.js');
    try {
      m = (await import(local)) as typeof m;
    } catch (e) {
      throw new ConfigError([
        `KUBECONFIG is for local runs and cannot be read here (${(e as Error).message}); in Lambda set EKS_CLUSTER_NAME, EKS_ENDPOINT and EKS_CA_DATA`,
      ]);
    }
    return m.endpointFromFile(path);
  };
}

export function dynamoClientOf(config: Config): DynamoDBClient {
  return new DynamoDBClient({
    region: config.dynamo.region,
    // The SDK's standard retry strategy is the only retry loop for DynamoDB requests (store.ts).
    maxAttempts: DYNAMO_MAX_ATTEMPTS,
    retryMode: 'standard',
    ...(config.dynamo.endpoint && { endpoint: config.dynamo.endpoint }),
    // Local endpoints (dynalite) accept any credentials; use placeholders so no credential chain is consulted.
    ...(config.dynamo.endpoint &&
      !process.env.AWS_ACCESS_KEY_ID && { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
  });
}

export interface BuildOptions {
  log?: Logger;
  metrics?: Metrics;
  /** A client-node KubeConfig or a KubeEndpoint; default: from the configuration. */
  kubeConfig?: KubeSource;
  dynamo?: DynamoDBClient;
}

export function buildDeps(config: Config, options: BuildOptions = {}): Deps {
  const log = options.log ?? jsonLogger({ level: config.logLevel, fields: { service: config.service } });
  const inLambda = !!process.env.AWS_LAMBDA_FUNCTION_NAME;
  const metrics = options.metrics ?? (inLambda ? new EmfMetrics(config.service) : new TallyMetrics());
  const kubeConfig = options.kubeConfig ?? kubeConfigOf(config);
  const client = options.dynamo ?? dynamoClientOf(config);
  const clock = { now: () => Date.now() };
  return {
    cluster: createK8sCluster({ kubeConfig, namespace: config.namespace, cacheTtlMs: config.readCacheMs }),
    gateway: createK8sGateway({ kubeConfig, timeoutMs: config.execTimeoutMs }),
    ipam: createDynamoIpam({ client, tableName: config.dynamo.tableName, log, metrics }),
    leases: createDynamoLeases({ client, tableName: config.dynamo.tableName, clock }),
    clock,
    log,
    metrics,
    newId: () => randomUUID(),
  };
}

let cached: Promise<Deps> | undefined;

/** Deps for the Lambda handlers: configuration read and validated once, at the first invocation of a cold start. */
export function liveDeps(): Promise<Deps> {
  cached ??= Promise.resolve().then(() => buildDeps(loadConfig(process.env)));
  return cached;
}
