/**
 * The contract every Cluster adapter keeps: the in-memory fake (local/memory/cluster.ts, run by
 * test/unit/cluster-contract.test.ts) and the client-node adapter against the local Kubernetes API
 * (test/integration/k8s-cluster-contract.test.ts) run these same tests. A subject seeds objects the way a user or
 * kube-ovn would (through the API for the real adapter, through the store for the fake); the tests then observe them
 * only through the port.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ConflictError, InvalidSpecError } from '../../shared/domain/errors.js';
import { FINALIZER, type IptablesEip, type NatRule } from '../../shared/domain/kube-ovn.js';
import type { Cluster, GatewayPod } from '../../shared/ports.js';

export interface ClusterSubject {
  cluster: Cluster;
  createEip(
    name: string,
    spec: IptablesEip['spec'],
    metadata?: { labels?: Record<string, string>; finalizers?: string[] },
  ): Promise<IptablesEip>;
  /** Asks for deletion, as `kubectl delete` does: finalizers hold the object, terminating. */
  deleteEip(name: string): Promise<void>;
  createRule(
    kind: NatRule['kind'],
    name: string,
    eip: string,
    options?: { terminating?: boolean },
  ): Promise<void>;
  createQos(name: string, shared: boolean): Promise<void>;
  /**
   * A VpcNatGateway; kube-ovn (master) then keeps its pods: `spec.replicas` of them (a Deployment's when above 1),
   * in `spec.namespace`, named with the current name prefix.
   */
  createGateway(name: string, spec?: { replicas?: number; namespace?: string }): Promise<void>;
  createNamespace(name: string): Promise<void>;
  /** The gateway's pod once Running with its container ready (kube-ovn's StatefulSet makes it). */
  gatewayPod(gw: string): Promise<GatewayPod>;
  setNatGw(enabled: boolean): Promise<void>;
  /** Sets (or, with undefined, removes) `natGwNamePrefix` in ovn-vpc-nat-config, keeping its other keys. */
  setNamePrefix(prefix: string | undefined): Promise<void>;
  /**
   * Deletes pod `pod` of the gateway while something holds it (a finalizer): it stays, terminating, and its
   * workload makes a replacement. Resolves with a function that lets it go.
   */
  holdAndDelete(namespace: string, pod: string): Promise<() => Promise<void>>;
}

/** Polls `read` until `ok` holds (the subjects' pods come and go asynchronously on a real cluster). */
async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string): Promise<T> {
  const started = Date.now();
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() - started > 20_000) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const running = (pods: GatewayPod[], n: number) =>
  pods.length === n && pods.every((p) => p.phase === 'Running' && !p.terminating);

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

