/**
 * Stand-in for kube-ovn's VPC NAT gateway controller plus the StatefulSet controller, reduced to the one duty the
 * EIP path depends on: for every VpcNatGateway keep exactly one pod `vpc-nat-gw-<gw>-0` in the namespace, shaped
 * as kube-ovn's StatefulSet template makes it. A deleted pod is replaced by a new one (new
 * uid, fresh gateway state — the local API runs its init container); a deleted VpcNatGateway takes its pod with
 * it; a change to the parts of the gateway the pod is built from rolls the pod, like a StatefulSet update.
 *
 * The pod's own net1 address (which kube-ovn's IPAM would assign) is the highest allocatable address of the
 * external subnet not held by another gateway pod, so that it stays clear of the product's lowest-first
 * allocation.
 */
import { createHash } from 'node:crypto';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1ConfigMap,
  type V1Pod,
} from '@kubernetes/client-node';
import { allocatableRanges, formatAddress, parseAddress, poolsOf } from '../../shared/domain/addressing.js';
import { gatewayApp } from '../../shared/domain/gateway-pod.js';
import {
  Annotation,
  DEFAULT_EXTERNAL_SUBNET,
  GATEWAY_CONTAINER,
  GROUP,
  gatewayPodName,
  Label,
  NAT_GATEWAY_SCRIPT,
  NatGwConfigMap,
  natGwFeatureOf,
  Plural,
  type Subnet,
  VERSION,
  type VpcNatGateway,
} from '../../shared/domain/kube-ovn.js';
import { type Log, Watched, WorkQueue } from './runtime.js';

export const GATEWAY_IMAGE = 'kubeovn/vpc-nat-gateway:v1.12.4';
export const INIT_CONTAINER = 'vpc-nat-gw-init';
const REVISION_LABEL = 'controller-revision-hash';
const POD_NAME_LABEL = 'statefulset.kubernetes.io/pod-name';

export interface GatewayStandInOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  serviceCidr: string;
  log: Log;
  /**
   * Model kube-ovn's VPC NAT gateway feature switch (the two ConfigMaps in the namespace): pods only while it is
   * on, all gateway pods removed when it is switched off. Off by default, so that test worlds without the
   * ConfigMaps still get their pods; the local stack turns it on.
   */
  featureSwitch?: boolean;
}

/** kube-ovn's util.GetNatGwExternalNetwork: the first external subnet, or the default one. */
export function externalNetworkOfGateway(gw: VpcNatGateway): string {
  return gw.spec.externalSubnets?.[0] || DEFAULT_EXTERNAL_SUBNET;
}

/** The annotation key prefix kube-ovn uses for an attachment's addresses: `<network>.<namespace>.kubernetes.io/`. */
export function providerPrefix(network: string, namespace: string): string {
  return `${network}.${namespace}.kubernetes.io`;
}

/** A reason the pod cannot be built yet; the stand-in waits for the next event instead of retrying. */
class Waiting extends Error {}

function v4Pool(subnet: Subnet | undefined, name: string, role: string) {
  if (!subnet) throw new Waiting(`waiting for ${role} subnet ${name}`);
  let pools: ReturnType<typeof poolsOf>;
  try {
    pools = poolsOf(subnet);
  } catch (e) {
    throw new Waiting(`${role} subnet ${name}: ${(e as Error).message}`);
  }
  const pool = pools.find((p) => p.family === 4);
  if (!pool) throw new Waiting(`${role} subnet ${name} has no IPv4 CIDR`);
  return pool;
}

/** The highest allocatable address of `subnet`'s IPv4 pool not in `taken`. */
export function pickNet1(
  subnet: Subnet,
  taken: ReadonlySet<string>,
): { address: string; cidr: string; gateway: string } {
  const pool = v4Pool(subnet, subnet.metadata.name, 'external');
  const ranges = allocatableRanges(pool);
  for (let i = ranges.length - 1; i >= 0; i--) {
    const r = ranges[i]!;
    for (let v = r.end; v >= r.start; v--) {
      const address = formatAddress(4, v);
      if (!taken.has(address)) return { address, cidr: pool.cidr, gateway: pool.gateway ?? '' };
    }
  }
  throw new Waiting(`external subnet ${subnet.metadata.name} has no address left for a gateway pod`);
}

interface Desired {
  pod: V1Pod;
  revision: string;
}

