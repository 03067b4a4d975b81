/**
 * Records what kube-ovn's own nat-gateway.sh does and prints, release by release, into
 * test/fixtures/gateway-runs/<release>.json: each release's script runs for real in a network namespace that is
 * set up as kube-ovn sets up the gateway pod of that release (eth0 to the VPC, net1 to the external network, the
 * routes the CNI would install, the container env), and every step keeps its argv, exit status, stdout and stderr.
 * The dialect tests (test/unit/dialect*.test.ts) read the fixtures: the refusal classifier is checked against the
 * messages the scripts really printed, the parsers against the real `ip`, `tc` and `iptables-save` output.
 *
 *   sudo npx tsx local/record-gateway-runs.ts --scripts DIR [--out DIR] [release…]
 *
 * DIR holds one directory per release (`v1.12.35/nat-gateway.sh`, …, `master/nat-gateway.sh`): kube-ovn's
 * `dist/images/vpcnatgateway/nat-gateway.sh` at that tag. The script is run from there, never copied; the fixture
 * records its sha256 so a test can tell which script it came from.
 *
 * Needs root, iproute2, iptables (legacy and nft), iputils arping and busybox (the image's `ipcalc`, `lsmod` and
 * `modprobe` are busybox applets). Each step runs as `ip netns exec <ns> unshare --mount …` with the script's
 * directory bind-mounted on /kube-ovn (so the script sees itself where the image has it) and a private /run;
 * `/etc/netns/<ns>/kube-ovn` becomes the namespace's /etc/kube-ovn. The host directories /kube-ovn and /etc/kube-ovn
 * are created empty if missing (mount points only).
 *
 * Kernel features this recorder's machine may lack are stood in for, and every step that used a stand-in says so
 * in `standIns`: `police` (the tc police action, used by the 1.12–1.15 QoS filters) is left out of the filter so the
 * filter itself is created; `fq_codel` (the 1.16+ leaf qdisc) is replaced by `pfifo`. Steps without stand-ins show
 * what the unmodified script gets from this kernel (for example `Error: Failed to load TC action module.`).
 * Recording is a development step, not part of the tests.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = '/kube-ovn/nat-gateway.sh';
/** kube-ovn's commit of each release directory the recorder knows (the script is that commit's, byte for byte). */
const COMMITS: Record<string, string> = {
  'v1.12.35': '112588fc35bd53ea50e005d9d9ed88275ac88582',
  'v1.13.0': 'ae4ce3770c71de6c2c9ba456d11bf30b651f83ab',
  'v1.14.0': '85a45ce306585ce24e2ee23a752df850a81c034c',
  'v1.15.0': '304cd067f3abb17c46ce63aea579e4130cbb9a29',
  'v1.16.0': '7162bc4afda1aee29c67addc2badc73b8c7227cf',
  master: '1533681d7a6b3dbdd7e8870fa70f0dc6aa49a82a',
};
const EXT_GW = '172.19.0.1';
const OWN_NET1 = '172.19.0.254/24';
const LAN_GW = '10.0.1.1';
const SVC_CIDR = '10.96.0.0/12';

