/**
 * In-memory Cluster: a small object store with the API server semantics the handlers rely on — uids,
 * monotonically increasing resourceVersions, optimistic concurrency on updateEip, status merge patches that send
 * only the given fields, finalizers holding a deleted object until they are gone, and Events.
 * Tests and the offline `npm run invoke` use it; the local Kubernetes API (local/kube-api) is the real thing.
 */
import { randomUUID } from 'node:crypto';
import { ConflictError, GatewayNotReadyError, InvalidSpecError } from '../../shared/domain/errors.js';
import {
  gatewayApp,
  gatewayNamespaceOf,
  isNamespaceName,
  namePrefixOf,
} from '../../shared/domain/gateway-pod.js';
import {
  API_VERSION,
  type GatewayPod,
  type IptablesEip,
  Label,
  NatGwConfigMap,
  type NatRule,
  NatRuleKindOf,
  natGwFeatureOf,
  type QoSPolicy,
  type Subnet,
  type VpcNatGateway,
} from '../../shared/domain/kube-ovn.js';
import type {
  Cluster,
  EipObjectChange,
  EipStatusChange,
  GatewayRef,
  KubeEvent,
  NatGwFeature,
  NatRuleRef,
} from '../../shared/ports.js';

export interface RecordedEvent extends KubeEvent {
  object: string;
  uid: string;
}

/** Gateway pods as the in-memory cluster keeps them: the port's view plus the labels it is found by. */
export interface MemoryPod extends GatewayPod {
  labels: Record<string, string>;
}

type Call = { method: keyof Cluster; name?: string; body?: unknown };

const clone = <T>(v: T): T => structuredClone(v);

/** The port's view of a pod: its app label kept, the other labels dropped. */
function toPort({ labels, ...pod }: MemoryPod): GatewayPod {
  return clone({ ...pod, ...(labels[Label.app] && { app: labels[Label.app] }) });
}

export class MemoryCluster implements Cluster {
  readonly eips = new Map<string, IptablesEip>();
  readonly qos = new Map<string, QoSPolicy>();
  readonly subnets = new Map<string, Subnet>();
  readonly gateways = new Map<string, VpcNatGateway>();
  readonly rules = new Map<string, NatRule>();
  readonly pods = new Map<string, MemoryPod>();
  readonly configMaps = new Map<string, Record<string, string>>();
  readonly events: RecordedEvent[] = [];
  /** Every write, in order, for tests that pin what was sent. */
  readonly writes: Call[] = [];
  private rv = 1;

  constructor(readonly namespace = 'kube-system') {}

  nextResourceVersion(): string {
    this.rv += 1;
    return String(this.rv);
  }

  // ------------------------------------------------------------ seeding helpers (tests, offline invoke)

  /** Creates or replaces an EIP as a user would (new uid unless given), returning the stored copy. */
  putEip(
    eip: Omit<IptablesEip, 'apiVersion' | 'kind' | 'metadata'> & {
      metadata: Partial<IptablesEip['metadata']> & { name: string };
    },
  ): IptablesEip {
    const stored: IptablesEip = {
      apiVersion: API_VERSION,
      kind: 'IptablesEIP',
      ...clone(eip),
      metadata: {
        uid: randomUUID(),
        creationTimestamp: new Date(0).toISOString(),
        generation: 1,
        ...clone(eip.metadata),
        resourceVersion: this.nextResourceVersion(),
      },
    };
    this.eips.set(stored.metadata.name, stored);
    return clone(stored);
  }

  /** Changes an EIP's spec as a user would (kubectl edit), bumping resourceVersion and generation. */
  editEipSpec(name: string, spec: Partial<IptablesEip['spec']>): IptablesEip {
    const e = this.mustEip(name);
    e.spec = { ...e.spec, ...spec };
    e.metadata.generation = (e.metadata.generation ?? 1) + 1;
    e.metadata.resourceVersion = this.nextResourceVersion();
    return clone(e);
  }

  /** Changes an EIP's labels as a user would (kubectl label); `null` removes a key. */
  editEipLabels(name: string, labels: Record<string, string | null>): IptablesEip {
    const e = this.mustEip(name);
    const next = { ...(e.metadata.labels ?? {}) };
    for (const [k, v] of Object.entries(labels)) {
      if (v === null) delete next[k];
      else next[k] = v;
    }
    e.metadata.labels = next;
    e.metadata.resourceVersion = this.nextResourceVersion();
    return clone(e);
  }

