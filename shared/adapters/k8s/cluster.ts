/**
 * The Cluster port on the thin REST client (rest.ts, ADR 0027): kube-ovn's custom resources, the gateway pods,
 * ConfigMaps and Events, each one JSON request. Every client error is translated here (errors.ts).
 *
 * Writes, and why they look the way they do:
 * - status: a JSON merge patch on /status carrying only the fields given (no lost updates:
 *   docs/kube-ovn-differences.md#status-patches-carry-only-changes).
 * - spec, labels, finalizers: one JSON merge patch carrying metadata.resourceVersion, which the API server takes
 *   as a precondition: a write based on a stale read is refused as a whole with 409 Conflict (ConflictError)
 *   instead of overwriting someone else's change. A merge patch needs nothing of the current object (a `null`
 *   label removes the key, the finalizer list is replaced whole), so no copy of the last read is kept and no error
 *   text is parsed (docs/adr/0009).
 */
import type { CoreV1Event, V1ConfigMap, V1Pod } from '@kubernetes/client-node';
import { GatewayNotReadyError, InvalidSpecError } from '../../domain/errors.js';
import {
  gatewayApp,
  gatewayNamespaceOf,
  gatewayPodSelector,
  gatewayPodTemplate,
  isNamespaceName,
  namePrefixOf,
} from '../../domain/gateway-pod.js';
import {
  Annotation,
  API_VERSION,
  GATEWAY_CONTAINER,
  type GatewayPod,
  GROUP,
  type IptablesEip,
  Label,
  NatGwConfigMap,
  type NatRule,
  type NatRuleKind,
  natGwFeatureOf,
  Plural,
  podNetworkAddresses,
  type QoSPolicy,
  type Subnet,
  VERSION,
  type VpcNatGateway,
} from '../../domain/kube-ovn.js';
import type {
  Clock,
  Cluster,
  EipObjectChange,
  EipStatusChange,
  GatewayRef,
  KubeEvent,
  Logger,
  NatGwFeature,
  NatRuleRef,
} from '../../ports.js';
import { conflict, statusOf, translate } from './errors.js';
import { KubeRest, type KubeSource } from './rest.js';

export interface K8sClusterOptions {
  /** Where the API server is: a KubeEndpoint, a lazy one, or a client-node KubeConfig (local runs, tests). */
  kubeConfig: KubeSource;
  /** Where the gateway pods and the nat-gw ConfigMaps live (kube-ovn's controller namespace). */
  namespace?: string;
  /** Where Events about the cluster-scoped EIPs go (kubectl describe looks in `default`). */
  eventNamespace?: string;
  /** For failures that are swallowed on purpose (Events are best effort). */
  log?: Pick<Logger, 'warn'>;
  /**
   * How long the nat-gw ConfigMaps, Subnets and VpcNatGateways read are reused (a warm Lambda container serves
   * many events; these objects change rarely). 0, the default, reads them every time. ADR 0028.
   */
  cacheTtlMs?: number;
  /** What the read cache's age is measured with (default the system clock; a test passes its own). */
  clock?: Clock;
  /** The reportingInstance of the Events written (the Lambda function's name); default REPORTING_COMPONENT. */
  reportingInstance?: string;
  /**
   * KUBE_OVN_RELEASE, when set: on 1.12 the gateway workloads' name prefix is never read from ovn-vpc-nat-config
   * (that release has no such key; namePrefixOf in shared/domain/gateway-pod.ts).
   */
  kubeOvnRelease?: string;
}

/** Event source, and the reportingComponent of every Event this product writes. */
export const REPORTING_COMPONENT = 'eip-lambdas';

/** A valid label value (empty allowed): anything else can be on no object, so no selector is needed for it. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

const RULE_PLURALS: ReadonlyArray<[NatRuleKind, string]> = [
  ['dnat', Plural.dnat],
  ['fip', Plural.fip],
  ['snat', Plural.snat],
];

/** RFC 3339 in whole seconds, as the API server writes times (a Date when a caller built the object). */
function rfc3339(t: Date | string | undefined): string | undefined {
  if (t === undefined) return undefined;
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime())) return typeof t === 'string' ? t : undefined;
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function toGatewayPod(pod: V1Pod, fallbackNamespace: string): GatewayPod {
  const meta = pod.metadata ?? {};
  const status = pod.status?.containerStatuses?.find((c) => c.name === GATEWAY_CONTAINER);
  const startedAt = rfc3339(status?.state?.running?.startedAt);
  return {
    namespace: meta.namespace ?? fallbackNamespace,
    name: meta.name ?? '',
    uid: meta.uid ?? '',
    phase: pod.status?.phase ?? 'Unknown',
    creationTimestamp: rfc3339(meta.creationTimestamp) ?? '',
    ...(meta.labels?.[Label.app] && { app: meta.labels[Label.app] }),
    ...(meta.annotations?.[Annotation.vpcNatGw] && { gateway: meta.annotations[Annotation.vpcNatGw] }),
    ...(meta.deletionTimestamp && { terminating: true }),
    addresses: podNetworkAddresses(meta.namespace ?? fallbackNamespace, meta.annotations),
    // What tells the pod's kube-ovn release (image, env, init container, routes, owner): docs/compatibility.md.
    template: gatewayPodTemplate(pod, GATEWAY_CONTAINER),
    ...(status && {
      container: {
        restartCount: status.restartCount ?? 0,
        ready: status.ready ?? false,
        ...(startedAt && { startedAt }),
      },
    }),
  };
}

