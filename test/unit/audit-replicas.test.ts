/**
 * The audit on a replicated gateway (docs/adr/0120-audit-reads-every-replica.md), on the in-memory world: every
 * active pod read on its own, each finding naming its pod, each repair acting on that pod only (the audit's own
 * removals of an orphan or a filter put on by hand; the core's re-add of an address or a rate, asked for that pod by
 * the event's `pod`). The EIPs are made Ready by the core on the gateway's first pod, then the other replicas get the
 * same calls and the placement records every pod (`recordPods`), the state ADR 0105's core leaves a replicated
 * gateway in. A gateway in another namespace under another name prefix is set up by hand. The same on the lab's
 * kube-ovn master: test/e2e/audit-replicas.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryAuditStore } from '../../local/memory/audit-store.js';
import type { MemoryPod } from '../../local/memory/cluster.js';
import { memoryInspector } from '../../local/memory/inspect.js';
import { type AuditDeps, repairDrift, runAudit } from '../../shared/audit/audit.js';
import { redoToken } from '../../shared/core/view.js';
import { gatewayApp } from '../../shared/domain/gateway-pod.js';
import { Label, NatGwConfigMap } from '../../shared/domain/kube-ovn.js';
import type { GatewayInspector } from '../../shared/ports.js';
import { POD, type World, world } from '../support/world.js';

const EXT = 'ovn-vpc-external-network';

function counted(inner: GatewayInspector): GatewayInspector & { perPod: Map<string, number> } {
  const perPod = new Map<string, number>();
  return {
    perPod,
    read(pod, argv, signal) {
      perPod.set(pod.name, (perPod.get(pod.name) ?? 0) + 1);
      return inner.read(pod, argv, signal);
    },
  };
}

function replica(
  w: World,
  name: string,
  o: { namespace?: string; app?: string; gateway?: string; phase?: string; terminating?: boolean } = {},
): MemoryPod {
  const at = new Date(w.clock.now()).toISOString();
  const pod: MemoryPod = {
    namespace: o.namespace ?? 'kube-system',
    name,
    uid: randomUUID(),
    phase: o.phase ?? 'Running',
    creationTimestamp: at,
    container: { restartCount: 0, startedAt: at, ready: o.phase === undefined || o.phase === 'Running' },
    labels: { [Label.app]: o.app ?? gatewayApp('gw1'), [Label.vpcNatGw]: 'true' },
    ...(o.gateway && { gateway: o.gateway }),
    ...(o.terminating && { terminating: true }),
    template: w.pod().template!,
  };
  w.cluster.putPod(pod);
  return pod;
}

/** Sends `pod` every call the core sent the gateway's first pod, as the replicas would have been sent them. */
async function sameCalls(w: World, pod: MemoryPod): Promise<void> {
  for (const c of w.gateway.calls.filter((x) => x.pod === POD)) await w.gateway.run(pod, c.op, c.args);
}

async function setup(replicas: number) {
  const w = world();
  w.qos('q', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '1' }], {
    shared: true,
  });
  w.eip('a', { qosPolicy: 'q' });
  w.eip('b');
  const ip: Record<string, string> = {};
  for (const n of ['a', 'b']) {
    const o = await w.run('add', n, 'added');
    if (o.status !== 'applied') throw new Error(`add ${n}: ${JSON.stringify(o)}`);
    ip[n] = o.ip!;
  }
  const pods = [w.pod()];
  for (let i = 1; i < replicas; i++) {
    const p = replica(w, `vpc-nat-gw-gw1-6d5f7b8c9-r${i}xyz`);
    await sameCalls(w, p);
    pods.push(p);
  }
  const inspector = counted(memoryInspector(w.gateway));
  const deps: AuditDeps = { ...w.deps, inspector, store: new MemoryAuditStore(w.ipam, w.leases) };
  return { w, deps, ip, pods, inspector };
}

