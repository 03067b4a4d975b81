import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { startQosStandIn } from '../../local/controllers/qos.js';
import { Plural } from '../../shared/domain/kube-ovn.js';
import { eventuallyValue } from '../support/eventually.js';
import {
  createCustom,
  createGateway,
  createSubnets,
  EXTERNAL,
  g,
  gatewayPod,
  startWorld,
  type World,
} from './k8s-fixtures.js';

let w: World;
let standIns: StandIns;
const logs: string[] = [];

beforeAll(async () => {
  w = await startWorld({ kubeOvnRelease: '1.12' });
  standIns = await startStandIns({ kubeConfig: w.kc, log: (l) => logs.push(l), release: '1.12' });
  await createSubnets(w);
});

afterAll(async () => {
  await standIns?.stop();
  await w?.close();
});

const NS = 'kube-system';

describe('gateway stand-in', () => {
  it("creates the gateway pod as kube-ovn 1.12's StatefulSet template does, and the local API initialises it", async () => {
    await createGateway(w, 'gwa');
    const pod = await eventuallyValue(() => gatewayPod(w, 'gwa'));
    expect(pod.metadata?.labels).toMatchObject({
      app: 'vpc-nat-gw-gwa',
      'ovn.kubernetes.io/vpc-nat-gw': 'true',
    });
    expect(pod.metadata?.annotations).toMatchObject({
      'ovn.kubernetes.io/vpc_nat_gw': 'gwa',
      'k8s.v1.cni.cncf.io/networks': `${NS}/${EXTERNAL}`,
      'ovn.kubernetes.io/logical_switch': 'vpc1-subnet',
      'ovn.kubernetes.io/ip_address': '10.0.1.254',
      [`${EXTERNAL}.${NS}.kubernetes.io/cidr`]: '172.18.0.0/16',
    });
    // The lab's default release (1.12: its template wraps the init in bash -c; every release: the next file).
    expect(pod.spec?.initContainers?.map((c) => [c.name, c.command, c.args])).toEqual([
      ['vpc-nat-gw-init', ['bash'], ['-c', 'bash /kube-ovn/nat-gateway.sh init 10.96.0.0/12,10.0.1.1']],
    ]);
    expect(pod.spec?.containers.map((c) => [c.name, c.securityContext?.privileged])).toEqual([
      ['vpc-nat-gw', true],
    ]);
    const sim = await eventuallyValue(() => w.api.gateways.get(NS, 'vpc-nat-gw-gwa-0'));
    await eventuallyValue(() => sim.initialised);
    expect(sim.routes()).toContain('10.96.0.0/12 via 10.0.1.1 dev eth0');
  });

  it('gives each gateway pod the highest free non-excluded address of the external subnet as its net1', async () => {
    await createGateway(w, 'gwb');
    await createGateway(w, 'gwc');
    const addrs = await eventuallyValue(async () => {
      const pods = await Promise.all(['gwa', 'gwb', 'gwc'].map((n) => gatewayPod(w, n)));
      const a = pods.map((p) => p?.metadata?.annotations?.[`${EXTERNAL}.${NS}.kubernetes.io/ip_address`]);
      return a.every(Boolean) ? a : undefined;
    });
    // 172.18.255.248-255 are excluded; .247 downwards are handed out, one per pod.
    expect(new Set(addrs)).toEqual(new Set(['172.18.255.247', '172.18.255.246', '172.18.255.245']));
    const sim = await eventuallyValue(() => w.api.gateways.get(NS, 'vpc-nat-gw-gwb-0'));
    expect(sim.net1Addresses()).toHaveLength(1);
    expect(addrs).toContain(sim.net1Addresses()[0]?.replace('/16', ''));
  });

  it('replaces a deleted gateway pod with a new one (new uid, fresh gateway state), as a StatefulSet would', async () => {
    const before = await eventuallyValue(() => gatewayPod(w, 'gwa'));
    const oldSim = await eventuallyValue(() => w.api.gateways.get(NS, 'vpc-nat-gw-gwa-0'));
    await eventuallyValue(() => oldSim.initialised);
    expect(
      oldSim.exec(['bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.10/16,172.18.0.1']).exitCode,
    ).toBe(0);
    await w.core.deleteNamespacedPod({ name: 'vpc-nat-gw-gwa-0', namespace: NS });
    const after = await eventuallyValue(async () => {
      const p = await gatewayPod(w, 'gwa');
      return p && p.metadata?.uid !== before.metadata?.uid ? p : undefined;
    });
    expect(after.metadata?.name).toBe('vpc-nat-gw-gwa-0');
    const sim = await eventuallyValue(() => {
      const s = w.api.gateways.get(NS, 'vpc-nat-gw-gwa-0');
      return s !== oldSim && s?.initialised ? s : undefined;
    });
    expect(sim.net1Addresses()).not.toContain('172.18.0.10/16');
  });

  it('deletes the pod when its VpcNatGateway is deleted', async () => {
    await createGateway(w, 'gwd');
    await eventuallyValue(() => gatewayPod(w, 'gwd'));
    await w.custom.deleteClusterCustomObject({ ...g, plural: Plural.gateway, name: 'gwd' });
    await eventuallyValue(async () => (await gatewayPod(w, 'gwd')) === undefined);
  });

  it('uses spec.externalSubnets[0] as the external network, and waits for that subnet to exist', async () => {
    await createGateway(w, 'gwe', { externalSubnets: ['ext2'] });
    // The stand-in has looked at the gateway (it says what it waits for) and made no pod.
    await eventuallyValue(() => logs.some((l) => l.includes('waiting for external subnet ext2')));
    expect(await gatewayPod(w, 'gwe')).toBeUndefined();
    await createCustom(w, Plural.subnet, 'Subnet', 'ext2', {
      cidrBlock: '192.168.100.0/24',
      gateway: '192.168.100.1',
    });
    const pod = await eventuallyValue(() => gatewayPod(w, 'gwe'));
    expect(pod.metadata?.annotations).toMatchObject({
      'k8s.v1.cni.cncf.io/networks': `${NS}/ext2`,
      [`ext2.${NS}.kubernetes.io/ip_address`]: '192.168.100.254',
      [`ext2.${NS}.kubernetes.io/cidr`]: '192.168.100.0/24',
    });
  });

  it("rolls the pod when the gateway's LAN address changes", async () => {
    await createGateway(w, 'gwf');
    const first = await eventuallyValue(() => gatewayPod(w, 'gwf'));
    await w.custom.patchClusterCustomObject({
      ...g,
      plural: Plural.gateway,
      name: 'gwf',
      body: [{ op: 'replace', path: '/spec/lanIp', value: '10.0.1.253' }],
    });
    const next = await eventuallyValue(async () => {
      const p = await gatewayPod(w, 'gwf');
      return p && p.metadata?.uid !== first.metadata?.uid ? p : undefined;
    });
    expect(next.metadata?.annotations?.['ovn.kubernetes.io/ip_address']).toBe('10.0.1.253');
  });

  it('restarts an informer whose re-watch fails with a server error', async () => {
    await createGateway(w, 'gwh');
    const first = await eventuallyValue(() => gatewayPod(w, 'gwh'));
    const fault = w.api.faults.apiError({ verb: 'watch', resource: 'pods', code: 500 });
    w.api.faults.dropWatches();
    await eventuallyValue(() => fault.hits === 1);
    await w.core.deleteNamespacedPod({ name: 'vpc-nat-gw-gwh-0', namespace: NS });
    await eventuallyValue(async () => {
      const p = await gatewayPod(w, 'gwh');
      return p && p.metadata?.uid !== first.metadata?.uid;
    });
    expect(logs.some((l) => l.includes('gateway pods informer: watch failed'))).toBe(true);
  });

  it('keeps working after its watches are dropped and the watch history is compacted', async () => {
    await createGateway(w, 'gwg');
    const first = await eventuallyValue(() => gatewayPod(w, 'gwg'));
    w.api.faults.compact();
    w.api.faults.dropWatches();
    await w.core.deleteNamespacedPod({ name: 'vpc-nat-gw-gwg-0', namespace: NS });
    await eventuallyValue(async () => {
      const p = await gatewayPod(w, 'gwg');
      return p && p.metadata?.uid !== first.metadata?.uid;
    });
  });
});

