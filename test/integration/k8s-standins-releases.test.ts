/**
 * The gateway stand-in builds and initialises the gateway pod as each kube-ovn release does (local/controllers/
 * gateway-pod.ts, read from pkg/controller/vpc_nat_gateway.go at each tag), and the local API's gateway then
 * answers as that release's nat-gateway.sh — seen from outside, through client-node and the real kubectl. How the
 * simulator was checked against kube-ovn's own scripts: local/natgw/README.md#how-the-model-was-checked.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { kubectl } from '../../local/kube-api/testing.js';
import { gatewayImage, KUBE_OVN_RELEASES, type KubeOvnRelease } from '../../local/natgw/releases.js';
import { eventuallyValue as eventually } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import {
  createGateway,
  createSubnets,
  EXTERNAL,
  gatewayPod,
  startWorld,
  type World,
} from './k8s-fixtures.js';

const { skip } = kubectlOrSkip();
const NS = 'kube-system';
const POD = 'vpc-nat-gw-gw1-0';
const SVC = '10.96.0.0/12';
const ROUTES = {
  eth0: `[{"dst":"${SVC}","gw":"10.0.1.1"}]`,
  net1: '[{"dst":"0.0.0.0/0","gw":"172.18.0.1"}]',
};

/** What each release's pod and gateway initialisation look like from the API (the expectations, per release). */
const EXPECT: Record<
  KubeOvnRelease,
  { initContainer: boolean; command: string[]; routes: boolean; env: boolean; eipAdd: string }
> = {
  '1.12': {
    initContainer: true,
    command: ['bash'],
    routes: false,
    env: false,
    eipAdd: '172.18.0.10/16,172.18.0.1',
  },
  '1.13': {
    initContainer: false,
    command: ['sleep', 'infinity'],
    routes: true,
    env: false,
    eipAdd: '172.18.0.10/16',
  },
  '1.14': {
    initContainer: false,
    command: ['sleep', 'infinity'],
    routes: true,
    env: false,
    eipAdd: '172.18.0.10/16',
  },
  '1.15': {
    initContainer: false,
    command: ['sleep', 'infinity'],
    routes: true,
    env: true,
    eipAdd: '172.18.0.10/16',
  },
  '1.16': {
    initContainer: false,
    command: ['sleep', 'infinity'],
    routes: true,
    env: true,
    eipAdd: '172.18.0.10/16',
  },
  master: {
    initContainer: false,
    command: ['sleep', 'infinity'],
    routes: true,
    env: true,
    eipAdd: '172.18.0.10/16',
  },
};

