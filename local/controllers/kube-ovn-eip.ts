/**
 * A MODEL of an unmodified kube-ovn-controller's IptablesEIP path, for the local lab only (`npm start --
 * --with-kube-ovn-eip-controller`, docs/adr/0097-lab-models-unmodified-kube-ovn-controller.md): what kube-ovn does
 * to IptablesEIPs, their gateways and their FIP rules, per release (local/controllers/kube-ovn-release.ts), so that
 * running beside it — fenced by infra/kube-ovn-fence or not — is tested end to end. It follows pkg/controller of each
 * tag, handler by handler and in kube-ovn's order:
 *
 * - queues (kube-ovn-workqueue.ts): add, update, reset and delete IptablesEIP, the gateway's EIP and FIP redo, add
 *   and update FIP, each with one worker and kube-ovn's rate limiter (custCrdRateLimiter, 1 s → 20 s per key, 10 qps
 *   overall, shared); delete (1.15+) with client-go's default one;
 * - enqueueing as kube-ovn's event handlers do: every added EIP (the first list included) to add; an update only when
 *   it is terminating or its status.redo or spec.qosPolicy changed; a gateway pod seen Running for the first time to
 *   the gateway redo (handleInitVpcNatGw's queues; the init itself is the gateway stand-in's);
 * - its IPAM (kube-ovn-ipam.ts), rebuilt at start from the subnets, the gateway pods' own addresses and every EIP's
 *   status.ip; random addresses lowest-free, excludeIps never handed out at random;
 * - handleAddIptablesEip: nothing to do for a Ready EIP with an IP; else (1.12: the gateway pod first) allocate, then
 *   eip-add, QoS, then spec (Update), status, labels, finalizer (createOrUpdateCrdEip);
 * - handleUpdateIptablesEip: the deletion branch (eip-del, QoS off, finalizer, release), "not support eip change
 *   ip", a QoS change (del, add, labels, status.qosPolicy), the redo branch, the finalizer;
 * - handleResetIptablesEip: labels, then patchEipStatus (status.nat from the rules labelled with the EIP's address);
 * - handleUpdateVpcEip / handleUpdateVpcFloatingIP: `ready=false` and the process-wide token (the last initialised
 *   gateway pod's creation time) on the gateway's EIPs, and the FIP redo (EIP labels and status, then the FIP's);
 * - handleAddIptablesFip and the FIP update's redo and deletion (DNAT and SNAT are not modelled);
 * - at start (1.13+) the finalizer migration, fatal when refused, as kube-ovn's LogFatalAndExit.
 *
 * Every request is counted (kube-ovn-client.ts) and every handler error logged with kube-ovn's message and its
 * `error syncing '<key>': …, requeuing` line. Not modelled: DNAT/SNAT, OVN EIPs and VIPs, dual stack, the QoS
 * controller (the lab's QoS stand-in copies policies to status), the gateway's own QoS, subnet status.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1ConfigMap,
  type V1Pod,
} from '@kubernetes/client-node';
import { errorText } from '../../shared/bridge/watch.js';
import { gatewayPodName, podNetworkAddresses } from '../../shared/domain/gateway-pod.js';
import {
  DEFAULT_EXTERNAL_SUBNET,
  FINALIZER,
  GROUP,
  Label,
  LEGACY_FINALIZER,
  NatGwConfigMap,
  natGwFeatureOf,
  Plural,
  type QoSPolicy,
  type Subnet,
  VERSION,
} from '../../shared/domain/kube-ovn.js';
import { atLeast, type KubeOvnRelease } from '../natgw/releases.js';
import { ExecFailed, KubeOvnClient, type RequestRecord } from './kube-ovn-client.js';
import { IpamError, KubeOvnSubnetIpam } from './kube-ovn-ipam.js';
import { type ReleaseFacts, releaseFacts } from './kube-ovn-release.js';
import {
  custCrdRateLimiter,
  defaultControllerRateLimiter,
  RateLimitedQueue,
  type RateLimiter,
} from './kube-ovn-workqueue.js';
import { type Log, Watched } from './runtime.js';

export interface KubeOvnEipModelOptions {
  /** kube-ovn-controller's credentials (its ServiceAccount in the lab's stack). */
  kubeConfig: KubeConfig;
  namespace: string;
  /** The release modelled (default 1.12). */
  release?: KubeOvnRelease;
  log: Log;
  /** kube-ovn's --cust-crd-retry-min-delay / --cust-crd-retry-max-delay, in seconds (defaults 1 and 20). */
  retryMinDelayS?: number;
  retryMaxDelayS?: number;
}

