/**
 * A MODEL of kube-ovn's own IptablesEIP controller (1.12's, with the eip-add format of the lab's release), for the local stack only (`npm start --
 * --with-kube-ovn-eip-controller`), so that running beside kube-ovn — conflict, detection, adoption — can be tested
 * end to end (docs/adr/0030-coexistence-with-kube-ovn-controller.md). It is small on purpose and models only what
 * another controller does that this product can observe:
 *
 * - mode `workers-on` (kube-ovn unmodified): for every IptablesEIP, its own in-memory IPAM hands out the lowest free
 *   address of the external subnet (rebuilt at start from the EIPs' status.ip and spec.v4ip and the gateway pods'
 *   own addresses, as kube-ovn rebuilds its IPAM from the cluster), `eip-add <ip>/<len>,<gw>` (1.13+: `<ip>/<len>`) runs in the gateway
 *   pod, then it writes spec.v4ip and spec.macAddress, status (ready, ip), kube-ovn's labels and the finalizer
 *   `kubeovn.io/kube-ovn-controller`, every write with field manager `kube-ovn-controller`. A terminating EIP gets
 *   `eip-del`, its address back in the model's IPAM and the finalizer removed. A not-Ready EIP with a redo token
 *   and an address is re-added (kube-ovn's redo branch). QoS, NAT rules and kube-ovn's known defects are not
 *   modelled. Everything waits while the VPC NAT gateway feature is off, as kube-ovn's workers do.
 * - mode `workers-off` (the documented coexistence mode: kube-ovn-controller with its IptablesEIP workers turned
 *   off): none of the above; what remains is kube-ovn's gateway initialisation, which on a gateway pod that was
 *   (re)created sets `status.ready=false` and `status.redo=<pod creation time>` on the EIPs of that gateway whose
 *   redo token differs (handleUpdateVpcEip), with the same field manager.
 */
import { randomBytes } from 'node:crypto';
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
import { gatewayPodName, podNetworkAddresses } from '../../shared/domain/gateway-pod.js';
import {
  Annotation,
  DEFAULT_EXTERNAL_SUBNET,
  FINALIZER,
  GATEWAY_CONTAINER,
  GROUP,
  Label,
  NAT_GATEWAY_SCRIPT,
  NatGwConfigMap,
  natGwFeatureOf,
  Plural,
  type Subnet,
  VERSION,
} from '../../shared/domain/kube-ovn.js';
import { atLeast, DEFAULT_RELEASE, type KubeOvnRelease } from '../natgw/releases.js';
import { execArgv, type Log, Watched, WorkQueue } from './runtime.js';

/** kube-ovn-controller's field manager on every write it makes. */
export const KUBE_OVN_FIELD_MANAGER = 'kube-ovn-controller';

export type KubeOvnEipMode = 'workers-on' | 'workers-off';

export interface KubeOvnEipModelOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  mode: KubeOvnEipMode;
  log: Log;
  /** The release whose eip-add format it sends: `<ip>/<len>,<gw>` on 1.12, `<ip>/<len>` since (default: the lab's). */
  release?: KubeOvnRelease;
}

interface Eip {
  metadata: {
    name: string;
    uid?: string;
    labels?: Record<string, string>;
    finalizers?: string[];
    deletionTimestamp?: string;
  };
  spec: { natGwDp?: string; externalSubnet?: string; v4ip?: string; macAddress?: string; qosPolicy?: string };
  status?: { ready?: boolean; ip?: string; redo?: string; qosPolicy?: string };
}

const EIPS = { group: GROUP, version: VERSION, plural: Plural.eip } as const;
const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** kube-ovn's redo token: the pod's creation time as `YYYY-MM-DDTHH:MM:SS` (no zone). */
export function redoToken(created: Date | string | undefined): string {
  return created ? new Date(created).toISOString().slice(0, 19) : '';
}