const defaultLog: Pick<Logger, 'warn'> = {
  warn: (message, fields) => console.warn(JSON.stringify({ level: 'warn', message, ...fields })),
};

/** The field manager of every EIP write (managedFields); the bridge tells other writers apart by it. */
export const FIELD_MANAGER = 'eip-lambdas';

export function createK8sCluster(options: K8sClusterOptions): Cluster {
  return new K8sCluster(options);
}

const CUSTOM = `/apis/${GROUP}/${VERSION}`;
const MERGE_PATCH = 'application/merge-patch+json';

/** A map with something in it, else undefined. */
const nonEmpty = <T extends object>(m: T | undefined): T | undefined =>
  m && Object.keys(m).length > 0 ? m : undefined;

/**
 * The merge patch of an EIP's spec, labels, annotations and finalizers, preconditioned on `resourceVersion`;
 * undefined when the change changes nothing.
 */
function eipPatchOf(resourceVersion: string, change: EipObjectChange): Record<string, unknown> | undefined {
  const spec = nonEmpty(
    Object.fromEntries(Object.entries(change.spec ?? {}).filter(([, v]) => v !== undefined)),
  );
  const labels = nonEmpty(change.labels);
  const annotations = nonEmpty(change.annotations);
  if (!spec && !labels && !annotations && !change.finalizers) return undefined;
  return {
    metadata: {
      resourceVersion,
      ...(labels && { labels }),
      ...(annotations && { annotations }),
      ...(change.finalizers && { finalizers: [...change.finalizers] }),
    },
    ...(spec && { spec }),
  };
}

class K8sCluster implements Cluster {
  private readonly rest: KubeRest;
  private readonly namespace: string;
  private readonly eventNamespace: string;
  private readonly log: Pick<Logger, 'warn'>;
  private readonly cacheTtlMs: number;
  private readonly clock: Clock;
  private readonly reportingInstance: string;
  private readonly kubeOvnRelease: string | undefined;
  /** Reads of slowly changing objects, by kind and name, with when they were made (a pending read is shared). */
  private readonly cache = new Map<string, { at: number; value: Promise<unknown> }>();

  constructor(options: K8sClusterOptions) {
    this.rest = new KubeRest(options.kubeConfig);
    this.namespace = options.namespace ?? 'kube-system';
    this.eventNamespace = options.eventNamespace ?? 'default';
    this.log = options.log ?? defaultLog;
    this.cacheTtlMs = options.cacheTtlMs ?? 0;
    this.clock = options.clock ?? Date;
    this.reportingInstance = options.reportingInstance ?? REPORTING_COMPONENT;
    this.kubeOvnRelease = options.kubeOvnRelease;
  }

  /** `read()` once per `cacheTtlMs` per key; a failed read is not kept. */
  private cached<T>(key: string, read: () => Promise<T>): Promise<T> {
    if (this.cacheTtlMs <= 0) return read();
    const now = this.clock.now();
    const hit = this.cache.get(key);
    if (hit && now - hit.at < this.cacheTtlMs) return hit.value as Promise<T>;
    const value = read();
    this.cache.set(key, { at: now, value });
    value.catch(() => this.cache.delete(key));
    if (this.cache.size > 512) this.cache.delete(this.cache.keys().next().value!);
    return value;
  }

  // ------------------------------------------------------------ reads

  async getEip(name: string): Promise<IptablesEip | undefined> {
    return this.getCustom<IptablesEip>(Plural.eip, name);
  }

  listEips(): Promise<IptablesEip[]> {
    return this.listCustom<IptablesEip>(Plural.eip);
  }

  async listEipsByLabel(key: string, value: string): Promise<IptablesEip[]> {
    if (!LABEL_VALUE.test(value) || value.length > 63) return [];
    return this.listCustom<IptablesEip>(Plural.eip, `${key}=${value}`);
  }

  getQosPolicy(name: string): Promise<QoSPolicy | undefined> {
    return this.getCustom<QoSPolicy>(Plural.qos, name);
  }