export interface KubeOvnEipModel {
  release: KubeOvnRelease;
  /** Every request it sent, in order. */
  requests(): readonly RequestRecord[];
  /** Its error log lines (klog.Error and utilruntime.HandleError), in order. */
  errors(): readonly string[];
  /** What its IPAM holds per subnet. */
  ipam(): Record<string, { address: string; owner: string; reserved: boolean }[]>;
  /** Resolves once no queue has a key waiting or being handled (retry timers may still be pending). */
  idle(): Promise<void>;
  pendingRetries(): number;
  stop(): Promise<void>;
}

/** Thrown by start() when kube-ovn-controller would exit (util.LogFatalAndExit). */
export class KubeOvnExited extends Error {}

type Meta = {
  name: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  deletionTimestamp?: string;
};
interface Eip {
  apiVersion?: string;
  kind?: string;
  metadata: Meta;
  spec: {
    natGwDp?: string;
    externalSubnet?: string;
    v4ip?: string;
    v6ip?: string;
    macAddress?: string;
    qosPolicy?: string;
  };
  status?: {
    ready?: boolean;
    ip?: string;
    redo?: string;
    nat?: string;
    qosPolicy?: string;
    conditions?: unknown[];
  };
}
interface Fip {
  metadata: Meta;
  spec: { eip?: string; internalIp?: string };
  status?: {
    ready?: boolean;
    v4ip?: string;
    v6ip?: string;
    natGwDp?: string;
    redo?: string;
    internalIp?: string;
  };
}

const EIP = Plural.eip;
const FIP = Plural.fip;

/** kube-ovn's `YYYY-MM-DDTHH:MM:SS` (time.Format in the controller's zone; UTC here). */
export function redoToken(created: Date | string | undefined): string {
  return created ? new Date(created).toISOString().slice(0, 19) : '';
}

function macFor(name: string): string {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `00:00:00:${[h >>> 16, h >>> 8, h].map((b) => (b & 0xff).toString(16).padStart(2, '0')).join(':')}`;
}

/** The whole status, as IptablesEipStatus marshals it (the strings always, conditions only when there are any). */
function statusBody(s: Eip['status']): Record<string, unknown> {
  return {
    ready: s?.ready ?? false,
    ip: s?.ip ?? '',
    redo: s?.redo ?? '',
    nat: s?.nat ?? '',
    qosPolicy: s?.qosPolicy ?? '',
    ...(s?.conditions?.length ? { conditions: s.conditions } : {}),
  };
}