describe.skipIf(skip).each(KUBE_OVN_RELEASES.map((r) => [r]))('gateway pods of kube-ovn %s', (release) => {
  const want = EXPECT[release];
  let w: World;
  let standIns: StandIns;
  let pod: V1Pod;
  const exec = (...argv: string[]) =>
    kubectl(w.api, 'exec', '-n', NS, POD, '-c', 'vpc-nat-gw', '--', ...argv);

  beforeAll(async () => {
    w = await startWorld({ kubeOvnRelease: release });
    standIns = await startStandIns({ kubeConfig: w.kc, release, featureSwitch: true, serviceCidr: SVC });
    for (const [name, data] of [
      ['ovn-vpc-nat-gw-config', { 'enable-vpc-nat-gw': 'true' }],
      ['ovn-vpc-nat-config', { image: gatewayImage(release) }],
    ] as const)
      await w.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name }, data } });
    await createSubnets(w);
    await createGateway(w, 'gw1');
    pod = await eventually(
      async () => {
        const p = await gatewayPod(w, 'gw1');
        return p?.metadata?.annotations?.['ovn.kubernetes.io/vpc_nat_gw_init'] === 'true' ? p : undefined;
      },
      { timeoutMs: 15_000 },
    );
  }, 30_000);

  afterAll(async () => {
    await standIns?.stop();
    await w?.close();
  });

  it("runs the release's image, as the ovn-vpc-nat-config ConfigMap names it", () => {
    expect(pod.spec?.containers.map((c) => [c.name, c.image])).toEqual([
      ['vpc-nat-gw', gatewayImage(release)],
    ]);
    expect(gatewayImage(release)).toMatch(/^docker\.io\/kubeovn\/vpc-nat-gateway:v1\.1[2-7]\.\d+$/);
  });

  it('declares the containers, init container and environment of its StatefulSet template', () => {
    const c = pod.spec?.containers[0];
    expect(c?.command).toEqual(want.command);
    expect(c?.securityContext).toEqual({ privileged: true, allowPrivilegeEscalation: true });
    if (want.initContainer) {
      expect(pod.spec?.initContainers?.map((i) => [i.name, i.command, i.args])).toEqual([
        ['vpc-nat-gw-init', ['bash'], ['-c', `bash /kube-ovn/nat-gateway.sh init ${SVC},10.0.1.1`]],
      ]);
      expect(c?.args).toEqual(['-c', 'while true; do sleep 10000; done']);
    } else {
      expect(pod.spec?.initContainers ?? []).toEqual([]);
      expect(pod.spec?.terminationGracePeriodSeconds).toBe(0);
    }
    if (want.env) {
      expect(c?.env).toEqual([
        { name: 'GATEWAY_V4', value: '172.18.0.1' },
        { name: 'GATEWAY_V6', value: '' },
      ]);
      expect(c?.lifecycle?.postStart?.exec?.command).toEqual(['sh', '-c', 'sysctl -w net.ipv4.ip_forward=1']);
    } else expect(c?.env).toBeUndefined();
  });

  it("carries the CNI's routes annotations from 1.13 on", () => {
    const a = pod.metadata?.annotations ?? {};
    const routes = [a['ovn.kubernetes.io/routes'], a[`${EXTERNAL}.${NS}.kubernetes.io/routes`]];
    expect(routes).toEqual(want.routes ? [ROUTES.eth0, ROUTES.net1] : [undefined, undefined]);
  });

  it('starts with the routes the release gives it: service CIDR via eth0, default via the external gateway', async () => {
    const r = await exec('ip', 'route');
    expect(r.code, r.stderr).toBe(0);
    // 1.12: the init container's service route and the controller's ext-subnet-route-add; 1.13+: the CNI's.
    expect(r.stdout).toContain('default via 172.18.0.1 dev net1 \n');
    expect(r.stdout).toContain(`${SVC} via 10.0.1.1 dev eth0 \n`);
    expect(r.stdout).not.toContain('dev eth0 \ndefault');
  });

  it('keeps its interfaces in /etc/kube-ovn/nat-gateway.env from 1.15 on', async () => {
    const r = await exec('cat', '/etc/kube-ovn/nat-gateway.env');
    if (want.env) expect([r.code, r.stdout]).toEqual([0, 'VPC_INTERFACE=eth0\nEXTERNAL_INTERFACE=net1\n']);
    else {
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        "cat: can't open '/etc/kube-ovn/nat-gateway.env': No such file or directory\n",
      );
    }
  });

  it("takes eip-add in the release's format, and from 1.13 refuses 1.12's with ip's message and exit 1", async () => {
    const old = await exec('bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.247/24,172.18.0.1');
    if (release === '1.12') expect(old.code, old.stderr).toBe(0);
    else {
      expect(old.code).toBe(1);
      expect(old.stderr).toContain(
        'Error: any valid prefix is expected rather than "172.18.0.247/24,172.18.0.1".\nfailed to exec command "ip addr replace 172.18.0.247/24,172.18.0.1 dev net1"\n',
      );
    }
    const add = await exec('bash', '/kube-ovn/nat-gateway.sh', 'eip-add', want.eipAdd);
    expect(add.code, add.stderr).toBe(0);
    const addr = await exec('ip', '-o', 'addr', 'show', 'dev', 'net1');
    expect(addr.stdout).toContain('inet 172.18.0.10/16 scope global secondary net1');
    const nat = await exec('iptables-save', '-t', 'nat');
    const hairpin =
      '-A HAIRPIN_SNAT -o eth0 -m mark --mark 0x1/0x1 -m conntrack --ctstate DNAT --ctorigdst 172.18.0.10 -j SNAT --to-source 172.18.0.10 --random-fully';
    if (release === '1.16' || release === 'master') expect(nat.stdout).toContain(hairpin);
    else expect(nat.stdout).not.toContain('HAIRPIN_SNAT');
  });

  it('is initialised again after its container restarts (kill 1)', async () => {
    // The container dies with its PID 1: kubectl reports exit 137, as from a real cluster.
    expect((await exec('kill', '1')).code).toBe(137);
    const again = await eventually(
      async () => {
        const p = await gatewayPod(w, 'gw1');
        const cs = p?.status?.containerStatuses?.[0];
        if (!cs?.state?.running || (cs.restartCount ?? 0) < 1) return undefined;
        const r = await exec('iptables-save', '-t', 'nat');
        return r.stdout.includes('-A SNAT_FILTER -j SHARED_SNAT') ? r : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(again.code).toBe(0);
    const addr = await exec('ip', '-o', 'addr', 'show', 'dev', 'net1');
    expect(addr.stdout).not.toContain('172.18.0.10/16');
  });
});
