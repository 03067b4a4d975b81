/**
 * The network-namespace gateway (local/netns/) with kube-ovn's own nat-gateway.sh of every release found in
 * EIP_KUBE_OVN_SCRIPTS: a gateway pod per release on the local API, driven through pods/exec with the argv that
 * release's controller sends, checked with the real `ip`, `tc` and `iptables` inside the pod's namespace. The
 * expected states are written from each release's documented behaviour (local/netns/README.md); the real script must
 * produce them. An op that fails only because this kernel lacks a tc module (police, fq_codel, matchall) is reported
 * as skipped with the kernel's message, never as passing; with --gateway-netns-pfifo (a second backend here) 1.16+'s
 * QoS runs with pfifo and is checked exactly.
 *
 * Every release runs at once (the ops mostly wait on arping): the flow is driven in beforeAll and each step checked
 * in its own test. All eight pods take 40–80 s on a busy two-core machine (each pod's step timings are printed).
 * Then the namespaces' clean-up on every exit path: normal close here, a crash, SIGTERM, and a SIGKILL of the owner's
 * process group followed by the next start.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { type NetnsBackend, startNetnsBackend } from '../../local/netns/backend.js';
import { kernelLimited } from '../../local/netns/commands.js';
import { listNamespaces, preflight, removeStale, stateDirOf } from '../../local/netns/host.js';
import { atLeast, type ReleaseLine, readScriptSet } from '../../local/netns/release.js';
import { KubeRest } from '../../shared/adapters/k8s/rest.js';
import {
  controllerExec,
  EXT,
  eipAddRule,
  LAN,
  NS,
  netnsTestPod,
  SERVICE_CIDR,
} from '../support/netns-pod.js';

const SCRIPTS = process.env.EIP_KUBE_OVN_SCRIPTS ? resolve(process.env.EIP_KUBE_OVN_SCRIPTS) : undefined;
const skipReason = SCRIPTS
  ? await preflight(SCRIPTS)
  : "EIP_KUBE_OVN_SCRIPTS is unset (a directory with kube-ovn's nat-gateway.sh of each release: <release>/nat-gateway.sh)";
if (skipReason) console.log(`netns-gateway.test.ts skipped: ${skipReason}`);
const releases = !skipReason && SCRIPTS ? Object.entries((await readScriptSet(SCRIPTS)).dirs) : [];

const EIP = '172.18.0.10';
const RATE = '10';

interface Outcome {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** One gateway pod's run: each step's outcome and what `ip`/`tc`/`iptables` showed after it. */
interface Run {
  line: ReleaseLine;
  tag: string;
  pfifo: boolean;
  pod: string;
  steps: Map<string, { outcome?: Outcome; state: Record<string, string> }>;
  /** How long each step's exec took, in ms (start: until Running; restart: from kill 1 until Running again). */
  timings: string[];
  failure?: Error;
}

/** The IPv6 link-local address the kernel gives an interface with this MAC (EUI-64), as `ip` prints it. */
function linkLocal(mac: string): string {
  const b = mac.split(':').map((x) => Number.parseInt(x, 16));
  b[0]! ^= 2;
  const words = [(b[0]! << 8) | b[1]!, (b[2]! << 8) | 0xff, (0xfe << 8) | b[3]!, (b[4]! << 8) | b[5]!];
  return `fe80::${words.map((w) => w.toString(16)).join(':')}`.replace(/::0:/, '::');
}

/** kube-ovn 1.16+'s HTB class id of an address (its ip_to_classid: a weighted sum of the octets). */
function classidOf(ip: string): number {
  const [a, b, c, d] = ip.split('.').map(Number) as [number, number, number, number];
  return ((a * 251 + b * 241 + c * 239 + d * 233) % 32766) + 1;
}

const lines = (text: string): string[] =>
  text
    .split('\n')
    .map((l) => l.trimEnd())
    .filter((l) => l !== '');