  /** Writes status fields as another writer would (kubectl edit --subresource=status). */
  putEipStatus(name: string, status: NonNullable<IptablesEip['status']>): IptablesEip {
    const e = this.mustEip(name);
    e.status = { ...(e.status ?? {}), ...clone(status) };
    e.metadata.resourceVersion = this.nextResourceVersion();
    return clone(e);
  }

  /** Asks the API to delete an EIP: with finalizers it only gets a deletionTimestamp. Returns whether it is gone. */
  deleteEip(name: string, at = new Date().toISOString()): boolean {
    const e = this.eips.get(name);
    if (!e) return true;
    if ((e.metadata.finalizers ?? []).length === 0) {
      this.eips.delete(name);
      return true;
    }
    e.metadata.deletionTimestamp ??= at;
    e.metadata.resourceVersion = this.nextResourceVersion();
    return false;
  }

  putRule(kind: NatRule['kind'], name: string, eip: string, extra: { terminating?: boolean } = {}): void {
    this.rules.set(`${kind}/${name}`, {
      apiVersion: API_VERSION,
      kind,
      metadata: {
        name,
        uid: randomUUID(),
        resourceVersion: this.nextResourceVersion(),
        ...(extra.terminating && { deletionTimestamp: new Date().toISOString(), finalizers: ['x'] }),
      },
      spec: { eip },
    });
  }

  removeRule(kind: NatRule['kind'], name: string): void {
    this.rules.delete(`${kind}/${name}`);
  }

  putPod(pod: MemoryPod): void {
    this.pods.set(`${pod.namespace}/${pod.name}`, clone(pod));
  }

  enableNatGw(enabled = true): void {
    if (!enabled) {
      this.configMaps.set(NatGwConfigMap.enable, { [NatGwConfigMap.enableKey]: 'false' });
      return;
    }
    this.configMaps.set(NatGwConfigMap.enable, { [NatGwConfigMap.enableKey]: 'true' });
    this.configMaps.set(NatGwConfigMap.image, {
      [NatGwConfigMap.imageKey]: 'docker.io/kubeovn/vpc-nat-gateway:v1.12.4',
    });
  }

  // ------------------------------------------------------------ Cluster port

  async getEip(name: string): Promise<IptablesEip | undefined> {
    const e = this.eips.get(name);
    return e && clone(e);
  }

  async listEips(): Promise<IptablesEip[]> {
    return [...this.eips.values()].map(clone);
  }

  async listEipsByLabel(key: string, value: string): Promise<IptablesEip[]> {
    return [...this.eips.values()].filter((e) => e.metadata.labels?.[key] === value).map(clone);
  }

  async getQosPolicy(name: string): Promise<QoSPolicy | undefined> {
    const q = this.qos.get(name);
    return q && clone(q);
  }

  async getSubnet(name: string): Promise<Subnet | undefined> {
    const s = this.subnets.get(name);
    return s && clone(s);
  }

  async getVpcNatGateway(name: string): Promise<VpcNatGateway | undefined> {
    const g = this.gateways.get(name);
    return g && clone(g);
  }

  async listNatRulesForEip(eipName: string): Promise<NatRuleRef[]> {
    return (
      [...this.rules.values()]
        .filter((r) => r.spec.eip === eipName && !r.metadata.deletionTimestamp)
        .map((r) => ({ kind: NatRuleKindOf[r.kind], name: r.metadata.name }))
        // As the Kubernetes adapter answers: dnat, fip, snat, each by name (test/contract/cluster.ts).
        .sort((a, b) =>
          a.kind === b.kind ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.kind < b.kind ? -1 : 1,
        )
    );
  }

  async findGatewayPod(gw: string): Promise<GatewayPod | undefined> {
    const matches = [...this.pods.values()].filter(
      (p) =>
        p.namespace === this.namespace &&
        p.labels[Label.app] === gatewayApp(gw) &&
        p.labels[Label.vpcNatGw] === 'true',
    );
    if (matches.length > 1) throw new GatewayNotReadyError(`too many pods for vpc nat gateway ${gw}`);
    const p = matches[0];
    if (!p) return undefined;
    return toPort(p);
  }

