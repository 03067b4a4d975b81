/**
 * Stand-in for kube-ovn's VPC NAT gateway controller plus the StatefulSet controller, reduced to the duties the
 * EIP path depends on: for every VpcNatGateway keep exactly one pod `vpc-nat-gw-<gw>-0` in the namespace, shaped
 * as the lab's kube-ovn release's StatefulSet template makes it (gateway-pod.ts), and initialise its gateway as
 * that release's controller does. A deleted pod is replaced by a new one (new uid, fresh gateway state); a
 * deleted VpcNatGateway takes its pod with it; a change to the parts of the gateway the pod is built from rolls
 * the pod, like a StatefulSet update.
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
  PatchStrategy,
  setHeaderOptions,
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
  NatGwConfigMap,
  natGwFeatureOf,
  Plural,
  type Subnet,
  VERSION,
  type VpcNatGateway,
} from '../../shared/domain/kube-ovn.js';
import { atLeast, DEFAULT_RELEASE, gatewayImage, type KubeOvnRelease } from '../natgw/releases.js';
import {
  type GatewayPodInput,
  gatewayPod,
  initialisation,
  providerPrefix,
  REVISION_LABEL,
} from './gateway-pod.js';
import { execArgv, type Log, Watched, WorkQueue } from './runtime.js';

export interface GatewayStandInOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  serviceCidr: string;
  log: Log;
  /**
   * Model kube-ovn's VPC NAT gateway feature switch (the two ConfigMaps in the namespace): pods only while it is
   * on, all gateway pods removed when it is switched off. Off by default, so that test worlds without the
   * ConfigMaps still get their pods; the local stack turns it on. With it on, the pods run the ConfigMap's image.
   */
  featureSwitch?: boolean;
  /** The kube-ovn release whose pod template and gateway initialisation the stand-in follows (default: the lab's). */
  release?: KubeOvnRelease;
}

/** kube-ovn's util.GetNatGwExternalNetwork: the first external subnet, or the default one. */
export function externalNetworkOfGateway(gw: VpcNatGateway): string {
  return gw.spec.externalSubnets?.[0] || DEFAULT_EXTERNAL_SUBNET;
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
  input: GatewayPodInput;
}

const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** A subnet's `spec.provider`, when it names one. */
function providerOf(subnet: Subnet | undefined): { provider?: string } {
  const provider = (subnet?.spec as { provider?: unknown } | undefined)?.provider;
  return typeof provider === 'string' && provider !== '' ? { provider } : {};
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
  const release = o.release ?? DEFAULT_RELEASE;
  /** Gateways initialised: pod uid (1.12), or pod uid and container id (1.13+). */
  const initialised = new Set<string>();

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
    onChange: (p, kind) => {
      if (kind === 'delete')
        for (const k of initialised) if (k.startsWith(p.metadata?.uid ?? '?')) initialised.delete(k);
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
    const image = imageOf();
    const built = [gw.spec.subnet, gw.spec.lanIp, extNet, o.serviceCidr, lan.gateway, lan.cidr, net1.cidr];
    const revision = createHash('sha256')
      .update(JSON.stringify([...built, release, image]))
      .digest('hex')
      .slice(0, 10);
    const revisionValue =
      `${gatewayApp(name)}-${revision}`.length <= 63 ? `${gatewayApp(name)}-${revision}` : revision;
    if (!parseAddress(gw.spec.lanIp))
      throw new Waiting(`vpc nat gateway ${name}: spec.lanIp ${gw.spec.lanIp} is not an address`);
    const input: GatewayPodInput = {
      release,
      image,
      gateway: name,
      namespace: ns,
      serviceCidr: o.serviceCidr,
      lanSubnet: gw.spec.subnet,
      lanIp: gw.spec.lanIp,
      lan: { cidr: lan.cidr, gateway: lan.gateway ?? '', ...providerOf(subnets.get(gw.spec.subnet)) },
      externalNetwork: extNet,
      external: { cidr: net1.cidr, gateway: net1.gateway, ...providerOf(external) },
      net1Address: net1.address,
      revision: revisionValue,
    };
    return { pod: gatewayPod(input), revision: revisionValue, input };
  }

  /** kube-ovn's vpcNatImage: the ovn-vpc-nat-config ConfigMap's image while the feature switch is modelled. */
  function imageOf(): string {
    const configured = o.featureSwitch
      ? configMaps.get(NatGwConfigMap.image, ns)?.data?.[NatGwConfigMap.imageKey]
      : undefined;
    return configured || gatewayImage(release);
  }

  /**
   * handleInitVpcNatGw on a running gateway pod: the release's init exec(s), then the pod's init annotation.
   * 1.12 does it once per pod (its init container runs again after a restart); from 1.13 the stand-in does it
   * again for every new container of the pod, where kube-ovn instead rolls the pod once (local/controllers/README.md).
   */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the lab's kube-ovn stand-in: one step per release difference, kept in the order kube-ovn's own controller runs them (ADR 0054)
  async function initialise(pod: V1Pod, input: GatewayPodInput): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const status = pod.status?.containerStatuses?.find((c) => c.name === GATEWAY_CONTAINER);
    if (pod.status?.phase !== 'Running' || !status?.state?.running) return;
    const key = atLeast(release, '1.13') ? `${uid}/${status.containerID ?? ''}` : uid;
    const annotated = pod.metadata?.annotations?.[Annotation.vpcNatGwInit] === 'true';
    if (initialised.has(key) || (!atLeast(release, '1.13') && annotated)) return;
    const name = pod.metadata?.name ?? '';
    for (const argv of initialisation(
      input,
      pod.metadata?.annotations?.['ovn.kubernetes.io/gateway'] ?? '',
    )) {
      await execArgv(o.kubeConfig, ns, name, GATEWAY_CONTAINER, argv);
    }
    initialised.add(key);
    if (!annotated) {
      await core
        .patchNamespacedPod(
          { name, namespace: ns, body: { metadata: { annotations: { [Annotation.vpcNatGwInit]: 'true' } } } },
          MERGE,
        )
        .catch((e: unknown) => {
          if ((e as { code?: number }).code !== 404) throw e;
        });
    }
    o.log(`gateway stand-in: initialised ${ns}/${name} (kube-ovn ${release})`);
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
        return;
      }
      await initialise(pod, desired.input);
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