const addrLine = (cidr: string, extra = '') =>
  `2: net1    inet ${cidr} scope global ${extra}net1\\       valid_lft forever preferred_lft forever`;
const ADDR_CNI = [
  addrLine(`${EXT.address}/16`),
  `2: net1    inet6 ${linkLocal(EXT.mac)}/64 scope link \\       valid_lft forever preferred_lft forever`,
];
const ADDR_EIP = [ADDR_CNI[0]!, addrLine(`${EIP}/16`, 'secondary '), ADDR_CNI[1]!];

/** `ip route` of a started pod: the CNI's routes plus what init did (1.12: the controller's ext-subnet-route-add). */
function routesAfterInit(): string[] {
  return [
    `default via ${EXT.gateway} dev net1`,
    `${LAN.cidr} dev eth0 proto kernel scope link src ${LAN.address}`,
    `${SERVICE_CIDR} via ${LAN.gateway} dev eth0`,
    `${EXT.cidr} dev net1 proto kernel scope link src ${EXT.address}`,
  ];
}

/** After eip-add: 1.16+ replace the default route with an `onlink` one (from $GATEWAY_V4). */
function routesAfterEip(line: ReleaseLine): string[] {
  const r = routesAfterInit();
  if (atLeast(line, '1.16')) r[0] = `default via ${EXT.gateway} dev net1 onlink`;
  return r;
}

/** The nat rules init adds (1.16+ also HAIRPIN_SNAT). */
function natRulesAfterInit(line: ReleaseLine): string[] {
  return [
    '-A PREROUTING -j DNAT_FILTER',
    '-A POSTROUTING -j SNAT_FILTER',
    '-A DNAT_FILTER -j EXCLUSIVE_DNAT',
    '-A DNAT_FILTER -j SHARED_DNAT',
    '-A SNAT_FILTER -j EXCLUSIVE_SNAT',
    '-A SNAT_FILTER -j SHARED_SNAT',
    ...(atLeast(line, '1.16') ? ['-A SNAT_FILTER -j HAIRPIN_SNAT'] : []),
  ].sort();
}

const HAIRPIN = `-A HAIRPIN_SNAT -o eth0 -m mark --mark 0x1/0x1 -m conntrack --ctstate DNAT --ctorigdst ${EIP} -j SNAT --to-source ${EIP} --random-fully`;

const apis: KubeApi[] = [];
const backends: NetnsBackend[] = [];
const runs: Run[] = [];
const limits: string[] = [];

const clients = new Map<KubeApi, KubeRest>();

async function exec(api: KubeApi, pod: string, argv: string[]): Promise<Outcome> {
  let rest = clients.get(api);
  if (!rest) {
    const kc = new KubeConfig();
    kc.loadFromString(api.kubeconfigYaml());
    rest = new KubeRest(kc);
    clients.set(api, rest);
  }
  let stdout = '';
  let stderr = '';
  const status = await new Promise<{ status?: string; details?: { causes?: { message?: string }[] } }>(
    (done, fail) => {
      rest
        .exec(NS, pod, 'vpc-nat-gw', argv, {
          stdout: (b) => {
            stdout += b.toString();
          },
          stderr: (b) => {
            stderr += b.toString();
          },
          status: done,
        })
        .catch(fail);
    },
  );
  const code = status.status === 'Success' ? 0 : Number(status.details?.causes?.[0]?.message ?? 1);
  return { stdout, stderr, exitCode: code };
}

