/**
 * `listGatewayPods` on the Kubernetes adapter covers every namespace gateway pods are in (docs/adr/0105-ha-gateways.md,
 * docs/adr/0121-gateway-pods-listed-where-the-gateways-are.md): kube-ovn's own, and each `spec.namespace` a
 * VpcNatGateway names, every replica of each, with the gateway each serves (its `ovn.kubernetes.io/vpc_nat_gw`
 * annotation, whatever the name prefix). The garbage collector then reserves every replica's own net1 address
 * (ADR 0042). Against the local Kubernetes API with the kube-ovn master stand-ins (their replicas and namespaces are
 * checked against master's controller in test/integration/k8s-standins-replicas.test.ts); the IPAM is the in-memory
 * port (the DynamoDB adapter's reservations are the IPAM contract's).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { MemoryIpam } from '../../local/memory/ipam.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { gatewayImage } from '../../local/natgw/releases.js';
import { createK8sCluster } from '../../shared/adapters/k8s/index.js';
import { collectGarbage } from '../../shared/core/gc.js';
import { Plural } from '../../shared/domain/kube-ovn.js';
import type { Cluster, GatewayPod } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';
import { eventuallyValue } from '../support/eventually.js';
import {
  createCustom,
  createGateway,
  createSubnets,
  EXTERNAL,
  startWorld,
  type World,
} from './k8s-fixtures.js';

const NS = 'kube-system';
let w: World;
let standIns: StandIns;
let cluster: Cluster;

beforeAll(async () => {
  w = await startWorld({ kubeOvnRelease: 'master' });
  for (const [name, data] of [
    ['ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'true' }],
    ['ovn-vpc-nat-config', { image: gatewayImage('master'), natGwNamePrefix: 'edge' }],
  ] as const)
    await w.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name }, data } });
  standIns = await startStandIns({ kubeConfig: w.kc, release: 'master', featureSwitch: true });
  await createSubnets(w);
  await w.core.createNamespace({ body: { metadata: { name: 'team-a' } } });
  await createGateway(w, 'lp-home', { replicas: 2, externalSubnets: [EXTERNAL] });
  await createGateway(w, 'lp-team', { replicas: 3, namespace: 'team-a', externalSubnets: [EXTERNAL] });
  cluster = createK8sCluster({ kubeConfig: w.kc, namespace: NS, kubeOvnRelease: 'master' });
}, 60_000);

afterAll(async () => {
  await standIns?.stop();
  await w?.close();
});

const running = (pods: GatewayPod[]) => pods.filter((p) => p.phase === 'Running' && !p.terminating);

describe('listGatewayPods on the Kubernetes adapter', () => {
  it("lists every replica in kube-ovn's namespace and in each gateway's spec.namespace, with the gateway each serves", async () => {
    const pods = await eventuallyValue(
      async () => {
        const list = running(await cluster.listGatewayPods());
        return list.length === 5 ? list : undefined;
      },
      { timeoutMs: 30_000, what: 'five replicas running' },
    );
    const seen = pods.map((p) => [p.gateway, p.namespace, p.app]).sort();
    expect(seen).toEqual([
      ['lp-home', NS, 'edge-lp-home'],
      ['lp-home', NS, 'edge-lp-home'],
      ['lp-team', 'team-a', 'edge-lp-team'],
      ['lp-team', 'team-a', 'edge-lp-team'],
      ['lp-team', 'team-a', 'edge-lp-team'],
    ]);
    // The same pods kube-ovn's rule finds for each gateway (the prefix, the namespace).
    const byRule = [
      ...(await cluster.findGatewayPods({ name: 'lp-home' })),
      ...(await cluster.findGatewayPods({ name: 'lp-team', namespace: 'team-a' })),
    ];
    expect(pods.map((p) => p.uid).sort()).toEqual(
      running(byRule)
        .map((p) => p.uid)
        .sort(),
    );
  });

  it('costs one list of VpcNatGateways and one list of pods per namespace, the gateways reused within the cache period', async () => {
    const cached = createK8sCluster({ kubeConfig: w.kc, namespace: NS, cacheTtlMs: 60_000 });
    // The adapter's own requests (the stand-ins list pods too).
    const count = (re: RegExp) =>
      w.api.requests
        .all()
        .filter((r) => r.method === 'GET' && r.headers['user-agent'] === 'eip-lambdas' && re.test(r.path))
        .length;
    const gwList = new RegExp(`/${Plural.gateway}$`);
    const podList = /^\/api\/v1\/namespaces\/[^/]+\/pods$/;
    const before = { gws: count(gwList), pods: count(podList) };
    await cached.listGatewayPods();
    await cached.listGatewayPods();
    expect(count(gwList) - before.gws).toBe(1);
    expect(count(podList) - before.pods).toBe(4); // two namespaces, twice
  });

  it("the garbage collector reserves every replica's own net1 address, in each namespace", async () => {
    await createCustom(w, Plural.eip, 'IptablesEIP', 'lp-eip', { natGwDp: 'lp-team' });
    const pods = running(await cluster.listGatewayPods());
    const clock = new ManualClock();
    const ipam = new MemoryIpam({ clock });
    const report = await collectGarbage({ cluster, ipam, clock, log: memoryLogger() }, ipam);
    const reserved = report.gatewayPods.filter((r) => r.status === 'reserved').map((r) => r.pod);
    expect(reserved.sort()).toEqual(pods.map((p) => `${p.namespace}/${p.name}`).sort());
    for (const p of pods) {
      const held = await ipam.findByOwner(`pod:${p.uid}`);
      expect(held.map((a) => a.address)).toEqual([p.addresses![EXTERNAL]]);
    }
  });
});
