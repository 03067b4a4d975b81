import { Exec, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { kubeConfigFromFile } from '../../local/kubeconfig.js';
import { gatewayImage } from '../../local/natgw/releases.js';
import { createK8sCluster } from '../../shared/adapters/k8s/index.js';
import { KubeHttpError } from '../../shared/adapters/k8s/rest.js';
import { IPAM_HOME_ANNOTATION } from '../../shared/domain/addressing.js';
import {
  ClusterUnavailableError,
  ConflictError,
  GatewayNotReadyError,
  InvalidSpecError,
} from '../../shared/domain/errors.js';
import { FINALIZER, type IptablesEip, Label, Plural } from '../../shared/domain/kube-ovn.js';
import type { Cluster } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';
import { eventuallyValue } from '../support/eventually.js';
import { createCustom, createGateway, createSubnets, g, startWorld, type World } from './k8s-fixtures.js';

let w: World;
let cluster: Cluster;
let standIns: StandIns;
const warnings: string[] = [];

beforeAll(async () => {
  w = await startWorld({ kubeOvnRelease: '1.12' });
  cluster = createK8sCluster({
    kubeConfig: w.kc,
    namespace: 'kube-system',
    log: { warn: (m) => warnings.push(m) },
  });
  standIns = await startStandIns({ kubeConfig: w.kc, release: '1.12' });
  await createSubnets(w);
});

afterAll(async () => {
  await standIns?.stop();
  await w?.close();
});

const eip = (name: string, spec: Record<string, unknown> = { natGwDp: 'gw1' }, metadata = {}) =>
  createCustom(w, Plural.eip, 'IptablesEIP', name, spec, metadata);

const read = async (name: string): Promise<IptablesEip> =>
  (await w.custom.getClusterCustomObject({ ...g, plural: Plural.eip, name })) as IptablesEip;

/** Runs `fn` and returns what it threw. */
async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

const lastRequest = (method: string, pathPart: string) =>
  w.api.requests
    .all()
    .filter((r) => r.method === method && r.path.includes(pathPart))
    .at(-1);

describe('reads', () => {
  it('getEip returns the object, and undefined when it does not exist', async () => {
    await eip('r-get', { natGwDp: 'gw1', v4ip: '172.18.0.9' });
    const got = await cluster.getEip('r-get');
    expect(got?.spec).toEqual({ natGwDp: 'gw1', v4ip: '172.18.0.9' });
    expect(got?.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(await cluster.getEip('r-missing')).toBeUndefined();
  });

  it('getQosPolicy, getSubnet and getVpcNatGateway read their kinds and return undefined for a missing name', async () => {
    await createCustom(w, Plural.qos, 'QoSPolicy', 'r-qos', { shared: true, bindingType: 'EIP' });
    await createGateway(w, 'r-gw');
    expect((await cluster.getQosPolicy('r-qos'))?.spec.shared).toBe(true);
    expect((await cluster.getSubnet('vpc1-subnet'))?.spec.cidrBlock).toBe('10.0.1.0/24');
    expect((await cluster.getVpcNatGateway('r-gw'))?.spec.lanIp).toBe('10.0.1.254');
    expect(await cluster.getQosPolicy('nope')).toBeUndefined();
    expect(await cluster.getSubnet('nope')).toBeUndefined();
    expect(await cluster.getVpcNatGateway('nope')).toBeUndefined();
  });

  it('listEipsByLabel selects by label and returns nothing for a value no label can have', async () => {
    await eip('r-l1', { natGwDp: 'gw1' }, { labels: { [Label.qos]: 'shared-q' } });
    await eip('r-l2', { natGwDp: 'gw1' }, { labels: { [Label.qos]: 'other-q' } });
    const found = await cluster.listEipsByLabel(Label.qos, 'shared-q');
    expect(found.map((e) => e.metadata.name)).toEqual(['r-l1']);
    expect(lastRequest('GET', '/iptables-eips')?.query).toContain(
      'labelSelector=ovn.kubernetes.io%2Fqos%3Dshared-q',
    );
    expect(await cluster.listEipsByLabel(Label.qos, 'no,such value')).toEqual([]);
  });

  it('listNatRulesForEip finds the rules whose spec.eip names the EIP, in dnat, fip, snat order, without terminating ones', async () => {
    await createCustom(w, Plural.fip, 'IptablesFIPRule', 'r-fip', { eip: 'r-nat', internalIp: '10.0.1.5' });
    await createCustom(w, Plural.snat, 'IptablesSnatRule', 'r-snat', {
      eip: 'r-nat',
      internalCIDR: '10.0.1.0/24',
    });
    await createCustom(w, Plural.dnat, 'IptablesDnatRule', 'r-dnat', {
      eip: 'r-nat',
      externalPort: '80',
      protocol: 'tcp',
      internalIp: '10.0.1.6',
      internalPort: '8080',
    });
    await createCustom(w, Plural.fip, 'IptablesFIPRule', 'r-fip-other', {
      eip: 'r-other',
      internalIp: '10.0.1.7',
    });
    await createCustom(
      w,
      Plural.fip,
      'IptablesFIPRule',
      'r-fip-going',
      { eip: 'r-nat', internalIp: '10.0.1.8' },
      { finalizers: ['example.com/hold'] },
    );
    await w.custom.deleteClusterCustomObject({ ...g, plural: Plural.fip, name: 'r-fip-going' });
    expect(await cluster.listNatRulesForEip('r-nat')).toEqual([
      { kind: 'dnat', name: 'r-dnat' },
      { kind: 'fip', name: 'r-fip' },
      { kind: 'snat', name: 'r-snat' },
    ]);
    expect(await cluster.listNatRulesForEip('r-none')).toEqual([]);
  });
});

describe('findGatewayPod', () => {
  it("maps the gateway pod: phase, creation time and the vpc-nat-gw container's state", async () => {
    await createGateway(w, 'p-gw');
    const pod = await eventuallyValue(async () => {
      const p = await cluster.findGatewayPod('p-gw');
      return p?.phase === 'Running' && p.container?.ready ? p : undefined;
    });
    expect(pod).toMatchObject({ namespace: 'kube-system', name: 'vpc-nat-gw-p-gw-0', phase: 'Running' });
    expect(pod.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(pod.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(pod.container).toMatchObject({ restartCount: 0, ready: true });
    expect(pod.container?.startedAt).toMatch(/Z$/);
    // What the dialect is chosen from: the stand-in builds the pod as kube-ovn 1.12's StatefulSet does.
    expect(pod.template).toMatchObject({ image: gatewayImage('1.12'), env: {}, initRunsScript: true });
  });

  it("sees the container restart count go up after the gateway's PID 1 is killed", async () => {
    const before = await eventuallyValue(() => cluster.findGatewayPod('p-gw'));
    await new Promise<void>((resolve) => {
      void new Exec(w.kc).exec(
        before.namespace,
        before.name,
        'vpc-nat-gw',
        ['kill', '1'],
        process.stdout,
        process.stderr,
        null,
        false,
        () => resolve(),
      );
    });
    const after = await eventuallyValue(async () => {
      const p = await cluster.findGatewayPod('p-gw');
      return p?.container?.restartCount === 1 && p.container.ready ? p : undefined;
    });
    expect(after.uid).toBe(before.uid);
  });

  it('returns undefined when the gateway has no pod', async () => {
    expect(await cluster.findGatewayPod('p-none')).toBeUndefined();
  });

  it("throws GatewayNotReadyError when more than one pod carries the gateway's labels", async () => {
    await createGateway(w, 'p-two');
    await eventuallyValue(() => cluster.findGatewayPod('p-two'));
    await w.core.createNamespacedPod({
      namespace: 'kube-system',
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p-two-impostor', labels: { app: 'vpc-nat-gw-p-two', [Label.vpcNatGw]: 'true' } },
        spec: { containers: [{ name: 'vpc-nat-gw', image: 'x' }] },
      },
    });
    const e = await thrown(() => cluster.findGatewayPod('p-two'));
    expect(e).toBeInstanceOf(GatewayNotReadyError);
    expect((e as Error).message).toContain('too many pods for vpc nat gateway p-two');
  });
});

describe('natGwFeature', () => {
  const setCm = async (name: string, data: Record<string, string> | undefined): Promise<void> => {
    await w.core.deleteNamespacedConfigMap({ name, namespace: 'kube-system' }).catch(() => undefined);
    if (data)
      await w.core.createNamespacedConfigMap({
        namespace: 'kube-system',
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data },
      });
  };

  it("follows kube-ovn's rules and words for the two ConfigMaps", async () => {
    await setCm('ovn-vpc-nat-gw-config', undefined);
    await setCm('ovn-vpc-nat-config', undefined);
    expect(await cluster.natGwFeature()).toEqual({
      enabled: false,
      reason: 'configMap "ovn-vpc-nat-gw-config" not configured',
    });
    await setCm('ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'false' });
    expect(await cluster.natGwFeature()).toEqual({
      enabled: false,
      reason: 'parameter "enable-vpc-nat-gw" in ConfigMap "ovn-vpc-nat-gw-config" not true',
    });
    await setCm('ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'true' });
    expect(await cluster.natGwFeature()).toEqual({
      enabled: false,
      reason: 'failed to get ovn-vpc-nat-config, configmaps "ovn-vpc-nat-config" not found',
    });
    await setCm('ovn-vpc-nat-config', { other: 'x' });
    expect(await cluster.natGwFeature()).toEqual({
      enabled: false,
      reason: 'ovn-vpc-nat-config should have image field',
    });
    await setCm('ovn-vpc-nat-config', { image: 'kubeovn/vpc-nat-gateway:v1.12.4' });
    expect(await cluster.natGwFeature()).toEqual({ enabled: true });
    // Only an explicit "false" turns it off, as in kube-ovn's resyncVpcNatGwConfig.
    await setCm('ovn-vpc-nat-gw-config', {});
    expect(await cluster.natGwFeature()).toEqual({ enabled: true });
  });

  it('with a read cache, reuses the ConfigMaps, Subnets and gateways it read until the cache age passes', async () => {
    // The cache's age is measured on a test clock: how long the requests take (a loaded machine) does not count.
    const clock = new ManualClock(Date.now());
    const cachedCluster = createK8sCluster({
      kubeConfig: w.kc,
      namespace: 'kube-system',
      cacheTtlMs: 300,
      clock,
    });
    const sent = () =>
      w.api.requests.all().filter((r) => r.headers['user-agent'] === 'eip-lambdas' && r.method === 'GET')
        .length;
    await setCm('ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'true' });
    await setCm('ovn-vpc-nat-config', { image: 'kubeovn/vpc-nat-gateway:v1.12.4' });
    const before = sent();
    expect(await cachedCluster.natGwFeature()).toEqual({ enabled: true });
    await cachedCluster.getSubnet('ovn-vpc-external-network');
    await cachedCluster.getVpcNatGateway('gw1');
    expect(sent() - before).toBe(4);
    await setCm('ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'false' });
    // Within the cache age: no request, the old answer.
    expect(await cachedCluster.natGwFeature()).toEqual({ enabled: true });
    await cachedCluster.getSubnet('ovn-vpc-external-network');
    await cachedCluster.getVpcNatGateway('gw1');
    expect(sent() - before).toBe(4);
    // After it: read again, the new answer; the uncached adapter always reads.
    clock.advance(299);
    expect(await cachedCluster.natGwFeature()).toEqual({ enabled: true });
    expect(sent() - before).toBe(4);
    clock.advance(1);
    expect((await cachedCluster.natGwFeature()).enabled).toBe(false);
    expect(sent() - before).toBe(6);
    await cluster.natGwFeature();
    await cluster.natGwFeature();
    expect(sent() - before).toBe(10);
    await setCm('ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'true' });
  });
});

describe('updateEip', () => {
  it('writes spec, labels (creating the map) and finalizers in one merge patch preconditioned on the resourceVersion', async () => {
    await eip('u-basic');
    const got = (await cluster.getEip('u-basic'))!;
    const updated = await cluster.updateEip('u-basic', got.metadata.resourceVersion, {
      spec: { v4ip: '172.18.0.20', macAddress: '00:00:00:AA:BB:CC' },
      labels: {
        [Label.subnet]: 'ovn-vpc-external-network',
        [Label.eipV4Ip]: '172.18.0.20',
        [Label.qos]: null,
      },
      finalizers: [FINALIZER],
    });
    expect(updated?.spec).toEqual({ natGwDp: 'gw1', v4ip: '172.18.0.20', macAddress: '00:00:00:AA:BB:CC' });
    const stored = await read('u-basic');
    expect(stored.metadata.labels).toEqual({
      [Label.subnet]: 'ovn-vpc-external-network',
      [Label.eipV4Ip]: '172.18.0.20',
    });
    expect(stored.metadata.finalizers).toEqual([FINALIZER]);
    expect(stored.metadata.resourceVersion).toBe(updated?.metadata.resourceVersion);
    const req = lastRequest('PATCH', '/iptables-eips/u-basic');
    expect(req?.headers?.['content-type']).toContain('application/merge-patch+json');
    expect(JSON.parse(String(req?.body)).metadata.resourceVersion).toBe(got.metadata.resourceVersion);
  });

  it('sets and removes single labels (null removes a key) and keeps the others', async () => {
    await eip('u-labels', { natGwDp: 'gw1' }, { labels: { keep: 'me', [Label.qos]: 'q1' } });
    const got = (await cluster.getEip('u-labels'))!;
    await cluster.updateEip('u-labels', got.metadata.resourceVersion, {
      labels: { [Label.qos]: null, [Label.natGwName]: 'gw1' },
    });
    expect((await read('u-labels')).metadata.labels).toEqual({ keep: 'me', [Label.natGwName]: 'gw1' });
    const sent = JSON.parse(String(lastRequest('PATCH', '/iptables-eips/u-labels')?.body));
    expect(sent.metadata.labels).toEqual({ [Label.qos]: null, [Label.natGwName]: 'gw1' });
  });

  it('sets and removes annotations the same way (the ipam-home record of ADR 0043), with the finalizer in one write', async () => {
    await eip('u-notes', { natGwDp: 'gw1' }, { annotations: { keep: 'me' } });
    const got = (await cluster.getEip('u-notes'))!;
    const set = await cluster.updateEip('u-notes', got.metadata.resourceVersion, {
      finalizers: [FINALIZER],
      annotations: { [IPAM_HOME_ANNOTATION]: '10.40.1.64' },
    });
    expect(set?.metadata.annotations).toEqual({ keep: 'me', [IPAM_HOME_ANNOTATION]: '10.40.1.64' });
    expect(set?.metadata.finalizers).toEqual([FINALIZER]);
    const sent = JSON.parse(String(lastRequest('PATCH', '/iptables-eips/u-notes')?.body));
    expect(sent.metadata).toMatchObject({
      finalizers: [FINALIZER],
      annotations: { [IPAM_HOME_ANNOTATION]: '10.40.1.64' },
    });
    await cluster.updateEip('u-notes', set!.metadata.resourceVersion, {
      spec: { v4ip: '10.40.1.70' },
      annotations: { [IPAM_HOME_ANNOTATION]: null },
    });
    const after = await read('u-notes');
    expect(after.metadata.annotations).toEqual({ keep: 'me' });
    expect(after.spec.v4ip).toBe('10.40.1.70');
  });

  it('throws ConflictError when the object changed after it was read (the API server refuses the stale resourceVersion)', async () => {
    await eip('u-stale');
    const got = (await cluster.getEip('u-stale'))!;
    await w.custom.patchClusterCustomObject({
      ...g,
      plural: Plural.eip,
      name: 'u-stale',
      body: [{ op: 'add', path: '/spec/qosPolicy', value: 'someone-else' }],
    });
    const e = await thrown(() =>
      cluster.updateEip('u-stale', got.metadata.resourceVersion, { finalizers: [FINALIZER] }),
    );
    expect(e).toBeInstanceOf(ConflictError);
    expect((await read('u-stale')).metadata.finalizers).toBeUndefined();
  });

  it('throws ConflictError and writes nothing for a resourceVersion it never read, in one request', async () => {
    await eip('u-stale2');
    const fresh = createK8sCluster({ kubeConfig: w.kc, namespace: 'kube-system' });
    const before = (await read('u-stale2')).metadata.resourceVersion;
    const e = await thrown(() => fresh.updateEip('u-stale2', '1', { finalizers: [FINALIZER] }));
    expect(e).toBeInstanceOf(ConflictError);
    const after = await read('u-stale2');
    expect(after.metadata.resourceVersion).toBe(before);
    expect(after.metadata.finalizers).toBeUndefined();
  });

  it('returns undefined for an object that does not exist', async () => {
    expect(await cluster.updateEip('u-missing', '5', { finalizers: [FINALIZER] })).toBeUndefined();
  });

  it('lets a terminating object go when its last finalizer is removed', async () => {
    await eip('u-going', { natGwDp: 'gw1' }, { finalizers: [FINALIZER] });
    await w.custom.deleteClusterCustomObject({ ...g, plural: Plural.eip, name: 'u-going' });
    const got = (await cluster.getEip('u-going'))!;
    expect(got.metadata.deletionTimestamp).toBeDefined();
    await cluster.updateEip('u-going', got.metadata.resourceVersion, { finalizers: [] });
    expect(await cluster.getEip('u-going')).toBeUndefined();
  });

  it("maps the API's refusal to add a finalizer to a terminating object to InvalidSpecError", async () => {
    await eip('u-term', { natGwDp: 'gw1' }, { finalizers: ['example.com/hold'] });
    await w.custom.deleteClusterCustomObject({ ...g, plural: Plural.eip, name: 'u-term' });
    const got = (await cluster.getEip('u-term'))!;
    const e = await thrown(() =>
      cluster.updateEip('u-term', got.metadata.resourceVersion, {
        finalizers: ['example.com/hold', FINALIZER],
      }),
    );
    expect(e).toBeInstanceOf(InvalidSpecError);
    expect((e as Error).message).toContain('no new finalizers can be added if the object is being deleted');
  });

  it('changes nothing (no new resourceVersion) when the change is already in place', async () => {
    await eip('u-noop', { natGwDp: 'gw1' }, { labels: { a: 'b' } });
    const got = (await cluster.getEip('u-noop'))!;
    const same = await cluster.updateEip('u-noop', got.metadata.resourceVersion, {
      spec: { v4ip: undefined },
      labels: { a: 'b', gone: null },
    });
    expect(same?.metadata.resourceVersion).toBe(got.metadata.resourceVersion);
    expect(same?.metadata.labels).toEqual({ a: 'b' });
    const empty = await cluster.updateEip('u-noop', got.metadata.resourceVersion, {
      spec: { v4ip: undefined },
    });
    expect(empty?.metadata.resourceVersion).toBe(got.metadata.resourceVersion);
    expect(lastRequest('PATCH', '/iptables-eips/u-noop')?.body).not.toContain('v4ip');
  });
});

describe('patchEipStatus', () => {
  it('merge-patches /status with only the given fields and keeps the others', async () => {
    await eip('s-basic');
    await cluster.patchEipStatus('s-basic', { ip: '172.18.0.30', ready: true, redo: '2026-01-01T00:00:00' });
    const updated = await cluster.patchEipStatus('s-basic', { ready: false });
    expect(updated?.status).toEqual({ ip: '172.18.0.30', ready: false, redo: '2026-01-01T00:00:00' });
    const req = lastRequest('PATCH', '/iptables-eips/s-basic/status');
    expect(req?.headers?.['content-type']).toContain('application/merge-patch+json');
    expect(JSON.parse(String(req?.body))).toEqual({ status: { ready: false } });
  });

  it('replaces the conditions list as a whole', async () => {
    await eip('s-cond');
    const c = (type: string) => ({ type, status: 'False' as const, reason: 'R', message: 'm' });
    await cluster.patchEipStatus('s-cond', { conditions: [c('A'), c('B')] });
    await cluster.patchEipStatus('s-cond', { conditions: [c('C')] });
    expect((await read('s-cond')).status?.conditions?.map((x) => x.type)).toEqual(['C']);
  });

  it('returns undefined for an object that does not exist', async () => {
    expect(await cluster.patchEipStatus('s-missing', { ready: true })).toBeUndefined();
  });
});

describe('emitEvent', () => {
  it('records a core/v1 Event about the EIP in the default namespace', async () => {
    await eip('ev-1');
    const e = (await cluster.getEip('ev-1'))!;
    await cluster.emitEvent(e, { type: 'Warning', reason: 'InvalidSpec', message: 'bad v4ip' });
    const events = await w.core.listNamespacedEvent({ namespace: 'default' });
    const mine = events.items.find((x) => x.involvedObject.name === 'ev-1');
    expect(mine).toMatchObject({
      type: 'Warning',
      reason: 'InvalidSpec',
      message: 'bad v4ip',
      reportingComponent: 'eip-lambdas',
      involvedObject: { kind: 'IptablesEIP', apiVersion: 'kubeovn.io/v1', name: 'ev-1', uid: e.metadata.uid },
    });
  });

  it('swallows and logs a failure to record the Event', async () => {
    await eip('ev-2');
    const e = (await cluster.getEip('ev-2'))!;
    warnings.length = 0;
    w.api.faults.apiError({ verb: 'create', resource: 'events', code: 500 });
    await expect(
      cluster.emitEvent(e, { type: 'Normal', reason: 'R', message: 'm' }),
    ).resolves.toBeUndefined();
    expect(warnings).toContain('event not recorded');
  });
});

describe('API failures', () => {
  it('turns 500, 503 and 429 into ClusterUnavailableError with the status and the HTTP error as cause', async () => {
    for (const code of [500, 503, 429]) {
      w.api.faults.apiError({ verb: 'get', resource: Plural.eip, name: 'f-any', code });
      const e = await thrown(() => cluster.getEip('f-any'));
      expect(e).toBeInstanceOf(ClusterUnavailableError);
      expect((e as ClusterUnavailableError).status).toBe(code);
      expect((e as Error).cause).toBeInstanceOf(KubeHttpError);
    }
  });

  it('turns a 409 on a status patch into ClusterUnavailableError and on updateEip into ConflictError', async () => {
    await eip('f-409');
    w.api.faults.apiError({ verb: 'patch', resource: `${Plural.eip}/status`, code: 409 });
    const s = await thrown(() => cluster.patchEipStatus('f-409', { ready: true }));
    expect(s).toBeInstanceOf(ClusterUnavailableError);
    expect((s as ClusterUnavailableError).status).toBe(409);
    const got = (await cluster.getEip('f-409'))!;
    w.api.faults.apiError({ verb: 'patch', resource: Plural.eip, code: 409 });
    expect(
      await thrown(() =>
        cluster.updateEip('f-409', got.metadata.resourceVersion, { finalizers: [FINALIZER] }),
      ),
    ).toBeInstanceOf(ConflictError);
  });

  it('turns failures of lists, pod lookups and ConfigMap reads into ClusterUnavailableError', async () => {
    w.api.faults.apiError({ verb: 'list', resource: Plural.snat, code: 500 });
    expect(await thrown(() => cluster.listNatRulesForEip('x'))).toBeInstanceOf(ClusterUnavailableError);
    w.api.faults.apiError({ verb: 'list', resource: 'pods', code: 503 });
    expect(await thrown(() => cluster.findGatewayPod('x'))).toBeInstanceOf(ClusterUnavailableError);
    w.api.faults.apiError({ verb: 'get', resource: 'configmaps', code: 403 });
    const e = await thrown(() => cluster.natGwFeature());
    expect(e).toBeInstanceOf(ClusterUnavailableError);
    expect((e as ClusterUnavailableError).status).toBe(403);
  });

  it('turns an unreachable API server into ClusterUnavailableError without a status', async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const e = await thrown(() =>
      createK8sCluster({ kubeConfig: kc, namespace: 'kube-system' }).getEip('any'),
    );
    expect(e).toBeInstanceOf(ClusterUnavailableError);
    expect((e as ClusterUnavailableError).status).toBeUndefined();
    expect((e as Error).message).toContain('ECONNREFUSED');
  });
});

describe('helpers', () => {
  it('kubeConfigFromFile reads the file KUBECONFIG names and explains a missing one', async () => {
    const { mkdtemp, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = await mkdtemp(join(tmpdir(), 'kc-'));
    const file = join(dir, 'config');
    await writeFile(file, w.api.kubeconfigYaml());
    expect(kubeConfigFromFile(undefined, { KUBECONFIG: file }).getCurrentCluster()?.server).toBe(
      w.api.tlsUrl,
    );
    expect(() => kubeConfigFromFile(undefined, {})).toThrow(/set KUBECONFIG/);
    expect(() => kubeConfigFromFile(join(dir, 'nope'))).toThrow(/does not exist/);
  });
});
