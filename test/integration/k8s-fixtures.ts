/**
 * Shared set-up for the Kubernetes adapter and stand-in tests: the real local API in-process on an ephemeral
 * port, client-node clients on its kubeconfig, and small builders for the kube-ovn objects.
 */
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import type { KubeOvnRelease } from '../../local/natgw/releases.js';
import { API_VERSION, GROUP, Plural, VERSION } from '../../shared/domain/kube-ovn.js';

export interface World {
  api: KubeApi;
  kc: KubeConfig;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  close(): Promise<void>;
}

/** The local API; its gateway pods run the lab's default kube-ovn release unless one is given. */
export async function startWorld(options: { kubeOvnRelease?: KubeOvnRelease } = {}): Promise<World> {
  const api = await startKubeApi({ restartDelayMs: 20, ...options });
  const kc = new KubeConfig();
  kc.loadFromString(api.kubeconfigYaml());
  return {
    api,
    kc,
    custom: kc.makeApiClient(CustomObjectsApi),
    core: kc.makeApiClient(CoreV1Api),
    close: () => api.close(),
  };
}

export const g = { group: GROUP, version: VERSION } as const;

export async function createCustom(
  w: World,
  plural: string,
  kind: string,
  name: string,
  spec: Record<string, unknown>,
  metadata: Record<string, unknown> = {},
): Promise<Record<string, unknown> & { metadata: { resourceVersion: string; uid: string } }> {
  return w.custom.createClusterCustomObject({
    ...g,
    plural,
    body: { apiVersion: API_VERSION, kind, metadata: { name, ...metadata }, spec },
  });
}

export const EXTERNAL = 'ovn-vpc-external-network';

/** The external subnet 172.18.0.0/16 (its top /29 excluded) and a VPC subnet 10.0.1.0/24 for the LAN side. */
export async function createSubnets(w: World, ext = EXTERNAL): Promise<void> {
  await createCustom(w, Plural.subnet, 'Subnet', ext, {
    cidrBlock: '172.18.0.0/16',
    gateway: '172.18.0.1',
    excludeIps: ['172.18.255.248..172.18.255.255'],
    provider: `${ext}.kube-system`,
  }).catch(ignoreExists);
  await createCustom(w, Plural.subnet, 'Subnet', 'vpc1-subnet', {
    cidrBlock: '10.0.1.0/24',
    gateway: '10.0.1.1',
    vpc: 'vpc1',
  }).catch(ignoreExists);
}

export function ignoreExists(e: unknown): void {
  if ((e as { code?: number }).code !== 409) throw e;
}

export async function createGateway(
  w: World,
  name: string,
  spec: Record<string, unknown> = {},
): Promise<void> {
  await createCustom(w, Plural.gateway, 'VpcNatGateway', name, {
    vpc: 'vpc1',
    subnet: 'vpc1-subnet',
    lanIp: '10.0.1.254',
    ...spec,
  });
}

export async function gatewayPod(w: World, gw: string): Promise<V1Pod | undefined> {
  try {
    return await w.core.readNamespacedPod({ name: `vpc-nat-gw-${gw}-0`, namespace: 'kube-system' });
  } catch (e) {
    if ((e as { code?: number }).code === 404) return undefined;
    throw e;
  }
}
