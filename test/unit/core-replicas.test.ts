/**
 * Replicated gateways in the core (docs/adr/0105-ha-gateways.md, docs/adr/0115-ha-gateways-phase-2.md): kube-ovn
 * master's Deployment of 2 or 3 pods in the in-memory world, each pod its own simulated nat-gateway.sh. Every active
 * pod carries every EIP; a pod that lacks the address is the only one spoken to; the EIP's conditions name it; a
 * deletion ends whatever a pod does. Execs are counted per pod.
 */
import { describe, expect, it } from 'vitest';
import type { MemoryPod } from '../../local/memory/cluster.js';
import { DELETE_PATIENCE_MS } from '../../shared/core/replicas.js';
import { podOwner } from '../../shared/domain/gateway-pod.js';
import { FINALIZER } from '../../shared/domain/kube-ovn.js';
import { blockedRetryAfter } from '../../shared/domain/retry.js';
import { type World, world } from '../support/world.js';

const RULES = [{ name: 'in', direction: 'ingress' as const, priority: 1, rateMax: '10', burstMax: '10' }];
const RULES2 = [
  { name: 'in', direction: 'ingress' as const, priority: 1, rateMax: '30', burstMax: '3' },
  { name: 'out', direction: 'egress' as const, priority: 2, rateMax: '20', burstMax: '2' },
];

/** Execs per pod name since `mark` (a count of w.gateway.calls). */
function execsSince(w: World, mark: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of w.gateway.calls.slice(mark)) out[c.pod] = (out[c.pod] ?? 0) + 1;
  return out;
}

const has = (w: World, pod: MemoryPod, ip: string) => w.net1(pod).some((a) => a.startsWith(`${ip}/`));
const limits = (w: World, pod: MemoryPod) =>
  w.tc(pod).map((f) => `${f.direction} ${f.ip} ${f.rate} ${f.burst}`);
const condition = (w: World, name: string, type: string) =>
  w.get(name)?.status?.conditions?.find((c) => c.type === type);
const placed = async (w: World, name: string) =>
  (await w.ipam.findByOwner(w.get(name)!.metadata.uid)).find((a) => a.family === 4)?.placement;

