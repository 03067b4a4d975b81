/**
 * An in-memory world for core and handler tests: the in-memory ports seeded with what a kube-ovn cluster with the
 * VPC NAT gateway feature has — the two ConfigMaps, the external subnet, a VpcNatGateway with a Running pod backed
 * by the simulated nat-gateway.sh, and QoS policies whose status the (stand-in) QoS controller has written.
 */
import { randomUUID } from 'node:crypto';
import type { Invocation } from '../../shared/core/invocation.js';
import { operations } from '../../shared/core/operations.js';
import type { Outcome } from '../../shared/core/outcome.js';
import {
  type GatewayPodTemplate,
  gatewayApp,
  gatewayPodName,
  NAME_PREFIX_KEY,
} from '../../shared/domain/gateway-pod.js';
import {
  API_VERSION,
  DEFAULT_EXTERNAL_SUBNET,
  type IptablesEip,
  Label,
  NatGwConfigMap,
  type QoSPolicyBandwidthLimitRule,
} from '../../shared/domain/kube-ovn.js';
import type { EipEvent, HandlerName, Reason } from '../../shared/events.js';
import { TallyMetrics } from '../../shared/observability/metrics.js';
import type { Clock, Deps } from '../../shared/ports.js';
import { atLeast, gatewayImage, type KubeOvnRelease } from '../natgw/releases.js';
import { MemoryCluster, type MemoryPod } from './cluster.js';
import { MemoryGateway } from './gateway.js';
import { MemoryHolds } from './holds.js';
import { memoryInspector } from './inspect.js';
import { MemoryIpam } from './ipam.js';
import { MemoryLeases } from './leases.js';
import { memoryLogger } from './logger.js';
import { MemoryRedoLedger } from './redo-ledger.js';

/**
 * The pod template facts of the release the simulated gateway speaks (local/natgw/README.md), as the lab's gateway
 * stand-in writes them on its pods (local/controllers/gateway-pod.ts): 1.12's init container; from 1.13 the routes
 * annotations; from 1.15 GATEWAY_V4 in the container's env.
 */
export function simulatedTemplate(release: KubeOvnRelease): GatewayPodTemplate {
  return {
    image: gatewayImage(release),
    env: atLeast(release, '1.15') ? { GATEWAY_V4: '172.18.0.1', GATEWAY_V6: '' } : {},
    initRunsScript: release === '1.12',
    routes: atLeast(release, '1.13')
      ? {
          'ovn.kubernetes.io/routes': ['10.96.0.0/12'],
          'ovn-vpc-external-network.kube-system.kubernetes.io/routes': ['0.0.0.0/0'],
        }
      : {},
  };
}

export const GW = 'gw1';
export const POD = gatewayPodName(GW);

/**
 * The one manual clock (the in-memory world's, and every test's through test/support/clock.ts): time moves only
 * when told. `now` is a bound function, so the clock can be handed to code that keeps `clock.now` alone.
 */
export class ManualClock implements Clock {
  constructor(public t = Date.parse('2026-11-29T10:00:00Z')) {}
  now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
  set(t: number): void {
    this.t = t;
  }
}

export interface WorldOptions {
  cidrBlock?: string;
  gateway?: string;
  excludeIps?: string[];
  /** The clock to run on (tests pass test/support/clock.ts's); a fresh ManualClock otherwise. */
  clock?: ManualClock;
  /** The kube-ovn release the gateway plays: its pod's template facts and its simulated script (default 1.12). */
  release?: KubeOvnRelease;
  /** The IPAM's owner index shows a claim this long after it was made (a model of DynamoDB's GSI, ADR 0085). */
  indexLagMs?: number;
}