export async function startKubeOvnEipModel(o: KubeOvnEipModelOptions): Promise<KubeOvnEipModel> {
  const facts: ReleaseFacts = releaseFacts(o.release ?? '1.12');
  const release = facts.release;
  const ns = o.namespace;
  const client = new KubeOvnClient(o.kubeConfig, ns);
  const custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const errors: string[] = [];
  const say = (line: string): void => o.log(`kube-ovn-controller (model, ${release}): ${line}`);
  const klogError = (line: string): void => {
    errors.push(line);
    say(`E ${line}`);
  };
  const ipams = new Map<string, KubeOvnSubnetIpam>();
  /** natGwCreatedAT: one process-wide token, the creation time of the gateway pod initialised last. */
  let natGwCreatedAT = '';
  const initialised = new Set<string>();
  const limiter: RateLimiter = custCrdRateLimiter(o.retryMinDelayS, o.retryMaxDelayS);
  const queues: RateLimitedQueue[] = [];
  /** A queue and its worker: `name` as newTypedRateLimitingQueue names it, `action` as runWorker does (1.13+). */
  const queue = (
    name: string,
    action: string,
    handle: (key: string) => Promise<void>,
    l: RateLimiter = limiter,
  ) => {
    const q = new RateLimitedQueue(name, l, handle, (key, e) =>
      klogError(facts.syncError(action, key, errorText(e).split('\n')[0] ?? '')),
    );
    queues.push(q);
    return q;
  };

  // ------------------------------------------------------------------------------------------- informers

  const seenEips = new Map<string, Eip>();
  const seenFips = new Map<string, Fip>();
  const eips = new Watched<Eip>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${EIP}`,
    list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: EIP }) as never,
    onChange: (e, kind) => onEip(e, kind),
    log: o.log,
    name: 'kube-ovn model: eips informer',
  });
  const fips = new Watched<Fip>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${FIP}`,
    list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: FIP }) as never,
    onChange: (f, kind) => onFip(f, kind),
    log: o.log,
    name: 'kube-ovn model: fips informer',
  });
  const subnets = new Watched<Subnet>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${Plural.subnet}`,
    list: () =>
      custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: Plural.subnet }) as never,
    onChange: (s, kind) => {
      if (kind !== 'delete') addSubnet(s);
    },
    log: o.log,
    name: 'kube-ovn model: subnets informer',
  });
  const qos = new Watched<QoSPolicy>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${Plural.qos}`,
    list: () =>
      custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: Plural.qos }) as never,
    onChange: () => {},
    log: o.log,
    name: 'kube-ovn model: qos informer',
  });
  const configMaps = new Watched<V1ConfigMap>({
    kubeConfig: o.kubeConfig,
    path: `/api/v1/namespaces/${ns}/configmaps`,
    list: () => core.listNamespacedConfigMap({ namespace: ns }),
    onChange: () => {},
    log: o.log,
    name: 'kube-ovn model: configmaps informer',
  });
  const pods = new Watched<V1Pod>({
    kubeConfig: o.kubeConfig,
    path: `/api/v1/namespaces/${ns}/pods`,
    list: () => core.listNamespacedPod({ namespace: ns, labelSelector: `${Label.vpcNatGw}=true` }),
    labelSelector: `${Label.vpcNatGw}=true`,
    onChange: (p, kind) => onPod(p, kind),
    log: o.log,
    name: 'kube-ovn model: gateway pods informer',
  });

  const featureOn = (): boolean =>
    natGwFeatureOf(
      configMaps.get(NatGwConfigMap.enable, ns)?.data,
      configMaps.get(NatGwConfigMap.image, ns)?.data,
    ).enabled;
  const networkOf = (e: Eip): string => e.spec.externalSubnet || DEFAULT_EXTERNAL_SUBNET;

  function addSubnet(s: Subnet): void {
    const v4 = s.spec.cidrBlock.split(',').find((c) => !c.includes(':'));
    if (!v4 || ipams.has(s.metadata.name)) return;
    const gw = (s.spec.gateway ?? '').split(',').find((g) => !g.includes(':'));
    try {
      ipams.set(s.metadata.name, new KubeOvnSubnetIpam(s.metadata.name, v4, gw, s.spec.excludeIps ?? []));
    } catch (e) {
      klogError(`failed to add subnet ${s.metadata.name} to ipam: ${errorText(e)}`);
    }
  }

  // ------------------------------------------------------------------------------------------- queues

  const addEip = queue('AddIptablesEip', 'add iptables eip', handleAddIptablesEip);
  const updateEip = queue('UpdateIptablesEip', 'update iptables eip', handleUpdateIptablesEip);
  const resetEip = queue('ResetIptablesEip', 'reset iptables eip', handleResetIptablesEip);
  const delEip = queue(
    'DeleteIptablesEip',
    'delete iptables eip',
    async (key) => say(`handle delete iptables eip ${key}`),
    atLeast(release, '1.15') ? defaultControllerRateLimiter() : limiter,
  );
  const updateVpcEip = queue('UpdateVpcEip', 'update eip for vpc nat gateway', handleUpdateVpcEip);
  const updateVpcFip = queue(
    'UpdateVpcFloatingIp',
    'update fip for vpc nat gateway',
    handleUpdateVpcFloatingIP,
  );
  const addFip = queue('AddIptablesFip', 'add iptables fip', handleAddIptablesFip);
  const updateFip = queue('UpdateIptablesFip', 'update iptables fip', handleUpdateIptablesFip);

  let started = false;
  function onEip(e: Eip, kind: 'add' | 'update' | 'delete'): void {
    const name = e.metadata.name;
    const old = seenEips.get(name);
    if (kind === 'delete') seenEips.delete(name);
    else seenEips.set(name, e);
    if (!started) return; // the first list is enqueued once the IPAM is built, as the informers start after InitIPAM
    if (kind === 'add' || !old) addEip.add(name);
    else if (kind === 'delete') delEip.add(name);
    else if (
      e.metadata.deletionTimestamp ||
      (old.status?.redo ?? '') !== (e.status?.redo ?? '') ||
      (old.spec.qosPolicy ?? '') !== (e.spec.qosPolicy ?? '')
    )
      updateEip.add(name);
  }

  function onFip(f: Fip, kind: 'add' | 'update' | 'delete'): void {
    const name = f.metadata.name;
    const old = seenFips.get(name);
    if (kind === 'delete') seenFips.delete(name);
    else seenFips.set(name, f);
    if (!started || kind === 'delete') return;
    if (kind === 'add' || !old) {
      addFip.add(name);
      return;
    }
    if (f.metadata.deletionTimestamp) {
      updateFip.add(name);
      return;
    }
    if (old.spec.eip !== f.spec.eip) resetEip.add(old.spec.eip ?? '');
    if (
      old.status?.v4ip !== f.status?.v4ip ||
      old.spec.eip !== f.spec.eip ||
      old.status?.redo !== f.status?.redo ||
      old.spec.internalIp !== f.spec.internalIp
    )
      updateFip.add(name);
  }

  /** handleInitVpcNatGw's part the model plays: a new gateway pod, Running, moves the token and queues the redo. */
  function onPod(p: V1Pod, kind: 'add' | 'update' | 'delete'): void {
    const uid = p.metadata?.uid ?? '';
    if (kind === 'delete') {
      initialised.delete(uid);
      return;
    }
    const gw = p.metadata?.annotations?.['ovn.kubernetes.io/vpc_nat_gw'];
    if (!started || !gw || initialised.has(uid) || p.status?.phase !== 'Running') return;
    initialised.add(uid);
    natGwCreatedAT = redoToken(p.metadata?.creationTimestamp);
    say(`nat gw pod '${gw}' inited at ${natGwCreatedAT}`);
    updateVpcFip.add(gw);
    updateVpcEip.add(gw);
  }

  // ------------------------------------------------------------------------------------------- helpers

  /** getNatGwPod: NotFound, not Running (kube-ovn sleeps 5 s first), or the pod. */
  async function getNatGwPod(gw: string): Promise<V1Pod> {
    const pod = pods.get(gatewayPodName(gw), ns);
    if (!pod) throw Object.assign(new Error(`pods "${gw}" not found`), { notFound: true });
    if (pod.status?.phase !== 'Running') {
      await new Promise((r) => setTimeout(r, 5_000));
      throw new Error('pod is not active now');
    }
    return pod;
  }

  async function execNatGwRules(object: string, gw: string, op: string, rules: string[]): Promise<void> {
    const pod = await getNatGwPod(gw);
    try {
      await client.exec(object, pod.metadata?.name ?? '', op, facts.command(op, rules));
    } catch (e) {
      const ran = e instanceof ExecFailed ? e : undefined;
      for (const line of facts.execErrorLines(errorText(e), ran?.stderr ?? '', ran?.exitCode === 0))
        klogError(line);
      throw e;
    }
  }

  function ipamOf(e: Eip): KubeOvnSubnetIpam {
    const s = ipams.get(networkOf(e));
    if (!s) throw new Error(`failed to get subnet ${networkOf(e)}`);
    return s;
  }

  const portName = (e: Eip): string => `${e.metadata.name}.${networkOf(e)}.${ns}`;

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: kube-ovn's addEipQoS / delEipQoS, branch for branch in its own order (ADR 0097), pinned by test/unit/kube-ovn-model.test.ts and test/integration/k8s-standins.test.ts
  async function qosRules(e: Eip, policyName: string, op: 'add' | 'del', ip: string): Promise<void> {
    const policy = qos.get(policyName);
    if (!policy) return; // IsNotFound: silently nothing
    if (op === 'add' && !policy.status?.shared) {
      const bound = eips.list().filter((x) => x.metadata.labels?.[Label.qos] === policyName);
      if (bound.length && bound[0]!.metadata.name !== e.metadata.name)
        throw new Error(`not support unshared qos policy ${policyName} to related to multiple eip`);
    }
    for (const r of policy.status?.bandwidthLimitRules ?? []) {
      const dir = r.direction === 'egress' ? 'egress' : 'ingress';
      const args = op === 'add' ? [`${ip},${r.priority ?? 0},${r.rateMax ?? ''},${r.burstMax ?? ''}`] : [ip];
      await execNatGwRules(e.metadata.name, e.spec.natGwDp ?? '', `eip-${dir}-qos-${op}`, args);
    }
  }

  /** getIptablesEipNat: the kinds of rules labelled with the EIP's address (only FIPs are modelled). */
  function natOf(v4ip: string | undefined): string {
    return fips.list().some((f) => f.metadata.labels?.[Label.eipV4Ip] === (v4ip ?? '')) ? 'fip' : '';
  }

  async function patchEipStatus(name: string, redo: string, qosName: string, ready: boolean): Promise<void> {
    const e = eips.get(name);
    if (!e) return;
    const s = { ...statusBody(e.status) } as Record<string, unknown>;
    let changed = false;
    const set = (k: string, v: unknown) => {
      if (s[k] !== v) {
        s[k] = v;
        changed = true;
      }
    };
    set('ready', ready);
    if (redo) set('redo', redo);
    set('nat', natOf(e.spec.v4ip));
    if (qosName) set('qosPolicy', qosName);
    if (changed) await client.patchStatus(EIP, name, s);
  }

  async function patchEipLabel(name: string): Promise<void> {
    const e = eips.get(name);
    if (!e) return;
    const l = e.metadata.labels ?? {};
    const want = {
      [Label.subnet]: networkOf(e),
      [Label.natGwName]: e.spec.natGwDp ?? '',
      [Label.qos]: e.spec.qosPolicy ?? '',
      [Label.eipV4Ip]: e.spec.v4ip ?? '',
    };
    if (Object.keys(l).length === 0) return client.patchLabels(EIP, name, 'add', want);
    if ((l[Label.natGwName] ?? '') !== want[Label.natGwName] || (l[Label.qos] ?? '') !== want[Label.qos])
      return client.patchLabels(EIP, name, 'replace', { ...l, ...want });
  }

  async function addEipFinalizer(name: string): Promise<void> {
    const e = eips.get(name);
    if (!e) return;
    const list = e.metadata.finalizers ?? [];
    if (atLeast(release, '1.13')) {
      if (e.metadata.deletionTimestamp || list.length !== 0) return;
    } else if (!e.metadata.deletionTimestamp && list.includes(facts.finalizer)) return;
    const next = list.includes(facts.finalizer) ? undefined : [...list, facts.finalizer];
    await client.patchFinalizers(EIP, name, next);
  }

  async function delEipFinalizer(name: string): Promise<void> {
    const e = eips.get(name);
    if (!e || !(e.metadata.finalizers ?? []).length) return;
    const list = e.metadata.finalizers ?? [];
    const next = list.filter((f) => f !== facts.finalizer);
    await client.patchFinalizers(EIP, name, next.length === list.length ? undefined : next);
  }

  // ------------------------------------------------------------------------------------------- EIP handlers

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: kube-ovn's handleAddIptablesEip, branch for branch in its own order (ADR 0097), pinned by test/unit/kube-ovn-model.test.ts and test/integration/k8s-standins.test.ts
  async function handleAddIptablesEip(key: string): Promise<void> {
    const e = eips.get(key);
    if (!e) return;
    if (!featureOn()) throw new Error('iptables nat gw not enable');
    say(`handle add iptables eip ${key}`);
    if (e.status?.ready && e.status.ip) return; // already ok
    const gw = e.spec.natGwDp ?? '';
    if (facts.podBeforeAllocation) await getNatGwPod(gw);
    const ipam = ipamOf(e);
    let ip: string;
    try {
      ip = e.spec.v4ip ? ipam.static(key, portName(e), e.spec.v4ip) : ipam.random(key, portName(e));
    } catch (x) {
      klogError(`failed to ${e.spec.v4ip ? 'acquire static' : 'allocate'} eip, err: ${errorText(x)}`);
      throw x;
    }
    const subnet = subnets.get(networkOf(e));
    const gateway = (subnet?.spec.gateway ?? '').split(',')[0] ?? '';
    try {
      await execNatGwRules(key, gw, 'eip-add', [facts.eipAddRule(ip, ipam.prefix, gateway)]);
    } catch (x) {
      klogError(`failed to create eip '${key}' in pod, ${errorText(x)}`);
      throw x;
    }
    if (e.spec.qosPolicy) await qosRules(e, e.spec.qosPolicy, 'add', ip);
    await createOrUpdateCrdEip(key, ip, gw, e.spec.qosPolicy ?? '');
  }

  async function createOrUpdateCrdEip(key: string, ip: string, gw: string, qosName: string): Promise<void> {
    const e = eips.get(key);
    if (!e) return;
    const obj = structuredClone(e);
    obj.spec = {
      ...obj.spec,
      v4ip: ip,
      v6ip: '',
      natGwDp: gw,
      macAddress: obj.spec.macAddress || macFor(key),
    };
    await client.replace(EIP, key, obj);
    await client.patchStatus(EIP, key, {
      ...statusBody(e.status),
      ip: e.status?.ip || ip,
      ready: true,
      qosPolicy: qosName,
    });
    const labels = { ...(e.metadata.labels ?? {}) };
    let op: 'add' | 'replace' | undefined;
    if (Object.keys(labels).length === 0) {
      op = 'add';
      Object.assign(labels, { [Label.subnet]: networkOf(e), [Label.natGwName]: gw, [Label.eipV4Ip]: ip });
    } else if (labels[Label.subnet] !== networkOf(e)) {
      op = 'replace';
      Object.assign(labels, { [Label.subnet]: networkOf(e), [Label.natGwName]: gw });
    }
    if (e.spec.qosPolicy && labels[Label.qos] !== e.spec.qosPolicy) {
      labels[Label.qos] = e.spec.qosPolicy;
      op ??= 'replace';
    }
    if (op) await client.patchLabels(EIP, key, op, labels);
    await addEipFinalizer(key);
    say(`configured ${ip} of ${key} on ${gw}`);
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: kube-ovn's handleUpdateIptablesEip, branch for branch in its own order (ADR 0097), pinned by test/unit/kube-ovn-model.test.ts and test/integration/k8s-standins.test.ts
  async function handleUpdateIptablesEip(key: string): Promise<void> {
    const e = eips.get(key);
    if (!e) return;
    say(`handle update iptables eip ${key}`);
    const ipam = ipamOf(e);
    const gw = e.spec.natGwDp ?? '';
    const ip = e.status?.ip ?? '';
    if (e.metadata.deletionTimestamp) {
      if (!ip) throw new Error(`failed to get eip ${ip} with mask by cidr`);
      if (featureOn()) {
        try {
          await execNatGwRules(key, gw, 'eip-del', [`${ip}/${ipam.prefix}`]);
        } catch (x) {
          if (!(x as { notFound?: boolean }).notFound) {
            klogError(`failed to clean eip '${key}' in pod, ${errorText(x)}`);
            throw x;
          }
        }
      }
      if (e.status?.qosPolicy) await qosRules(e, e.status.qosPolicy, 'del', ip);
      await delEipFinalizer(key);
      ipam.release(key);
      return;
    }
    if (ip && ip !== (e.spec.v4ip ?? ''))
      throw new Error(`not support eip change ip, old ip '${ip}', new ip '${e.spec.v4ip ?? ''}'`);
    if (!featureOn()) throw new Error('iptables nat gw not enable');
    if ((e.status?.qosPolicy ?? '') !== (e.spec.qosPolicy ?? '')) {
      if (e.status?.qosPolicy) await qosRules(e, e.status.qosPolicy, 'del', ip);
      if (e.spec.qosPolicy) await qosRules(e, e.spec.qosPolicy, 'add', ip);
      await patchEipLabel(key);
      const now = eips.get(key);
      if (now && (now.status?.qosPolicy ?? '') !== (e.spec.qosPolicy ?? ''))
        await client.patchStatus(EIP, key, { ...statusBody(now.status), qosPolicy: e.spec.qosPolicy ?? '' });
    }
    if (!e.status?.ready && e.status?.redo && ip) {
      const subnet = subnets.get(networkOf(e));
      const gateway = (subnet?.spec.gateway ?? '').split(',')[0] ?? '';
      await execNatGwRules(key, gw, 'eip-add', [facts.eipAddRule(ip, ipam.prefix, gateway)]);
      if (e.spec.qosPolicy) await qosRules(e, e.spec.qosPolicy, 'add', ip);
      await patchEipStatus(key, '', e.spec.qosPolicy ?? '', true);
    }
    await addEipFinalizer(key);
  }

  async function handleResetIptablesEip(key: string): Promise<void> {
    if (!eips.get(key)) return;
    say(`handle reset eip ${key}`);
    await patchEipLabel(key);
    await patchEipStatus(key, '', '', true);
  }

  async function handleUpdateVpcEip(gw: string): Promise<void> {
    if (!featureOn()) throw new Error('iptables nat gw not enable');
    say(`handle update vpc eip ${gw}`);
    for (const e of eips.list()) {
      if (e.spec.natGwDp !== gw || (e.status?.redo ?? '') === natGwCreatedAT) continue;
      try {
        await patchEipStatus(e.metadata.name, natGwCreatedAT, '', false);
      } catch (x) {
        klogError(`failed to update eip '${e.metadata.name}' to re-apply, ${errorText(x)}`);
        throw x;
      }
    }
  }

  // ------------------------------------------------------------------------------------------- FIPs

  async function patchFipStatus(name: string, change: NonNullable<Fip['status']>): Promise<void> {
    const f = fips.get(name);
    if (!f) return;
    const cur = { ready: false, v4ip: '', v6ip: '', natGwDp: '', redo: '', internalIp: '', ...f.status };
    const next = { ...cur, ...change };
    if (JSON.stringify(next) !== JSON.stringify(cur)) await client.patchStatus(FIP, name, next, 'fip-status');
  }

  async function handleUpdateVpcFloatingIP(gw: string): Promise<void> {
    if (!featureOn()) throw new Error('iptables nat gw not enable');
    for (const f of fips.list()) {
      if (f.metadata.labels?.[Label.natGwName] !== gw || f.status?.redo === natGwCreatedAT) continue;
      const eip = f.spec.eip ?? '';
      try {
        await patchEipLabel(eip);
        await patchEipStatus(eip, natGwCreatedAT, '', false);
        await patchFipStatus(f.metadata.name, { redo: natGwCreatedAT, ready: false });
      } catch (x) {
        klogError(`failed to update eip '${eip}' to re-apply, ${errorText(x)}`);
        throw x;
      }
    }
  }

  /** GetEip: the EIP from the cache, which must have a status.ip. */
  function getEip(name: string): Eip {
    const e = eips.get(name);
    if (!e) throw new Error(`iptables-eips.kubeovn.io "${name}" not found`);
    if (!e.status?.ip) throw new Error(`eip '${name}' is not ready, has no v4ip`);
    return e;
  }

  async function fipFinalizer(name: string, add: boolean): Promise<void> {
    const f = fips.get(name);
    if (!f) return;
    const list = f.metadata.finalizers ?? [];
    const has = list.includes(facts.finalizer);
    if (add === has) return;
    const next = add ? [...list, facts.finalizer] : list.filter((x) => x !== facts.finalizer);
    await client.patchFinalizers(FIP, name, next, 'fip-finalizers');
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: kube-ovn's handleAddIptablesFip, branch for branch in its own order (ADR 0097), pinned by test/unit/kube-ovn-model.test.ts and test/integration/k8s-standins.test.ts
  async function handleAddIptablesFip(key: string): Promise<void> {
    const f = fips.get(key);
    if (!f) return;
    if (!featureOn()) throw new Error('iptables nat gw not enable');
    if (f.status?.ready && f.status.v4ip) return;
    const eipName = f.spec.eip ?? '';
    if (!eipName) throw new Error('failed to create fip rule, should set eip');
    const e = getEip(eipName);
    if (facts.fipFinalizerFirst) await fipFinalizer(key, true);
    await execNatGwRules(key, e.spec.natGwDp ?? '', 'floating-ip-add', [
      `${e.status!.ip},${f.spec.internalIp ?? ''}`,
    ]);
    await patchFipStatus(key, {
      ready: true,
      v4ip: e.status!.ip!,
      v6ip: e.spec.v6ip ?? '',
      natGwDp: e.spec.natGwDp ?? '',
      internalIp: f.spec.internalIp ?? '',
    });
    const labels = f.metadata.labels ?? {};
    if (labels[Label.eipV4Ip] !== e.spec.v4ip || labels[Label.natGwName] !== e.spec.natGwDp)
      await client.patchLabels(
        FIP,
        key,
        Object.keys(labels).length ? 'replace' : 'add',
        { ...labels, [Label.natGwName]: e.spec.natGwDp ?? '', [Label.eipV4Ip]: e.spec.v4ip ?? '' },
        'fip-labels',
      );
    if (!facts.fipFinalizerFirst) await fipFinalizer(key, true);
    try {
      await patchEipStatus(eipName, '', '', true);
    } catch (x) {
      klogError(`failed to patch fip use eip ${key}, ${errorText(x)}`);
      throw x;
    }
    if (facts.fipAddResets) resetEip.addAfter(eipName, 3_000);
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: kube-ovn's handleUpdateIptablesFip, branch for branch in its own order (ADR 0097), pinned by test/unit/kube-ovn-model.test.ts and test/integration/k8s-standins.test.ts
  async function handleUpdateIptablesFip(key: string): Promise<void> {
    const f = fips.get(key);
    if (!f) return;
    if (f.metadata.deletionTimestamp) {
      if (featureOn() && f.status?.v4ip)
        try {
          await execNatGwRules(key, f.status.natGwDp ?? '', 'floating-ip-del', [
            `${f.status.v4ip},${f.status.internalIp ?? ''}`,
          ]);
        } catch (x) {
          if (!(x as { notFound?: boolean }).notFound) throw x;
        }
      await fipFinalizer(key, false);
      resetEip.addAfter(f.spec.eip ?? '', 3_000);
      return;
    }
    if (!featureOn()) throw new Error('iptables nat gw not enable');
    const e = getEip(f.spec.eip ?? '');
    if (!f.status?.ready && f.status?.redo && f.status.v4ip) {
      await execNatGwRules(key, e.spec.natGwDp ?? '', 'floating-ip-add', [
        `${f.status.v4ip},${f.spec.internalIp ?? ''}`,
      ]);
      await patchFipStatus(key, { ready: true });
    }
    await fipFinalizer(key, true);
  }

  // ------------------------------------------------------------------------------------------- start

  async function migrateFinalizers(): Promise<void> {
    for (const e of eips.list()) {
      const list = e.metadata.finalizers ?? [];
      if (!list.includes(LEGACY_FINALIZER)) continue;
      const next = list.filter((f) => f !== LEGACY_FINALIZER);
      if (!e.metadata.deletionTimestamp && !next.includes(FINALIZER)) next.push(FINALIZER);
      try {
        await client.patchFinalizers(EIP, e.metadata.name, next);
      } catch (x) {
        klogError(`failed to sync finalizers for IptablesEIP ${e.metadata.name}: ${errorText(x)}`);
        throw new KubeOvnExited(`failed to initialize crd finalizers: ${errorText(x)}`);
      }
    }
  }

  /** InitIPAM: subnets, the gateway pods' own addresses, every EIP's status.ip. */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: kube-ovn's InitIPAM, branch for branch in its own order (ADR 0097), pinned by test/unit/kube-ovn-model.test.ts and test/integration/k8s-standins.test.ts
  function initIpam(): void {
    for (const s of subnets.list()) addSubnet(s);
    for (const p of pods.list()) {
      initialised.add(p.metadata?.uid ?? ''); // initialised before this start (vpc_nat_gw_init)
      for (const [network, address] of Object.entries(podNetworkAddresses(ns, p.metadata?.annotations))) {
        const ipam = ipams.get(network);
        try {
          ipam?.static(`${p.metadata?.name}.${ns}`, `${p.metadata?.name}.${ns}.${network}`, address);
        } catch (x) {
          klogError(`failed to init ipam from pod ${p.metadata?.name}: ${errorText(x)}`);
        }
      }
    }
    for (const e of eips.list()) {
      try {
        const ipam = ipams.get(networkOf(e));
        if (!ipam) throw new IpamError('NoAvailableAddress');
        ipam.static(e.metadata.name, e.metadata.name, e.status?.ip ?? '');
      } catch (x) {
        klogError(`failed to init ipam from iptables eip cr ${e.metadata.name}: ${errorText(x)}`);
      }
    }
  }

  const informers = [subnets, configMaps, pods, qos, eips, fips];
  const stop = async () => {
    await Promise.all(informers.map((i) => i.stop()));
    await Promise.all(queues.map((q) => q.stop()));
  };
  try {
    await Promise.all(informers.map((i) => i.start()));
    if (facts.migratesFinalizers) await migrateFinalizers();
    initIpam();
  } catch (e) {
    await stop();
    throw e;
  }
  started = true;
  for (const e of eips.list()) addEip.add(e.metadata.name);
  for (const f of fips.list()) addFip.add(f.metadata.name);
  const held = [...ipams.values()].reduce((n, s) => n + s.held().length, 0);
  say(`started; ${held} address(es) in its IPAM`);

  return {
    release,
    requests: () => client.records,
    errors: () => errors,
    ipam: () => Object.fromEntries([...ipams].map(([n, s]) => [n, s.held()])),
    async idle() {
      while (queues.some((q) => q.length > 0)) await new Promise((r) => setTimeout(r, 20));
    },
    pendingRetries: () => queues.reduce((n, q) => n + q.pendingRetries, 0),
    stop,
  };
}
