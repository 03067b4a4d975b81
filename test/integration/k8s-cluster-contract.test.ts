import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll } from 'vitest';
import { startStandIns } from '../../local/controllers/index.js';
import { createK8sCluster } from '../../shared/adapters/k8s/index.js';
import { NatGwConfigMap, Plural } from '../../shared/domain/kube-ovn.js';
import { describeClusterContract } from '../contract/cluster.js';
import { eventuallyValue } from '../support/eventually.js';
import { createCustom, createGateway, createSubnets, g, startWorld, type World } from './k8s-fixtures.js';

const NS = 'kube-system';
const stops: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
});

const rulePlural = {
  IptablesFIPRule: Plural.fip,
  IptablesDnatRule: Plural.dnat,
  IptablesSnatRule: Plural.snat,
};

describeClusterContract('client-node adapter on the local Kubernetes API', async () => {
  // kube-ovn master: its replicated gateways and spec.namespace (local/controllers/README.md).
  const w: World = await startWorld({ kubeOvnRelease: 'master' });
  stops.push(() => w.close());
  const standIns = await startStandIns({ kubeConfig: w.kc, release: 'master' });
  stops.push(() => standIns.stop());
  await createSubnets(w);
  const core = w.kc.makeApiClient(CoreV1Api);
  const configMap = async (name: string, data: Record<string, string>) => {
    const body = { metadata: { name, namespace: NS }, data };
    await core
      .replaceNamespacedConfigMap({ name, namespace: NS, body })
      .catch(() => core.createNamespacedConfigMap({ namespace: NS, body }));
  };
  const setNatGw = async (enabled: boolean) => {
    await configMap(NatGwConfigMap.enable, { [NatGwConfigMap.enableKey]: String(enabled) });
    await configMap(NatGwConfigMap.image, {
      [NatGwConfigMap.imageKey]: 'docker.io/kubeovn/vpc-nat-gateway:v1.12.4',
    });
  };
  await setNatGw(true);
  await createGateway(w, 'gw1', { externalSubnets: ['ovn-vpc-external-network'] });
  const cluster = createK8sCluster({ kubeConfig: w.kc, namespace: NS });
  return {
    cluster,
    async createEip(name, spec, metadata = {}) {
      return (await createCustom(w, Plural.eip, 'IptablesEIP', name, { ...spec }, metadata)) as never;
    },
    async deleteEip(name) {
      await w.custom.deleteClusterCustomObject({ ...g, plural: Plural.eip, name });
    },
    async createRule(kind, name, eip, options = {}) {
      await createCustom(
        w,
        rulePlural[kind],
        kind,
        name,
        { eip, internalIp: '10.0.1.5' },
        options.terminating ? { finalizers: ['example.com/hold'] } : {},
      );
      if (options.terminating)
        await w.custom.deleteClusterCustomObject({ ...g, plural: rulePlural[kind], name });
    },
    async createQos(name, shared) {
      await createCustom(w, Plural.qos, 'QoSPolicy', name, { shared, bindingType: 'EIP' });
    },
    async createGateway(name, spec = {}) {
      await createGateway(w, name, spec);
    },
    async createNamespace(name) {
      await core.createNamespace({ body: { metadata: { name } } });
    },
    async setNamePrefix(prefix) {
      const cm = await core.readNamespacedConfigMap({ name: NatGwConfigMap.image, namespace: NS });
      const { natGwNamePrefix: _old, ...data } = cm.data ?? {};
      await configMap(NatGwConfigMap.image, {
        ...data,
        ...(prefix !== undefined && { natGwNamePrefix: prefix }),
      });
    },
    async holdAndDelete(namespace, name) {
      const finalizers = (list: string[]) => [{ op: 'add', path: '/metadata/finalizers', value: list }];
      await core.patchNamespacedPod({ namespace, name, body: finalizers(['example.com/hold']) });
      await core.deleteNamespacedPod({ namespace, name });
      return async () => {
        await core.patchNamespacedPod({ namespace, name, body: finalizers([]) });
      };
    },
    async gatewayPod(gw) {
      return eventuallyValue(async () => {
        const p = await cluster.findGatewayPod(gw);
        return p?.phase === 'Running' && p.container?.ready ? p : undefined;
      });
    },
    setNatGw,
  };
});