describe('QoS stand-in', () => {
  const status = async (name: string): Promise<Record<string, unknown> | undefined> =>
    (
      (await w.custom.getClusterCustomObject({ ...g, plural: Plural.qos, name })) as {
        status?: Record<string, unknown>;
      }
    ).status;

  it('copies the spec into the status with the rules sorted by name', async () => {
    const rules = [
      { name: 'zeta', direction: 'egress', rateMax: '10', burstMax: '10', priority: 1 },
      { name: 'alpha', direction: 'ingress', rateMax: '5.5', burstMax: '5', priority: 2 },
    ];
    await createCustom(w, Plural.qos, 'QoSPolicy', 'q-sorted', {
      shared: true,
      bindingType: 'EIP',
      bandwidthLimitRules: rules,
    });
    const s = await eventuallyValue(() => status('q-sorted'));
    expect(s).toEqual({ shared: true, bindingType: 'EIP', bandwidthLimitRules: [rules[1], rules[0]] });
  });

  it('follows a change to the rules', async () => {
    await createCustom(w, Plural.qos, 'QoSPolicy', 'q-change', {
      shared: false,
      bindingType: 'EIP',
      bandwidthLimitRules: [{ name: 'r1', direction: 'ingress', rateMax: '1', burstMax: '1', priority: 1 }],
    });
    await eventuallyValue(() => status('q-change'));
    await w.custom.patchClusterCustomObject({
      ...g,
      plural: Plural.qos,
      name: 'q-change',
      body: [{ op: 'replace', path: '/spec/bandwidthLimitRules/0/rateMax', value: '7' }],
    });
    await eventuallyValue(async () => {
      const rules = (await status('q-change'))?.bandwidthLimitRules as Array<{ rateMax: string }>;
      return rules[0]?.rateMax === '7';
    });
  });

  it('starts while the API fails its first lists, retrying until one succeeds', async () => {
    const fault = w.api.faults.apiError({ verb: 'list', resource: Plural.qos, code: 503, times: 2 });
    const lines: string[] = [];
    const second = await startQosStandIn({ kubeConfig: w.kc, log: (l) => lines.push(l) });
    await second.stop();
    expect(fault.hits).toBe(2);
    expect(lines.filter((l) => l.includes('qos-policies informer: list/watch failed'))).toHaveLength(2);
  });

  it('refuses an unshared policy with the NATGW binding type, as kube-ovn does', async () => {
    await createCustom(w, Plural.qos, 'QoSPolicy', 'q-natgw', { shared: false, bindingType: 'NATGW' });
    await createCustom(w, Plural.qos, 'QoSPolicy', 'q-after', { shared: true, bindingType: 'EIP' });
    await eventuallyValue(() => status('q-after'));
    expect(await status('q-natgw')).toBeUndefined();
    expect(logs.some((l) => l.includes('q-natgw'))).toBe(true);
  });
});

