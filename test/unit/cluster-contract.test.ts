import { randomUUID } from 'node:crypto';
import type { MemoryPod } from '../../local/memory/cluster.js';
import {
  gatewayApp,
  gatewayNamespaceOf,
  gatewayPodName,
  gatewayReplicasOf,
  namePrefixOf,
} from '../../shared/domain/gateway-pod.js';
import {
  API_VERSION,
  NatGwConfigMap,
  type NatRule,
  type VpcNatGateway,
} from '../../shared/domain/kube-ovn.js';
import { describeClusterContract } from '../contract/cluster.js';
import { world } from '../support/world.js';

/** A pod as kube-ovn master's workload for `gw` makes it (the StatefulSet's, or a Deployment's ReplicaSet's). */
function podOf(gw: VpcNatGateway, prefix: string, i: number): MemoryPod {
  const app = gatewayApp(gw.metadata.name, prefix);
  const replicated = gatewayReplicasOf(gw) > 1;
  return {
    namespace: gatewayNamespaceOf(undefined, gw) ?? 'kube-system',
    name: replicated
      ? `${app}-7d4f8c9b5-${'bcdfg'.slice(i)}${'xz245'.slice(0, i)}`
      : gatewayPodName(gw.metadata.name, prefix),
    uid: randomUUID(),
    phase: 'Running',
    creationTimestamp: new Date(0).toISOString(),
    labels: { app, 'ovn.kubernetes.io/vpc-nat-gw': 'true' },
    container: { restartCount: 0, ready: true, startedAt: new Date(0).toISOString() },
    template: {
      env: {},
      initRunsScript: false,
      routes: {},
      ownerKind: replicated ? 'ReplicaSet' : 'StatefulSet',
    },
  };
}

describeClusterContract('in-memory fake (local/memory/cluster.ts)', async () => {
  const w = world();
  const { cluster } = w;
  const prefix = () => namePrefixOf(cluster.configMaps.get(NatGwConfigMap.image));
  return {
    cluster,
    async createEip(name, spec, metadata = {}) {
      return cluster.putEip({ metadata: { name, ...metadata }, spec });
    },
    async deleteEip(name) {
      cluster.deleteEip(name);
    },
    async createRule(kind: NatRule['kind'], name: string, eip: string, options = {}) {
      cluster.putRule(kind, name, eip, options);
    },
    async createQos(name, shared) {
      cluster.qos.set(name, {
        apiVersion: API_VERSION,
        kind: 'QoSPolicy',
        metadata: { name, uid: randomUUID(), resourceVersion: cluster.nextResourceVersion() },
        spec: { shared, bindingType: 'EIP', bandwidthLimitRules: [] },
      });
    },
    async createGateway(name, spec = {}) {
      const gw: VpcNatGateway = {
        apiVersion: API_VERSION,
        kind: 'VpcNatGateway',
        metadata: { name, uid: randomUUID(), resourceVersion: cluster.nextResourceVersion() },
        spec: { vpc: 'vpc1', subnet: 'vpc1-subnet1', lanIp: '10.0.1.254', ...spec },
      };
      cluster.gateways.set(name, gw);
      for (let i = 0; i < gatewayReplicasOf(gw); i++) cluster.putPod(podOf(gw, prefix(), i));
    },
    async createNamespace() {},
    async setNamePrefix(p) {
      const { natGwNamePrefix: _old, ...data } = cluster.configMaps.get(NatGwConfigMap.image) ?? {};
      cluster.configMaps.set(NatGwConfigMap.image, {
        ...data,
        ...(p !== undefined && { natGwNamePrefix: p }),
      });
    },
    async holdAndDelete(namespace, name) {
      const key = `${namespace}/${name}`;
      const pod = cluster.pods.get(key)!;
      cluster.pods.set(key, { ...pod, terminating: true });
      // Its ReplicaSet makes another.
      cluster.putPod({ ...pod, name: `${name.slice(0, -5)}zzzzz`, uid: randomUUID() });
      return async () => {
        cluster.pods.delete(key);
      };
    },
    async gatewayPod(gw) {
      const pod = await cluster.findGatewayPod(gw);
      if (!pod) throw new Error(`no pod for ${gw}`);
      return pod;
    },
    async setNatGw(enabled) {
      cluster.enableNatGw(enabled);
    },
  };
});