export async function startGatewayStandIn(o: GatewayStandInOptions): Promise<{ stop(): Promise<void> }> {
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
  const ns = o.namespace;
  const waiting = new Map<string, string>();
  /**
   * net1 addresses handed out, by pod name. The pods informer may not have seen a pod created a moment ago, so
   * like kube-ovn's IPAM the stand-in remembers its own allocations (reconciles run one at a time).
   */
  const assigned = new Map<string, string>();

  const queue = new WorkQueue(reconcile, o.log, 'gateway stand-in');
  let lastFeature: string | undefined;
  const enqueueAll = (): void => {
    for (const g of gateways.list()) queue.add(g.metadata?.name ?? '');
  };

  const gateways = new Watched<VpcNatGateway & { metadata: { name: string } }>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${Plural.gateway}`,
    list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: Plural.gateway }),
    onChange: (g) => queue.add(g.metadata.name),
    log: o.log,
    name: 'vpc-nat-gateways informer',
  });
  const subnets = new Watched<Subnet>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${Plural.subnet}`,
    list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: Plural.subnet }),
    // Pods are built from subnets: a subnet that appears or changes may unblock (or roll) any gateway.
    onChange: () => enqueueAll(),
    log: o.log,
    name: 'subnets informer',
  });
  const pods = new Watched<V1Pod>({
    kubeConfig: o.kubeConfig,
    path: `/api/v1/namespaces/${ns}/pods`,
    list: () => core.listNamespacedPod({ namespace: ns, labelSelector: `${Label.vpcNatGw}=true` }),
    labelSelector: `${Label.vpcNatGw}=true`,
    onChange: (p) => {
      const gw = p.metadata?.annotations?.[Annotation.vpcNatGw];
      if (gw) queue.add(gw);
    },
    log: o.log,
    name: 'gateway pods informer',
  });

  const configMaps = new Watched<V1ConfigMap>({
    kubeConfig: o.kubeConfig,
    path: `/api/v1/namespaces/${ns}/configmaps`,
    list: () => core.listNamespacedConfigMap({ namespace: ns }),
    onChange: (cm) => {
      const name = cm.metadata?.name;
      if (name === NatGwConfigMap.enable || name === NatGwConfigMap.image) enqueueAll();
    },
    log: o.log,
    name: 'nat-gw configmaps informer',
  });

  /**
   * kube-ovn's feature state (resyncVpcNatGwConfig): 'off' when ovn-vpc-nat-gw-config is missing or says "false"
   * (kube-ovn then deletes every gateway StatefulSet); 'on' when ovn-vpc-nat-config also carries an image;
   * otherwise 'unknown' — kube-ovn keeps its last state: it creates nothing new and removes nothing.
   */
  function feature(): { state: 'on' | 'off' | 'unknown'; reason?: string } {
    if (!o.featureSwitch) return { state: 'on' };
    const enable = configMaps.get(NatGwConfigMap.enable, ns)?.data;
    const image = configMaps.get(NatGwConfigMap.image, ns)?.data;
    const f = natGwFeatureOf(enable, image);
    if (f.enabled) return { state: 'on' };
    const off = !enable || enable[NatGwConfigMap.enableKey] === 'false';
    return { state: off ? 'off' : 'unknown', ...(f.reason !== undefined && { reason: f.reason }) };
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a kube-ovn controller's reconcile step in kube-ovn's own order (local/controllers/README.md), pinned by test/integration/k8s-standins.test.ts
  function desiredPod(gw: VpcNatGateway): Desired {
    const name = gw.metadata.name;
    const extNet = externalNetworkOfGateway(gw);
    if (!gw.spec.subnet) throw new Waiting(`vpc nat gateway ${name} has no spec.subnet`);
    if (!gw.spec.lanIp) throw new Waiting(`vpc nat gateway ${name} has no spec.lanIp`);
    const lan = v4Pool(subnets.get(gw.spec.subnet), gw.spec.subnet, 'lan');
    const external = subnets.get(extNet);
    if (!external) throw new Waiting(`waiting for external subnet ${extNet}`);
    const podName = gatewayPodName(name);
    const provider = providerPrefix(extNet, ns);
    const taken = new Set(
      pods
        .list()
        .filter((p) => p.metadata?.name !== podName && p.metadata?.namespace === ns)
        .map((p) => p.metadata?.annotations?.[`${provider}/ip_address`])
        .filter((a): a is string => typeof a === 'string'),
    );
    for (const [pod, address] of assigned) if (pod !== podName) taken.add(address);
    const net1 = pickNet1(external, taken);
    const lanGw = lan.gateway ?? '';
    const revision = createHash('sha256')
      .update(
        JSON.stringify([gw.spec.subnet, gw.spec.lanIp, extNet, o.serviceCidr, lanGw, lan.cidr, net1.cidr]),
      )
      .digest('hex')
      .slice(0, 10);
    const revisionValue =
      `${gatewayApp(name)}-${revision}`.length <= 63 ? `${gatewayApp(name)}-${revision}` : revision;
    if (!parseAddress(gw.spec.lanIp))
      throw new Waiting(`vpc nat gateway ${name}: spec.lanIp ${gw.spec.lanIp} is not an address`);
    const pod: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: podName,
        namespace: ns,
        labels: {
          [Label.app]: gatewayApp(name),
          [Label.vpcNatGw]: 'true',
          [REVISION_LABEL]: revisionValue,
          [POD_NAME_LABEL]: podName,
        },
        annotations: {
          [Annotation.vpcNatGw]: name,
          [Annotation.networks]: `${ns}/${extNet}`,
          [Annotation.logicalSwitch]: gw.spec.subnet,
          [Annotation.ipAddress]: gw.spec.lanIp,
          // What kube-ovn's pod controller writes once it has allocated the addresses.
          'ovn.kubernetes.io/allocated': 'true',
          'ovn.kubernetes.io/cidr': lan.cidr,
          'ovn.kubernetes.io/gateway': lanGw,
          [`${provider}/allocated`]: 'true',
          [`${provider}/logical_switch`]: extNet,
          [`${provider}/ip_address`]: net1.address,
          [`${provider}/cidr`]: net1.cidr,
          [`${provider}/gateway`]: net1.gateway,
        },
      },
      spec: {
        terminationGracePeriodSeconds: 0,
        initContainers: [
          {
            name: INIT_CONTAINER,
            image: GATEWAY_IMAGE,
            imagePullPolicy: 'IfNotPresent',
            command: ['bash', NAT_GATEWAY_SCRIPT, 'init', `${o.serviceCidr},${lanGw}`],
            securityContext: { privileged: true, allowPrivilegeEscalation: true },
          },
        ],
        containers: [
          {
            name: GATEWAY_CONTAINER,
            image: GATEWAY_IMAGE,
            imagePullPolicy: 'IfNotPresent',
            // Only the container's command, as kube-ovn declares it; nothing ever runs it.
            command: ['bash'],
            args: ['-c', 'while true; do sleep 10000; done'],
            securityContext: { privileged: true, allowPrivilegeEscalation: true },
          },
        ],
      },
    };
    return { pod, revision: revisionValue };
  }

  async function deletePod(pod: V1Pod, why: string): Promise<void> {
    const name = pod.metadata?.name ?? '';
    o.log(`gateway stand-in: deleting pod ${ns}/${name} (${why})`);
    try {
      await core.deleteNamespacedPod({
        name,
        namespace: ns,
        gracePeriodSeconds: 0,
        body: { preconditions: { uid: pod.metadata?.uid } },
      });
    } catch (e) {
      const code = (e as { code?: number }).code;
      if (code !== 404 && code !== 409) throw e;
    }
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a kube-ovn controller's reconcile step in kube-ovn's own order (local/controllers/README.md), pinned by test/integration/k8s-standins.test.ts
  async function reconcile(name: string): Promise<void> {
    const gw = gateways.get(name);
    const pod = pods.get(gatewayPodName(name), ns);
    if (!gw) {
      waiting.delete(name);
      assigned.delete(gatewayPodName(name));
      if (pod && !pod.metadata?.deletionTimestamp) await deletePod(pod, `vpc nat gateway ${name} is gone`);
      return;
    }
    if (pod?.metadata?.deletionTimestamp) return; // its DELETED event brings us back
    const f = feature();
    const said = `${f.state}${f.reason ? `: ${f.reason}` : ''}`;
    if (f.state !== 'on' && lastFeature !== said)
      o.log(`gateway stand-in: the VPC NAT gateway feature is ${said}`);
    lastFeature = said;
    if (f.state === 'off') {
      assigned.delete(gatewayPodName(name));
      if (pod) await deletePod(pod, 'the VPC NAT gateway feature is off');
      return;
    }
    if (f.state === 'unknown' && !pod) return;
    let desired: Desired;
    try {
      desired = desiredPod(gw);
    } catch (e) {
      if (!(e instanceof Waiting)) throw e;
      if (waiting.get(name) !== e.message) o.log(`gateway stand-in: ${e.message}`);
      waiting.set(name, e.message);
      return;
    }
    waiting.delete(name);
    if (pod) {
      if (pod.metadata?.labels?.[REVISION_LABEL] !== desired.revision) {
        await deletePod(pod, 'the gateway changed');
      }
      return;
    }
    try {
      const address =
        desired.pod.metadata?.annotations?.[`${providerPrefix(externalNetworkOfGateway(gw), ns)}/ip_address`];
      if (address) assigned.set(gatewayPodName(name), address);
      await core.createNamespacedPod({ namespace: ns, body: desired.pod });
      o.log(`gateway stand-in: created pod ${ns}/${gatewayPodName(name)}`);
    } catch (e) {
      if ((e as { code?: number }).code !== 409) throw e; // 409: the informer has not caught up yet
    }
  }

  await Promise.all([subnets.start(), pods.start(), ...(o.featureSwitch ? [configMaps.start()] : [])]);
  await gateways.start();
  const resync = setInterval(enqueueAll, 30_000);
  resync.unref();
  return {
    async stop() {
      clearInterval(resync);
      await Promise.all([
        gateways.stop(),
        subnets.stop(),
        pods.stop(),
        ...(o.featureSwitch ? [configMaps.stop()] : []),
      ]);
      await queue.stop();
    },
  };
}