describe.each([2, 3])('a gateway of %i pods', (n) => {
  it('the pods are configured at once, not one after another (each has its own queue and gateway lease)', async () => {
    const w = world();
    w.replicas(n);
    w.eip('eip-a');
    const inner = w.deps.gateway;
    const track = { running: 0, max: 0 };
    const gateway: typeof inner = {
      async run(...args) {
        track.running++;
        track.max = Math.max(track.max, track.running);
        try {
          await new Promise((r) => setTimeout(r, 5));
          return await inner.run(...args);
        } finally {
          track.running--;
        }
      },
    };
    const { operations } = await import('../../shared/core/operations.js');
    const out = await operations.add(
      {
        event: w.event('add', 'eip-a', 'added'),
        signal: new AbortController().signal,
        deadline: w.clock.now() + 60_000,
        log: w.log,
      },
      { ...w.deps, gateway },
    );
    expect(out).toMatchObject({ status: 'applied' });
    expect(track.max).toBe(n);
  });

  it('an add puts the address on every pod and records them, in one write after the execs', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.eip('eip-a');
    const writes = w.cluster.writes.length;
    expect(await w.run('add', 'eip-a', 'added')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
    for (const p of pods) expect(has(w, p, '172.18.0.2')).toBe(true);
    expect(execsSince(w, 0)).toEqual(Object.fromEntries(pods.map((p) => [p.name, 1])));
    const placement = await placed(w, 'eip-a');
    expect(Object.keys(placement?.pods ?? {}).sort()).toEqual(pods.map((p) => p.uid).sort());
    expect(placement?.namespace).toBeUndefined();
    const e = w.get('eip-a')!;
    expect(e.status).toMatchObject({ ready: true, ip: '172.18.0.2' });
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'True', reason: 'Configured' });
    expect(condition(w, 'eip-a', 'GatewayPods')).toMatchObject({
      status: 'True',
      reason: 'AllPods',
      message: `on ${n} of ${n} pods: ${pods.map((p) => p.name).join(', ')}`,
    });
    // The finalizer, then spec and labels, then status: as on one pod.
    expect(w.cluster.writes.slice(writes).map((x) => x.method)).toEqual([
      'updateEip',
      'updateEip',
      'patchEipStatus',
    ]);
  });

  it('with QoS: the filters on every pod; a QoS change moves them on every pod', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.qos('q1', RULES);
    w.qos('q2', RULES2);
    w.eip('eip-a', { qosPolicy: 'q1' });
    await w.run('add', 'eip-a', 'added');
    for (const p of pods) expect(limits(w, p)).toEqual(['ingress 172.18.0.2 10Mbit 10Mb']);
    expect((await placed(w, 'eip-a'))?.qos).toBe('q1');
    w.cluster.editEipSpec('eip-a', { qosPolicy: 'q2' });
    const mark = w.gateway.calls.length;
    expect(await w.run('update', 'eip-a', 'spec-changed')).toMatchObject({ status: 'applied' });
    for (const p of pods)
      expect(limits(w, p).sort()).toEqual(['egress 172.18.0.2 20Mbit 2Mb', 'ingress 172.18.0.2 30Mbit 3Mb']);
    // No eip-add: the address is on every pod already.
    expect(w.gateway.calls.slice(mark).filter((c) => c.op === 'eip-add')).toEqual([]);
    expect(w.get('eip-a')?.status?.qosPolicy).toBe('q2');
    expect((await placed(w, 'eip-a'))?.qos).toBe('q2');
  });

  it('one pod restarted: only it is redone, in one sweep for every EIP; the others get no exec', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.qos('q1', RULES, { shared: true });
    for (const name of ['eip-a', 'eip-b', 'eip-c']) {
      w.eip(name, { qosPolicy: 'q1' });
      await w.run('add', name, 'added');
    }
    const restarted = pods[1]!;
    w.restartContainer(restarted);
    expect(w.net1(restarted).filter((a) => a.startsWith('172.18.0.'))).toEqual([]);
    const mark = w.gateway.calls.length;
    for (const name of ['eip-a', 'eip-b', 'eip-c'])
      expect(
        await w.run('update', name, 'gateway-restarted', { gateway: 'gw1', pod: restarted.uid }),
      ).toMatchObject({ status: 'applied' });
    // eip-add for the three addresses in one exec, their QoS in one more (ADR 0111), in that pod only.
    expect(execsSince(w, mark)).toEqual({ [restarted.name]: 2 });
    for (const ip of ['172.18.0.2', '172.18.0.3', '172.18.0.4']) {
      for (const p of pods) expect(has(w, p, ip)).toBe(true);
      expect(limits(w, restarted)).toContain(`ingress ${ip} 10Mbit 10Mb`);
    }
    const placement = await placed(w, 'eip-a');
    expect(placement?.pods?.[restarted.uid]?.token).toBe(w.get('eip-a')?.status?.redo);
    // A resync afterwards changes nothing anywhere.
    const after = w.gateway.calls.length;
    await w.run('update', 'eip-a', 'resync');
    expect(execsSince(w, after)).toEqual({});
  });

  it('a restart seen by a resync (no hint): the restarted pod alone, by its token', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added');
    w.restartContainer(pods[0]!);
    const mark = w.gateway.calls.length;
    await w.run('update', 'eip-a', 'resync');
    expect(execsSince(w, mark)).toEqual({ [pods[0]!.name]: 1 });
    expect(has(w, pods[0]!, '172.18.0.2')).toBe(true);
  });

  it('one pod failing, then healing: Ready=False PartiallyConfigured naming it, then Ready on the retry alone', async () => {
    const w = world();
    const pods = w.replicas(n);
    const bad = pods.at(-1)!;
    w.eip('eip-a');
    w.gateway.failNext(1, { pod: bad.name, op: 'eip-add', stderr: 'injected failure' });
    await expect(w.run('add', 'eip-a', 'added')).rejects.toThrow(/exit status 1/);
    // The others are configured and recorded; the failing one is named, with why.
    for (const p of pods.slice(0, -1)) expect(has(w, p, '172.18.0.2')).toBe(true);
    expect(has(w, bad, '172.18.0.2')).toBe(false);
    expect(Object.keys((await placed(w, 'eip-a'))?.pods ?? {}).sort()).toEqual(
      pods
        .slice(0, -1)
        .map((p) => p.uid)
        .sort(),
    );
    const e = w.get('eip-a')!;
    expect(e.status?.ready).toBe(false);
    expect(e.status?.ip).toBe('172.18.0.2');
    const ready = condition(w, 'eip-a', 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'PartiallyConfigured' });
    expect(ready?.message).toContain(`${bad.name}: command terminated with non-zero exit code`);
    expect(ready?.message).toContain(`on ${n - 1} of ${n} active pods`);
    expect(condition(w, 'eip-a', 'GatewayPods')).toMatchObject({
      status: 'False',
      reason: 'GatewayCommandFailed',
    });
    expect(condition(w, 'eip-a', 'GatewayPods')?.message).toContain(`on ${n - 1} of ${n} pods`);
    expect(w.cluster.events.some((x) => x.reason === 'PartiallyConfigured')).toBe(true);
    // The retry (Lambda's, the same event): the failing pod alone, no redo of the others.
    const mark = w.gateway.calls.length;
    expect(await w.run('add', 'eip-a', 'added')).toMatchObject({ status: 'applied' });
    expect(execsSince(w, mark)).toEqual({ [bad.name]: 1 });
    expect(has(w, bad, '172.18.0.2')).toBe(true);
    expect(w.get('eip-a')?.status?.ready).toBe(true);
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'True' });
    expect(condition(w, 'eip-a', 'GatewayPods')).toMatchObject({ status: 'True', reason: 'AllPods' });
    expect(Object.keys((await placed(w, 'eip-a'))?.pods ?? {})).toHaveLength(n);
  });

  it('a pod that refuses for good: the EIP is rejected with its code once the others carry it', async () => {
    const w = world();
    const pods = w.replicas(n);
    const bad = pods[0]!;
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added');
    w.restartContainer(bad);
    w.gateway.failNext(1, { pod: bad.name, op: 'eip-add', stderr: 'Error: Nexthop has invalid gateway.' });
    const outcome = await w.run('update', 'eip-a', 'gateway-restarted', { gateway: 'gw1', pod: bad.uid });
    expect(outcome).toMatchObject({ status: 'rejected', code: 'GatewayRefused' });
    expect(condition(w, 'eip-a', 'GatewayPods')).toMatchObject({ status: 'False', reason: 'GatewayRefused' });
    expect(condition(w, 'eip-a', 'Ready')?.message).toContain(`${bad.name}: gateway `);
    for (const p of pods.slice(1)) expect(has(w, p, '172.18.0.2')).toBe(true);
    expect((await placed(w, 'eip-a'))?.pods?.[bad.uid]).toBeUndefined();
  });

  it('scale up adds the address to the new pod only; scale down drops its entry at the next write, without an exec', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added');
    const added = w.addReplica();
    let mark = w.gateway.calls.length;
    await w.run('update', 'eip-a', 'gateway-restarted', { gateway: 'gw1', pod: added.uid });
    expect(execsSince(w, mark)).toEqual({ [added.name]: 1 });
    expect(has(w, added, '172.18.0.2')).toBe(true);
    expect(Object.keys((await placed(w, 'eip-a'))?.pods ?? {})).toHaveLength(n + 1);
    expect(condition(w, 'eip-a', 'GatewayPods')?.message).toContain(`on ${n + 1} of ${n + 1} pods`);
    for (const p of [...pods, added].slice(1)) w.deletePod(p);
    mark = w.gateway.calls.length;
    const places = w.cluster.writes.length;
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({ status: 'applied' });
    expect(execsSince(w, mark)).toEqual({});
    expect(Object.keys((await placed(w, 'eip-a'))?.pods ?? {})).toEqual([pods[0]!.uid]);
    // Back to one pod: no GatewayPods condition; the record stays (it is kept once it exists).
    expect(condition(w, 'eip-a', 'GatewayPods')).toBeUndefined();
    expect(w.cluster.writes.slice(places).map((x) => x.method)).toEqual(['patchEipStatus']);
  });

  it('a pod not running yet is named in GatewayPods, the EIP stays Ready on the active ones', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.setPod(pods[0]!, { phase: 'Pending', container: { restartCount: 0, ready: false } });
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a', 'added')).toMatchObject({ status: 'applied' });
    expect(execsSince(w, 0)[pods[0]!.name]).toBeUndefined();
    expect(condition(w, 'eip-a', 'Ready')?.status).toBe('True');
    expect(condition(w, 'eip-a', 'GatewayPods')).toMatchObject({
      status: 'False',
      reason: 'GatewayNotReady',
    });
    expect(condition(w, 'eip-a', 'GatewayPods')?.message).toContain(
      `${pods[0]!.name}: not running (Pending)`,
    );
    // It runs: the bridge routes its coming up; the address goes there only.
    w.setPod(pods[0]!, {
      phase: 'Running',
      container: { restartCount: 0, startedAt: new Date(w.clock.now()).toISOString(), ready: true },
    });
    const mark = w.gateway.calls.length;
    await w.run('update', 'eip-a', 'gateway-restarted', { gateway: 'gw1', pod: pods[0]!.uid });
    expect(execsSince(w, mark)).toEqual({ [pods[0]!.name]: 1 });
    expect(condition(w, 'eip-a', 'GatewayPods')?.status).toBe('True');
  });

  it('deletion with a pod gone mid-way (kubeovn/kube-ovn#7100): the others cleaned, nothing sticks', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.qos('q1', RULES);
    w.eip('eip-a', { qosPolicy: 'q1' });
    await w.run('add', 'eip-a', 'added');
    w.deletePod(pods[0]!);
    w.cluster.deleteEip('eip-a', new Date(w.clock.now()).toISOString());
    const mark = w.gateway.calls.length;
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(Object.keys(execsSince(w, mark)).sort()).toEqual(pods.slice(1).map((p) => p.name));
    for (const p of pods.slice(1)) {
      expect(has(w, p, '172.18.0.2')).toBe(false);
      expect(limits(w, p)).toEqual([]);
    }
    expect(w.get('eip-a')).toBeUndefined();
    expect(w.ipam.allocations.size).toBe(0);
    expect(await w.holds.findHolder('q1')).toBeUndefined();
  });

  it('deletion with every pod gone, terminating or restarted: finalizer removed at once, no exec', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added');
    w.setPod(pods[0]!, { terminating: true });
    w.restartContainer(pods[1]!);
    for (const p of pods.slice(2)) w.deletePod(p);
    w.cluster.deleteEip('eip-a', new Date(w.clock.now()).toISOString());
    const mark = w.gateway.calls.length;
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(execsSince(w, mark)).toEqual({});
    expect(w.get('eip-a')).toBeUndefined();
  });

  it('deletion with a pod failing: retried within the patience, then the address is left to the pod', async () => {
    const w = world();
    const pods = w.replicas(n);
    const bad = pods[0]!;
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added');
    w.cluster.deleteEip('eip-a', new Date(w.clock.now()).toISOString());
    w.gateway.failNext(100, { pod: bad.name, op: 'eip-del', stderr: 'injected failure' });
    await expect(w.run('update', 'eip-a', 'deletion-requested')).rejects.toThrow(/exit status 1/);
    // The others are clean already; the EIP waits, holding its address.
    for (const p of pods.slice(1)) expect(has(w, p, '172.18.0.2')).toBe(false);
    expect(w.get('eip-a')?.metadata.finalizers).toEqual([FINALIZER]);
    w.clock.advance(DELETE_PATIENCE_MS);
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.get('eip-a')).toBeUndefined();
    const [left] = [...w.ipam.allocations.values()];
    expect(left).toMatchObject({ address: '172.18.0.2', owner: { uid: podOwner(bad.uid) } });
    expect(left?.placement).toBeUndefined();
    const event = w.cluster.events.find((x) => x.reason === 'LeftOnGatewayPod');
    expect(event?.type).toBe('Warning');
    expect(event?.message).toContain(`172.18.0.2 is left on gateway pod kube-system/${bad.name}`);
    // Never handed out while that pod may carry it.
    w.eip('eip-b', { v4ip: '172.18.0.2' });
    expect(await w.run('add', 'eip-b', 'added')).toMatchObject({
      status: 'rejected',
      code: 'AddressConflict',
    });
  });

  it('deletion with a pod refusing: the address is left to it at once', async () => {
    const w = world();
    const pods = w.replicas(n);
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added');
    w.cluster.deleteEip('eip-a', new Date(w.clock.now()).toISOString());
    w.gateway.failNext(1, {
      pod: pods[1]!.name,
      op: 'eip-del',
      stderr: 'Error: Nexthop has invalid gateway.',
    });
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.get('eip-a')).toBeUndefined();
    expect([...w.ipam.allocations.values()].map((a) => a.owner.uid)).toEqual([podOwner(pods[1]!.uid)]);
  });
});