  async findGatewayPods(gw: GatewayRef): Promise<GatewayPod[]> {
    const namespace = gw.namespace || this.namespace;
    if (!isNamespaceName(namespace))
      throw new InvalidSpecError(
        `spec.namespace "${namespace}" of the gateway's pods is not a namespace name`,
      );
    const app = gatewayApp(gw.name, gw.prefix ?? namePrefixOf(this.configMaps.get(NatGwConfigMap.image)));
    return [...this.pods.values()]
      .filter(
        (p) =>
          p.namespace === namespace && p.labels[Label.app] === app && p.labels[Label.vpcNatGw] === 'true',
      )
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .map(toPort);
  }

  /** As the Kubernetes adapter: its own namespace and each `spec.namespace` a VpcNatGateway names (ADR 0121). */
  async listGatewayPods(): Promise<GatewayPod[]> {
    const namespaces = new Set([this.namespace]);
    for (const g of this.gateways.values()) {
      const n = gatewayNamespaceOf(undefined, g);
      if (n !== undefined && isNamespaceName(n)) namespaces.add(n);
    }
    return [...this.pods.values()]
      .filter((p) => namespaces.has(p.namespace) && p.labels[Label.vpcNatGw] === 'true')
      .map(toPort);
  }

  async natGwFeature(): Promise<NatGwFeature> {
    return natGwFeatureOf(
      this.configMaps.get(NatGwConfigMap.enable),
      this.configMaps.get(NatGwConfigMap.image),
    );
  }

  async updateEip(
    name: string,
    resourceVersion: string,
    change: EipObjectChange,
  ): Promise<IptablesEip | undefined> {
    this.writes.push({ method: 'updateEip', name, body: clone(change) });
    const e = this.eips.get(name);
    if (!e) return undefined;
    if (this.racingWriters > 0) {
      // Someone else's write lands just before ours: the object moves on and our precondition fails.
      this.racingWriters--;
      e.metadata.resourceVersion = this.nextResourceVersion();
    }
    if (e.metadata.resourceVersion !== resourceVersion)
      throw new ConflictError(
        `iptables-eips "${name}": the object has been modified (resourceVersion ${resourceVersion} is stale)`,
      );
    if (change.spec) e.spec = { ...e.spec, ...change.spec };
    if (change.labels) e.metadata.labels = mergeKeys(e.metadata.labels, change.labels);
    if (change.annotations) e.metadata.annotations = mergeKeys(e.metadata.annotations, change.annotations);
    if (change.finalizers) {
      const adding = change.finalizers.some((f) => !(e.metadata.finalizers ?? []).includes(f));
      if (adding && e.metadata.deletionTimestamp)
        throw new ConflictError(`iptables-eips "${name}" is being deleted: no new finalizers can be added`);
      e.metadata.finalizers = [...change.finalizers];
    }
    if (change.spec) e.metadata.generation = (e.metadata.generation ?? 1) + 1;
    e.metadata.resourceVersion = this.nextResourceVersion();
    if (e.metadata.deletionTimestamp && (e.metadata.finalizers ?? []).length === 0) {
      this.eips.delete(name);
    }
    return clone(e);
  }

  private racingWriters = 0;

  /** The next `n` updateEip calls each lose a race to a concurrent writer (a 409 Conflict). */
  raceNextUpdates(n: number): void {
    this.racingWriters = n;
  }

  async patchEipStatus(name: string, change: EipStatusChange): Promise<IptablesEip | undefined> {
    this.writes.push({ method: 'patchEipStatus', name, body: clone(change) });
    const e = this.eips.get(name);
    if (!e) return undefined;
    e.status = { ...(e.status ?? {}), ...clone(change) };
    e.metadata.resourceVersion = this.nextResourceVersion();
    return clone(e);
  }

  async emitEvent(eip: IptablesEip, event: KubeEvent): Promise<void> {
    this.events.push({ ...event, object: eip.metadata.name, uid: eip.metadata.uid });
  }

  private mustEip(name: string): IptablesEip {
    const e = this.eips.get(name);
    if (!e) throw new Error(`no EIP ${name}`);
    return e;
  }
}

/** A JSON merge patch of a string map: `null` removes the key, keys not named are kept. */
function mergeKeys(
  current: Record<string, string> | undefined,
  change: Record<string, string | null>,
): Record<string, string> {
  const out = { ...(current ?? {}) };
  for (const [k, v] of Object.entries(change)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  return out;
}
