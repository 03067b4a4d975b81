/**
 * `npm run bench -- exec-cost [--scripts=DIR] [--runs=7]`
 *
 * What each program of kube-ovn 1.12's nat-gateway.sh costs in a real gateway namespace on this machine, the figures
 * behind the lab's exec cost model (local/natgw/exec-model.ts, MEASURED_COSTS). Linux and root only: it runs the
 * network-namespace gateway (local/netns/, ADR 0070) with one 1.12 pod and execs into it directly through the backend
 * (no Kubernetes API in between, so no exec start latency is in these figures).
 *
 * Measured, each the median of `--runs`, in two ways: the wall time of an exec through the backend (nsenter + ip
 * netns exec + the command), and the CPU time (user + system) of the command and its children, read with bash's
 * `times` in the same namespace. On a quiet node a short program's run time is about its CPU time; on a busy shared
 * machine its wall time is mostly waiting for a core, so the model's per-command costs come from the CPU times, and
 * arping's from its wall time (it sleeps a second between probes). Programs: `ip`, `tc`, `iptables-legacy`, its
 * `-save`, `arping` with 1 and 3 probes; the script's preamble alone (an unknown op: bash, its `which` lookups and
 * the backend check, then the usage line); whole ops (eip-add with one and three rules, eip-del, snat-add,
 * floating-ip-add) beside what the model predicts for the same argv on the simulator with MEASURED_COSTS; and 8
 * snat-adds and 8 eip-adds at once. JSON: bench/results/exec-cost-netns.json.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { ExecModel, MEASURED_COSTS } from '../local/natgw/exec-model.js';
import { NatGatewaySim } from '../local/natgw/sim.js';
import { type NetnsBackend, startNetnsBackend } from '../local/netns/backend.js';
import { preflight, stateDirOf } from '../local/netns/host.js';
import { readScriptSet } from '../local/netns/release.js';
import { NAT_GATEWAY_SCRIPT } from '../shared/domain/kube-ovn.js';
import {
  controllerExec,
  EXT,
  eipAddRule,
  LAN,
  netnsTestPod,
  SERVICE_CIDR,
} from '../test/support/netns-pod.js';
import type { Suite } from './run.js';

const USAGE = 'usage: npm run bench -- exec-cost [--scripts=DIR] [--runs=7]';

class UsageError extends Error {
  override readonly name = 'UsageError';
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round((s[Math.floor(s.length / 2)] ?? 0) * 10) / 10;
};

interface Measured {
  /** Wall time of an exec through the backend. */
  ms: number;
  /** CPU time (user + system) of the command and its children. */
  cpuMs: number;
  exitCodes: number[];
}

export interface ExecCostResult {
  /** The script that ran, by its release directory's name (e.g. v1.12.35/nat-gateway.sh), not the host's path. */
  script: string;
  runs: number;
  /** An exec of `true` through the backend: the floor of every wall time below. */
  floorMs: number;
  /** Each program alone (wall time less the floor). */
  programs: Record<string, Measured>;
  /** Whole ops of the script (the floor included), beside the model's prediction for the simulator. */
  ops: Record<string, Measured & { modelMs: number }>;
  /** Several at once in one pod: wall time until the last answered, and each one's own time. */
  together: Record<string, { n: number; wallMs: number; eachMs: number[]; exitCodes: number[] }>;
  /** What MEASURED_COSTS would be from this run (ms). */
  derived: Record<string, number>;
}

/** The model's time for `argv` on a simulator in the state `prepare` gives it, on a virtual clock. */
async function predict(argv: string[], prepare: (sim: NatGatewaySim) => void): Promise<number> {
  const sim = new NatGatewaySim({ release: '1.12', net1: `${EXT.address}/16`, eth0: `${LAN.address}/24` });
  sim.exec(['bash', NAT_GATEWAY_SCRIPT, 'init', `${SERVICE_CIDR},${LAN.gateway}`]);
  prepare(sim);
  let now = 0;
  const model = new ExecModel({
    commands: 'measured',
    now: () => now,
    sleep: async (ms) => {
      now += ms;
    },
  });
  await model.exec('p', argv, (hook) => sim.exec(argv, hook), true);
  return Math.round(now);
}

