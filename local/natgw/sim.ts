/**
 * The simulated NAT gateway pod behind `pods/exec` in the local Kubernetes API: kube-ovn's nat-gateway.sh
 * (as shipped with 1.12) over an in-memory network namespace, plus the inspection commands a person types into
 * `kubectl exec` (`ip addr`, `ip route`, `tc filter show`, `iptables-save`, ...).
 *
 * `exec(argv)` is a parser of argv, never a shell: nothing is evaluated, `bash -c` is refused.
 */
import { ip } from './ip.js';
import { iptables, iptablesSave } from './iptables.js';
import { runScript, SCRIPT_PATH } from './script.js';
import {
  fail,
  formatInet,
  formatIp,
  type Inet,
  NetState,
  ok,
  parseIp,
  parsePrefix,
  type ToolResult,
} from './state.js';
import { formatRate, formatSize, tc } from './tc.js';

export interface ExecOutcome {
  stdout: string;
  stderr: string;
  exitCode: number;
  /** the command killed PID 1 */
  restart?: boolean;
}

/** One u32 filter on net1, as the tests read it. */
export interface TcFilter {
  /** ingress = parent ffff: matching `dst`; egress = the htb root 1: matching `src`. */
  direction: 'ingress' | 'egress';
  parent: string;
  match: 'src' | 'dst';
  /** The matched address, without prefix. */
  ip: string;
  prefix: number;
  prio: number;
  handle: string;
  /** As tc prints them: `10Mbit`, `10Mb`. */
  rate: string;
  burst: string;
}

export interface ExecRecord {
  argv: readonly string[];
  exitCode: number;
}

/**
 * The external L2 segment several simulated gateways share, so that duplicate address detection (`arping -D`
 * in eip-add) can see each other's net1 addresses and any extra host that answers ARP (e.g. the subnet's
 * router at its gateway address). Without a segment DAD always passes.
 */
export class ExternalSegment {
  private readonly sims = new Set<NatGatewaySim>();
  private readonly hosts = new Map<string, string>();

  join(sim: NatGatewaySim): void {
    this.sims.add(sim);
  }

  leave(sim: NatGatewaySim): void {
    this.sims.delete(sim);
  }

  /** A host outside the simulation that answers ARP for `ip`. */
  addHost(ipAddress: string, mac = '00:00:5e:00:01:01'): void {
    this.hosts.set(ipAddress, mac);
  }

  /** The MAC of whoever else answers ARP for `ipAddress`, if anyone. */
  answerer(ipAddress: string, asker: NatGatewaySim): string | undefined {
    const host = this.hosts.get(ipAddress);
    if (host) return host;
    for (const sim of this.sims) {
      if (sim !== asker && sim.answersArpFor(ipAddress)) return sim.net1Mac;
    }
    return undefined;
  }
}

export interface NatGatewaySimOptions {
  /** The pod's own net1 address in CIDR form (what the macvlan attachment gives it), e.g. `172.18.0.254/16`. */
  net1?: string;
  /** The pod's eth0 address in CIDR form (its lanIp in the VPC subnet); routes via eth0 are checked against it. */
  eth0?: string;
  /** Shared segment for duplicate address detection between gateways. */
  segment?: ExternalSegment;
  /** Clock for the iptables-save header. */
  now?: () => Date;
}

const BIN_DIRS = ['/bin/', '/sbin/', '/usr/bin/', '/usr/sbin/', '/usr/local/bin/', '/usr/local/sbin/'];

export class NatGatewaySim {
  private readonly net: NetState;
  private readonly segment: ExternalSegment | undefined;
  private readonly now: () => Date;
  private readonly log: ExecRecord[] = [];
  private restartCount = 0;

  constructor(options: NatGatewaySimOptions = {}) {
    const own = (name: 'net1' | 'eth0'): Inet | undefined => {
      const text = options[name];
      if (text === undefined) return undefined;
      const inet = parsePrefix(text);
      if (!inet || !text.includes('/'))
        throw new Error(`NatGatewaySim: ${name} must be an address in CIDR form, got "${text}"`);
      return inet;
    };
    this.net = new NetState({ net1: own('net1'), eth0: own('eth0') });
    this.segment = options.segment;
    this.now = options.now ?? (() => new Date());
    this.segment?.join(this);
  }

  /** Runs one exec'd command (argv as pods/exec received it). */
  exec(argv: readonly string[]): ExecOutcome {
    let outcome: ExecOutcome;
    try {
      outcome = this.dispatch(argv);
    } catch (e) {
      // A simulator bug must not take the API server down with it; it shows up as a failed command.
      outcome = {
        stdout: '',
        stderr: `nat gateway simulator: internal error: ${(e as Error).stack ?? e}\n`,
        exitCode: 70,
      };
    }
    this.log.push({ argv: [...argv], exitCode: outcome.exitCode });
    return outcome;
  }