async function podStatus(api: KubeApi, name: string) {
  const kc = new KubeConfig();
  kc.loadFromString(api.kubeconfigYaml());
  return kc
    .makeApiClient(CoreV1Api)
    .readNamespacedPod({ name, namespace: NS })
    .then((p) => p.status)
    .catch(() => undefined);
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const TC_VIEWS = ['qdisc', 'ingress', 'egress', 'classes', 'ifbClasses', 'ifbFilters'];
const IP_VIEWS = ['addr', 'route', 'nat'];

/** What the tools show inside the pod after a step (`only` these views, else all). */
async function snapshot(
  api: KubeApi,
  pod: string,
  line: ReleaseLine,
  only?: readonly string[],
): Promise<Record<string, string>> {
  // nat-gateway.sh uses iptables-legacy when the kernel has its tables, as this test asks.
  const legacy = (await exec(api, pod, ['iptables-legacy', '-t', 'nat', '-S', 'INPUT', '1'])).exitCode === 0;
  const all: Record<string, string[]> = {
    addr: ['ip', '-o', 'addr', 'show', 'dev', 'net1'],
    route: ['ip', 'route'],
    qdisc: ['tc', 'qdisc', 'show', 'dev', 'net1'],
    ingress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', 'ffff:'],
    egress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', '1:'],
    classes: ['tc', 'class', 'show', 'dev', 'net1'],
    nat: [legacy ? 'iptables-legacy' : 'iptables', '-t', 'nat', '-S'],
    forward: ['sysctl', '-n', 'net.ipv4.ip_forward'],
    ...(atLeast(line, '1.16') && {
      ifbClasses: ['tc', 'class', 'show', 'dev', 'ifb-net1'],
      ifbFilters: ['tc', '-p', 'filter', 'show', 'dev', 'ifb-net1', 'parent', '1:'],
    }),
    ...(atLeast(line, '1.15') && { env: ['cat', '/etc/kube-ovn/nat-gateway.env'] }),
  };
  const argvs = Object.entries(all).filter(([k]) => !only || only.includes(k));
  // Read-only, so all at once.
  const read = await Promise.all(
    argvs.map(async ([k, argv]) => {
      const r = await exec(api, pod, argv);
      return [k, r.exitCode === 0 ? r.stdout : `exit ${r.exitCode}: ${r.stderr.trim()}`] as const;
    }),
  );
  return Object.fromEntries(read);
}

/** One release's flow, as its controller drives a gateway: init, eip-add, QoS both directions, eip-del, restart. */
async function drive(api: KubeApi, backend: NetnsBackend, run: Run): Promise<void> {
  const { line, pod } = run;
  const step = async (name: string, argv?: string[], views?: readonly string[]): Promise<void> => {
    const t = Date.now();
    const outcome = argv ? await exec(api, pod, argv) : undefined;
    const ms = Date.now() - t;
    run.steps.set(name, { ...(outcome && { outcome }), state: await snapshot(api, pod, line, views) });
    if (argv) run.timings.push(`${name} ${ms}`);
  };
  const kc = new KubeConfig();
  kc.loadFromString(api.kubeconfigYaml());
  const client = kc.makeApiClient(CoreV1Api);
  await client.createNamespacedPod({ namespace: NS, body: netnsTestPod({ name: pod, line, tag: run.tag }) });
  const created = Date.now();
  await until(`${pod} Running`, async () =>
    (await podStatus(api, pod))?.phase === 'Running' ? true : undefined,
  );
  run.timings.push(`start ${Date.now() - created}`);
  await step('start');
  await step('eip-add', controllerExec(line, 'eip-add', [eipAddRule(line, EIP, 16)]), IP_VIEWS);
  const qos = `${EIP},1,${RATE},1`;
  await step('eip-ingress-qos-add', controllerExec(line, 'eip-ingress-qos-add', [qos]), TC_VIEWS);
  await step('eip-egress-qos-add', controllerExec(line, 'eip-egress-qos-add', [qos]), TC_VIEWS);
  await step('eip-ingress-qos-del', controllerExec(line, 'eip-ingress-qos-del', [EIP]), TC_VIEWS);
  await step('eip-egress-qos-del', controllerExec(line, 'eip-egress-qos-del', [EIP]), TC_VIEWS);
  await step('eip-del', controllerExec(line, 'eip-del', [`${EIP}/16`]), IP_VIEWS);
  const restarted = Date.now();
  const killed = await exec(api, pod, ['kill', '1']);
  await until(`${pod} restarted`, async () => {
    const s = await podStatus(api, pod);
    return s?.phase === 'Running' &&
      s.containerStatuses?.[0]?.restartCount === 1 &&
      s.containerStatuses[0].ready
      ? true
      : undefined;
  });
  run.timings.push(`restart ${Date.now() - restarted}`);
  run.steps.set('kill 1', { outcome: killed, state: await snapshot(api, pod, line) });
  const id = backend.namespaceOf(NS, pod);
  await client.deleteNamespacedPod({ name: pod, namespace: NS, gracePeriodSeconds: 0 });
  const left = await until(`${pod}'s namespaces gone`, async () =>
    backend.namespaceOf(NS, pod) === undefined &&
    !listNamespaces().some((n) => n === id || n.startsWith(`${id}-`))
      ? []
      : undefined,
  );
  run.steps.set('delete', {
    state: { namespaces: `${id ? 'had' : 'had no'} ${id ?? ''}; left ${left.join(' ')}` },
  });
}

beforeAll(async () => {
  if (skipReason || !SCRIPTS) return;
  const started = Date.now();
  const withPfifo = releases.some(([line]) => atLeast(line as ReleaseLine, '1.16'));
  for (const pfifo of withPfifo ? [false, true] : [false]) {
    const backend = await startNetnsBackend({ scripts: SCRIPTS, pfifo });
    backends.push(backend);
    const api = await startKubeApi({ gatewayBackend: backend, restartDelayMs: 50 });
    apis.push(api);
    for (const [line, dir] of releases) {
      if (pfifo && !atLeast(line as ReleaseLine, '1.16')) continue;
      const tag = basename(dir);
      runs.push({
        line: line as ReleaseLine,
        tag,
        pfifo,
        pod: `vpc-nat-gw-${tag.replace(/\W/g, '')}${pfifo ? 'pfifo' : ''}-0`,
        steps: new Map(),
        timings: [],
      });
    }
  }
  await Promise.all(
    runs.map((r) =>
      drive(apis[r.pfifo ? 1 : 0]!, backends[r.pfifo ? 1 : 0]!, r).catch((e: unknown) => {
        r.failure = e as Error;
      }),
    ),
  );
  for (const r of runs) console.log(`${r.pod}: ${r.timings.join(', ')} ms`);
  console.log(
    `netns gateway: ${runs.length} pods (${releases.map(([l]) => l).join(', ')}) in ${Date.now() - started} ms`,
  );
}, 170_000);

afterAll(async () => {
  for (const api of apis) await api.close();
  for (const b of backends) await b.close();
  if (limits.length > 0)
    console.log(`limited by this kernel (reported as skipped, not passing):\n  ${limits.join('\n  ')}`);
});

type Ctx = { skip: (note?: string) => never };

function stepOf(run: Run, name: string) {
  const s = run.steps.get(name);
  if (!s)
    throw new Error(
      `${run.pod}: step ${name} was not reached${run.failure ? `: ${run.failure.message}` : ''}`,
    );
  return s;
}

/** The op succeeded — or failed only because this kernel lacks a tc module, which is then reported, not passed. */
function okOrKernelLimited(run: Run, name: string): string | undefined {
  const { outcome } = stepOf(run, name);
  const limited = outcome && kernelLimited(outcome);
  if (limited) {
    limits.push(`kube-ovn ${run.line}${run.pfifo ? ' (pfifo)' : ''} ${name}: ${limited}`);
    return limited;
  }
  expect(outcome?.exitCode, `${name}: ${outcome?.stdout}${outcome?.stderr}`).toBe(0);
  return undefined;
}

/** `tc qdisc show` as kind, handle and parent (refcounts and queue stats vary with the machine). */
const qdiscs = (text: string): string[] =>
  lines(text).map(
    (l) =>
      l
        .match(/^qdisc (\S+) (\S+) (root|parent \S+)/)
        ?.slice(1)
        .join(' ') ?? l,
  );

/** Whether `name`'s add in that direction ran whole (not limited by this kernel). */
function addRan(run: Run, add: string): boolean {
  const s = run.steps.get(add);
  return s?.outcome !== undefined && s.outcome.exitCode === 0;
}

/**
 * tc after a QoS step. `present` says which directions have the EIP's QoS at that point. Where this kernel lacks the
 * module an add needs, what the script did before that command stays (qdiscs, classes) and nothing after it.
 */
function expectQos(run: Run, name: string, present: { ingress: boolean; egress: boolean }): void {
  const { state } = stepOf(run, name);
  const ingressRan = addRan(run, 'eip-ingress-qos-add');
  const egressRan = addRan(run, 'eip-egress-qos-add');
  const afterIngressAddOnly = name === 'eip-ingress-qos-add';
  if (!atLeast(run.line, '1.16')) {
    // u32 filters with a police action on net1's ingress qdisc and its htb root.
    const police = (text: string, dir: string, on: boolean, ran: boolean) => {
      if (!on || !ran) expect(lines(text)).toEqual([]);
      else expect(lines(text)).toContain(`  match IP ${dir} ${EIP}/32`);
    };
    police(state.ingress!, 'dst', present.ingress, ingressRan);
    police(state.egress!, 'src', present.egress, egressRan);
    // The veth's noqueue root until egress QoS puts an htb root in its place.
    expect(qdiscs(state.qdisc!)).toEqual([
      afterIngressAddOnly ? 'noqueue 0: root' : 'htb 1: root',
      'ingress ffff: parent ffff:fff1',
    ]);
    return;
  }
  // 1.16+: ingress redirected to IFB; an HTB class per EIP with a leaf qdisc (fq_codel, or pfifo with the opt-in)
  // and a u32 filter to it, on ifb-net1 (ingress) and net1 (egress).
  const cid = classidOf(EIP);
  const u32 = (dir: 'src' | 'dst') => [
    'filter protocol ip pref 1 u32 chain 0',
    'filter protocol ip pref 1 u32 chain 0 fh 800: ht divisor 1',
    `filter protocol ip pref 1 u32 chain 0 fh 800::${(cid & 0xfff).toString(16)} order ${cid & 0xfff} key ht 800 bkt 0 *flowid 1:${cid.toString(16)} not_in_hw`,
    `  match IP ${dir} ${EIP}/32`,
  ];
  const klass = (leaf: boolean) =>
    `class htb 1:${cid.toString(16)} root ${leaf ? 'leaf <auto>: ' : ''}prio 0 rate ${RATE}Mbit ceil ${RATE}Mbit burst 1024Kb cburst 1024Kb`;
  const DEFAULT_CLASS = 'class htb 1:9999 root prio 0 rate 10Gbit ceil 10Gbit burst 0b cburst 0b';
  const classes = (t: string) => lines(t).map((l) => l.replace(/leaf [0-9a-f]+: /, 'leaf <auto>: '));
  expect(lines(state.ingress!)).toEqual([
    'filter protocol all pref 65535 u32 chain 0',
    'filter protocol all pref 65535 u32 chain 0 fh 800: ht divisor 1',
    'filter protocol all pref 65535 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 terminal flowid not_in_hw',
    '  match 00000000/00000000 at 0',
    '\taction order 1: mirred (Egress Redirect to device ifb-net1) stolen',
    '\tindex 1 ref 1 bind 1',
  ]);
  expect(lines(state.ifbFilters!)).toEqual(present.ingress && ingressRan ? u32('dst') : []);
  expect(lines(state.egress!)).toEqual(present.egress && egressRan ? u32('src') : []);
  expect(classes(state.ifbClasses!)).toEqual([
    DEFAULT_CLASS,
    ...(present.ingress ? [klass(ingressRan)] : []),
  ]);
  expect(classes(state.classes!)).toEqual(
    afterIngressAddOnly ? [] : [DEFAULT_CLASS, ...(present.egress ? [klass(egressRan)] : [])],
  );
}

describe.skipIf(skipReason !== undefined)(
  'network-namespace gateway: kube-ovn nat-gateway.sh per release',
  () => {
    for (const [lineName, dir] of releases) {
      const line = lineName as ReleaseLine;
      for (const pfifo of atLeast(line, '1.16') ? [false, true] : [false]) {
        const label = `kube-ovn ${line} (${basename(dir)}${pfifo ? ', pfifo for fq_codel' : ''})`;
        const runOf = (): Run => {
          const r = runs.find((x) => x.line === line && x.pfifo === pfifo);
          if (!r) throw new Error(`no run for ${label}`);
          return r;
        };
        describe(label, () => {
          it('starts with the CNI addresses and routes, initialised as the release does', () => {
            const { state } = stepOf(runOf(), 'start');
            expect(lines(state.addr!)).toEqual(ADDR_CNI);
            expect(lines(state.route!)).toEqual(routesAfterInit());
            expect(
              lines(state.nat!)
                .filter((l) => l.startsWith('-A '))
                .sort(),
            ).toEqual(natRulesAfterInit(line));
            // 1.15+: the postStart hook turned forwarding on and init wrote the interfaces down.
            expect(state.forward?.trim()).toBe(atLeast(line, '1.15') ? '1' : '0');
            if (atLeast(line, '1.15'))
              expect(state.env).toBe('VPC_INTERFACE=eth0\nEXTERNAL_INTERFACE=net1\n');
            expect(qdiscs(state.qdisc!)).toEqual(['noqueue 0: root']);
          });

          it(`eip-add ${eipAddRule(line, EIP, 16)} puts the EIP on net1`, () => {
            const { outcome, state } = stepOf(runOf(), 'eip-add');
            expect(outcome?.exitCode, outcome?.stderr).toBe(0);
            expect(lines(outcome!.stdout)[0]).toBe(`eip-add ${eipAddRule(line, EIP, 16)}`);
            expect(lines(state.addr!)).toEqual(ADDR_EIP);
            expect(lines(state.route!)).toEqual(routesAfterEip(line));
            if (atLeast(line, '1.16')) expect(lines(state.nat!)).toContain(HAIRPIN);
          });

          for (const [name, present] of [
            ['eip-ingress-qos-add', { ingress: true, egress: false }],
            ['eip-egress-qos-add', { ingress: true, egress: true }],
          ] as const) {
            it(`${name} ${EIP},1,${RATE},1`, (ctx: Ctx) => {
              const limited = okOrKernelLimited(runOf(), name);
              expectQos(runOf(), name, present);
              if (limited) ctx.skip(`limited by this kernel: ${limited}`);
            });
          }

          for (const [name, egress] of [
            ['eip-ingress-qos-del', true],
            ['eip-egress-qos-del', false],
          ] as const) {
            it(name, (ctx: Ctx) => {
              const run = runOf();
              expect(okOrKernelLimited(run, name)).toBeUndefined();
              expectQos(run, name, { ingress: false, egress });
              const add = name.replace('-del', '-add');
              const addLimited = kernelLimited(stepOf(run, add).outcome!);
              if (addLimited)
                ctx.skip(`ran, but the ${add} it undoes was limited by this kernel: ${addLimited}`);
            });
          }

          it('eip-del removes the EIP from net1', () => {
            const { outcome, state } = stepOf(runOf(), 'eip-del');
            expect(outcome?.exitCode, outcome?.stderr).toBe(0);
            expect(lines(state.addr!)).toEqual(ADDR_CNI);
            expect(lines(state.route!)).toEqual(routesAfterEip(line));
            expect(lines(state.nat!)).not.toContain(HAIRPIN);
          });

          it('kill 1 restarts the container: back to the CNI state, initialised again', () => {
            const { outcome, state } = stepOf(runOf(), 'kill 1');
            expect(outcome?.exitCode).toBe(137);
            expect(lines(state.addr!)).toEqual(ADDR_CNI);
            expect(lines(state.route!)).toEqual(routesAfterInit());
            expect(
              lines(state.nat!)
                .filter((l) => l.startsWith('-A '))
                .sort(),
            ).toEqual(natRulesAfterInit(line));
            expect(qdiscs(state.qdisc!)).toEqual(['noqueue 0: root']);
          });

          it('deleting the pod removes its namespaces', () => {
            expect(stepOf(runOf(), 'delete').state.namespaces).toMatch(/^had eipgw-\d+-\d+-\d+; left $/);
          });
        });
      }
    }

    it('a closed backend leaves no namespace and no state directory behind', async () => {
      const b = await startNetnsBackend({ scripts: SCRIPTS });
      const api = await startKubeApi({ gatewayBackend: b });
      const kc = new KubeConfig();
      kc.loadFromString(api.kubeconfigYaml());
      const [line, dir] = releases[0]!;
      await kc.makeApiClient(CoreV1Api).createNamespacedPod({
        namespace: NS,
        body: netnsTestPod({ name: 'vpc-nat-gw-close-0', line: line as ReleaseLine, tag: basename(dir) }),
      });
      await until('pod Running', async () =>
        (await podStatus(api, 'vpc-nat-gw-close-0'))?.phase === 'Running' ? true : undefined,
      );
      expect(b.namespaces()).toHaveLength(3);
      await api.close();
      await b.close();
      expect(listNamespaces().filter((n) => n.startsWith(`${b.base}-`))).toEqual([]);
      expect(existsSync(stateDirOf(b.base))).toBe(false);
    }, 60_000);
  },
);

/** Runs test/support/netns-child.ts in its own process group until it printed `ready <namespace>`. */
function child(mode: 'crash' | 'wait') {
  const [line, dir] = releases[0]!;
  const p = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/support/netns-child.ts', SCRIPTS!, mode, line, basename(dir)],
    { detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  p.stderr.on('data', (b: Buffer) => {
    err += b.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    p.on('exit', (code, signal) => done({ code, signal })),
  );
  const ready = new Promise<string>((done, fail) => {
    let out = '';
    p.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const m = out.match(/^ready (\S+)$/m);
      if (m) done(m[1]!);
    });
    void exited.then(() => fail(new Error(`child exited before ready: ${err}`)));
  });
  return { p, ready, exited };
}

const ofPid = (pid: number | undefined) => listNamespaces().filter((n) => n.startsWith(`eipgw-${pid}-`));

describe.skipIf(skipReason !== undefined)('network-namespace gateway: clean-up on every exit path', () => {
  it.concurrent('an uncaught exception in the owner removes its namespaces as the process exits', async () => {
    const c = child('crash');
    const ns = await c.ready;
    expect(ns).toMatch(/^eipgw-\d+-1-1$/);
    const end = await c.exited;
    expect(end.code).toBe(1);
    expect(ofPid(c.p.pid)).toEqual([]);
  }, 60_000);

  it.concurrent('SIGTERM to an owner that does not handle it removes its namespaces, then the signal ends it', async () => {
    const c = child('wait');
    await c.ready;
    expect(ofPid(c.p.pid)).toHaveLength(3);
    process.kill(-c.p.pid!, 'SIGTERM');
    const end = await c.exited;
    expect(end.signal).toBe('SIGTERM');
    expect(ofPid(c.p.pid)).toEqual([]);
  }, 60_000);

  it.concurrent('after a SIGKILL of the owner process group, the next start removes what it left', async () => {
    const c = child('wait');
    await c.ready;
    process.kill(-c.p.pid!, 'SIGKILL');
    await c.exited;
    const left = ofPid(c.p.pid);
    expect(left).toHaveLength(3);
    const removed = removeStale();
    expect(removed.sort()).toEqual(expect.arrayContaining(left.sort()));
    expect(ofPid(c.p.pid)).toEqual([]);
  }, 60_000);
});