export function describeClusterContract(name: string, make: () => Promise<ClusterSubject>): void {
  describe(`Cluster contract: ${name}`, () => {
    let s: ClusterSubject;
    let c: Cluster;
    beforeAll(async () => {
      s = await make();
      c = s.cluster;
    }, 60_000);

    it('getEip reads what was created (uid, resourceVersion, spec) and undefined for a missing name', async () => {
      const created = await s.createEip('ct-get', { natGwDp: 'gw1', v4ip: '172.18.0.9' });
      const got = await c.getEip('ct-get');
      expect(got?.spec).toEqual({ natGwDp: 'gw1', v4ip: '172.18.0.9' });
      expect(got?.metadata.uid).toBe(created.metadata.uid);
      expect(got?.metadata.resourceVersion).toBe(created.metadata.resourceVersion);
      expect(await c.getEip('ct-missing')).toBeUndefined();
      expect((await c.listEips()).map((e) => e.metadata.name)).toContain('ct-get');
    });

    it('updateEip writes spec, labels and finalizers guarded by the resourceVersion; null removes a label', async () => {
      const e = await s.createEip('ct-upd', { natGwDp: 'gw1' }, { labels: { keep: 'me', drop: 'me' } });
      const after = await c.updateEip('ct-upd', e.metadata.resourceVersion, {
        spec: { v4ip: '172.18.0.20' },
        labels: { drop: null, add: 'yes' },
        finalizers: [FINALIZER],
      });
      expect(after?.spec).toEqual({ natGwDp: 'gw1', v4ip: '172.18.0.20' });
      expect(after?.metadata.labels).toEqual({ keep: 'me', add: 'yes' });
      expect(after?.metadata.finalizers).toEqual([FINALIZER]);
      expect(after?.metadata.resourceVersion).not.toBe(e.metadata.resourceVersion);
      expect(after?.metadata.generation).toBeGreaterThan(e.metadata.generation ?? 0);
      expect(await c.getEip('ct-upd')).toMatchObject({
        spec: after?.spec,
        metadata: { labels: after?.metadata.labels },
      });
    });

    it('updateEip with a stale resourceVersion is a ConflictError and changes nothing', async () => {
      const e = await s.createEip('ct-stale', { natGwDp: 'gw1' });
      await c.updateEip('ct-stale', e.metadata.resourceVersion, { labels: { first: 'write' } });
      const err = await rejection(
        c.updateEip('ct-stale', e.metadata.resourceVersion, { labels: { second: 'write' } }),
      );
      expect(err).toBeInstanceOf(ConflictError);
      expect((await c.getEip('ct-stale'))?.metadata.labels).toEqual({ first: 'write' });
    });

    it('updateEip of a missing EIP returns undefined', async () => {
      expect(await c.updateEip('ct-nobody', '1', { labels: { a: 'b' } })).toBeUndefined();
    });

    it('patchEipStatus merges only the given fields, bumps the resourceVersion, not the generation', async () => {
      const e = await s.createEip('ct-status', { natGwDp: 'gw1' });
      await c.patchEipStatus('ct-status', { ready: true, ip: '172.18.0.30', nat: '' });
      const after = await c.patchEipStatus('ct-status', { redo: '2026-11-29T10:00:00' });
      expect(after?.status).toMatchObject({ ready: true, ip: '172.18.0.30', redo: '2026-11-29T10:00:00' });
      expect(after?.metadata.resourceVersion).not.toBe(e.metadata.resourceVersion);
      expect(after?.metadata.generation).toBe(e.metadata.generation);
      expect(await c.patchEipStatus('ct-nobody', { ready: false })).toBeUndefined();
    });

    it('a terminating EIP stays until its last finalizer is removed, then is gone; no finalizer can be added to it', async () => {
      await s.createEip('ct-fin', { natGwDp: 'gw1' }, { finalizers: [FINALIZER] });
      await s.deleteEip('ct-fin');
      const terminating = await c.getEip('ct-fin');
      expect(terminating?.metadata.deletionTimestamp).toBeTruthy();
      const err = await rejection(
        c.updateEip('ct-fin', terminating!.metadata.resourceVersion, {
          finalizers: [FINALIZER, 'example.com/more'],
        }),
      );
      expect(err).toBeInstanceOf(Error);
      const again = await c.getEip('ct-fin');
      expect(again?.metadata.finalizers).toEqual([FINALIZER]);
      const removed = await c.updateEip('ct-fin', again!.metadata.resourceVersion, { finalizers: [] });
      expect(
        removed === undefined ||
          removed.metadata.finalizers === undefined ||
          removed.metadata.finalizers.length === 0,
      ).toBe(true);
      expect(await c.getEip('ct-fin')).toBeUndefined();
    });

    it('listEipsByLabel selects by label', async () => {
      await s.createEip('ct-l1', { natGwDp: 'gw1' }, { labels: { 'ovn.kubernetes.io/qos': 'ct-q' } });
      await s.createEip('ct-l2', { natGwDp: 'gw1' }, { labels: { 'ovn.kubernetes.io/qos': 'ct-other' } });
      expect((await c.listEipsByLabel('ovn.kubernetes.io/qos', 'ct-q')).map((e) => e.metadata.name)).toEqual([
        'ct-l1',
      ]);
      expect(await c.listEipsByLabel('ovn.kubernetes.io/qos', 'ct-none')).toEqual([]);
    });

    it('listNatRulesForEip: the rules naming the EIP, in dnat, fip, snat order, without terminating ones', async () => {
      await s.createRule('IptablesSnatRule', 'ct-snat', 'ct-nat');
      await s.createRule('IptablesFIPRule', 'ct-fip', 'ct-nat');
      await s.createRule('IptablesDnatRule', 'ct-dnat', 'ct-nat');
      await s.createRule('IptablesFIPRule', 'ct-fip-other', 'ct-elsewhere');
      await s.createRule('IptablesFIPRule', 'ct-fip-going', 'ct-nat', { terminating: true });
      expect(await c.listNatRulesForEip('ct-nat')).toEqual([
        { kind: 'dnat', name: 'ct-dnat' },
        { kind: 'fip', name: 'ct-fip' },
        { kind: 'snat', name: 'ct-snat' },
      ]);
      expect(await c.listNatRulesForEip('ct-nothing')).toEqual([]);
    });

    it('getQosPolicy, getSubnet and getVpcNatGateway read their kinds; undefined for a missing name', async () => {
      await s.createQos('ct-qos', true);
      await s.createGateway('ct-gw');
      expect((await c.getQosPolicy('ct-qos'))?.spec.shared).toBe(true);
      expect((await c.getVpcNatGateway('ct-gw'))?.metadata.name).toBe('ct-gw');
      expect((await c.getSubnet('ovn-vpc-external-network'))?.spec.cidrBlock).toMatch(/^172\.18\./);
      expect(await c.getQosPolicy('ct-none')).toBeUndefined();
      expect(await c.getSubnet('ct-none')).toBeUndefined();
      expect(await c.getVpcNatGateway('ct-none')).toBeUndefined();
    });

    it("findGatewayPod finds a gateway's pod by its labels; listGatewayPods lists it; undefined for a gateway without one", async () => {
      const pod = await s.gatewayPod('gw1');
      expect(pod).toMatchObject({ namespace: 'kube-system', phase: 'Running', app: 'vpc-nat-gw-gw1' });
      expect(pod.uid).toBeTruthy();
      expect(pod.container?.startedAt).toBeTruthy();
      expect((await c.findGatewayPod('gw1'))?.uid).toBe(pod.uid);
      expect((await c.listGatewayPods()).map((p) => p.uid)).toContain(pod.uid);
      expect(await c.findGatewayPod('ct-no-such-gw')).toBeUndefined();
    });

    it("findGatewayPods: every pod of a replicated gateway, by name, and no other gateway's", async () => {
      await s.createGateway('ct-ha', { replicas: 3 });
      await s.createGateway('ct-ha-b', { replicas: 2 });
      const pods = await until(
        () => c.findGatewayPods({ name: 'ct-ha' }),
        (p) => running(p, 3),
        'three pods of ct-ha',
      );
      expect(pods.map((p) => [p.namespace, p.app, p.template?.ownerKind])).toEqual(
        Array(3).fill(['kube-system', 'vpc-nat-gw-ct-ha', 'ReplicaSet']),
      );
      for (const p of pods)
        expect(p.name).toMatch(/^vpc-nat-gw-ct-ha-[4-9bcdf]+-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
      expect(new Set(pods.map((p) => p.uid)).size).toBe(3);
      expect(pods.map((p) => p.name)).toEqual(pods.map((p) => p.name).sort());
      const b = await until(
        () => c.findGatewayPods({ name: 'ct-ha-b' }),
        (p) => running(p, 2),
        'ct-ha-b',
      );
      expect(b.every((p) => p.app === 'vpc-nat-gw-ct-ha-b')).toBe(true);
      expect((await c.findGatewayPods({ name: 'gw1' })).map((p) => p.name)).toEqual(['vpc-nat-gw-gw1-0']);
      expect(await c.findGatewayPods({ name: 'ct-no-such-gw' })).toEqual([]);
    });

    it("findGatewayPods looks in the namespace it is given (the gateway's spec.namespace), else the adapter's", async () => {
      await s.createNamespace('ct-team');
      await s.createGateway('ct-ns', { namespace: 'ct-team', replicas: 2 });
      await s.createGateway('ct-ns1', { namespace: 'ct-team' });
      const pods = await until(
        () => c.findGatewayPods({ name: 'ct-ns', namespace: 'ct-team' }),
        (p) => running(p, 2),
        'two pods of ct-ns in ct-team',
      );
      expect(pods.map((p) => p.namespace)).toEqual(['ct-team', 'ct-team']);
      const one = await until(
        () => c.findGatewayPods({ name: 'ct-ns1', namespace: 'ct-team' }),
        (p) => running(p, 1),
        'the pod of ct-ns1 in ct-team',
      );
      expect(one.map((p) => [p.namespace, p.name])).toEqual([['ct-team', 'vpc-nat-gw-ct-ns1-0']]);
      // listGatewayPods covers every namespace a gateway names, not the adapter's alone (ADR 0121).
      const listed = await until(
        () => c.listGatewayPods(),
        (l) => l.filter((p) => p.namespace === 'ct-team').length >= 3,
        'the three ct-team pods in listGatewayPods',
      );
      expect(
        listed
          .filter((p) => p.namespace === 'ct-team')
          .map((p) => p.name)
          .sort(),
      ).toEqual([...pods.map((p) => p.name), 'vpc-nat-gw-ct-ns1-0'].sort());
      expect(await c.findGatewayPods({ name: 'ct-ns' })).toEqual([]);
      const err = await rejection(c.findGatewayPods({ name: 'ct-ns', namespace: 'Team_A' }));
      expect(err).toBeInstanceOf(InvalidSpecError);
    });

    it('findGatewayPods lists a terminating pod, marked, beside the replacement its workload made', async () => {
      await s.createGateway('ct-term', { replicas: 2 });
      const [first, second] = await until(
        () => c.findGatewayPods({ name: 'ct-term' }),
        (p) => running(p, 2),
        'two pods of ct-term',
      );
      const release = await s.holdAndDelete(first!.namespace, first!.name);
      const pods = await until(
        () => c.findGatewayPods({ name: 'ct-term' }),
        (p) => p.length === 3 && p.filter((x) => !x.terminating && x.phase === 'Running').length === 2,
        'ct-term: one terminating, two running',
      );
      expect(pods.filter((p) => p.terminating).map((p) => p.uid)).toEqual([first!.uid]);
      expect(pods.map((p) => p.uid)).toContain(second!.uid);
      expect(pods.every((p) => p.terminating === true || p.terminating === undefined)).toBe(true);
      await release();
      await until(
        () => c.findGatewayPods({ name: 'ct-term' }),
        (p) => running(p, 2),
        'ct-term back to two',
      );
    });

    it('findGatewayPods finds the pods by the name prefix ovn-vpc-nat-config names (natGwNamePrefix)', async () => {
      await s.setNamePrefix('ct-edge');
      try {
        await s.createGateway('ct-pre', { replicas: 2 });
        await s.createGateway('ct-pre1');
        const pods = await until(
          () => c.findGatewayPods({ name: 'ct-pre' }),
          (p) => running(p, 2),
          'two pods of ct-pre named ct-edge-…',
        );
        for (const p of pods)
          expect([p.app, p.name.startsWith('ct-edge-ct-pre-')]).toEqual(['ct-edge-ct-pre', true]);
        const one = await until(
          () => c.findGatewayPods({ name: 'ct-pre1' }),
          (p) => running(p, 1),
          'the pod of ct-pre1',
        );
        expect(one.map((p) => p.name)).toEqual(['ct-edge-ct-pre1-0']);
        // A prefix the caller already read is taken as given, the ConfigMap not read again: the default one finds
        // none of these pods, the same one finds them.
        expect(await c.findGatewayPods({ name: 'ct-pre1', prefix: 'vpc-nat-gw' })).toEqual([]);
        expect((await c.findGatewayPods({ name: 'ct-pre1', prefix: 'ct-edge' })).map((p) => p.name)).toEqual([
          'ct-edge-ct-pre1-0',
        ]);
      } finally {
        await s.setNamePrefix(undefined);
      }
      // Without the key, the default prefix again: these pods are no longer the gateway's as kube-ovn finds them.
      const back = await c.findGatewayPods({ name: 'ct-pre1' });
      expect(back.every((p) => p.app === 'vpc-nat-gw-ct-pre1')).toBe(true);
    });

    it('natGwFeature follows the two ConfigMaps', async () => {
      await s.setNatGw(false);
      const off = await c.natGwFeature();
      expect(off.enabled).toBe(false);
      expect(off.reason).toBeTruthy();
      await s.setNatGw(true);
      expect((await c.natGwFeature()).enabled).toBe(true);
    });

    it('emitEvent is best effort: it resolves', async () => {
      const e = await s.createEip('ct-event', { natGwDp: 'gw1' });
      await expect(
        c.emitEvent(e, { type: 'Warning', reason: 'Test', message: 'a contract test' }),
      ).resolves.toBeUndefined();
    });
  });
}