export interface RecordedStep {
  /** What the step is, in words. */
  name: string;
  /** `setup` (the namespace as kube-ovn's pod would be), `op` (a script call), `read` (an inspection command). */
  kind: 'setup' | 'op' | 'read';
  argv: string[];
  /** The container env the step ran with (beyond PATH). */
  env?: Record<string, string>;
  /** Kernel features stood in for during this step (see the file comment). */
  standIns?: Array<'police' | 'fq_codel'>;
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

export interface GatewayRun {
  /** The directory name: the kube-ovn tag, or `master`. */
  release: string;
  /** kube-ovn's commit of that release, when the recorder knows it. */
  kubeOvnCommit?: string;
  scriptSha256: string;
  kernel: string;
  tools: Record<string, string>;
  recordedAt: string;
  steps: RecordedStep[];
}

type Line = '1.12' | '1.13' | '1.15' | '1.16';

function lineOf(release: string): Line {
  if (release === 'master') return '1.16';
  const m = /^v1\.(\d+)\./.exec(release);
  const minor = Number(m?.[1]);
  if (minor <= 12) return '1.12';
  if (minor <= 14) return '1.13';
  return minor === 15 ? '1.15' : '1.16';
}

function sh(
  argv: string[],
  env?: NodeJS.ProcessEnv,
): { exitCode: number | null; stdout: string; stderr: string } {
  const r = spawnSync(argv[0]!, argv.slice(1), {
    encoding: 'utf8',
    env: env ?? process.env,
    timeout: 60_000,
  });
  return { exitCode: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

function must(argv: string[]): void {
  const r = sh(argv);
  if (r.exitCode !== 0) throw new Error(`${argv.join(' ')}: exit ${r.exitCode}: ${r.stderr.trim()}`);
}

/** The PATH directory the script runs with: busybox applets and the tc stand-in. */
function toolDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'eip-gwrun-'));
  for (const applet of ['ipcalc', 'lsmod', 'modprobe']) symlinkSync('/usr/bin/busybox', join(dir, applet));
  // Rewrites only what EIP_STANDIN names; otherwise the real tc with the same argv.
  writeFileSync(
    join(dir, 'tc'),
    [
      '#!/bin/bash',
      'out=(); skip=0',
      'for a in "$@"; do',
      '  if [[ ",$EIP_STANDIN," == *,police,* && "$a" == police ]]; then skip=6; fi',
      '  if (( skip > 0 )); then skip=$((skip-1)); continue; fi',
      '  if [[ ",$EIP_STANDIN," == *,fq_codel,* && "$a" == fq_codel ]]; then a=pfifo; fi',
      '  out+=("$a")',
      'done',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash array expansion, not a template
      'exec /usr/sbin/tc "${out[@]}"',
      '',
    ].join('\n'),
  );
  chmodSync(join(dir, 'tc'), 0o755);
  return dir;
}

class Gateway {
  readonly steps: RecordedStep[] = [];
  readonly ns: string;
  readonly ext: string;
  readonly vpc: string;
  env: Record<string, string> = {};

  constructor(
    readonly scriptDir: string,
    readonly tools: string,
    id: string,
  ) {
    this.ns = `eipgw-${id}`;
    this.ext = `eipext-${id}`;
    this.vpc = `eipvpc-${id}`;
  }

  /** Runs argv inside the gateway namespace as the container would. */
  private inPod(argv: string[], standIns: RecordedStep['standIns'] = []) {
    const env = {
      PATH: `${this.tools}:/usr/sbin:/usr/bin:/sbin:/bin`,
      ...this.env,
      EIP_STANDIN: standIns.join(','),
    };
    const trampoline = 'mount --bind "$1" /kube-ovn && mount -t tmpfs tmpfs /run && shift && exec "$@"';
    const full = ['ip', 'netns', 'exec', this.ns, 'unshare', '--mount', '--propagation', 'private'];
    return sh([...full, '/bin/sh', '-c', trampoline, 'sh', this.scriptDir, ...argv], env);
  }

  record(
    kind: RecordedStep['kind'],
    name: string,
    argv: string[],
    standIns?: RecordedStep['standIns'],
  ): RecordedStep {
    const r = this.inPod(argv, standIns);
    const step: RecordedStep = {
      name,
      kind,
      argv,
      ...(Object.keys(this.env).length > 0 && kind === 'op' && { env: { ...this.env } }),
      ...(standIns?.length && { standIns }),
      ...r,
    };
    this.steps.push(step);
    return step;
  }

  op(name: string, op: string, args: string[], standIns?: RecordedStep['standIns']): RecordedStep {
    return this.record('op', name, ['bash', SCRIPT, op, ...args], standIns);
  }

  read(name: string, argv: string[]): RecordedStep {
    return this.record('read', name, argv);
  }

