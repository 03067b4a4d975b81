/**
 * The watch side of the bridge: one self-restarting informer (shared/bridge/watch.ts) per watched kind — the
 * kube-ovn CRs the EIP path reads, the gateway pods, and the two ConfigMaps that switch the VPC NAT gateway
 * feature on. Nothing is lost across errors: a change made while a watch was down arrives as a watch event
 * (history kept) or as a difference found by the relist.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { GROUP, Label, NatGwConfigMap, Plural, VERSION } from '../domain/kube-ovn.js';
import type { Logger } from '../ports.js';
import type { KubeObject, WatchedKind } from './objects.js';
import { type WatchStatus as GenericWatchStatus, ResilientInformer, type WatchType } from './watch.js';

export interface WatchSpec {
  kind: WatchedKind;
  /** The watch's name in status, logs and metrics: the kind, or `ConfigMap/<name>`. */
  name: string;
  /** The collection path the informer lists and watches. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** path plus the label selector, for a raw watch. */
  watchPath: string;
}

const CR_PLURALS: [WatchedKind, string][] = [
  ['IptablesEIP', Plural.eip],
  ['IptablesFIPRule', Plural.fip],
  ['IptablesDnatRule', Plural.dnat],
  ['IptablesSnatRule', Plural.snat],
  ['QoSPolicy', Plural.qos],
  ['Subnet', Plural.subnet],
  ['VpcNatGateway', Plural.gateway],
];

export const GATEWAY_POD_SELECTOR = `${Label.vpcNatGw}=true`;

/** The ConfigMaps (in the gateway namespace) the bridge cares about; others in the namespace are ignored. */
export const WATCHED_CONFIG_MAPS: readonly string[] = [NatGwConfigMap.enable, NatGwConfigMap.image];

/**
 * What the bridge watches: the kube-ovn CRs (cluster-scoped), the gateway pods and the ConfigMaps in `namespace`.
 * EIPs first.
 */
export function watchPaths(namespace: string): WatchSpec[] {
  const crs = CR_PLURALS.map(([kind, plural]) => {
    const path = `/apis/${GROUP}/${VERSION}/${plural}`;
    return { kind, name: kind, path, watchPath: path };
  });
  const configMapPath = `/api/v1/namespaces/${namespace}/configmaps`;
  return [
    ...crs,
    gatewayPodWatch(namespace, 'Pod'),
    // One watch per ConfigMap, by name: RBAC can then grant exactly these two (resourceNames), not the namespace's.
    ...WATCHED_CONFIG_MAPS.map((name) => {
      const fieldSelector = `metadata.name=${name}`;
      return {
        kind: 'ConfigMap' as const,
        name: `ConfigMap/${name}`,
        path: configMapPath,
        fieldSelector,
        watchPath: `${configMapPath}?fieldSelector=${encodeURIComponent(fieldSelector)}`,
      };
    }),
  ];
}

/**
 * The gateway pods of one namespace (label ovn.kubernetes.io/vpc-nat-gw=true): kube-ovn's, and each namespace a
 * VpcNatGateway's spec.namespace names (kube-ovn master, docs/adr/0105-ha-gateways.md).
 */
export function gatewayPodWatch(namespace: string, name = `Pod/${namespace}`): WatchSpec {
  const path = `/api/v1/namespaces/${namespace}/pods`;
  return {
    kind: 'Pod',
    name,
    path,
    labelSelector: GATEWAY_POD_SELECTOR,
    watchPath: `${path}?labelSelector=${encodeURIComponent(GATEWAY_POD_SELECTOR)}`,
  };
}

export type ChangeListener = (
  kind: WatchedKind,
  type: WatchType,
  object: KubeObject,
  opts: { initial: boolean },
) => void;

export type WatchStatus = GenericWatchStatus;

export interface SourceOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  onChange: ChangeListener;
  log?: Logger;
  /** Restart backoff after an informer error: first delay and ceiling. Defaults 500 ms and 30 s. */
  restartBackoffMs?: number;
  maxRestartBackoffMs?: number;
}

/** Watch objects are plain JSON; list items may be client-node model classes with Date fields. One shape for all. */
function plain(o: KubernetesObject): KubeObject {
  return JSON.parse(JSON.stringify(o)) as KubeObject;
}

type ListFn = () => Promise<{ metadata?: { resourceVersion?: string }; items: KubernetesObject[] }>;