const sh = (w: World, pod: MemoryPod, ...argv: string[]) => {
  const r = w.gateway.sim(pod).exec(argv);
  if (r.exitCode !== 0) throw new Error(r.stderr);
};
const callsOn = (w: World, from: number) => w.gateway.calls.slice(from).map((c) => [c.pod, c.op, ...c.args]);
const named = (p: MemoryPod) => `${p.namespace}/${p.name}`;

/** Records the pods as carrying b's address in their current run, as the per-pod placement does. */
async function recordPods(w: World, pods: MemoryPod[], address: string): Promise<string> {
  const a = [...w.ipam.allocations.values()].find((x) => x.address === address)!;
  const placed = Object.fromEntries(pods.map((p) => [p.uid, { name: p.name, token: redoToken(p) }]));
  await w.ipam.place(a.subnet, a.address, a.owner.uid, { ...a.placement!, pods: placed });
  return a.owner.uid;
}
const placedPods = (w: World, address: string) =>
  Object.keys(
    [...w.ipam.allocations.values()].find((x) => x.address === address)?.placement?.pods ?? {},
  ).sort();

describe('the audit reads every replica of a gateway', () => {
  it('clean on 1, 2 and 3 replicas, with 3 read-only execs a pod a pass on kube-ovn 1.12 (3, 6, 9 a gateway)', async () => {
    const perGateway: number[] = [];
    for (const n of [1, 2, 3]) {
      const { deps, inspector, pods } = await setup(n);
      const report = await runAudit(deps);
      expect(report.drift).toEqual([]);
      expect(report.gateways.map((g) => g.pod)).toEqual(pods.map(named).sort());
      expect([...inspector.perPod.values()]).toEqual(Array(n).fill(3));
      perGateway.push([...inspector.perPod.values()].reduce((s, x) => s + x, 0));
    }
    console.log(`inspection execs per gateway per pass, 1.12, 1/2/3 replicas: ${perGateway.join(', ')}`);
    expect(perGateway).toEqual([3, 6, 9]);
  });

  it('an address removed from one replica is missing on that pod only, though the others carry it', async () => {
    const { w, deps, ip, pods } = await setup(3);
    sh(w, pods[2]!, 'ip', 'addr', 'del', `${ip.b}/24`, 'dev', 'net1');
    const report = await runAudit(deps);
    expect(report.drift.map((d) => [d.kind, d.eip, d.pod, d.podUid])).toEqual([
      ['missing-address', 'b', named(pods[2]!), pods[2]!.uid],
    ]);
    expect(report.drift[0]!.message).toContain(`(pod ${named(pods[2]!)})`);
  });

  it('a foreign address on one replica is an orphan there, removed from that pod alone (no exec on the others)', async () => {
    const { w, deps, pods } = await setup(3);
    sh(w, pods[1]!, 'ip', 'addr', 'add', '172.18.0.99/24', 'dev', 'net1');
    const report = await runAudit(deps);
    expect(report.drift.map((d) => [d.kind, d.address, d.pod])).toEqual([
      ['orphan-address', '172.18.0.99', named(pods[1]!)],
    ]);
    const from = w.gateway.calls.length;
    const actions = await repairDrift(deps, report, { orphanGraceMs: 0 });
    expect(actions.map((a) => [a.kind, a.target, a.result])).toEqual([
      ['orphan-address', `172.18.0.99/24 on gw1 (pod ${named(pods[1]!)})`, 'done'],
    ]);
    expect(callsOn(w, from)).toEqual([
      [pods[1]!.name, 'eip-del', '172.18.0.99/24'],
      [pods[1]!.name, 'eip-ingress-qos-del', '172.18.0.99'],
      [pods[1]!.name, 'eip-egress-qos-del', '172.18.0.99'],
    ]);
    expect((await runAudit(deps)).drift).toEqual([]);
  });

  it('the same orphan on two replicas: one finding each, one grace period for both, removed from each', async () => {
    const { w, deps, pods } = await setup(3);
    for (const p of [pods[0]!, pods[2]!]) sh(w, p, 'ip', 'addr', 'add', '172.18.0.98/24', 'dev', 'net1');
    const first = await repairDrift(deps, await runAudit(deps), { orphanGraceMs: 60_000 });
    expect(first.map((a) => [a.target, a.result])).toEqual([
      [`172.18.0.98/24 on gw1 (pod ${named(pods[0]!)})`, 'waiting'],
      [`172.18.0.98/24 on gw1 (pod ${named(pods[2]!)})`, 'waiting'],
    ]);
    w.clock.advance(61_000);
    const second = await repairDrift(deps, await runAudit(deps), { orphanGraceMs: 60_000 });
    expect(second.map((a) => a.result)).toEqual(['done', 'done']);
    expect((await deps.store.sightings('gw1')).size).toBe(0);
    expect((await runAudit(deps)).drift).toEqual([]);
  });

  it('a wrong rate on one replica is qos-drift naming that pod, repaired on that pod alone', async () => {
    const { w, deps, ip, pods } = await setup(2);
    await recordPods(w, pods, ip.a!);
    // The script's own replacement of the filter, with another rate, on the second pod only.
    await w.gateway.run(pods[1]!, 'eip-ingress-qos-add', [`${ip.a},1,99,1`]);
    const report = await runAudit(deps);
    expect(report.drift.map((d) => [d.kind, d.eip, d.pod, d.repair])).toEqual([
      ['qos-drift', 'a', named(pods[1]!), 'redo'],
    ]);
    expect(report.drift[0]!.message).toMatch(
      /ingress rate on gateway gw1 \(pod kube-system\/vpc-nat-gw-gw1-\S+\) is 99Mbit/,
    );
    const from = w.gateway.calls.length;
    const actions = await repairDrift(deps, report);
    expect(actions.map((a) => [a.kind, a.result])).toEqual([['qos-drift', 'done']]);
    expect(new Set(w.gateway.calls.slice(from).map((c) => c.pod))).toEqual(new Set([pods[1]!.name]));
    expect((await runAudit(deps)).drift).toEqual([]);
  });

  it('a filter put on one replica by hand is stripped from that pod alone', async () => {
    const { w, deps, ip, pods } = await setup(3);
    await w.gateway.run(pods[2]!, 'eip-egress-qos-add', [`${ip.b},1,5,1`]);
    const report = await runAudit(deps);
    expect(report.drift.map((d) => [d.kind, d.eip, d.pod, d.repair])).toEqual([
      ['qos-drift', 'b', named(pods[2]!), 'strip-qos'],
    ]);
    const from = w.gateway.calls.length;
    const actions = await repairDrift(deps, report);
    expect(actions.map((a) => [a.target, a.result])).toEqual([
      [`${ip.b} on gw1 (pod ${named(pods[2]!)})`, 'done'],
    ]);
    expect(callsOn(w, from)).toEqual([[pods[2]!.name, 'eip-egress-qos-del', ip.b!]]);
    expect((await runAudit(deps)).drift).toEqual([]);
  });

  it('a replica that is not running is unreadable on its own; the running ones are still judged; a terminating one is not read', async () => {
    const { w, deps, ip, pods, inspector } = await setup(2);
    const pending = replica(w, 'vpc-nat-gw-gw1-6d5f7b8c9-pend1', { phase: 'Pending' });
    const leaving = replica(w, 'vpc-nat-gw-gw1-6d5f7b8c9-term1', { terminating: true });
    sh(w, pods[1]!, 'ip', 'addr', 'del', `${ip.a}/24`, 'dev', 'net1');
    const report = await runAudit(deps);
    expect(report.drift.map((d) => [d.kind, d.pod])).toEqual([
      ['missing-address', named(pods[1]!)],
      ['gateway-unreadable', named(pending)],
    ]);
    expect(report.drift[1]!.message).toBe(
      `gateway gw1 (pod ${named(pending)}) could not be inspected: pod is not running (phase Pending)`,
    );
    expect(inspector.perPod.has(pending.name)).toBe(false);
    expect(inspector.perPod.has(leaving.name)).toBe(false);
  });

  it("a gateway in its spec.namespace under ovn-vpc-nat-config's name prefix: its pods there are read, a replica without the address named", async () => {
    const w = world();
    const cm = w.cluster.configMaps.get(NatGwConfigMap.image)!;
    w.cluster.configMaps.set(NatGwConfigMap.image, { ...cm, natGwNamePrefix: 'edge' });
    const gw1 = w.cluster.gateways.get('gw1')!;
    w.cluster.gateways.set('gw2', {
      ...gw1,
      metadata: { ...gw1.metadata, name: 'gw2', uid: randomUUID() },
      spec: { ...gw1.spec, namespace: 'team-a', replicas: 2 },
    });
    const opts = { namespace: 'team-a', app: gatewayApp('gw2', 'edge'), gateway: 'gw2' };
    const p0 = replica(w, 'edge-gw2-7c9d5f6b8-abcde', opts);
    const p1 = replica(w, 'edge-gw2-7c9d5f6b8-fghjk', opts);
    // An EIP Ready on gw2 with its allocation placed there, its address on the first replica only.
    const ip = '172.18.0.40';
    const eip = w.cluster.putEip({ metadata: { name: 'c' }, spec: { natGwDp: 'gw2' } });
    const pool = {
      subnet: EXT,
      family: 4 as const,
      cidr: '172.18.0.0/24',
      gateway: '172.18.0.1',
      exclude: [],
    };
    await w.ipam.claimAddress(pool, ip, { uid: eip.metadata.uid, name: 'c' }, { gateway: 'gw2', prefix: 24 });
    const labels = {
      [Label.subnet]: EXT,
      [Label.natGwName]: 'gw2',
      [Label.eipV4Ip]: ip,
    };
    w.cluster.eips.get('c')!.metadata.labels = labels;
    w.cluster.eips.get('c')!.status = { ready: true, ip, redo: 'x', nat: '', qosPolicy: '' };
    await w.gateway.run(p0, 'eip-add', [`${ip}/24,172.18.0.1`]);
    const inspector = counted(memoryInspector(w.gateway));
    const deps: AuditDeps = { ...w.deps, inspector, store: new MemoryAuditStore(w.ipam, w.leases) };
    const report = await runAudit(deps);
    // gw1's pod keeps the default prefix: kube-ovn no longer finds it as gw1's, neither does the audit.
    expect(report.gateways.map((g) => [g.gateway, g.pod])).toEqual([
      ['gw2', named(p0)],
      ['gw2', named(p1)],
    ]);
    expect(report.drift.map((d) => [d.kind, d.eip, d.pod])).toEqual([['missing-address', 'c', named(p1)]]);
    expect([...inspector.perPod.keys()].sort()).toEqual([p0.name, p1.name]);
  });

  it('the repair of an address missing on one replica re-adds it on that pod alone (no exec on the others), the placement naming all three again', async () => {
    const { w, deps, ip, pods } = await setup(3);
    await recordPods(w, pods, ip.b!);
    sh(w, pods[1]!, 'ip', 'addr', 'del', `${ip.b}/24`, 'dev', 'net1');
    const from = w.gateway.calls.length;
    const actions = await repairDrift(deps, await runAudit(deps));
    expect(actions.map((a) => [a.kind, a.target, a.result])).toEqual([['missing-address', 'b', 'done']]);
    expect(new Set(w.gateway.calls.slice(from).map((c) => c.pod))).toEqual(new Set([pods[1]!.name]));
    expect(placedPods(w, ip.b!)).toEqual(pods.map((p) => p.uid).sort());
    expect((await runAudit(deps)).drift).toEqual([]);
  });
});