export function world(options: WorldOptions = {}) {
  const clock = options.clock ?? new ManualClock();
  const cluster = new MemoryCluster();
  const ipam = new MemoryIpam({ clock, ...(options.indexLagMs && { indexLagMs: options.indexLagMs }) });
  const holds = new MemoryHolds();
  const leases = new MemoryLeases({ clock });
  const release = options.release ?? '1.12';
  // A pod's own net1 address, from 1.13 (1.16's init fails without one, as its script does); the 1.12 world keeps
  // the bare net1 its tests were written for.
  const gateway = new MemoryGateway({ release, ...(release !== '1.12' && { net1: '172.18.0.254/24' }) });
  const metrics = new TallyMetrics();
  const redoLedger = new MemoryRedoLedger();
  const log = memoryLogger();
  let ids = 0;
  let replicaIds = 0;
  /** Where the Deployment's pods go and their app label, once the gateway runs replicas. */
  let replicaSet: { namespace: string; app: string } | undefined;
  const deps: Deps = {
    cluster,
    ipam,
    holds,
    leases,
    gateway,
    inspector: memoryInspector(gateway),
    redoLedger,
    clock,
    log,
    metrics,
    newId: () => `inv-${++ids}`,
  };

  cluster.enableNatGw();
  const meta = (name: string) => ({
    name,
    uid: randomUUID(),
    resourceVersion: cluster.nextResourceVersion(),
  });
  cluster.subnets.set(DEFAULT_EXTERNAL_SUBNET, {
    apiVersion: API_VERSION,
    kind: 'Subnet',
    metadata: meta(DEFAULT_EXTERNAL_SUBNET),
    spec: {
      cidrBlock: options.cidrBlock ?? '172.18.0.0/24',
      gateway: options.gateway ?? '172.18.0.1',
      excludeIps: options.excludeIps ?? ['172.18.0.250..172.18.0.254'],
      protocol: 'IPv4',
      provider: `${DEFAULT_EXTERNAL_SUBNET}.kube-system`,
    },
  });
  cluster.gateways.set(GW, {
    apiVersion: API_VERSION,
    kind: 'VpcNatGateway',
    metadata: meta(GW),
    spec: {
      vpc: 'vpc1',
      subnet: 'vpc1-subnet1',
      lanIp: '10.0.1.254',
      externalSubnets: [DEFAULT_EXTERNAL_SUBNET],
    },
  });

  const w = {
    deps,
    clock,
    cluster,
    ipam,
    holds,
    leases,
    gateway,
    redoLedger,
    metrics,
    log,

    /** (Re)creates the gateway pod as the StatefulSet would: a new uid and a fresh, initialised gateway. */
    createPod(started = clock.now(), addresses?: Record<string, string>): MemoryPod {
      const at = new Date(started).toISOString();
      const pod: MemoryPod = {
        namespace: 'kube-system',
        name: POD,
        uid: randomUUID(),
        phase: 'Running',
        creationTimestamp: at,
        container: { restartCount: 0, startedAt: at, ready: true },
        labels: { [Label.app]: gatewayApp(GW), [Label.vpcNatGw]: 'true' },
        ...(addresses && { addresses }),
        template: simulatedTemplate(release),
      };
      cluster.putPod(pod);
      return pod;
    },
    pod(): MemoryPod {
      const p = cluster.pods.get(`kube-system/${POD}`);
      if (!p) throw new Error('no gateway pod');
      return p;
    },
    /** A container restart (kill 1, node reboot): same pod, lost network state, a later start time. */
    restartContainer(pod: MemoryPod = w.pod()): void {
      const p = cluster.pods.get(`${pod.namespace}/${pod.name}`);
      if (!p) throw new Error(`no gateway pod ${pod.name}`);
      clock.advance(5_000);
      p.container = {
        restartCount: (p.container?.restartCount ?? 0) + 1,
        startedAt: new Date(clock.now()).toISOString(),
        ready: true,
      };
      gateway.restart(p);
    },
    net1(pod: Pick<MemoryPod, 'uid'> = w.pod()): string[] {
      return gateway.sim(pod).net1Addresses();
    },
    tc(
      pod: Pick<MemoryPod, 'uid'> = w.pod(),
    ): { direction: 'ingress' | 'egress'; ip: string; priority: number; rate: string; burst: string }[] {
      return gateway
        .sim(pod)
        .tcFilters()
        .map((f) => ({ direction: f.direction, ip: f.ip, priority: f.prio, rate: f.rate, burst: f.burst }));
    },

    // ---------------------------------------------------------- replicated gateways (kube-ovn master)

    /**
     * Runs the gateway as kube-ovn master's Deployment of `n` replicas (docs/adr/0105-ha-gateways.md): the
     * StatefulSet's pod goes, `n` pods owned by a ReplicaSet come, each with its own fresh gateway; in `namespace`
     * (the VpcNatGateway's spec.namespace) and under `prefix` (ovn-vpc-nat-config's natGwNamePrefix) when given.
     * Returns the pods.
     */
    replicas(n: number, o: { namespace?: string; prefix?: string } = {}): MemoryPod[] {
      for (const p of w.pods()) cluster.pods.delete(`${p.namespace}/${p.name}`);
      const vng = cluster.gateways.get(GW)!;
      vng.spec = { ...vng.spec, replicas: n, ...(o.namespace && { namespace: o.namespace }) };
      if (o.prefix) {
        const image = cluster.configMaps.get(NatGwConfigMap.image) ?? {};
        cluster.configMaps.set(NatGwConfigMap.image, { ...image, [NAME_PREFIX_KEY]: o.prefix });
      }
      replicaSet = { namespace: o.namespace ?? 'kube-system', app: gatewayApp(GW, o.prefix) };
      return Array.from({ length: n }, () => w.addReplica());
    },
    /** One more pod of the Deployment (a scale-up, or the ReplicaSet replacing a deleted pod). */
    addReplica(started = clock.now()): MemoryPod {
      const at = new Date(started).toISOString();
      const rs = replicaSet ?? { namespace: 'kube-system', app: gatewayApp(GW) };
      const pod: MemoryPod = {
        namespace: rs.namespace,
        name: `${rs.app}-7d9f8b6c5-${(++replicaIds).toString(36).padStart(5, 'x')}`,
        uid: randomUUID(),
        phase: 'Running',
        creationTimestamp: at,
        container: { restartCount: 0, startedAt: at, ready: true },
        labels: { [Label.app]: rs.app, [Label.vpcNatGw]: 'true' },
        template: { ...simulatedTemplate(release), ownerKind: 'ReplicaSet' },
      };
      cluster.putPod(pod);
      return pod;
    },
    /** Every pod of the gateway, by name (the StatefulSet's or the Deployment's). */
    pods(): MemoryPod[] {
      const app = replicaSet?.app ?? gatewayApp(GW);
      return [...cluster.pods.values()]
        .filter((p) => p.labels[Label.app] === app)
        .sort((a, b) => (a.name < b.name ? -1 : 1));
    },
    /** Changes a pod as the kubelet or a deletion would (phase, terminating, container). */
    setPod(pod: MemoryPod, change: Partial<Pick<MemoryPod, 'phase' | 'terminating' | 'container'>>): void {
      const p = cluster.pods.get(`${pod.namespace}/${pod.name}`);
      if (!p) throw new Error(`no gateway pod ${pod.name}`);
      Object.assign(p, change);
    },
    /** The pod is gone (scaled down, deleted): its state goes with it. */
    deletePod(pod: MemoryPod): void {
      cluster.pods.delete(`${pod.namespace}/${pod.name}`);
    },

    qos(
      name: string,
      rules: QoSPolicyBandwidthLimitRule[],
      opts: { shared?: boolean; copyToStatus?: boolean; bindingType?: string } = {},
    ): void {
      const spec = {
        shared: opts.shared ?? false,
        bindingType: opts.bindingType ?? 'EIP',
        bandwidthLimitRules: rules,
      };
      cluster.qos.set(name, {
        apiVersion: API_VERSION,
        kind: 'QoSPolicy',
        metadata: meta(name),
        spec,
        ...(opts.copyToStatus !== false && {
          status: { ...spec, bandwidthLimitRules: [...rules].sort((a, b) => a.name.localeCompare(b.name)) },
        }),
      });
    },

    eip(name: string, spec: IptablesEip['spec'] = {}): IptablesEip {
      return cluster.putEip({ metadata: { name }, spec: { natGwDp: GW, ...spec } });
    },
    get(name: string): IptablesEip | undefined {
      return cluster.eips.get(name);
    },

    event(
      handler: HandlerName,
      name: string,
      reason: Reason = 'manual',
      extra: Partial<EipEvent> = {},
    ): EipEvent {
      const e = cluster.eips.get(name);
      const uid = extra.object?.uid ?? e?.metadata.uid;
      return {
        version: 1,
        id: `${uid}:${e?.metadata.resourceVersion}:${reason}`,
        handler,
        reason,
        ...extra,
        object: {
          name,
          ...(uid && { uid }),
          ...(e && { resourceVersion: e.metadata.resourceVersion }),
          ...extra.object,
        },
      };
    },

    /** Runs an operation the way the handler does, with a generous deadline. */
    async run(
      handler: HandlerName,
      name: string,
      reason: Reason = 'manual',
      extra: Partial<EipEvent> = {},
    ): Promise<Outcome> {
      const inv: Invocation = {
        event: w.event(handler, name, reason, extra),
        signal: new AbortController().signal,
        deadline: clock.now() + 60_000,
        log,
      };
      return operations[handler](inv, deps);
    },

    /** Runs an already-built event. */
    async runEvent(event: EipEvent, signal = new AbortController().signal): Promise<Outcome> {
      return operations[event.handler]({ event, signal, deadline: clock.now() + 60_000, log }, deps);
    },

    /** Everything observable, for "run twice, same world" checks. */
    snapshot() {
      const eips = [...cluster.eips.values()].map((e) => ({
        name: e.metadata.name,
        uid: e.metadata.uid,
        spec: e.spec,
        status: e.status,
        labels: e.metadata.labels,
        finalizers: e.metadata.finalizers,
        deleting: !!e.metadata.deletionTimestamp,
      }));
      const allocations = [...ipam.allocations.values()]
        .map((a) => `${a.subnet}/${a.address}=${a.owner.uid}`)
        .sort();
      const policyHolds = [...holds.held].map(([policy, h]) => `${policy}=${h.uid}`).sort();
      let net1: string[] = [];
      let tc: unknown[] = [];
      if (cluster.pods.has(`kube-system/${POD}`)) {
        net1 = w.net1();
        tc = w.tc();
      }
      return { eips, allocations, policyHolds, net1, tc };
    },
  };
  w.createPod();
  return w;
}