  /** A container or sandbox restart: all network state is lost (the caller then re-runs the init container). */
  restart(): void {
    this.net.reset();
    this.restartCount++;
  }

  // ------------------------------------------------------------ inspection (read-only)

  /** Whether `init` has run since the last restart. */
  get initialised(): boolean {
    return this.net.initialised;
  }

  /** Whether net1 answers ARP (`init` turns it off, the first eip-add turns it back on). */
  get arp(): boolean {
    return this.net.link('net1')?.arp ?? false;
  }

  get restarts(): number {
    return this.restartCount;
  }

  get net1Mac(): string {
    return this.net.link('net1')?.mac ?? '';
  }

  /** net1's addresses in CIDR form, in the order they were added (the pod's own first). */
  net1Addresses(): string[] {
    return (this.net.link('net1')?.addresses ?? []).map(formatInet);
  }

  /** `ip route` lines (main table, IPv4). */
  routes(): string[] {
    return this.runTool(['ip', 'route']).stdout.split('\n').filter(Boolean);
  }

  /** The default route's gateway and device, if there is one. */
  defaultRoute(): { via?: string; dev: string } | undefined {
    const r = this.net.routes.find((x) => x.dst.prefix === 0 && x.dst.family === 4);
    if (!r) return undefined;
    return { dev: r.dev, ...(r.via ? { via: formatIp(r.via.family, r.via.value) } : {}) };
  }

  /** net1's qdiscs, as `ingress` / `htb 1:`. */
  qdiscs(): string[] {
    return this.net.qdiscs.map((q) => (q.kind === 'ingress' ? 'ingress' : `htb ${q.handle}`));
  }

  tcFilters(): TcFilter[] {
    return this.net.qdiscs.flatMap((q) =>
      [...q.prios]
        .sort((a, b) => a.prio - b.prio)
        .flatMap((p) =>
          p.nodes.map((n) => ({
            direction: q.kind === 'ingress' ? ('ingress' as const) : ('egress' as const),
            parent: q.handle,
            match: n.direction,
            ip: formatIp(n.match.family, n.match.value),
            prefix: n.match.prefix,
            prio: p.prio,
            handle: n.handle,
            rate: formatRate(n.rate),
            burst: formatSize(n.burst),
          })),
        ),
    );
  }

  /** The nat table's rules as `iptables -t nat -S` prints them (`-A CHAIN …`). */
  natRules(): string[] {
    return this.runTool(['iptables', '-t', 'nat', '-S'])
      .stdout.split('\n')
      .filter((l) => l.startsWith('-A '));
  }

  /** The nat table's user-defined chains. */
  natChains(): string[] {
    return [...this.net.chains.entries()].filter(([, c]) => !c.builtin).map(([n]) => n);
  }

  /** Every command exec'd so far, with its exit code. */
  history(): readonly ExecRecord[] {
    return this.log;
  }

  /** True if `ipAddress` is on net1 and net1 answers ARP (used by the shared segment). */
  answersArpFor(ipAddress: string): boolean {
    const l = this.net.link('net1');
    const want = parseIp(ipAddress);
    return (
      !!l &&
      l.up &&
      l.arp &&
      !!want &&
      l.addresses.some((a) => a.family === want.family && a.value === want.value)
    );
  }

  // ------------------------------------------------------------ dispatch

  private runTool(argv: readonly string[]): ExecOutcome {
    const r = this.tool(argv);
    return { stdout: r.out, stderr: r.err, exitCode: r.code };
  }

  private dispatch(argv: readonly string[]): ExecOutcome {
    const [cmd, ...rest] = argv;
    if (cmd === undefined || cmd === '')
      return { stdout: '', stderr: 'bash: : command not found\n', exitCode: 127 };
    const name = programName(cmd);
    if (name === 'bash' || name === 'sh') return this.shell(name, rest);
    if (cmd === SCRIPT_PATH) return this.script(rest);
    if (name === 'kill') return this.kill(rest);
    return this.runTool(argv);
  }

  private shell(name: string, args: readonly string[]): ExecOutcome {
    const [first, ...rest] = args;
    if (first === undefined) return { stdout: '', stderr: '', exitCode: 0 }; // no stdin: the shell ends at once
    if (first === '-c') {
      return {
        stdout: '',
        stderr: `${name}: -c is refused by the NAT gateway simulator: it runs argv only and evaluates nothing\n`,
        exitCode: 126,
      };
    }
    if (first.startsWith('-')) {
      return {
        stdout: '',
        stderr: `${name}: ${first}: option not supported by the NAT gateway simulator\n`,
        exitCode: 2,
      };
    }
    if (first === SCRIPT_PATH) return this.script(rest);
    return { stdout: '', stderr: `${name}: ${first}: No such file or directory\n`, exitCode: 127 };
  }