describe("gateway stand-in with kube-ovn's feature switch (the local stack's setting)", () => {
  let fw: World;
  let fs: StandIns;
  const lines: string[] = [];
  const cm = (name: string, data: Record<string, string>) =>
    fw.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name }, data } });
  const setEnable = (value: string) =>
    fw.core.patchNamespacedConfigMap(
      { namespace: NS, name: 'ovn-vpc-nat-gw-config', body: { data: { 'enable-vpc-nat-gw': value } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );

  beforeAll(async () => {
    fw = await startWorld({ kubeOvnRelease: '1.12' });
    fs = await startStandIns({
      kubeConfig: fw.kc,
      log: (l) => lines.push(l),
      featureSwitch: true,
      release: '1.12',
    });
    await createSubnets(fw);
  });

  afterAll(async () => {
    await fs?.stop();
    await fw?.close();
  });

  it('creates no gateway pod while ovn-vpc-nat-gw-config is missing, and one once both ConfigMaps switch it on', async () => {
    await createGateway(fw, 'fa');
    await eventuallyValue(() =>
      lines.some((l) => l.includes('feature is off: configMap "ovn-vpc-nat-gw-config" not configured')),
    );
    expect(await gatewayPod(fw, 'fa')).toBeUndefined();
    await cm('ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'true' });
    // Enabled but no image yet: kube-ovn's state stays as it was, so still no pod.
    await eventuallyValue(() => lines.some((l) => l.includes('configmaps "ovn-vpc-nat-config" not found')));
    expect(await gatewayPod(fw, 'fa')).toBeUndefined();
    await cm('ovn-vpc-nat-config', { image: 'docker.io/kubeovn/vpc-nat-gateway:v1.12.4' });
    const pod = await eventuallyValue(() => gatewayPod(fw, 'fa'));
    expect(pod.metadata?.labels?.app).toBe('vpc-nat-gw-fa');
  });

  it('removes every gateway pod when enable-vpc-nat-gw is "false", and re-creates them, freshly initialised, when it is "true" again', async () => {
    await createGateway(fw, 'fb');
    const before = await eventuallyValue(() => gatewayPod(fw, 'fb'));
    const oldSim = await eventuallyValue(() => fw.api.gateways.get(NS, 'vpc-nat-gw-fb-0'));
    await eventuallyValue(() => oldSim.initialised);
    expect(
      oldSim.exec(['bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.20/16,172.18.0.1']).exitCode,
    ).toBe(0);
    await setEnable('false');
    await eventuallyValue(async () => !(await gatewayPod(fw, 'fa')) && !(await gatewayPod(fw, 'fb')));
    expect(fw.api.gateways.get(NS, 'vpc-nat-gw-fb-0')).toBeUndefined();
    // A gateway created while the feature is off gets no pod either.
    await createGateway(fw, 'fc');
    await eventuallyValue(() =>
      lines.some((l) => l.includes('feature is off: parameter "enable-vpc-nat-gw"')),
    );
    expect(await gatewayPod(fw, 'fc')).toBeUndefined();

    await setEnable('true');
    const pods = await eventuallyValue(async () => {
      const all = await Promise.all(['fa', 'fb', 'fc'].map((n) => gatewayPod(fw, n)));
      return all.every(Boolean) ? all : undefined;
    });
    expect(pods[1]?.metadata?.uid).not.toBe(before.metadata?.uid);
    const sim = await eventuallyValue(() => fw.api.gateways.get(NS, 'vpc-nat-gw-fb-0'));
    await eventuallyValue(() => sim.initialised);
    expect(sim.net1Addresses()).not.toContain('172.18.0.20/16');
  });
});

describe("model of kube-ovn's own IptablesEIP controller", () => {
  let mw: World;
  let ms: StandIns;
  let model: { stop(): Promise<void> } | undefined;
  const lines: string[] = [];
  type Eip = {
    metadata: {
      finalizers?: string[];
      labels?: Record<string, string>;
      managedFields?: { manager: string; subresource?: string }[];
    };
    spec: { v4ip?: string; macAddress?: string };
    status?: { ready?: boolean; ip?: string; redo?: string };
  };
  const getEip = async (name: string): Promise<Eip | undefined> => {
    try {
      return (await mw.custom.getClusterCustomObject({ ...g, plural: Plural.eip, name })) as Eip;
    } catch (e) {
      if ((e as { code?: number }).code === 404) return undefined;
      throw e;
    }
  };

  beforeAll(async () => {
    mw = await startWorld({ kubeOvnRelease: '1.12' });
    ms = await startStandIns({
      kubeConfig: mw.kc,
      log: (l) => lines.push(l),
      featureSwitch: true,
      release: '1.12',
    });
    await createSubnets(mw);
    for (const [name, data] of [
      ['ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'true' }],
      ['ovn-vpc-nat-config', { image: 'docker.io/kubeovn/vpc-nat-gateway:v1.12.4' }],
    ] as const)
      await mw.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name }, data } });
    await createGateway(mw, 'gw1');
    const sim = await eventuallyValue(() => mw.api.gateways.get(NS, 'vpc-nat-gw-gw1-0'));
    await eventuallyValue(() => sim.initialised);
  });

  afterAll(async () => {
    await model?.stop();
    await ms?.stop();
    await mw?.close();
  });

  // How the model was checked against the real thing: each step below is a line of kube-ovn v1.12.35's
  // pkg/controller (handleAddIptablesEip → createOrUpdateCrdEip, handleUpdateIptablesEip's deletion branch,
  // handleUpdateVpcEip, pkg/ipam/subnet.go), read from the tag; test/e2e/coexistence.test.ts runs it per release.
  it('unfenced, 1.12: lowest free address, eip-add in its shell form, spec, status, labels and its finalizer as kube-ovn-controller; a released address waits', async () => {
    const { startKubeOvnEipModel } = await import('../../local/controllers/kube-ovn-eip.js');
    const m = await startKubeOvnEipModel({
      kubeConfig: mw.kc,
      namespace: NS,
      release: '1.12',
      log: (l) => lines.push(l),
    });
    model = m;
    await createCustom(mw, Plural.eip, 'IptablesEIP', 'ko-1', { natGwDp: 'gw1' });
    const e = await eventuallyValue(async () => {
      const x = await getEip('ko-1');
      return x?.status?.ready && x.metadata.finalizers?.length ? x : undefined;
    });
    expect(e.status?.ip).toBe('172.18.0.2');
    expect(e.spec.v4ip).toBe('172.18.0.2');
    expect(e.spec.macAddress).toMatch(/^00:00:00(:[0-9a-f]{2}){3}$/);
    expect(e.metadata.finalizers).toEqual(['kube-ovn-controller']);
    expect(e.metadata.labels).toMatchObject({
      'ovn.kubernetes.io/subnet': EXTERNAL,
      'ovn.kubernetes.io/vpc-nat-gw-name': 'gw1',
      'ovn.kubernetes.io/eip_v4_ip': '172.18.0.2',
    });
    const writers = e.metadata.managedFields?.map((x) => `${x.manager}/${x.subresource ?? ''}`) ?? [];
    expect(writers).toEqual(expect.arrayContaining(['kube-ovn-controller/', 'kube-ovn-controller/status']));
    const sim = mw.api.gateways.get(NS, 'vpc-nat-gw-gw1-0');
    expect(sim?.net1Addresses()).toContain('172.18.0.2/16');
    // 1.12 sends `/bin/bash -c "bash /kube-ovn/nat-gateway.sh eip-add <ip>/<len>,<gw>"` (counted once as sent).
    expect(
      m
        .requests()
        .filter((r) => r.object === 'ko-1')
        .map((r) => `${r.kind}:${r.outcome}`),
    ).toEqual(
      expect.arrayContaining(['exec eip-add:ok', 'spec:ok', 'status:ok', 'labels:ok', 'finalizers:ok']),
    );

    await createCustom(mw, Plural.eip, 'IptablesEIP', 'ko-2', { natGwDp: 'gw1' });
    const second = await eventuallyValue(async () => {
      const x = await getEip('ko-2');
      return x?.status?.ready ? x : undefined;
    });
    expect(second.status?.ip).toBe('172.18.0.3');

    await mw.custom.deleteClusterCustomObject({ ...g, plural: Plural.eip, name: 'ko-1' });
    await eventuallyValue(async () => (await getEip('ko-1')) === undefined);
    expect(sim?.net1Addresses()).not.toContain('172.18.0.2/16');
    // kube-ovn's IPAM puts a released address on its released list, handed out only once the free pool is empty.
    await createCustom(mw, Plural.eip, 'IptablesEIP', 'ko-3', { natGwDp: 'gw1' });
    const third = await eventuallyValue(async () => {
      const x = await getEip('ko-3');
      return x?.status?.ready ? x : undefined;
    });
    expect(third.status?.ip).toBe('172.18.0.4');
    expect(m.ipam()[EXTERNAL]?.map((a) => a.address)).not.toContain('172.18.0.2');
    await m.stop();
    model = undefined;
  });

  it('a re-created gateway pod: ready=false and the pod creation time as redo on its EIPs, then the redo branch puts the address back', async () => {
    const { startKubeOvnEipModel, redoToken } = await import('../../local/controllers/kube-ovn-eip.js');
    model = await startKubeOvnEipModel({
      kubeConfig: mw.kc,
      namespace: NS,
      release: '1.12',
      log: (l) => lines.push(l),
    });
    const configured = await eventuallyValue(async () => {
      const x = await getEip('ko-3');
      return x?.status?.ready ? x : undefined;
    });
    const before = await eventuallyValue(() => gatewayPod(mw, 'gw1'));
    await mw.core.deleteNamespacedPod({ namespace: NS, name: 'vpc-nat-gw-gw1-0' });
    const after = await eventuallyValue(async () => {
      const p = await gatewayPod(mw, 'gw1');
      return p && p.metadata?.uid !== before.metadata?.uid && p.status?.phase === 'Running' ? p : undefined;
    });
    const token = redoToken(after.metadata?.creationTimestamp);
    const e = await eventuallyValue(
      async () => {
        const x = await getEip('ko-3');
        return x?.status?.redo === token && x.status.ready ? x : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(e.status?.ip).toBe(configured.status?.ip);
    const sim = await eventuallyValue(() => mw.api.gateways.get(NS, 'vpc-nat-gw-gw1-0'));
    expect(sim.net1Addresses()).toContain(`${configured.status?.ip}/16`);
  });
});