  getSubnet(name: string): Promise<Subnet | undefined> {
    return this.cached(`subnet/${name}`, () => this.getCustom<Subnet>(Plural.subnet, name));
  }

  getVpcNatGateway(name: string): Promise<VpcNatGateway | undefined> {
    return this.cached(`gateway/${name}`, () => this.getCustom<VpcNatGateway>(Plural.gateway, name));
  }

  async listNatRulesForEip(eipName: string): Promise<NatRuleRef[]> {
    // No field selector: for custom resources the API server only supports metadata.name (and whatever the CRD
    // declares in selectableFields, which kube-ovn's CRDs do not), so `spec.eip=` is refused with 400
    // "field label not supported". The rule controllers' eip_v4_ip label lags and survives IP reuse
    // (docs/kube-ovn-differences.md#status-nat-from-rule-specs).
    // Three small lists, filtered here.
    const lists = await Promise.all(
      RULE_PLURALS.map(async ([kind, plural]) => ({ kind, items: await this.listCustom<NatRule>(plural) })),
    );
    return lists.flatMap(({ kind, items }) =>
      items
        .filter((r) => r.spec?.eip === eipName && !r.metadata.deletionTimestamp)
        .map((r) => ({ kind, name: r.metadata.name }))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    );
  }

  async findGatewayPod(gw: string): Promise<GatewayPod | undefined> {
    const labelSelector = gatewayPodSelector(gw);
    let pods: V1Pod[];
    try {
      pods = (await this.listPods(labelSelector)).items;
    } catch (e) {
      throw translate(e, `list pods in ${this.namespace} -l ${labelSelector}`);
    }
    if (pods.length > 1) {
      const names = pods.map((p) => p.metadata?.name).join(', ');
      throw new GatewayNotReadyError(`too many pods for vpc nat gateway ${gw}: ${names}`);
    }
    const pod = pods[0];
    return pod && toGatewayPod(pod, this.namespace);
  }

  async findGatewayPods(gw: GatewayRef): Promise<GatewayPod[]> {
    const namespace = gw.namespace || this.namespace;
    if (!isNamespaceName(namespace))
      throw new InvalidSpecError(
        `spec.namespace "${namespace}" of the gateway's pods is not a namespace name`,
      );
    const prefix =
      gw.prefix ?? namePrefixOf(await this.configMapData(NatGwConfigMap.image), this.kubeOvnRelease);
    // A name that is no label value is on no pod (kube-ovn's webhook keeps workload names within 52 characters).
    if (!LABEL_VALUE.test(gatewayApp(gw.name, prefix)) || gatewayApp(gw.name, prefix).length > 63) return [];
    const labelSelector = gatewayPodSelector(gw.name, prefix);
    try {
      const pods = (await this.listPods(labelSelector, namespace)).items;
      return pods
        .map((p) => toGatewayPod(p, namespace))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    } catch (e) {
      throw translate(e, `list pods in ${namespace} -l ${labelSelector}`);
    }
  }

  /**
   * Every gateway pod in every namespace gateways are in: the adapter's (kube-ovn's), and each `spec.namespace` a
   * VpcNatGateway names (kube-ovn master puts its pods there, docs/adr/0105-ha-gateways.md), one list per namespace.
   * The namespaces are read with one list of VpcNatGateways per cache period. A namespace that cannot be listed
   * (no RBAC there) fails the whole call: a replica's own address left out would be handed to an EIP.
   */
  async listGatewayPods(): Promise<GatewayPod[]> {
    const labelSelector = `${Label.vpcNatGw}=true`;
    const namespaces = await this.gatewayNamespaces();
    const lists = await Promise.all(
      namespaces.map(async (namespace) => {
        try {
          return (await this.listPods(labelSelector, namespace)).items.map((p) => toGatewayPod(p, namespace));
        } catch (e) {
          throw translate(e, `list pods in ${namespace} -l ${labelSelector}`);
        }
      }),
    );
    return lists.flat();
  }

  /**
   * The adapter's namespace, then each valid `spec.namespace` of the VpcNatGateways (ignored when the release is
   * known to be one without the field, as gatewayNamespaceOf has it), sorted, each once.
   */
  private gatewayNamespaces(): Promise<string[]> {
    return this.cached('gateway-namespaces', async () => {
      const gateways = await this.listCustom<VpcNatGateway>(Plural.gateway);
      const named = gateways
        .map((g) => gatewayNamespaceOf(undefined, g, this.kubeOvnRelease))
        .filter((n): n is string => n !== undefined && n !== this.namespace && isNamespaceName(n));
      return [this.namespace, ...[...new Set(named)].sort()];
    });
  }