describe('a replicated gateway in a namespace of its own, under a custom name prefix', () => {
  it('is found by the prefix in that namespace; the placement records it; deletion looks there', async () => {
    const w = world();
    const pods = w.replicas(2, { namespace: 'gw-ns', prefix: 'custom-gw' });
    expect(pods.map((p) => p.name.startsWith('custom-gw-gw1-'))).toEqual([true, true]);
    w.qos('q1', RULES);
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a', 'added')).toMatchObject({ status: 'applied' });
    for (const p of pods) expect(has(w, p, '172.18.0.2')).toBe(true);
    expect((await placed(w, 'eip-a'))?.namespace).toBe('gw-ns');
    // A QoS change alone (no eip-add): each pod spoken to as a pod of gw1, whatever its app label says.
    w.cluster.editEipSpec('eip-a', { qosPolicy: 'q1' });
    expect(await w.run('update', 'eip-a', 'spec-changed')).toMatchObject({ status: 'applied' });
    for (const p of pods) expect(limits(w, p)).toEqual(['ingress 172.18.0.2 10Mbit 10Mb']);
    w.restartContainer(pods[1]!);
    const mark = w.gateway.calls.length;
    await w.run('update', 'eip-a', 'resync');
    expect(execsSince(w, mark)).toEqual({ [pods[1]!.name]: 2 }); // the address, then its QoS
    expect(limits(w, pods[1]!)).toEqual(['ingress 172.18.0.2 10Mbit 10Mb']);
    w.cluster.deleteEip('eip-a', new Date(w.clock.now()).toISOString());
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    for (const p of pods) expect(has(w, p, '172.18.0.2')).toBe(false);
    expect(w.get('eip-a')).toBeUndefined();
  });
});

