/**
 * Stand-in for kube-ovn's VPC NAT gateway controller plus the StatefulSet, Deployment and ReplicaSet controllers,
 * reduced to the duties the EIP path depends on: for every VpcNatGateway keep its pods — one `<prefix>-<gw>-0` of a
 * StatefulSet, or on master with `spec.replicas > 1` that many of a Deployment (gateway-workloads.ts) — in its
 * namespace (`spec.namespace` on master, else kube-ovn's), shaped as the lab's kube-ovn release's template makes them
 * (gateway-pod.ts), and initialise each pod's gateway as that release's controller does. A deleted pod is replaced by
 * a new one (new uid, fresh gateway state; a replica under a new name); a deleted VpcNatGateway takes its pods with
 * it; a change to the parts of the gateway the pods are built from rolls them, like a StatefulSet or Deployment
 * update; `spec.replicas` scales a Deployment.
 *
 * A pod's own net1 address (which kube-ovn's IPAM would assign) is the highest allocatable address of the external
 * subnet not held by another gateway pod, so that it stays clear of the product's lowest-first allocation; a replica's
 * LAN address, likewise the highest free one of the LAN subnet.
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
import {
  gatewayApp,
  gatewayNamespaceOf,
  gatewayReplicasOf,
  namePrefixOf,
} from '../../shared/domain/gateway-pod.js';
import {
  Annotation,
  DEFAULT_EXTERNAL_SUBNET,
  GATEWAY_CONTAINER,
  GROUP,
  Label,
  NatGwConfigMap,
  natGwFeatureOf,
  Plural,
  type Subnet,
  VERSION,
  type VpcNatGateway,
} from '../../shared/domain/kube-ovn.js';
import { atLeast, DEFAULT_RELEASE, gatewayImage, type KubeOvnRelease } from '../natgw/releases.js';
import { gatewayPod, initialisation, type PodOwner, providerPrefix } from './gateway-pod.js';
import {
  derivedUid,
  ownedBy,
  type PodTemplate,
  planWorkload,
  podTemplateHash,
  replicaSetName,
  replicaSetUid,
  type Workload,
  workloadKey,
} from './gateway-workloads.js';
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

/**
 * The highest allocatable address of `subnet`'s IPv4 pool not in `taken` (a pod's net1, or a replica's LAN address),
 * as kube-ovn's IPAM sees the pool: the CIDR without its gateway and excludeIps. This product's range annotation means
 * nothing to kube-ovn (ADR 0006).
 */
export function pickNet1(
  subnet: Subnet,
  taken: ReadonlySet<string>,
  role = 'external',
): { address: string; cidr: string; gateway: string } {
  const pool = v4Pool(subnet, subnet.metadata.name, role);
  const { only: _productRange, ...kubeOvnPool } = pool;
  const ranges = allocatableRanges(kubeOvnPool);
  for (let i = ranges.length - 1; i >= 0; i--) {
    const r = ranges[i]!;
    for (let v = r.end; v >= r.start; v--) {
      const address = formatAddress(4, v);
      if (!taken.has(address)) return { address, cidr: pool.cidr, gateway: pool.gateway ?? '' };
    }
  }
  throw new Waiting(`${role} subnet ${subnet.metadata.name} has no address left for a gateway pod`);
}

const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** A subnet's `spec.provider`, when it names one. */
function providerOf(subnet: Subnet | undefined): { provider?: string } {
  const provider = (subnet?.spec as { provider?: unknown } | undefined)?.provider;
  return typeof provider === 'string' && provider !== '' ? { provider } : {};
}

/** How long a pod created or deleted is expected to show in the informer before the stand-in stops waiting. */
const EXPECTATION_MS = 10_000;

/** A hash of what a pod is built from, `length` hex characters. */
const hashOf = (parts: unknown[], length: number): string =>
  createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, length);

