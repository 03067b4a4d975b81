/**
 * The handlers on the real adapters, as one Lambda container runs them: the local Kubernetes API with the kube-ovn
 * stand-ins and the demo objects, the handlers' RBAC and exec policy applied as `kubectl apply -k infra/rbac` sends
 * them (the local API enforces both), dynalite for the table, and one `Deps` built by the product's own `buildDeps`
 * under the handlers' identity. What the integration tests of the handlers share.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import { IDENTITIES } from '../../local/identities.js';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { memoryLogger } from '../../local/memory/logger.js';
import type { KubeOvnRelease } from '../../local/natgw/releases.js';
import { buildDeps } from '../../shared/adapters/live.js';
import { loadConfig } from '../../shared/config/config.js';
import type { Deps } from '../../shared/ports.js';
import { type CountingClient, type DynamoFixture, PRODUCT_RETRIES, startDynamoFixture } from './dynamo.js';
import { eventuallyValue } from './eventually.js';

const root = join(import.meta.dirname, '../..');

export interface HandlersLab {
  api: KubeApi;
  dynamo: DynamoFixture;
  /** The table's client, counting requests by operation. */
  client: CountingClient;
  /** The administrator's client for IptablesEIPs and the other kube-ovn objects. */
  custom: CustomObjectsApi;
  /** The administrator's kubeconfig, written to a file (for kubectl and the CLIs). */
  kubeconfig: string;
  /** One container's dependencies, under the handlers' identity. */
  deps: Deps;
  stop(): Promise<void>;
}

/** Starts it all; the gateway pod of the demo gateway gw1 is up when it resolves. */
export async function startHandlersLab(options: {
  table: string;
  token: string;
  /** The kube-ovn release the local API and the stand-ins play (their default when absent). */
  release?: KubeOvnRelease;
}): Promise<HandlersLab> {
  const dir = mkdtempSync(join(tmpdir(), 'eip-handlers-'));
  const kubeconfig = join(dir, 'kubeconfig');
  const release = options.release !== undefined ? { kubeOvnRelease: options.release } : {};
  const api = await startKubeApi({ ...release, tokens: [{ token: options.token, ...IDENTITIES.handlers }] });
  await api.writeKubeconfig(kubeconfig);
  const admin = new KubeConfig();
  admin.loadFromString(api.kubeconfigYaml());
  const dynamo = await startDynamoFixture();
  const client = await dynamo.table(options.table, PRODUCT_RETRIES);
  const standIns = await startStandIns({
    kubeConfig: admin,
    ...(options.release !== undefined && { release: options.release }),
  });
  const objects = KubernetesObjectApi.makeApiClient(admin);
  for (const file of ['handlers.yaml', 'exec-policy.yaml'])
    for (const d of parseAllDocuments(readFileSync(join(root, 'infra/rbac', file), 'utf8')))
      await objects.create(d.toJS() as KubernetesObject);
  for (const o of demoObjects('kube-system')) await objects.create(o as KubernetesObject);
  const handlers = new KubeConfig();
  handlers.loadFromString(api.kubeconfigYaml(options.token));
  const deps = buildDeps(
    loadConfig({ KUBECONFIG: kubeconfig, TABLE_NAME: options.table, DYNAMODB_ENDPOINT: dynamo.endpoint }),
    { kubeConfig: handlers, dynamo: client, log: memoryLogger('warn') },
  );
  await eventuallyValue(() => api.gateways.get('kube-system', 'vpc-nat-gw-gw1-0'), {
    what: "the stand-in's gateway pod",
  });
  return {
    api,
    dynamo,
    client,
    custom: admin.makeApiClient(CustomObjectsApi),
    kubeconfig,
    deps,
    async stop() {
      await standIns.stop();
      await api.close();
      await dynamo.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
