import { randomUUID } from 'node:crypto';
import { API_VERSION, type NatRule } from '../../shared/domain/kube-ovn.js';
import { describeClusterContract } from '../contract/cluster.js';
import { world } from '../support/world.js';

describeClusterContract('in-memory fake (local/memory/cluster.ts)', async () => {
  const w = world();
  const { cluster } = w;
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
    async createGateway(name) {
      cluster.gateways.set(name, {
        apiVersion: API_VERSION,
        kind: 'VpcNatGateway',
        metadata: { name, uid: randomUUID(), resourceVersion: cluster.nextResourceVersion() },
        spec: { vpc: 'vpc1', subnet: 'vpc1-subnet1', lanIp: '10.0.1.254' },
      });
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