export async function startKubeOvnEipModel(o: KubeOvnEipModelOptions): Promise<{ stop(): Promise<void> }> {
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
  const ns = o.namespace;
  const say = (line: string): void => o.log(`kube-ovn eip model (${o.mode}): ${line}`);
  const kubeOvn = o.release ?? DEFAULT_RELEASE;
  /** createEipInPod's rule: 1.12 appends the external gateway; later releases route by the pod's own setup. */
  const eipAddArg = (ip: string, prefix: number, gateway: string): string =>
    atLeast(kubeOvn, '1.13') ? `${ip}/${prefix}` : `${ip}/${prefix},${gateway}`;
  /** The model's IPAM: address → owner (EIP name, or `pod:<name>` for a gateway pod's own address). */
  const ipam = new Map<string, string>();
  /** Gateway pods whose initialisation the model has done (kube-ovn's vpc_nat_gw_init annotation). */
  const initialised = new Set<string>();

  const queue = new WorkQueue(reconcile, o.log, 'kube-ovn eip model');
  const eips = new Watched<Eip>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${Plural.eip}`,
    list: () => custom.listClusterCustomObject(EIPS) as Promise<{ items: Eip[] }>,
    onChange: (e) => {
      if (o.mode === 'workers-on') queue.add(`eip/${e.metadata.name}`);
    },
    log: o.log,
    name: 'kube-ovn eip model: eips informer',
  });
  const subnets = new Watched<Subnet>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${Plural.subnet}`,
    list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: Plural.subnet }),
    onChange: () => {},
    log: o.log,
    name: 'kube-ovn eip model: subnets informer',
  });
  const configMaps = new Watched<V1ConfigMap>({
    kubeConfig: o.kubeConfig,
    path: `/api/v1/namespaces/${ns}/configmaps`,
    list: () => core.listNamespacedConfigMap({ namespace: ns }),
    onChange: () => {
      if (o.mode === 'workers-on') for (const e of eips.list()) queue.add(`eip/${e.metadata.name}`);
    },
    log: o.log,
    name: 'kube-ovn eip model: configmaps informer',
  });
  const pods = new Watched<V1Pod>({
    kubeConfig: o.kubeConfig,
    path: `/api/v1/namespaces/${ns}/pods`,
    list: () => core.listNamespacedPod({ namespace: ns, labelSelector: `${Label.vpcNatGw}=true` }),
    labelSelector: `${Label.vpcNatGw}=true`,
    onChange: (p, kind) => {
      if (kind === 'delete') initialised.delete(p.metadata?.uid ?? '');
      else queue.add(`pod/${p.metadata?.name ?? ''}`);
    },
    log: o.log,
    name: 'kube-ovn eip model: gateway pods informer',
  });

  const featureOn = (): boolean =>
    natGwFeatureOf(
      configMaps.get(NatGwConfigMap.enable, ns)?.data,
      configMaps.get(NatGwConfigMap.image, ns)?.data,
    ).enabled;

  function subnetOf(e: Eip): Subnet | undefined {
    return subnets.get(e.spec.externalSubnet || DEFAULT_EXTERNAL_SUBNET);
  }

  /** Lowest free address of the subnet's IPv4 pool (kube-ovn's IPAM ignores this product's EIP range). */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a kube-ovn controller's reconcile step in kube-ovn's own order (local/controllers/README.md), pinned by test/integration/k8s-standins.test.ts
  function allocate(e: Eip, subnet: Subnet): { ip: string; prefix: number; gateway: string } {
    const pool = poolsOf(subnet).find((p) => p.family === 4);
    if (!pool) throw new Error(`subnet ${subnet.metadata.name} has no IPv4 CIDR`);
    const prefix = Number(pool.cidr.split('/')[1]);
    const gateway = pool.gateway ?? '';
    const held = [...ipam].find(([, owner]) => owner === e.metadata.name)?.[0];
    if (held) return { ip: held, prefix, gateway };
    const wanted = e.spec.v4ip;
    if (wanted) {
      const owner = ipam.get(wanted);
      if (owner && owner !== e.metadata.name)
        throw new Error(`AddressConflict: ${wanted} is held by ${owner}`);
      ipam.set(wanted, e.metadata.name);
      return { ip: wanted, prefix, gateway };
    }
    for (const r of allocatableRanges({ ...pool, only: undefined })) {
      for (let v = r.start; v <= r.end; v++) {
        const ip = formatAddress(4, v);
        if (!ipam.has(ip)) {
          ipam.set(ip, e.metadata.name);
          return { ip, prefix, gateway };
        }
      }
    }
    throw new Error(`NoAvailableAddress: subnet ${subnet.metadata.name} is full`);
  }

  function release(name: string): void {
    for (const [ip, owner] of ipam) if (owner === name) ipam.delete(ip);
  }

  function exec(gw: string, argv: string[]): Promise<void> {
    return execArgv(o.kubeConfig, ns, gatewayPodName(gw), GATEWAY_CONTAINER, argv);
  }

  async function patch(name: string, body: object, status = false): Promise<void> {
    const args = { ...EIPS, name, body, fieldManager: KUBE_OVN_FIELD_MANAGER };
    try {
      if (status) await custom.patchClusterCustomObjectStatus(args, MERGE);
      else await custom.patchClusterCustomObject(args, MERGE);
    } catch (e) {
      if ((e as { code?: number }).code !== 404) throw e;
    }
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a kube-ovn controller's reconcile step in kube-ovn's own order (local/controllers/README.md), pinned by test/integration/k8s-standins.test.ts
  async function reconcileEip(name: string): Promise<void> {
    const e = eips.get(name);
    if (!e) return;
    if (!featureOn()) throw new Error('iptables nat gw not enable');
    const subnet = subnetOf(e);
    const gw = e.spec.natGwDp ?? '';
    if (e.metadata.deletionTimestamp) {
      if (!e.metadata.finalizers?.includes(FINALIZER)) return;
      const ip = e.status?.ip;
      if (ip && subnet) {
        const prefix = Number(
          poolsOf(subnet)
            .find((p) => p.family === 4)
            ?.cidr.split('/')[1] ?? 32,
        );
        if (pods.get(gatewayPodName(gw), ns))
          await exec(gw, ['bash', NAT_GATEWAY_SCRIPT, 'eip-del', `${ip}/${prefix}`]);
      }
      await patch(name, { metadata: { finalizers: e.metadata.finalizers.filter((f) => f !== FINALIZER) } });
      release(name);
      say(`released ${ip ?? '(no address)'} of ${name}`);
      return;
    }
    if (!subnet) throw new Error(`failed to get subnet ${e.spec.externalSubnet || DEFAULT_EXTERNAL_SUBNET}`);
    if (e.status?.ready && e.status.ip) {
      if (!e.metadata.finalizers?.includes(FINALIZER))
        await patch(name, { metadata: { finalizers: [...(e.metadata.finalizers ?? []), FINALIZER] } });
      return;
    }
    if (e.status?.ip && e.status.redo && !e.status.ready) {
      // kube-ovn's redo branch: put the address back, then ready.
      const prefix = Number(
        poolsOf(subnet)
          .find((p) => p.family === 4)
          ?.cidr.split('/')[1] ?? 32,
      );
      const gateway = poolsOf(subnet).find((p) => p.family === 4)?.gateway ?? '';
      await exec(gw, ['bash', NAT_GATEWAY_SCRIPT, 'eip-add', eipAddArg(e.status.ip, prefix, gateway)]);
      await patch(name, { status: { ready: true } }, true);
      return;
    }
    const { ip, prefix, gateway } = allocate(e, subnet);
    await exec(gw, ['bash', NAT_GATEWAY_SCRIPT, 'eip-add', eipAddArg(ip, prefix, gateway)]);
    const mac = e.spec.macAddress || `00:00:00:${randomBytes(3).toString('hex').match(/../g)!.join(':')}`;
    await patch(name, { spec: { v4ip: ip, macAddress: mac } });
    await patch(name, { status: { ready: true, ip, qosPolicy: e.spec.qosPolicy ?? '' } }, true);
    await patch(name, {
      metadata: {
        labels: {
          [Label.subnet]: subnet.metadata.name,
          [Label.natGwName]: gw,
          [Label.eipV4Ip]: ip,
          ...(e.spec.qosPolicy ? { [Label.qos]: e.spec.qosPolicy } : {}),
        },
        finalizers: [...(e.metadata.finalizers ?? []).filter((f) => f !== FINALIZER), FINALIZER],
      },
    });
    say(`configured ${ip} of ${name} on ${gw}`);
  }

  /** kube-ovn's handleUpdateVpcEip on a gateway pod it has not initialised yet (both modes). */
  async function reconcilePod(podName: string): Promise<void> {
    const pod = pods.get(podName, ns);
    const uid = pod?.metadata?.uid ?? '';
    if (!pod || initialised.has(uid) || pod.status?.phase !== 'Running') return;
    const gw = pod.metadata?.annotations?.[Annotation.vpcNatGw];
    if (!gw) return;
    if (!featureOn()) throw new Error('iptables nat gw not enable');
    const token = redoToken(pod.metadata?.creationTimestamp);
    for (const e of eips.list()) {
      if (e.spec.natGwDp !== gw || e.status?.redo === token || e.metadata.deletionTimestamp) continue;
      await patch(e.metadata.name, { status: { ready: false, redo: token } }, true);
      say(`redo ${token} requested on ${e.metadata.name} (gateway pod ${podName} initialised)`);
    }
    initialised.add(uid);
  }

  async function reconcile(key: string): Promise<void> {
    const [kind, name] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
    if (kind === 'eip') await reconcileEip(name);
    else await reconcilePod(name);
  }

  await Promise.all([subnets.start(), configMaps.start(), pods.start()]);
  // kube-ovn rebuilds its IPAM from the cluster at start: the gateway pods' own addresses and the EIPs'.
  for (const p of pods.list()) {
    initialised.add(p.metadata?.uid ?? ''); // already initialised before this start
    for (const address of Object.values(podNetworkAddresses(ns, p.metadata?.annotations)))
      if (parseAddress(address)) ipam.set(address, `pod:${p.metadata?.name ?? ''}`);
  }
  await eips.start();
  for (const e of eips.list()) {
    const ip = e.status?.ip || e.spec.v4ip;
    if (ip && !e.metadata.deletionTimestamp) ipam.set(ip, e.metadata.name);
  }
  say(`started; ${ipam.size} address(es) known`);
  return {
    async stop() {
      await Promise.all([eips.stop(), subnets.stop(), configMaps.stop(), pods.stop()]);
      await queue.stop();
    },
  };
}