  private script(args: readonly string[]): ExecOutcome {
    const r = runScript((a) => this.tool(a), this.net, args);
    return { stdout: r.out, stderr: r.err, exitCode: r.code };
  }

  private kill(args: readonly string[]): ExecOutcome {
    const pids = args.filter((a) => !a.startsWith('-'));
    const signal = args.find((a) => a.startsWith('-'));
    if (signal !== undefined && !/^-(\d+|[A-Z]+|s)$/.test(signal)) {
      return { stdout: '', stderr: `kill: bad signal name '${signal.slice(1)}'\n`, exitCode: 1 };
    }
    if (pids.length === 0)
      return { stdout: '', stderr: 'kill: usage: kill [-s sigspec] pid ...\n', exitCode: 2 };
    const other = pids.find((p) => p !== '1');
    if (other !== undefined)
      return { stdout: '', stderr: `kill: can't kill pid ${other}: No such process\n`, exitCode: 1 };
    // The container dies with its PID 1. The caller restarts it (restart()) and re-runs the init container.
    return { stdout: '', stderr: '', exitCode: 0, restart: true };
  }

  /** The programs on the gateway image's PATH that the simulation knows. */
  private tool(argv: readonly string[]): ToolResult {
    const [cmd = '', ...args] = argv;
    switch (programName(cmd)) {
      case 'ip':
        return ip(this.net, args);
      case 'tc':
        return tc(this.net, args);
      case 'iptables':
        return iptables(this.net, args);
      case 'iptables-save':
        return iptablesSave(this.net, args, this.now());
      case 'arping':
        return this.arping(args);
      case 'sleep':
      case 'true':
        return ok();
      case 'false':
        return fail('', 1);
      default:
        return fail(`bash: ${cmd}: command not found\n`, 127);
    }
  }

  /** iputils arping, enough for `arping -I net1 -c 3 -D <ip>` (DAD) and the gratuitous forms. */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
  private arping(args: readonly string[]): ToolResult {
    let dev = 'eth0';
    let count = 3;
    let dad = false;
    let unsolicited = false;
    let target: string | undefined;
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      if (a === '-I') dev = args[++i] ?? '';
      else if (a === '-c' || a === '-w') {
        const v = args[++i] ?? '';
        if (!/^\d+$/.test(v)) return fail(`arping: invalid argument: '${v}'\n`, 2);
        if (a === '-c') count = Number(v);
      } else if (a === '-D') dad = true;
      else if (a === '-U' || a === '-A') unsolicited = true;
      else if (a === '-q' || a === '-f' || a === '-b') {
        // accepted
      } else if (a.startsWith('-')) return fail(`arping: invalid option -- '${a.slice(1)}'\n`, 2);
      else target = a;
    }
    if (target === undefined)
      return fail('Usage: arping [-AbDfhqUV] [-c count] [-w timeout] [-I device] destination\n', 2);
    const l = this.net.link(dev);
    if (!l) return fail(`arping: Device ${dev} not available.\n`, 2);
    const t = parseIp(target);
    if (t?.family !== 4) return fail(`arping: ${target}: Name or service not known\n`, 2);
    if (!l.up) return fail(`arping: Interface "${dev}" is down\n`, 2);
    const from = dad ? '0.0.0.0' : formatIp(4, l.addresses.find((a) => a.family === 4)?.value ?? 0n);
    const head = `ARPING ${target} from ${from} ${dev}\n`;
    if (unsolicited)
      return ok(`${head}Sent ${count} probes (${count} broadcast(s))\nReceived 0 response(s)\n`);
    const answer = this.segment?.answerer(target, this);
    if (answer) {
      return {
        out: `${head}Unicast reply from ${target} [${answer.toUpperCase()}]  0.612ms\nSent 1 probes (1 broadcast(s))\nReceived 1 response(s)\n`,
        err: '',
        code: dad ? 1 : 0,
      };
    }
    return {
      out: `${head}Sent ${count} probes (${count} broadcast(s))\nReceived 0 response(s)\n`,
      err: '',
      code: dad ? 0 : 1,
    };
  }
}

function programName(cmd: string): string {
  const dir = BIN_DIRS.find((d) => cmd.startsWith(d));
  return dir ? cmd.slice(dir.length) : cmd;
}