describe('the single pod of a StatefulSet', () => {
  it("records no pods and no GatewayPods condition (today's writes: status.redo is its token)", async () => {
    const w = world();
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added');
    expect(await placed(w, 'eip-a')).toEqual({ gateway: 'gw1', prefix: 24, qos: '' });
    expect(condition(w, 'eip-a', 'GatewayPods')).toBeUndefined();
    w.restartContainer();
    await w.run('update', 'eip-a', 'gateway-restarted', { gateway: 'gw1' });
    expect(await placed(w, 'eip-a')).toEqual({ gateway: 'gw1', prefix: 24, qos: '' });
  });
});

describe('an EIP refused before replicated gateways were served', () => {
  it('is sent again (ReplicatedGateway stays a blocked code) and served: the old condition clears', async () => {
    const w = world();
    w.replicas(2);
    w.eip('eip-a');
    const since = new Date(w.clock.now() - 60_000).toISOString();
    const old = {
      status: 'False' as const,
      reason: 'ReplicatedGateway',
      message: 'owned by a ReplicaSet',
      lastTransitionTime: since,
    };
    w.cluster.putEipStatus('eip-a', {
      conditions: [
        { type: 'Ready', ...old },
        { type: 'Validated', ...old },
      ],
    });
    expect(blockedRetryAfter(w.get('eip-a'), w.clock.now())).toBe(20_000);
    expect(await w.run('update', 'eip-a', 'blocked-retry')).toMatchObject({ status: 'applied' });
    const reasons = (w.get('eip-a')?.status?.conditions ?? []).map((c) => c.reason);
    expect(reasons).not.toContain('ReplicatedGateway');
    expect(condition(w, 'eip-a', 'Ready')?.status).toBe('True');
    expect(blockedRetryAfter(w.get('eip-a'), w.clock.now())).toBeUndefined();
  });
});

describe('the delete safety net on a gateway of replicas', () => {
  it('an object force-deleted with a pod refusing: the other pod cleaned, the address left to the refusing one, with an Event', async () => {
    const w = world();
    const pods = w.replicas(2);
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added');
    const e = w.get('eip-a')!;
    const event = w.event('delete', 'eip-a', 'deleted', {
      old: { metadata: { name: 'eip-a', uid: e.metadata.uid }, spec: e.spec, status: e.status },
    });
    w.cluster.eips.delete('eip-a'); // finalizer removed by hand, then deleted
    w.gateway.failNext(1, {
      pod: pods[0]!.name,
      op: 'eip-del',
      stderr: 'Error: Nexthop has invalid gateway.',
    });
    expect(await w.runEvent(event)).toMatchObject({ status: 'applied' });
    expect(has(w, pods[1]!, '172.18.0.2')).toBe(false);
    expect([...w.ipam.allocations.values()].map((a) => a.owner.uid)).toEqual([podOwner(pods[0]!.uid)]);
    const left = w.cluster.events.find((x) => x.reason === 'LeftOnGatewayPod');
    expect(left).toMatchObject({ object: 'eip-a', uid: e.metadata.uid, type: 'Warning' });
  });
});
