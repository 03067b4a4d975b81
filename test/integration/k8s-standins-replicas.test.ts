/**
 * kube-ovn master's replicated gateways, as the gateway stand-in plays them (local/controllers/gateway-workloads.ts,
 * read from kube-ovn master's pkg/controller/vpc_nat_gateway.go at commit 1533681d: genNatGwDeployment,
 * handleAddOrUpdateVpcNatGw, natGwNamespace; pkg/controller/vpc_nat.go: natGwNamePrefix): `spec.replicas > 1` makes a
 * Deployment whose pods carry its ReplicaSet's names, labels and ownerReference and a required pod anti-affinity;
 * scaling creates and deletes pods; each pod has its own gateway (the simulator here) that can be deleted, restarted or
 * made to fail on its own; `spec.namespace` places the pods; `natGwNamePrefix` names them; releases before master
 * ignore both fields. Seen from outside as a user sees it, through kubectl (`kubectl get pods -n … -l …`); waits poll
 * with client-node. The Deployment and ReplicaSet controllers' naming and ranking are Kubernetes' (k8s.io/kubernetes
 * pkg/controller/deployment and replicaset, apimachinery's rand.SafeEncodeString), the pod-template-hash's value is
 * the lab's own (README). With EIP_NETNS=1 (root, EIP_KUBE_OVN_SCRIPTS) the replicas also run kube-ovn master's own
 * nat-gateway.sh, each in its own network namespaces (local/netns/).
 */
import { resolve } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { startKubeApi } from '../../local/kube-api/index.js';
import { kubectl } from '../../local/kube-api/testing.js';
import { gatewayImage, type KubeOvnRelease } from '../../local/natgw/releases.js';
import { type NetnsBackend, startNetnsBackend } from '../../local/netns/backend.js';
import { preflight } from '../../local/netns/host.js';
import { Plural } from '../../shared/domain/kube-ovn.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { createGateway, createSubnets, EXTERNAL, g, startWorld, type World } from './k8s-fixtures.js';

const { skip } = kubectlOrSkip();
const NS = 'kube-system';
const HASH = '[4-9bcdf]{1,10}';
const SUFFIX = '[bcdfghjklmnpqrstvwxz2456789]{5}';
const NET1 = `${EXTERNAL}.${NS}.kubernetes.io/ip_address`;

interface Lab {
  w: World;
  standIns: StandIns;
  logs: string[];
}

async function startLab(
  release: KubeOvnRelease,
  natConfig: Record<string, string> = {},
  world?: World,
): Promise<Lab> {
  const w = world ?? (await startWorld({ kubeOvnRelease: release }));
  const logs: string[] = [];
  for (const [name, data] of [
    ['ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'true' }],
    ['ovn-vpc-nat-config', { image: gatewayImage(release), ...natConfig }],
  ] as const)
    await w.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name }, data } });
  const standIns = await startStandIns({
    kubeConfig: w.kc,
    release,
    featureSwitch: true,
    log: (l) => logs.push(l),
  });
  await createSubnets(w);
  return { w, standIns, logs };
}

/** The pods a user sees with `kubectl get pods -n <ns> -l <selector> -o json`, by name. */
async function kubectlPods(w: World, namespace: string, selector: string): Promise<V1Pod[]> {
  const r = await kubectl(w.api, 'get', 'pods', '-n', namespace, '-l', selector, '-o', 'json');
  expect(r.code, r.stderr).toBe(0);
  const items = (JSON.parse(r.stdout) as { items: V1Pod[] }).items;
  return items.sort((a, b) => (a.metadata!.name! < b.metadata!.name! ? -1 : 1));
}

const initialised = (p: V1Pod): boolean =>
  p.status?.phase === 'Running' &&
  !p.metadata?.deletionTimestamp &&
  p.metadata?.annotations?.['ovn.kubernetes.io/vpc_nat_gw_init'] === 'true';

/** Waits (client-node) until exactly `n` pods match, every one Running and initialised; returns them by name. */
async function settledPods(w: World, namespace: string, selector: string, n: number): Promise<V1Pod[]> {
  return eventuallyValue(
    async () => {
      const items = (await w.core.listNamespacedPod({ namespace, labelSelector: selector })).items;
      if (items.length !== n || !items.every(initialised)) return undefined;
      return items.sort((a, b) => (a.metadata!.name! < b.metadata!.name! ? -1 : 1));
    },
    { timeoutMs: 20_000, what: `${n} initialised pods -n ${namespace} -l ${selector}` },
  );
}

