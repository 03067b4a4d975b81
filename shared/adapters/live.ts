/**
 * The composition root: real adapters built once per cold start from validated configuration. Handlers call
 * `liveDeps()` (memoised); `npm run invoke` and the local stack call `buildDeps(config)` directly.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KubeConfig } from '@kubernetes/client-node';
import { type Config, loadConfig } from '../config/config.js';
import { jsonLogger } from '../observability/log.js';
import { EmfMetrics, TallyMetrics } from '../observability/metrics.js';
import type { Deps, Logger, Metrics } from '../ports.js';
import { cachedEksToken } from './aws/eks-token.js';
import { createDynamoIpam, createDynamoLeases } from './dynamo/index.js';
import { createK8sCluster, createK8sGateway, kubeConfigFromFile } from './k8s/index.js';

/** A KubeConfig for EKS: endpoint and CA from configuration, a bearer token minted from the Lambda role. */
export function eksKubeConfig(access: Extract<Config['kube'], { kind: 'eks' }>): KubeConfig {
  const kc = new KubeConfig();
  const token = cachedEksToken({ clusterName: access.clusterName, region: access.region });
  kc.loadFromClusterAndUser(
    { name: access.clusterName, server: access.endpoint, caData: access.caData, skipTLSVerify: false },
    { name: 'eip-lambdas-iam' },
  );
  kc.addAuthenticator({
    isAuthProvider: (user) => user.name === 'eip-lambdas-iam',
    applyAuthentication: async (_user, opts) => {
      opts.headers = { ...(opts.headers ?? {}), Authorization: `Bearer ${await token()}` };
    },
  });
  return kc;
}

export function kubeConfigOf(config: Config): KubeConfig {
  return config.kube.kind === 'eks' ? eksKubeConfig(config.kube) : kubeConfigFromFile(config.kube.path);
}

export function dynamoClientOf(config: Config): DynamoDBClient {
  return new DynamoDBClient({
    region: config.dynamo.region,
    ...(config.dynamo.endpoint && { endpoint: config.dynamo.endpoint }),
    // Local endpoints (dynalite) accept any credentials; use placeholders so no credential chain is consulted.
    ...(config.dynamo.endpoint &&
      !process.env.AWS_ACCESS_KEY_ID && { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }),
  });
}

export interface BuildOptions {
  log?: Logger;
  metrics?: Metrics;
  kubeConfig?: KubeConfig;
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
    cluster: createK8sCluster({ kubeConfig, namespace: config.namespace }),
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