  /** Host-side setup, recorded so the fixture says what the namespace looked like. */
  setup(name: string, argv: string[]): void {
    const r = sh(argv);
    this.steps.push({ name, kind: 'setup', argv, ...r });
    if (r.exitCode !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr.trim()}`);
  }

  create(line: Line): void {
    for (const n of [this.ns, this.ext, this.vpc]) must(['ip', 'netns', 'add', n]);
    mkdirSync(`/etc/netns/${this.ns}/kube-ovn`, { recursive: true });
    const inNs = (ns: string, ...a: string[]) => ['ip', '-n', ns, ...a];
    this.setup('lo up', inNs(this.ns, 'link', 'set', 'lo', 'up'));
    // eth0 towards the VPC, net1 towards the external network (macvlan in a real pod; a veth here).
    this.setup(
      'eth0',
      inNs(
        this.ns,
        'link',
        'add',
        'eth0',
        'address',
        '0a:00:00:00:00:10',
        'type',
        'veth',
        'peer',
        'name',
        'lan0',
        'netns',
        this.vpc,
      ),
    );
    this.setup(
      'net1',
      inNs(
        this.ns,
        'link',
        'add',
        'net1',
        'address',
        '0a:00:00:00:00:20',
        'type',
        'veth',
        'peer',
        'name',
        'ext0',
        'netns',
        this.ext,
      ),
    );
    this.setup('eth0 address', inNs(this.ns, 'addr', 'add', '10.0.1.254/24', 'dev', 'eth0'));
    this.setup(
      'net1 address (the pod own external address)',
      inNs(this.ns, 'addr', 'add', OWN_NET1, 'dev', 'net1'),
    );
    for (const dev of ['eth0', 'net1']) this.setup(`${dev} up`, inNs(this.ns, 'link', 'set', dev, 'up'));
    this.setup('VPC side', inNs(this.vpc, 'addr', 'add', `${LAN_GW}/24`, 'dev', 'lan0'));
    this.setup('VPC side up', inNs(this.vpc, 'link', 'set', 'lan0', 'up'));
    this.setup('external gateway', inNs(this.ext, 'addr', 'add', `${EXT_GW}/24`, 'dev', 'ext0'));
    this.setup(
      'another host on the external network, holding 172.19.0.99',
      inNs(this.ext, 'addr', 'add', '172.19.0.99/24', 'dev', 'ext0'),
    );
    this.setup('external side up', inNs(this.ext, 'link', 'set', 'ext0', 'up'));
    if (line === '1.12') {
      // 1.12: no routes annotation; the CNI's default route is on eth0.
      this.setup(
        'default route on eth0 (CNI)',
        inNs(this.ns, 'route', 'add', 'default', 'via', LAN_GW, 'dev', 'eth0'),
      );
    } else {
      // 1.13+: the routes annotations: the service CIDR via the LAN gateway, the default via the external gateway.
      this.setup(
        'service CIDR via eth0 (routes annotation)',
        inNs(this.ns, 'route', 'add', SVC_CIDR, 'via', LAN_GW, 'dev', 'eth0'),
      );
      this.setup(
        'default via net1 (routes annotation)',
        inNs(this.ns, 'route', 'add', 'default', 'via', EXT_GW, 'dev', 'net1'),
      );
    }
    // 1.15+: the container env kube-ovn's pod template sets.
    if (line === '1.15' || line === '1.16') this.env = { GATEWAY_V4: EXT_GW, GATEWAY_V6: '' };
  }

  destroy(): void {
    for (const n of [this.ns, this.ext, this.vpc]) sh(['ip', 'netns', 'del', n]);
    rmSync(`/etc/netns/${this.ns}`, { recursive: true, force: true });
  }
}

const READS: Array<[string, string[], Line[]]> = [
  ['addresses on net1', ['ip', '-o', 'addr', 'show', 'dev', 'net1'], ['1.12', '1.13', '1.15', '1.16']],
  [
    'ingress filters on net1',
    ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', 'ffff:'],
    ['1.12', '1.13', '1.15', '1.16'],
  ],
  [
    'egress filters on net1',
    ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', '1:'],
    ['1.12', '1.13', '1.15', '1.16'],
  ],
  ['classes on net1', ['tc', 'class', 'show', 'dev', 'net1'], ['1.16']],
  ['ingress filters on the IFB', ['tc', '-p', 'filter', 'show', 'dev', 'ifb-net1', 'parent', '1:'], ['1.16']],
  ['classes on the IFB', ['tc', 'class', 'show', 'dev', 'ifb-net1'], ['1.16']],
  ['qdiscs on net1', ['tc', 'qdisc', 'show', 'dev', 'net1'], ['1.12', '1.13', '1.15', '1.16']],
  ['nat table (legacy)', ['iptables-legacy-save', '-t', 'nat'], ['1.12', '1.13', '1.15', '1.16']],
  ['nat table (nft)', ['iptables-save', '-t', 'nat'], ['1.16']],
  ['env file', ['cat', '/etc/kube-ovn/nat-gateway.env'], ['1.15', '1.16']],
  ['routes', ['ip', 'route', 'show'], ['1.12', '1.13', '1.15', '1.16']],
];

function readAll(g: Gateway, line: Line, when: string): void {
  for (const [name, argv, lines] of READS) if (lines.includes(line)) g.read(`${when}: ${name}`, argv);
}

/** The product's ops, as each release's controller sends them, and the failures the gateway gives. */
function scenario(g: Gateway, line: Line): void {
  const old = line === '1.12';
  const eip = (cidr: string) => (old ? `${cidr},${EXT_GW}` : cidr);
  g.op('eip-add before init', 'eip-add', [eip('172.19.0.30/24')]);
  if (old) {
    g.op('init (the 1.12 init container)', 'init', [`${SVC_CIDR},${LAN_GW}`]);
    g.op('init again (the controller; a no-op)', 'init', [`${SVC_CIDR},${LAN_GW}`]);
    g.op('ext-subnet-route-add (the controller)', 'ext-subnet-route-add', [`172.19.0.0/24,${EXT_GW}`]);
  } else {
    g.op('init (the controller, no arguments)', 'init', []);
  }
  readAll(g, line, 'after init');
  g.op('QoS deletion before any QoS (ingress)', 'eip-ingress-qos-del', ['172.19.0.247']);
  g.op('QoS deletion before any QoS (egress)', 'eip-egress-qos-del', ['172.19.0.247']);
  g.op('eip-add', 'eip-add', [eip('172.19.0.247/24')]);
  g.op('eip-add of an address that extends another (.24 / .247)', 'eip-add', [eip('172.19.0.24/24')]);
  g.op('eip-add again (idempotent)', 'eip-add', [eip('172.19.0.247/24')]);
  g.op('eip-add in the other release form', 'eip-add', [old ? '172.19.0.40/24' : `172.19.0.40/24,${EXT_GW}`]);
  g.op('eip-add of a malformed address', 'eip-add', [eip('300.19.0.5/24')]);
  g.op('eip-add with a prefix length over 32', 'eip-add', [eip('172.19.0.5/33')]);
  if (old) g.op('eip-add with a gateway outside the subnet', 'eip-add', ['172.19.0.6/24,10.9.9.9']);
  g.op('eip-add of an address another host holds', 'eip-add', [eip('172.19.0.99/24')]);
  readAll(g, line, 'after eip-add');
  g.op('ingress QoS on this kernel, no stand-in', 'eip-ingress-qos-add', ['172.19.0.247,1,10,1']);
  g.op('egress QoS on this kernel, no stand-in', 'eip-egress-qos-add', ['172.19.0.247,1,10,1']);
  g.op('ingress QoS with a malformed rate', 'eip-ingress-qos-add', ['172.19.0.247,1,ten,1']);
  g.op('egress QoS with a malformed burst', 'eip-egress-qos-add', ['172.19.0.247,1,10,lots']);
  g.op('ingress QoS with a malformed priority', 'eip-ingress-qos-add', ['172.19.0.247,first,10,1']);
  const stand: RecordedStep['standIns'] = line === '1.16' ? ['fq_codel'] : ['police'];
  g.op('ingress QoS for .247', 'eip-ingress-qos-add', ['172.19.0.247,1,10,1'], stand);
  g.op('egress QoS for .247', 'eip-egress-qos-add', ['172.19.0.247,1,10.5,2'], stand);
  g.op('ingress QoS for .24', 'eip-ingress-qos-add', ['172.19.0.24,2,100,1'], stand);
  g.op('egress QoS for .24', 'eip-egress-qos-add', ['172.19.0.24,2,100,1'], stand);
  readAll(g, line, 'after QoS for .247 and .24');
  g.op(
    'QoS change for .24 as a re-add (egress, 20 Mbit/s)',
    'eip-egress-qos-add',
    ['172.19.0.24,2,20,1'],
    stand,
  );
  readAll(g, line, 'after the re-add');
  // The same kind of change as a deletion, then an add (ingress, 50 Mbit/s).
  g.op('ingress QoS deletion for .24', 'eip-ingress-qos-del', ['172.19.0.24']);
  readAll(g, line, 'after deleting the ingress QoS of .24');
  g.op('ingress QoS for .24 again (50 Mbit/s)', 'eip-ingress-qos-add', ['172.19.0.24,2,50,1'], stand);
  readAll(g, line, 'after the delete-then-add');
  g.op('QoS deletion of an address with no filter (ingress)', 'eip-ingress-qos-del', ['172.19.0.5']);
  g.op('QoS deletion of an address with no filter (egress)', 'eip-egress-qos-del', ['172.19.0.5']);
  g.op('eip-del', 'eip-del', ['172.19.0.24/24']);
  g.op('eip-del of an address that is not there', 'eip-del', ['172.19.0.77/24']);
  readAll(g, line, 'after eip-del');
  if (line === '1.16') classidCollision(g, stand);
  g.op('unknown operation', 'eip-frobnicate', ['172.19.0.247/24']);
  g.setup('net1 gone (as after a restart that lost the attachment)', [
    'ip',
    '-n',
    g.ns,
    'link',
    'del',
    'net1',
  ]);
  g.op('eip-add without net1', 'eip-add', [eip('172.19.0.31/24')]);
  g.op('QoS without net1', 'eip-ingress-qos-add', ['172.19.0.31,1,10,1'], stand);
}

/**
 * 1.16+ derives an HTB class id from the address (a weighted sum of its octets): 172.19.0.239 and 172.19.233.0 get
 * the same one, so the second is given another; its deletion then also deletes by the derived id.
 */
function classidCollision(g: Gateway, stand: RecordedStep['standIns']): void {
  g.op(
    'ingress QoS with a malformed priority, with the stand-in',
    'eip-ingress-qos-add',
    ['172.19.0.247,first,10,1'],
    stand,
  );
  g.op('egress QoS for 172.19.0.239', 'eip-egress-qos-add', ['172.19.0.239,3,30,1'], stand);
  g.op(
    'egress QoS for 172.19.233.0 (same derived class id)',
    'eip-egress-qos-add',
    ['172.19.233.0,3,40,1'],
    stand,
  );
  g.read('after QoS for .0.239 and .233.0: egress filters on net1', [
    'tc',
    '-p',
    'filter',
    'show',
    'dev',
    'net1',
    'parent',
    '1:',
  ]);
  g.read('after QoS for .0.239 and .233.0: classes on net1', ['tc', 'class', 'show', 'dev', 'net1']);
  g.op('egress QoS deletion for 172.19.233.0', 'eip-egress-qos-del', ['172.19.233.0']);
  g.read('after deleting the egress QoS of .233.0: egress filters on net1', [
    'tc',
    '-p',
    'filter',
    'show',
    'dev',
    'net1',
    'parent',
    '1:',
  ]);
  g.read('after deleting the egress QoS of .233.0: classes on net1', ['tc', 'class', 'show', 'dev', 'net1']);
}

function version(argv: string[]): string {
  const r = sh(argv);
  return `${r.stdout}${r.stderr}`.trim().split('\n')[0] ?? '';
}

function main(): void {
  const args = process.argv.slice(2);
  const flag = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args.splice(i, 2)[1] : undefined;
  };
  const scripts = flag('--scripts') ?? process.env.EIP_KUBE_OVN_SCRIPTS;
  const out = flag('--out') ?? fileURLToPath(new URL('../test/fixtures/gateway-runs/', import.meta.url));
  if (!scripts) throw new Error('usage: record-gateway-runs.ts --scripts DIR [--out DIR] [release…]');
  if (process.getuid?.() !== 0) throw new Error('network namespaces need root');
  const releases = args.length ? args : ['v1.12.35', 'v1.13.0', 'v1.14.0', 'v1.15.0', 'v1.16.0', 'master'];
  for (const dir of ['/kube-ovn', '/etc/kube-ovn']) mkdirSync(dir, { recursive: true });
  mkdirSync(out, { recursive: true });
  const tools = toolDir();
  const toolVersions = {
    iproute2: version(['ip', '-V']),
    iptables: version(['iptables', '--version']),
    'iptables-legacy': version(['iptables-legacy', '--version']),
    arping: version(['arping', '-V']),
    busybox: version(['busybox']),
    bash: version(['bash', '--version']),
  };
  try {
    for (const release of releases) {
      const scriptDir = resolve(scripts, release);
      const script = readFileSync(join(scriptDir, 'nat-gateway.sh'));
      const g = new Gateway(scriptDir, tools, `${process.pid}-${randomBytes(2).toString('hex')}`);
      const line = lineOf(release);
      try {
        g.create(line);
        scenario(g, line);
      } finally {
        g.destroy();
      }
      const run: GatewayRun = {
        release,
        ...(COMMITS[release] && { kubeOvnCommit: COMMITS[release] }),
        scriptSha256: createHash('sha256').update(script).digest('hex'),
        kernel: version(['uname', '-sr']),
        tools: toolVersions,
        recordedAt: new Date().toISOString(),
        steps: g.steps,
      };
      writeFileSync(join(out, `${release}.json`), `${JSON.stringify(run, null, 2)}\n`);
      console.log(`${release}: ${g.steps.length} steps`);
    }
  } finally {
    rmSync(tools, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) main();