export async function startGatewayStandIn(o: GatewayStandInOptions): Promise<{ stop(): Promise<void> }> {
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
  /** kube-ovn's controller namespace: its ConfigMaps, the external networks' attachments, the default pod namespace. */
  const ns = o.namespace;
  const waiting = new Map<string, string>();
  /**
   * Addresses handed out (net1, and the LAN address of a replica), by `<namespace>/<pod>`. The pods informer may not
   * have seen a pod created a moment ago, so like kube-ovn's IPAM the stand-in remembers its own allocations
   * (reconciles run one at a time); a pod's go when its deletion is seen.
   */
  const assigned = new Map<string, { net1: string; lan?: string }>();
  const release = o.release ?? DEFAULT_RELEASE;
  /** Gateways initialised: pod uid (1.12), or pod uid and container id (1.13+). */
  const initialised = new Set<string>();
  /** Every workload made for a gateway, by workloadKey, until the gateway is deleted. */
  const workloads = new Map<string, Workload>();
  /**
   * The controllers' expectations (client-go's ControllerExpectations): pods created (by `<namespace>/<name>`) or
   * deleted (by uid) that the informer has not shown yet, with when, so that the next step neither makes nor deletes
   * them twice. Forgotten when seen, or after EXPECTATION_MS.
   */
  const expectedCreates = new Map<string, { pod: V1Pod; at: number }>();
  const expectedDeletes = new Map<string, number>();

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
  // In every namespace: on master a gateway's pods are where its spec.namespace says.
  const pods = new Watched<V1Pod>({
    kubeConfig: o.kubeConfig,
    path: '/api/v1/pods',
    list: () => core.listPodForAllNamespaces({ labelSelector: `${Label.vpcNatGw}=true` }),
    labelSelector: `${Label.vpcNatGw}=true`,
    onChange: (p, kind) => {
      if (kind === 'delete') {
        for (const k of initialised) if (k.startsWith(p.metadata?.uid ?? '?')) initialised.delete(k);
        assigned.delete(`${p.metadata?.namespace}/${p.metadata?.name}`);
        expectedDeletes.delete(p.metadata?.uid ?? '');
      } else expectedCreates.delete(`${p.metadata?.namespace}/${p.metadata?.name}`);
      const gw = p.metadata?.annotations?.[Annotation.vpcNatGw];
      if (gw) queue.add(gw);
    },
    log: o.log,
    name: 'gateway pods informer',
  });

  // Always read: kube-ovn takes the name prefix from ovn-vpc-nat-config whatever the feature switch says.
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

  /** Where and under which name kube-ovn keeps gateway `gw`'s workload now: natGwNamespace, GenNatGwName. */
  function placeOf(gw: VpcNatGateway): { namespace: string; app: string } {
    const prefix = namePrefixOf(configMaps.get(NatGwConfigMap.image, ns)?.data, release);
    return {
      namespace: gatewayNamespaceOf(undefined, gw, release) ?? ns,
      app: gatewayApp(gw.metadata.name, prefix),
    };
  }

  /** The workload kube-ovn keeps for `gw` now, with the template of its pods. @throws Waiting */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a kube-ovn controller's reconcile step in kube-ovn's own order (local/controllers/README.md), pinned by test/integration/k8s-standins.test.ts
  function desiredWorkload(gw: VpcNatGateway): Workload {
    const name = gw.metadata.name;
    const extNet = externalNetworkOfGateway(gw);
    const replicas = gatewayReplicasOf(gw, release);
    const kind = replicas > 1 ? 'Deployment' : 'StatefulSet';
    if (!gw.spec.subnet) throw new Waiting(`vpc nat gateway ${name} has no spec.subnet`);
    if (kind === 'StatefulSet' && !gw.spec.lanIp)
      throw new Waiting(`vpc nat gateway ${name} has no spec.lanIp`);
    if (kind === 'StatefulSet' && !parseAddress(gw.spec.lanIp ?? ''))
      throw new Waiting(`vpc nat gateway ${name}: spec.lanIp ${gw.spec.lanIp} is not an address`);
    const lan = v4Pool(subnets.get(gw.spec.subnet), gw.spec.subnet, 'lan');
    const external = subnets.get(extNet);
    if (!external) throw new Waiting(`waiting for external subnet ${extNet}`);
    const extPool = v4Pool(external, extNet, 'external');
    const { namespace, app } = placeOf(gw);
    const image = imageOf();
    const template: PodTemplate = {
      release,
      image,
      gateway: name,
      namespace,
      nadNamespace: ns,
      app,
      serviceCidr: o.serviceCidr,
      lanSubnet: gw.spec.subnet,
      lan: { cidr: lan.cidr, gateway: lan.gateway ?? '', ...providerOf(subnets.get(gw.spec.subnet)) },
      externalNetwork: extNet,
      external: { cidr: extPool.cidr, gateway: extPool.gateway ?? '', ...providerOf(external) },
      ...(kind === 'StatefulSet' && { staticLanIp: gw.spec.lanIp }),
    };
    const built = [
      gw.spec.subnet,
      extNet,
      o.serviceCidr,
      lan.gateway,
      lan.cidr,
      extPool.cidr,
      release,
      image,
    ];
    let revision: string;
    if (kind === 'StatefulSet') {
      // The StatefulSet controller's controller-revision-hash: `<statefulset>-<hash>` (a bare hash when too long).
      const hash = hashOf([gw.spec.lanIp, ...built], 10);
      revision = `${app}-${hash}`.length <= 63 ? `${app}-${hash}` : hash;
    } else revision = podTemplateHash(built);
    const uid = derivedUid(`${gw.metadata.uid}/${kind}/${namespace}/${app}`);
    return { gateway: name, kind, namespace, name: app, replicas, template, revision, uid };
  }

  /** kube-ovn's vpcNatImage: the ovn-vpc-nat-config ConfigMap's image while the feature switch is modelled. */
  function imageOf(): string {
    const configured = o.featureSwitch
      ? configMaps.get(NatGwConfigMap.image, ns)?.data?.[NatGwConfigMap.imageKey]
      : undefined;
    return configured || gatewayImage(release);
  }

  /** The net1 and LAN addresses held by gateway pods (and handed out to pods not seen yet), but `key`'s own. */
  function takenAddresses(provider: string, key: string): { net1: Set<string>; lan: Set<string> } {
    const net1 = new Set<string>();
    const lan = new Set<string>(gateways.list().flatMap((g) => (g.spec.lanIp ? [g.spec.lanIp] : [])));
    const add = (set: Set<string>, a: string | undefined) => a && set.add(a);
    for (const p of pods.list()) {
      if (`${p.metadata?.namespace}/${p.metadata?.name}` === key) continue;
      add(net1, p.metadata?.annotations?.[`${provider}/ip_address`]);
      add(lan, p.metadata?.annotations?.[Annotation.ipAddress]);
    }
    for (const [k, a] of assigned) {
      if (k === key) continue;
      net1.add(a.net1);
      add(lan, a.lan);
    }
    return { net1, lan };
  }

  /** Addresses no other pod holds: net1 on the external subnet and, for a replica, its LAN address. */
  function addressesFor(w: Workload, key: string): { net1: string; lan: string } {
    const t = w.template;
    const taken = takenAddresses(providerPrefix(t.externalNetwork, ns), key);
    const net1 = pickNet1(subnets.get(t.externalNetwork)!, taken.net1).address;
    const lan = t.staticLanIp ?? pickNet1(subnets.get(t.lanSubnet)!, taken.lan, 'lan').address;
    return { net1, lan };
  }

  async function createPod(w: Workload, name: string): Promise<void> {
    const key = `${w.namespace}/${name}`;
    const { net1, lan } = addressesFor(w, key);
    const owner: PodOwner =
      w.kind === 'StatefulSet'
        ? { kind: 'StatefulSet', name: w.name, uid: w.uid, revision: w.revision }
        : { kind: 'ReplicaSet', name: replicaSetName(w), uid: replicaSetUid(w), revision: w.revision };
    const { staticLanIp: _static, ...template } = w.template;
    const body = gatewayPod({ ...template, name, owner, lanIp: lan, net1Address: net1 });
    assigned.set(key, { net1, ...(w.kind === 'Deployment' && { lan }) });
    try {
      await core.createNamespacedPod({ namespace: w.namespace, body });
      if (!pods.get(name, w.namespace)) expectedCreates.set(key, { pod: body, at: Date.now() });
      o.log(`gateway stand-in: created pod ${key}`);
    } catch (e) {
      if ((e as { code?: number }).code === 409) return; // the informer has not caught up yet
      assigned.delete(key);
      throw e;
    }
  }

  /**
   * handleInitVpcNatGw on a running gateway pod: the release's init exec(s), then the pod's init annotation.
   * 1.12 does it once per pod (its init container runs again after a restart); from 1.13 the stand-in does it
   * again for every new container of the pod, where kube-ovn instead rolls the pod once (local/controllers/README.md).
   */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the lab's kube-ovn stand-in: one step per release difference, kept in the order kube-ovn's own controller runs them (ADR 0054)
  async function initialise(pod: V1Pod, t: PodTemplate): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const status = pod.status?.containerStatuses?.find((c) => c.name === GATEWAY_CONTAINER);
    if (pod.status?.phase !== 'Running' || !status?.state?.running || pod.metadata?.deletionTimestamp) return;
    const key = atLeast(release, '1.13') ? `${uid}/${status.containerID ?? ''}` : uid;
    const annotated = pod.metadata?.annotations?.[Annotation.vpcNatGwInit] === 'true';
    if (initialised.has(key) || (!atLeast(release, '1.13') && annotated)) return;
    const name = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? ns;
    for (const argv of initialisation(t, pod.metadata?.annotations?.['ovn.kubernetes.io/gateway'] ?? '')) {
      await execArgv(o.kubeConfig, namespace, name, GATEWAY_CONTAINER, argv);
    }
    initialised.add(key);
    if (!annotated) {
      await core
        .patchNamespacedPod(
          { name, namespace, body: { metadata: { annotations: { [Annotation.vpcNatGwInit]: 'true' } } } },
          MERGE,
        )
        .catch((e: unknown) => {
          if ((e as { code?: number }).code !== 404) throw e;
        });
    }
    o.log(`gateway stand-in: initialised ${namespace}/${name} (kube-ovn ${release})`);
  }

  async function deletePod(pod: V1Pod, why: string): Promise<void> {
    const name = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? ns;
    o.log(`gateway stand-in: deleting pod ${namespace}/${name} (${why})`);
    if (pods.get(name, namespace)) expectedDeletes.set(pod.metadata?.uid ?? '', Date.now());
    try {
      await core.deleteNamespacedPod({
        name,
        namespace,
        gracePeriodSeconds: 0,
        body: { preconditions: { uid: pod.metadata?.uid } },
      });
    } catch (e) {
      const code = (e as { code?: number }).code;
      if (code !== 404 && code !== 409) throw e;
    }
  }

  const podsOfGateway = (name: string): V1Pod[] =>
    pods.list().filter((p) => p.metadata?.annotations?.[Annotation.vpcNatGw] === name);
  const workloadsOf = (name: string): Workload[] => [...workloads.values()].filter((w) => w.gateway === name);

  /** The workload's pods as its controller counts them: created ones not seen yet in, deleted ones still seen out. */
  function asExpected(w: Workload, own: readonly V1Pod[]): V1Pod[] {
    const now = Date.now();
    for (const [k, at] of expectedDeletes) if (now - at > EXPECTATION_MS) expectedDeletes.delete(k);
    for (const [k, e] of expectedCreates) if (now - e.at > EXPECTATION_MS) expectedCreates.delete(k);
    return [
      ...own.filter((p) => !expectedDeletes.has(p.metadata?.uid ?? '')),
      ...[...expectedCreates.values()].map((e) => e.pod).filter((p) => ownedBy(p, w)),
    ];
  }

  /**
   * One step of a workload's controller over its pods (Kubernetes keeps an existing workload's pods whatever
   * kube-ovn's state), then kube-ovn's initialisation of those running.
   */
  async function sync(w: Workload): Promise<void> {
    const own = pods.list().filter((p) => ownedBy(p, w));
    for (const a of planWorkload(w, asExpected(w, own))) {
      if (a.kind === 'delete') await deletePod(a.pod, a.why);
      else await createPod(w, a.name);
    }
    for (const p of own) await initialise(p, w.template);
  }

  /** The feature is off: kube-ovn deletes the StatefulSet `<prefix>-<gw>` in the gateway's namespace, and only it. */
  async function switchedOff(gw: VpcNatGateway): Promise<void> {
    const { namespace, app } = placeOf(gw);
    const key = workloadKey({ kind: 'StatefulSet', namespace, name: app });
    workloads.delete(key);
    for (const p of podsOfGateway(gw.metadata.name)) {
      const owner = p.metadata?.ownerReferences?.find((r) => r.controller);
      if (p.metadata?.namespace === namespace && owner?.kind === 'StatefulSet' && owner.name === app)
        if (!p.metadata?.deletionTimestamp) await deletePod(p, 'the VPC NAT gateway feature is off');
    }
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a kube-ovn controller's reconcile step in kube-ovn's own order (local/controllers/README.md), pinned by test/integration/k8s-standins.test.ts
  async function reconcile(name: string): Promise<void> {
    const gw = gateways.get(name);
    if (!gw) {
      // Its workloads are owned by it: the garbage collector takes them and their pods.
      waiting.delete(name);
      for (const w of workloadsOf(name)) workloads.delete(workloadKey(w));
      for (const p of podsOfGateway(name))
        if (!p.metadata?.deletionTimestamp) await deletePod(p, `vpc nat gateway ${name} is gone`);
      return;
    }
    const f = feature();
    const said = `${f.state}${f.reason ? `: ${f.reason}` : ''}`;
    if (f.state !== 'on' && lastFeature !== said)
      o.log(`gateway stand-in: the VPC NAT gateway feature is ${said}`);
    lastFeature = said;
    if (f.state === 'off') await switchedOff(gw);
    if (f.state === 'on') {
      try {
        const desired = desiredWorkload(gw);
        workloads.set(workloadKey(desired), desired);
        waiting.delete(name);
      } catch (e) {
        if (!(e instanceof Waiting)) throw e;
        if (waiting.get(name) !== e.message) o.log(`gateway stand-in: ${e.message}`);
        waiting.set(name, e.message);
      }
    }
    // Every workload it has keeps its pods; while kube-ovn's state is not 'on' no workload is made or changed.
    for (const w of workloadsOf(name)) await sync(w);
  }

  await Promise.all([subnets.start(), pods.start(), configMaps.start()]);
  await gateways.start();
  const resync = setInterval(enqueueAll, 30_000);
  resync.unref();
  return {
    async stop() {
      clearInterval(resync);
      await Promise.all([gateways.stop(), subnets.stop(), pods.stop(), configMaps.stop()]);
      await queue.stop();
    },
  };
}