const names = (pods: readonly V1Pod[]): string[] => pods.map((p) => p.metadata?.name ?? '');
const selectorOf = (app: string) => `app=${app},ovn.kubernetes.io/vpc-nat-gw=true`;

async function patchGateway(w: World, name: string, spec: Record<string, unknown>): Promise<void> {
  const r = await kubectl(
    w.api,
    'patch',
    'vpc-nat-gateway',
    name,
    '--type',
    'merge',
    '-p',
    JSON.stringify({ spec }),
  );
  expect(r.code, r.stderr).toBe(0);
}

async function execIn(w: World, namespace: string, pod: string, ...argv: string[]) {
  return kubectl(w.api, 'exec', '-n', namespace, pod, '-c', 'vpc-nat-gw', '--', ...argv);
}

describe.skipIf(skip)('replicated gateways on kube-ovn master', () => {
  let lab: Lab;
  beforeAll(async () => {
    lab = await startLab('master');
  }, 30_000);
  afterAll(async () => {
    await lab?.standIns.stop();
    await lab?.w.close();
  });

  it.each([2, 3])(
    'spec.replicas %i: a Deployment’s pods, named, labelled and owned as its ReplicaSet makes them, each with its own addresses and gateway',
    async (n) => {
      const { w } = lab;
      await createGateway(w, `ha${n}`, { replicas: n, lanIp: '' });
      const app = `vpc-nat-gw-ha${n}`;
      await settledPods(w, NS, selectorOf(app), n);
      const pods = await kubectlPods(w, NS, selectorOf(app));
      expect(pods).toHaveLength(n);
      const hash = pods[0]?.metadata?.labels?.['pod-template-hash'] ?? '';
      expect(hash).toMatch(new RegExp(`^${HASH}$`));
      const rs = `${app}-${hash}`;
      const rsUid = pods[0]?.metadata?.ownerReferences?.[0]?.uid;
      for (const p of pods) {
        expect(p.metadata?.name).toMatch(new RegExp(`^${rs}-${SUFFIX}$`));
        expect(p.metadata?.labels).toEqual({
          app,
          'ovn.kubernetes.io/vpc-nat-gw': 'true',
          'pod-template-hash': hash,
        });
        expect(p.metadata?.ownerReferences).toEqual([
          {
            apiVersion: 'apps/v1',
            kind: 'ReplicaSet',
            name: rs,
            uid: rsUid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ]);
        expect(p.spec?.affinity).toEqual({
          podAntiAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [
              {
                labelSelector: { matchLabels: { app, 'ovn.kubernetes.io/vpc-nat-gw': 'true' } },
                topologyKey: 'kubernetes.io/hostname',
              },
            ],
          },
        });
        expect(p.spec?.containers.map((c) => [c.name, c.image])).toEqual([
          ['vpc-nat-gw', gatewayImage('master')],
        ]);
      }
      // kube-ovn's IPAM gives each replica its own LAN and net1 addresses (the template has no static LAN address).
      const lanIps = pods.map((p) => p.metadata?.annotations?.['ovn.kubernetes.io/ip_address']);
      const net1s = pods.map((p) => p.metadata?.annotations?.[NET1]);
      expect(new Set(lanIps).size).toBe(n);
      expect(new Set(net1s).size).toBe(n);
      for (const a of lanIps) expect(a).toMatch(/^10\.0\.1\.\d+$/);
      // Each replica is its own gateway: an address added in one is in no other.
      const [first, ...others] = names(pods);
      expect(
        (await execIn(w, NS, first!, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.50/16')).code,
      ).toBe(0);
      expect((await execIn(w, NS, first!, 'ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).toContain(
        '172.18.0.50/16',
      );
      for (const o of others) {
        const addr = await execIn(w, NS, o, 'ip', '-o', 'addr', 'show', 'dev', 'net1');
        expect(addr.stdout).not.toContain('172.18.0.50/16');
        expect(addr.stdout).toContain(
          `inet ${pods.find((p) => p.metadata?.name === o)?.metadata?.annotations?.[NET1]}/16`,
        );
      }
    },
  );

  it('scaling 2 → 3 → 2 adds a replica and deletes the newest; back to 1, master makes a StatefulSet beside the Deployment', async () => {
    const { w, logs } = lab;
    await createGateway(w, 'sc', { replicas: 2 });
    const sel = selectorOf('vpc-nat-gw-sc');
    const two = names(await settledPods(w, NS, sel, 2));
    await patchGateway(w, 'sc', { replicas: 3 });
    const three = await settledPods(w, NS, sel, 3);
    expect(names(three)).toEqual(expect.arrayContaining(two));
    await patchGateway(w, 'sc', { replicas: 2 });
    // Every replica ready and of the same template: the ReplicaSet deletes the newest (creation times are in whole
    // seconds: one of the newest second).
    const left = names(await settledPods(w, NS, sel, 2));
    const gone = three.find((p) => !left.includes(p.metadata!.name!))!;
    const created = (p: V1Pod) => new Date(String(p.metadata?.creationTimestamp)).getTime();
    for (const p of three) expect(created(gone)).toBeGreaterThanOrEqual(created(p));
    expect(logs).toContain(`gateway stand-in: deleting pod ${NS}/${gone.metadata?.name} (scaled down to 2)`);
    // handleAddOrUpdateVpcNatGw with replicas 1 creates the StatefulSet and leaves the Deployment as it is: both
    // workloads' pods carry the gateway's labels, and kube-ovn's getNatGwPods lists all three.
    await patchGateway(w, 'sc', { replicas: 1 });
    const all = await settledPods(w, NS, sel, 3);
    expect(names(all)).toEqual([...left, 'vpc-nat-gw-sc-0'].sort());
    const sts = (await kubectlPods(w, NS, sel)).find((p) => p.metadata?.name === 'vpc-nat-gw-sc-0');
    expect(sts?.metadata?.ownerReferences?.map((o) => [o.kind, o.name])).toEqual([
      ['StatefulSet', 'vpc-nat-gw-sc'],
    ]);
    expect(sts?.metadata?.labels?.['statefulset.kubernetes.io/pod-name']).toBe('vpc-nat-gw-sc-0');
    expect(sts?.metadata?.annotations?.['ovn.kubernetes.io/ip_address']).toBe('10.0.1.254');
    expect(sts?.spec?.affinity).toBeUndefined();
    // Deleting the VpcNatGateway takes every workload it owns, and their pods.
    await w.custom.deleteClusterCustomObject({ ...g, plural: Plural.gateway, name: 'sc' });
    await eventuallyValue(
      async () => (await w.core.listNamespacedPod({ namespace: NS, labelSelector: sel })).items.length === 0,
    );
  });

  it('one replica deleted, restarted (kill 1) or failing on its own: the others are untouched', async () => {
    const { w } = lab;
    await createGateway(w, 'per', { replicas: 2, lanIp: '' });
    const sel = selectorOf('vpc-nat-gw-per');
    const [a, b] = await settledPods(w, NS, sel, 2);
    const [an, bn] = [a!.metadata!.name!, b!.metadata!.name!];
    for (const p of [an, bn])
      expect(
        (await execIn(w, NS, p, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.60/16')).code,
      ).toBe(0);

    // Restart: only that pod's container restarts and loses its state.
    expect((await execIn(w, NS, an, 'kill', '1')).code).toBe(137);
    const restarted = await eventuallyValue(async () => {
      const p = await w.core.readNamespacedPod({ namespace: NS, name: an });
      const cs = p.status?.containerStatuses?.[0];
      return cs?.state?.running && (cs.restartCount ?? 0) === 1 ? p : undefined;
    });
    expect(restarted.metadata?.uid).toBe(a!.metadata?.uid);
    await eventuallyValue(async () =>
      (await execIn(w, NS, an, 'iptables-save', '-t', 'nat')).stdout.includes('SHARED_SNAT'),
    );
    expect((await execIn(w, NS, an, 'ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).not.toContain(
      '172.18.0.60/16',
    );
    const other = await w.core.readNamespacedPod({ namespace: NS, name: bn });
    expect(other.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    expect((await execIn(w, NS, bn, 'ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).toContain(
      '172.18.0.60/16',
    );

    // Failure: the lab's exec fault hook (local/kube-api/faults.ts) aims at one pod by name.
    const fault = w.api.faults.failExec({
      pod: bn,
      command: 'eip-add',
      times: Number.POSITIVE_INFINITY,
      exitCode: 1,
      stderr: 'failed to exec command "ip addr replace"\n',
    });
    const failed = await execIn(w, NS, bn, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.61/16');
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('failed to exec command "ip addr replace"\n');
    expect(
      (await execIn(w, NS, an, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.61/16')).code,
    ).toBe(0);
    expect(fault.hits).toBe(1);
    fault.cancel();

    // Deletion: the ReplicaSet replaces that replica under a new name; the other keeps its uid and its gateway.
    const del = await kubectl(w.api, 'delete', 'pod', '-n', NS, an);
    expect(del.code, del.stderr).toBe(0);
    const after = await settledPods(w, NS, sel, 2);
    const fresh = after.find((p) => p.metadata?.name !== bn)!;
    expect(fresh.metadata?.name).not.toBe(an);
    expect(fresh.metadata?.name).toMatch(new RegExp(`^vpc-nat-gw-per-${HASH}-${SUFFIX}$`));
    expect(after.find((p) => p.metadata?.name === bn)?.metadata?.uid).toBe(b!.metadata?.uid);
    expect((await execIn(w, NS, bn, 'ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).toContain(
      '172.18.0.60/16',
    );
  });

  it('a changed template rolls the replicas one at a time, never more pods than replicas', async () => {
    const { w, logs } = lab;
    await createGateway(w, 'roll', { replicas: 2, lanIp: '' });
    const sel = selectorOf('vpc-nat-gw-roll');
    const before = await settledPods(w, NS, sel, 2);
    const oldHash = before[0]?.metadata?.labels?.['pod-template-hash'];
    let most = 0;
    const watch = setInterval(() => {
      w.core
        .listNamespacedPod({ namespace: NS, labelSelector: sel })
        .then((l) => {
          most = Math.max(most, l.items.length);
        })
        .catch(() => {});
    }, 10);
    await w.custom.createClusterCustomObject({
      ...g,
      plural: Plural.subnet,
      body: {
        apiVersion: 'kubeovn.io/v1',
        kind: 'Subnet',
        metadata: { name: 'ext-roll' },
        spec: { cidrBlock: '192.168.50.0/24', gateway: '192.168.50.1' },
      },
    });
    await patchGateway(w, 'roll', { externalSubnets: ['ext-roll'] });
    const after = await eventuallyValue(async () => {
      const pods = await settledPods(w, NS, sel, 2);
      return pods.every((p) => p.metadata?.labels?.['pod-template-hash'] !== oldHash) ? pods : undefined;
    });
    clearInterval(watch);
    expect(new Set(after.map((p) => p.metadata?.labels?.['pod-template-hash'])).size).toBe(1);
    for (const p of after)
      expect(p.metadata?.annotations?.['ext-roll.kube-system.kubernetes.io/ip_address']).toMatch(
        /^192\.168\.50\./,
      );
    expect(logs.filter((l) => l.includes('(rolling update)') && l.includes('vpc-nat-gw-roll-'))).toHaveLength(
      2,
    );
    expect(most).toBeLessThanOrEqual(2);
  });

  it('spec.namespace puts the pods in that namespace; the external network stays kube-ovn’s', async () => {
    const { w } = lab;
    expect((await kubectl(w.api, 'create', 'namespace', 'team-a')).code).toBe(0);
    await createGateway(w, 'nsd', { namespace: 'team-a', replicas: 2, lanIp: '' });
    await createGateway(w, 'nss', { namespace: 'team-a' });
    const ha = await settledPods(w, 'team-a', selectorOf('vpc-nat-gw-nsd'), 2);
    const [one] = await settledPods(w, 'team-a', selectorOf('vpc-nat-gw-nss'), 1);
    expect(one?.metadata?.name).toBe('vpc-nat-gw-nss-0');
    expect(await kubectlPods(w, NS, 'app in (vpc-nat-gw-nsd,vpc-nat-gw-nss)')).toEqual([]);
    for (const p of [...ha, one!]) {
      expect(p.metadata?.annotations?.['k8s.v1.cni.cncf.io/networks']).toBe(`${NS}/${EXTERNAL}`);
      const name = p.metadata!.name!;
      const addr = await execIn(w, 'team-a', name, 'ip', '-o', 'addr', 'show', 'dev', 'net1');
      expect(addr.stdout).toContain(`inet ${p.metadata?.annotations?.[NET1]}/16`);
      expect(w.api.gateways.get('team-a', name)?.initialised).toBe(true);
    }
  });
});

describe.skipIf(skip)('the gateway workloads’ name prefix (ovn-vpc-nat-config natGwNamePrefix)', () => {
  const labs: Lab[] = [];
  afterAll(async () => {
    for (const l of labs) {
      await l.standIns.stop();
      await l.w.close();
    }
  });

  it.each([
    ['master', 'egress-blue-0'],
    ['1.16', 'egress-blue-0'],
    ['1.13', 'egress-blue-0'],
    ['1.12', 'vpc-nat-gw-blue-0'],
  ] as const)('kube-ovn %s names the StatefulSet’s pod %s (1.12 has no such key)', async (release, pod) => {
    const lab = await startLab(release, { natGwNamePrefix: 'egress' });
    labs.push(lab);
    await createGateway(lab.w, 'blue');
    const app = pod.replace(/-0$/, '');
    const [p] = await settledPods(lab.w, NS, selectorOf(app), 1);
    expect(p?.metadata?.name).toBe(pod);
    expect(p?.metadata?.ownerReferences?.map((o) => [o.kind, o.name])).toEqual([['StatefulSet', app]]);
    expect((await kubectlPods(lab.w, NS, selectorOf(app))).map((x) => x.metadata?.labels?.app)).toEqual([
      app,
    ]);
    if (release !== 'master') return;
    // master's replicated gateway: the Deployment and its ReplicaSet take the prefix too.
    await createGateway(lab.w, 'red', { replicas: 2, lanIp: '' });
    const pods = await settledPods(lab.w, NS, selectorOf('egress-red'), 2);
    for (const r of pods) expect(r.metadata?.name).toMatch(new RegExp(`^egress-red-${HASH}-${SUFFIX}$`));
  });

  it('a new prefix makes a new workload beside the old one, as kube-ovn leaves the old; deleting the gateway takes both', async () => {
    const lab = await startLab('1.16');
    labs.push(lab);
    const { w } = lab;
    await createGateway(w, 'pf');
    const [old] = await settledPods(w, NS, selectorOf('vpc-nat-gw-pf'), 1);
    await w.core.patchNamespacedConfigMap({
      namespace: NS,
      name: 'ovn-vpc-nat-config',
      body: [{ op: 'add', path: '/data/natGwNamePrefix', value: 'edge' }],
    });
    const [fresh] = await settledPods(w, NS, selectorOf('edge-pf'), 1);
    expect(fresh?.metadata?.name).toBe('edge-pf-0');
    const still = await w.core.readNamespacedPod({ namespace: NS, name: 'vpc-nat-gw-pf-0' });
    expect(still.metadata?.uid).toBe(old?.metadata?.uid);
    await w.custom.deleteClusterCustomObject({ ...g, plural: Plural.gateway, name: 'pf' });
    await eventuallyValue(
      async () =>
        (
          await w.core.listNamespacedPod({
            namespace: NS,
            labelSelector: 'ovn.kubernetes.io/vpc-nat-gw=true',
          })
        ).items.length === 0,
    );
  });
});

describe.skipIf(skip)('releases before master ignore spec.replicas and spec.namespace', () => {
  let lab: Lab;
  beforeAll(async () => {
    lab = await startLab('1.16');
  }, 30_000);
  afterAll(async () => {
    await lab?.standIns.stop();
    await lab?.w.close();
  });

  it('kube-ovn 1.16: one StatefulSet pod in its own namespace', async () => {
    const { w } = lab;
    expect((await kubectl(w.api, 'create', 'namespace', 'team-b')).code).toBe(0);
    await createGateway(w, 'old', { replicas: 3, namespace: 'team-b' });
    const [p] = await settledPods(w, NS, selectorOf('vpc-nat-gw-old'), 1);
    expect(p?.metadata?.name).toBe('vpc-nat-gw-old-0');
    expect(p?.metadata?.ownerReferences?.map((o) => o.kind)).toEqual(['StatefulSet']);
    expect(await kubectlPods(w, 'team-b', 'ovn.kubernetes.io/vpc-nat-gw=true')).toEqual([]);
  });
});

describe.skipIf(skip)('the feature switched off on master', () => {
  let lab: Lab;
  beforeAll(async () => {
    lab = await startLab('master');
  }, 30_000);
  afterAll(async () => {
    await lab?.standIns.stop();
    await lab?.w.close();
  });

  it("removes the StatefulSets' pods only: kube-ovn's clean-up deletes StatefulSets, a replicated gateway's Deployment stays", async () => {
    const { w } = lab;
    await createGateway(w, 'one');
    await createGateway(w, 'two', { replicas: 2, lanIp: '' });
    await settledPods(w, NS, selectorOf('vpc-nat-gw-one'), 1);
    const ha = names(await settledPods(w, NS, selectorOf('vpc-nat-gw-two'), 2));
    await w.core.patchNamespacedConfigMap({
      namespace: NS,
      name: 'ovn-vpc-nat-gw-config',
      body: [{ op: 'replace', path: '/data/enable-vpc-nat-gw', value: 'false' }],
    });
    await eventuallyValue(
      async () =>
        (await w.core.listNamespacedPod({ namespace: NS, labelSelector: selectorOf('vpc-nat-gw-one') })).items
          .length === 0,
    );
    expect(names(await kubectlPods(w, NS, selectorOf('vpc-nat-gw-two')))).toEqual(ha);
  });
});

const SCRIPTS = process.env.EIP_KUBE_OVN_SCRIPTS ? resolve(process.env.EIP_KUBE_OVN_SCRIPTS) : undefined;
const netnsSkip =
  process.env.EIP_NETNS !== '1'
    ? 'EIP_NETNS is not 1'
    : ((await preflight(SCRIPTS)) ?? (SCRIPTS ? undefined : 'EIP_KUBE_OVN_SCRIPTS is unset'));
if (netnsSkip)
  console.log(`k8s-standins-replicas.test.ts: the real-script (netns) replicas are skipped: ${netnsSkip}`);

describe.skipIf(skip || netnsSkip !== undefined)("replicas on kube-ovn master's own script (netns)", () => {
  let backend: NetnsBackend;
  let lab: Lab;
  beforeAll(async () => {
    backend = await startNetnsBackend({ scripts: SCRIPTS, defaultRelease: 'master' });
    const api = await startKubeApi({ restartDelayMs: 20, kubeOvnRelease: 'master', gatewayBackend: backend });
    const kc = new KubeConfig();
    kc.loadFromString(api.kubeconfigYaml());
    const w: World = {
      api,
      kc,
      custom: kc.makeApiClient(CustomObjectsApi),
      core: kc.makeApiClient(CoreV1Api),
      close: () => api.close(),
    };
    lab = await startLab('master', {}, w);
  }, 60_000);
  afterAll(async () => {
    await lab?.standIns.stop();
    await lab?.w.close();
    await backend?.close();
  });

  it('each replica is its own network namespace: its own net1, an EIP added or lost in one only', async () => {
    const { w } = lab;
    await createGateway(w, 'real', { replicas: 2, lanIp: '' });
    const pods = await settledPods(w, NS, selectorOf('vpc-nat-gw-real'), 2);
    const [a, b] = names(pods);
    expect(backend.namespaceOf(NS, a!)).toBeTruthy();
    expect(backend.namespaceOf(NS, a!)).not.toBe(backend.namespaceOf(NS, b!));
    for (const p of pods) {
      const addr = await execIn(w, NS, p.metadata!.name!, 'ip', '-o', 'addr', 'show', 'dev', 'net1');
      expect(addr.stdout).toContain(`inet ${p.metadata?.annotations?.[NET1]}/16`);
    }
    const add = await execIn(w, NS, a!, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.70/16');
    expect(add.code, add.stderr).toBe(0);
    expect((await execIn(w, NS, a!, 'ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).toContain(
      '172.18.0.70/16',
    );
    expect((await execIn(w, NS, b!, 'ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).not.toContain(
      '172.18.0.70/16',
    );
    const add2 = await execIn(w, NS, b!, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.70/16');
    expect(add2.code, add2.stderr).toBe(0);
    expect((await execIn(w, NS, a!, 'kill', '1')).code).toBe(137);
    await eventuallyValue(
      async () => {
        const p = await w.core.readNamespacedPod({ namespace: NS, name: a! });
        return p.status?.containerStatuses?.[0]?.restartCount === 1 && initialised(p);
      },
      { timeoutMs: 30_000 },
    );
    expect((await execIn(w, NS, a!, 'ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).not.toContain(
      '172.18.0.70/16',
    );
    expect((await execIn(w, NS, b!, 'ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).toContain(
      '172.18.0.70/16',
    );
  }, 90_000);
});