function listFn(spec: WatchSpec, kc: KubeConfig, home: string): ListFn {
  const namespace = spec.kind === 'Pod' ? (spec.path.split('/')[4] ?? home) : home;
  if (spec.kind === 'Pod') {
    const core = kc.makeApiClient(CoreV1Api);
    return () => core.listNamespacedPod({ namespace, labelSelector: spec.labelSelector });
  }
  if (spec.kind === 'ConfigMap') {
    const core = kc.makeApiClient(CoreV1Api);
    return () => core.listNamespacedConfigMap({ namespace, fieldSelector: spec.fieldSelector });
  }
  const custom = kc.makeApiClient(CustomObjectsApi);
  const plural = spec.path.split('/').pop()!;
  return async () =>
    (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as {
      metadata?: { resourceVersion?: string };
      items: KubernetesObject[];
    };
}

export class InformerSource {
  private readonly resources: ResilientInformer<KubernetesObject>[];
  /** The gateway pod watches of the other namespaces VpcNatGateways name, by namespace (started as they appear). */
  private readonly extra = new Map<string, ResilientInformer<KubernetesObject>>();
  private stopped = false;

  constructor(private readonly options: SourceOptions) {
    this.resources = watchPaths(options.namespace).map((spec) => this.informer(spec));
  }

  private informer(spec: WatchSpec): ResilientInformer<KubernetesObject> {
    const { options } = this;
    const log = options.log;
    return new ResilientInformer<KubernetesObject>({
      kubeConfig: options.kubeConfig,
      kind: spec.name,
      path: spec.path,
      list: listFn(spec, options.kubeConfig, options.namespace),
      ...(spec.labelSelector !== undefined && { labelSelector: spec.labelSelector }),
      ...(spec.fieldSelector !== undefined && { fieldSelector: spec.fieldSelector }),
      onChange: (type, o, opts) => {
        try {
          options.onChange(spec.kind, type, plain(o), opts);
        } catch (e) {
          log?.error('change handler failed', { watch: spec.kind, error: String(e) });
        }
      },
      ...(log && { log }),
      ...(options.restartBackoffMs !== undefined && { restartBackoffMs: options.restartBackoffMs }),
      ...(options.maxRestartBackoffMs !== undefined && {
        maxRestartBackoffMs: options.maxRestartBackoffMs,
      }),
    });
  }

  /**
   * Watches the gateway pods of `namespace` too, from now on (a VpcNatGateway's spec.namespace, kube-ovn master:
   * docs/adr/0105-ha-gateways.md), so that a replica coming up there routes its gateway's EIPs as one in kube-ovn's
   * namespace does. Idempotent; kept until the bridge stops (kube-ovn leaves a workload's pods when the namespace
   * changes). Not part of `ready()`: a namespace the bridge may not read (infra/bridge/gateway-namespace not applied
   * for it) is retried with backoff and logged, and leaves that namespace to the periodic resync.
   */
  watchGatewayPodsIn(namespace: string): void {
    if (this.stopped || namespace === this.options.namespace || this.extra.has(namespace)) return;
    const informer = this.informer(gatewayPodWatch(namespace));
    this.extra.set(namespace, informer);
    this.options.log?.info('watching gateway pods in another namespace', { namespace });
    informer.start().catch(() => undefined);
  }

  /**
   * Starts every informer. The EIP informer lists first, so that a rule, pod or QoS policy seen in the other
   * first lists already finds the EIPs it fans out to. Resolves once all have listed and are watching (each
   * retries in the background until it can).
   */
  async start(): Promise<void> {
    const [eips, ...rest] = this.resources;
    await eips!.start();
    await Promise.all(rest.map((r) => r.start()));
  }

  /** Every informer has listed and is watching now (a paused one counts as healthy: it was stopped on purpose). */
  ready(): boolean {
    return this.resources.every((r) => {
      const s = r.status();
      return s.watching || (s.paused === true && s.listed);
    });
  }

  /** Closes every watch until `resume()` (back-pressure from a full queue). */
  async pause(): Promise<void> {
    await Promise.all([...this.resources, ...this.extra.values()].map((r) => r.pause()));
  }

  resume(): void {
    for (const r of [...this.resources, ...this.extra.values()]) r.resume();
  }

  status(): WatchStatus[] {
    return [...this.resources, ...this.extra.values()].map((r) => r.status());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.resources, ...this.extra.values()].map((r) => r.stop()));
  }
}