  async natGwFeature(): Promise<NatGwFeature> {
    // Both read at once: one round trip of latency; the rule itself is kube-ovn's (natGwFeatureOf).
    const [enable, image] = await Promise.all([
      this.configMapData(NatGwConfigMap.enable),
      this.configMapData(NatGwConfigMap.image),
    ]);
    return natGwFeatureOf(enable, image);
  }

  // ------------------------------------------------------------ writes

  async updateEip(
    name: string,
    resourceVersion: string,
    change: EipObjectChange,
  ): Promise<IptablesEip | undefined> {
    const what = `patch ${Plural.eip} "${name}"`;
    const body = eipPatchOf(resourceVersion, change);
    if (!body) return this.getEip(name);
    try {
      return await this.rest.request<IptablesEip>('PATCH', `${CUSTOM}/${Plural.eip}/${seg(name)}`, {
        query: { fieldManager: FIELD_MANAGER },
        body,
        contentType: MERGE_PATCH,
      });
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      if (statusOf(e) === 409) throw conflict(e, what);
      throw translate(e, what);
    }
  }

  async patchEipStatus(name: string, change: EipStatusChange): Promise<IptablesEip | undefined> {
    const status = Object.fromEntries(Object.entries(change).filter(([, v]) => v !== undefined));
    if (Object.keys(status).length === 0) return this.getEip(name);
    try {
      const updated = await this.rest.request<IptablesEip>(
        'PATCH',
        `${CUSTOM}/${Plural.eip}/${seg(name)}/status`,
        { query: { fieldManager: FIELD_MANAGER }, body: { status }, contentType: MERGE_PATCH },
      );
      return updated;
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw translate(e, `patch ${Plural.eip} "${name}" /status`);
    }
  }

  async emitEvent(eip: IptablesEip, event: KubeEvent): Promise<void> {
    const now = new Date();
    const at = rfc3339(now) as unknown as Date; // sent as JSON: the API server's own time format
    const body: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: {
        name: `${eip.metadata.name}.${now.getTime().toString(16)}${Math.floor(Math.random() * 0xffff).toString(16)}`,
        namespace: this.eventNamespace,
      },
      involvedObject: {
        apiVersion: API_VERSION,
        kind: 'IptablesEIP',
        name: eip.metadata.name,
        uid: eip.metadata.uid,
        resourceVersion: eip.metadata.resourceVersion,
      },
      type: event.type,
      reason: event.reason,
      message: event.message,
      source: { component: REPORTING_COMPONENT },
      reportingComponent: REPORTING_COMPONENT,
      reportingInstance: this.reportingInstance,
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
    };
    try {
      await this.rest.request('POST', `/api/v1/namespaces/${seg(this.eventNamespace)}/events`, { body });
    } catch (e) {
      const err = translate(e, `create event for ${Plural.eip} "${eip.metadata.name}"`);
      this.log.warn('event not recorded', {
        eip: eip.metadata.name,
        reason: event.reason,
        error: err.message,
      });
    }
  }

  // ------------------------------------------------------------ helpers

  private listPods(labelSelector: string, namespace = this.namespace): Promise<{ items: V1Pod[] }> {
    return this.rest.request<{ items: V1Pod[] }>('GET', `/api/v1/namespaces/${seg(namespace)}/pods`, {
      query: { labelSelector },
    });
  }

  /** A nat-gw ConfigMap's data in the adapter's namespace ({} when it has none), undefined when it does not exist. */
  private configMapData(name: string): Promise<Record<string, string> | undefined> {
    return this.cached(`configmap/${name}`, async () => {
      const cm = await this.readConfigMap(name);
      return cm && (cm.data ?? {});
    });
  }

  private async getCustom<T>(plural: string, name: string): Promise<T | undefined> {
    try {
      return await this.rest.request<T>('GET', `${CUSTOM}/${plural}/${seg(name)}`);
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw translate(e, `get ${plural} "${name}"`);
    }
  }

  private async listCustom<T>(plural: string, labelSelector?: string): Promise<T[]> {
    try {
      const list = await this.rest.request<{ items?: T[] }>('GET', `${CUSTOM}/${plural}`, {
        query: { labelSelector },
      });
      return list.items ?? [];
    } catch (e) {
      throw translate(e, `list ${plural}${labelSelector ? ` -l ${labelSelector}` : ''}`);
    }
  }

  private async readConfigMap(name: string): Promise<V1ConfigMap | undefined> {
    try {
      return await this.rest.request<V1ConfigMap>(
        'GET',
        `/api/v1/namespaces/${seg(this.namespace)}/configmaps/${seg(name)}`,
      );
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw translate(e, `get configmap ${this.namespace}/${name}`);
    }
  }
}

/** One path segment (names are DNS labels in practice; encoded anyway). */
function seg(s: string): string {
  return encodeURIComponent(s);
}