/**
 * The CPU time (user + system, ms) of `argv` and its children in the pod's namespace: bash runs it (an argv, as its
 * positional parameters) and prints its children's times with the `times` builtin.
 */
function cpuTime(view: string, ns: string, bin: string, argv: string[]): Promise<number> {
  const script = '"$@" >/dev/null 2>&1; times';
  return new Promise((resolvePromise, reject) => {
    const child = spawn(
      'nsenter',
      [`--mount=${view}`, '--', 'ip', 'netns', 'exec', ns, 'bash', '-c', script, 'bash', ...argv],
      {
        env: { PATH: `${bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`, HOME: '/root' },
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.on('error', reject);
    child.on('close', () => {
      // times: the shell's own user and system time, then its children's: "0m0.012s 0m0.020s".
      const children = out.trim().split('\n').at(-1) ?? '';
      const secs = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
      if (secs.length !== 2) reject(new Error(`cannot read the times of ${argv.join(' ')}: ${out}`));
      else resolvePromise((secs[0]! + secs[1]!) * 1000);
    });
  });
}

async function measure(args: readonly string[]): Promise<ExecCostResult> {
  const get = (k: string) => args.find((a) => a.startsWith(`--${k}=`))?.split('=')[1];
  const runs = Number(get('runs') ?? 7);
  if (!Number.isInteger(runs) || runs < 1 || runs > 101)
    throw new UsageError(`--runs must be an integer from 1 to 101\n${USAGE}`);
  const scriptsArg = get('scripts') ?? process.env.EIP_KUBE_OVN_SCRIPTS;
  const scripts = scriptsArg ? resolve(scriptsArg) : undefined;
  const why = await preflight(scripts);
  if (why)
    throw new UsageError(
      `exec-cost runs kube-ovn's script in network namespaces: ${why} (--scripts=DIR or EIP_KUBE_OVN_SCRIPTS)\n${USAGE}`,
    );
  const backend: NetnsBackend = await startNetnsBackend({ scripts });
  try {
    const pod = netnsTestPod({ name: 'vpc-nat-gw-cost-0', uid: 'cost', line: '1.12', tag: 'v1.12.35' });
    const inits = await backend.start(pod as never, false);
    if (inits.some((i) => i.exitCode !== 0)) throw new Error(`init failed: ${JSON.stringify(inits)}`);
    const exec = async (argv: string[]) => {
      const t0 = performance.now();
      const r = await backend.exec(pod as never, argv, '');
      return { ms: performance.now() - t0, code: r.exitCode };
    };
    const ns = backend.namespaceOf(pod.metadata.namespace, pod.metadata.name);
    const state = stateDirOf(backend.base);
    const view = join(state, 'views', '1.mnt');
    if (!ns || !existsSync(view))
      throw new Error(`the pod's namespace or view is not where expected (${view})`);
    const cpu = (argv: string[]) => cpuTime(view, ns, join(state, 'bin'), argv);
    const repeat = async (argvOf: (i: number) => string[], n = runs): Promise<Measured> => {
      const xs: { ms: number; code: number }[] = [];
      const cs: number[] = [];
      for (let i = 0; i < n; i++) {
        xs.push(await exec(argvOf(i)));
        cs.push(await cpu(argvOf(n + i)));
      }
      return {
        ms: median(xs.map((x) => x.ms)),
        cpuMs: median(cs),
        exitCodes: [...new Set(xs.map((x) => x.code))],
      };
    };

    const floor = (await repeat(() => ['true'], runs * 2)).ms;
    const less = (m: Measured): Measured => ({ ...m, ms: Math.round((m.ms - floor) * 10) / 10 });
    const ipt = 'iptables-legacy';
    await exec([ipt, '-t', 'nat', '-N', 'COST']);
    const programs: Record<string, Measured> = {
      'ip -o addr show dev net1': less(await repeat(() => ['ip', '-o', 'addr', 'show', 'dev', 'net1'])),
      'ip route replace default': less(
        await repeat(() => ['ip', 'route', 'replace', 'default', 'via', EXT.gateway, 'dev', 'net1']),
      ),
      'tc qdisc show dev net1': less(await repeat(() => ['tc', 'qdisc', 'show', 'dev', 'net1'])),
      'iptables-legacy -t nat -S INPUT 1': less(await repeat(() => [ipt, '-t', 'nat', '-S', 'INPUT', '1'])),
      'iptables-legacy -t nat -A/-D': less(
        await repeat((i) => [
          ipt,
          '-t',
          'nat',
          i < runs ? '-A' : '-D', // the wall-time runs add a rule, the CPU-time runs (argv n + i) delete one
          'COST',
          '-s',
          '10.9.9.9/32',
          '-j',
          'RETURN',
        ]),
      ),
      'iptables-legacy-save -t nat': less(await repeat(() => ['iptables-legacy-save', '-t', 'nat'])),
    };

    const op = (name: string, rules: string[]) => controllerExec('1.12', name, rules);
    // The simulator takes the form the product sends (argv); the real script the controller's bash -c.
    const simOp = (name: string, rules: string[]) => ['bash', NAT_GATEWAY_SCRIPT, name, ...rules];
    const ip = (i: number) => `172.18.1.${i + 1}`;
    const eip = (i: number) => eipAddRule('1.12', ip(i), 16);
    const opRuns = Math.min(runs, 5);
    const ops: ExecCostResult['ops'] = {};
    const record = async (
      name: string,
      argvOf: (i: number) => string[],
      simArgv: string[],
      prepare: (sim: NatGatewaySim) => void = () => undefined,
      n = opRuns,
    ) => {
      const m = await repeat(argvOf, n);
      ops[name] = { ...m, modelMs: await predict(simArgv, prepare) };
    };
    await record('preamble only (unknown op)', () => op('cost-nothing', []), simOp('cost-nothing', []));
    await record('eip-add (1 rule)', (i) => op('eip-add', [eip(i)]), simOp('eip-add', [eip(0)]));
    await record(
      'eip-add (3 rules)',
      (i) => op('eip-add', [eip(20 + 3 * i), eip(21 + 3 * i), eip(22 + 3 * i)]),
      simOp('eip-add', [eip(20), eip(21), eip(22)]),
      () => undefined,
      Math.min(opRuns, 3),
    );
    await record(
      'eip-del',
      (i) => op('eip-del', [`${ip(i)}/16`]),
      simOp('eip-del', [`${ip(0)}/16`]),
      (sim) => sim.exec(simOp('eip-add', [eip(0)])),
    );
    await record(
      'snat-add',
      (i) => op('snat-add', [`172.18.0.30,10.0.1.${100 + i}/32`]),
      simOp('snat-add', ['172.18.0.30,10.0.1.100/32']),
    );
    await record(
      'floating-ip-add',
      (i) => op('floating-ip-add', [`172.18.2.${i + 1},10.0.1.${150 + i}`]),
      simOp('floating-ip-add', ['172.18.2.1,10.0.1.150']),
    );

    // After the first eip-add net1 answers ARP again (init turns it off: arping then exits at once, "not ARPable").
    programs['arping -c 1 -D (no answer)'] = less(
      await repeat(() => ['arping', '-I', 'net1', '-c', '1', '-D', '172.18.0.250'], 3),
    );
    programs['arping -c 3 -D (no answer)'] = less(
      await repeat(() => ['arping', '-I', 'net1', '-c', '3', '-D', '172.18.0.251'], 3),
    );

    const together: ExecCostResult['together'] = {};
    const atOnce = async (name: string, argvs: string[][]) => {
      const t0 = performance.now();
      const rs = await Promise.all(argvs.map((a) => exec(a)));
      together[name] = {
        n: argvs.length,
        wallMs: Math.round(performance.now() - t0),
        eachMs: rs.map((r) => Math.round(r.ms)),
        exitCodes: [...new Set(rs.map((r) => r.code))],
      };
    };
    await atOnce(
      '8 snat-add',
      Array.from({ length: 8 }, (_, i) => op('snat-add', [`172.18.0.31,10.0.3.${i + 1}/32`])),
    );
    await atOnce(
      '8 eip-add',
      Array.from({ length: 8 }, (_, i) => op('eip-add', [eip(100 + i)])),
    );

    const c = (k: string) => Math.max(1, Math.round(programs[k]!.cpuMs));
    const check = c('iptables-legacy -t nat -S INPUT 1');
    const derived = {
      script: Math.max(1, Math.round(ops['preamble only (unknown op)']!.cpuMs - check)),
      ip: Math.round((c('ip -o addr show dev net1') + c('ip route replace default')) / 2),
      tc: c('tc qdisc show dev net1'),
      iptables: Math.round((check + c('iptables-legacy -t nat -A/-D')) / 2),
      iptablesSave: c('iptables-legacy-save -t nat'),
      arpingProbe: Math.round((programs['arping -c 3 -D (no answer)']!.ms + floor) / 3),
    };
    const dir = (await readScriptSet(scripts!)).dirs['1.12'];
    const script = `${dir ? basename(dir) : '1.12'}/nat-gateway.sh`;
    return { script, runs, floorMs: floor, programs, ops, together, derived };
  } finally {
    await backend.close();
  }
}

function render(r: ExecCostResult): string {
  const row = (k: string, v: string) => `  ${k.padEnd(38)} ${v}`;
  return [
    `kube-ovn's ${r.script} in a network namespace; median of ${r.runs}; Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg()[0]!.toFixed(1)}`,
    `an exec of true through the backend (the floor): ${r.floorMs} ms`,
    '',
    'each program alone (ms): wall time less the floor, CPU time',
    ...Object.entries(r.programs).map(([k, v]) =>
      row(k, `${v.ms} wall, ${v.cpuMs} CPU (exit ${v.exitCodes.join(',')})`),
    ),
    '',
    'whole ops (ms): wall time (floor included), CPU time, the model on the simulator',
    ...Object.entries(r.ops).map(([k, v]) =>
      row(k, `${v.ms} wall, ${v.cpuMs} CPU, ${v.modelMs} model (exit ${v.exitCodes.join(',')})`),
    ),
    '',
    'at once in one pod:',
    ...Object.entries(r.together).map(([k, v]) =>
      row(k, `${v.wallMs} ms until the last; each ${v.eachMs.join(' ')} (exit ${v.exitCodes.join(',')})`),
    ),
    '',
    `per-command costs from this run: ${JSON.stringify(r.derived)}`,
    `the model's MEASURED_COSTS:       ${JSON.stringify(MEASURED_COSTS)}`,
  ].join('\n');
}

export const suite: Suite = {
  description: "per-command costs of kube-ovn's nat-gateway.sh in a real network namespace (Linux, root)",
  usage: USAGE,
  async run(args) {
    const result = await measure(args);
    return {
      table: render(result),
      file: 'exec-cost-netns.json',
      json: {
        suite: 'exec-cost',
        date: new Date().toISOString(),
        node: process.version,
        cpus: cpus().length,
        loadAverageAtEnd: loadavg().map((x) => Math.round(x * 100) / 100),
        ...result,
        modelCosts: MEASURED_COSTS,
      },
    };
  },
};
