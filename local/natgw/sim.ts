/**
 * The simulated NAT gateway container behind `pods/exec` in the local Kubernetes API: one kube-ovn release's
 * nat-gateway.sh (dialects/, chosen by `release`) over an in-memory network namespace, plus the inspection
 * commands a person types into `kubectl exec` (`ip addr`, `ip route`, `tc filter show`, `iptables-save`,
 * `cat /etc/kube-ovn/nat-gateway.env`, ...).
 *
 * `exec(argv)` is a parser of argv, never a shell: nothing is evaluated, `bash -c` is refused.
 */
import { formatInet, formatIp, type Inet, type Ip, parseIp, parsePrefix } from './addr.js';
import { DIALECTS } from './dialects/index.js';
import { ip } from './ip.js';
import { routeTable } from './ip-route.js';
import { iptables, iptablesSave } from './iptables.js';
import { DEFAULT_RELEASE, type KubeOvnRelease } from './releases.js';
import { runScript, SCRIPT_PATH } from './script.js';
import { type CniRoute, fail, NetState, ok, type ToolResult, words } from './state.js';
import { tc } from './tc.js';
import { formatClassId, formatRate, formatSize, keptSize } from './tc-units.js';
import { arping, cat, ipcalc, lsmod, modprobe } from './tools.js';

export type { CniRoute, KubeOvnRelease };

export interface ExecOutcome {
  stdout: string;
  stderr: string;
  exitCode: number;
  /** the command killed PID 1 */
  restart?: boolean;
}

/** One EIP QoS filter, as the tests read it (police filters before 1.16, htb class filters since). */
export interface TcFilter {
  /** ingress = matching `dst` (net1's ingress qdisc, or the ifb device on 1.16+); egress = matching `src`. */
  direction: 'ingress' | 'egress';
  /** The device the filter sits on: net1, or ifb-net1 for 1.16+ ingress. */
  dev: string;
  parent: string;
  match: 'src' | 'dst';
  /** The matched address, without prefix. */
  ip: string;
  prefix: number;
  prio: number;
  handle: string;
  /** As tc prints them: `10Mbit`, `10Mb` (the police action's, or the htb class's the filter sends to). */
  rate: string;
  burst: string;
  /** The htb class the filter sends to (1.16+), e.g. `1:42b3`. */
  classid?: string;
}

/**
 * Wraps each program an exec runs (the script's `ip`, `iptables`, `arping`, … or the exec'd program itself): it may
 * call `run` and return its result, or answer without running it. The local API's exec cost model
 * (local/natgw/exec-model.ts) times the commands and applies the xtables lock with it.
 */
export type ToolHook = (argv: readonly string[], run: () => ToolResult) => ToolResult;

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
  /** The kube-ovn release whose nat-gateway.sh the container runs (default: the lab's, releases.ts). */
  release?: KubeOvnRelease;
  /** The pod's own net1 address in CIDR form (what the macvlan attachment gives it), e.g. `172.18.0.254/16`. */
  net1?: string;
  /** The pod's eth0 address in CIDR form (its lanIp in the VPC subnet); routes via eth0 are checked against it. */
  eth0?: string;
  /**
   * The routes the CNI installs from the pod's routes annotations (1.13+). Without them: a default route via
   * the first host of eth0's subnet.
   */
  routes?: readonly CniRoute[];
  /** The container's environment, from the pod spec (GATEWAY_V4, GATEWAY_V6 on 1.15+). */
  env?: Readonly<Record<string, string>>;
  /** Shared segment for duplicate address detection between gateways. */
  segment?: ExternalSegment;
  /** Clock for the iptables-save header. */
  now?: () => Date;
}

const BIN_DIRS = ['/bin/', '/sbin/', '/usr/bin/', '/usr/sbin/', '/usr/local/bin/', '/usr/local/sbin/'];

function ownAddress(name: string, text: string | undefined): Inet | undefined {
  if (text === undefined) return undefined;
  const inet = parsePrefix(text);
  if (!inet || !text.includes('/'))
    throw new Error(`NatGatewaySim: ${name} must be an address in CIDR form, got "${text}"`);
  return inet;
}

function cniRoute(r: CniRoute): { dst: Inet; via?: Ip; dev: string } {
  const dst = parsePrefix(r.dst);
  const via = r.via === undefined ? undefined : parseIp(r.via);
  if (!dst || (r.via !== undefined && !via))
    throw new Error(`NatGatewaySim: route ${JSON.stringify(r)} is not a CIDR and an address`);
  return { dst, dev: r.dev, ...(via ? { via } : {}) };
}

export class NatGatewaySim {
  readonly release: KubeOvnRelease;
  private readonly net: NetState;
  private readonly env: Readonly<Record<string, string>>;
  private readonly segment: ExternalSegment | undefined;
  private readonly now: () => Date;
  private readonly log: ExecRecord[] = [];
  private restartCount = 0;
  private hook: ToolHook | undefined;

  constructor(options: NatGatewaySimOptions = {}) {
    this.release = options.release ?? DEFAULT_RELEASE;
    this.net = new NetState({
      net1: ownAddress('net1', options.net1),
      eth0: ownAddress('eth0', options.eth0),
      ...(options.routes && { cniRoutes: options.routes.map(cniRoute) }),
    });
    this.env = { ...(options.env ?? {}) };
    this.segment = options.segment;
    this.now = options.now ?? (() => new Date());
    this.segment?.join(this);
  }

  /** Runs one exec'd command (argv as pods/exec received it); `hook` sees every program it runs. */
  exec(argv: readonly string[], hook?: ToolHook): ExecOutcome {
    let outcome: ExecOutcome;
    this.hook = hook;
    try {
      outcome = this.dispatch(argv);
    } catch (e) {
      // A simulator bug must not take the API server down with it; it shows up as a failed command.
      outcome = {
        stdout: '',
        stderr: `nat gateway simulator: internal error: ${(e as Error).stack ?? e}\n`,
        exitCode: 70,
      };
    } finally {
      this.hook = undefined;
    }
    this.log.push({ argv: [...argv], exitCode: outcome.exitCode });
    return outcome;
  }

  /**
   * Runs a container's declared command (an init container's). kube-ovn's 1.12 template wraps plain argv in
   * `bash -c "bash /kube-ovn/nat-gateway.sh init …"`: a string of plain words runs as those words; anything with
   * shell syntax in it is refused, as exec refuses `bash -c`.
   */
  runContainer(argv: readonly string[]): ExecOutcome {
    const [shell = '', flag, text, ...rest] = argv;
    const name = programName(shell);
    if ((name === 'bash' || name === 'sh') && flag === '-c' && text !== undefined && rest.length === 0) {
      if (/^[\w./:,=@%+-]+( +[\w./:,=@%+-]+)* *$/.test(text)) return this.exec(words(text));
    }
    return this.exec(argv);
  }

  /** A container or sandbox restart: all network state and the container's files are lost. */
  restart(): void {
    this.net.reset();
    this.restartCount++;
  }

  // ------------------------------------------------------------ inspection (read-only)

  /** Whether `init` has run since the last restart. */
  get initialised(): boolean {
    return this.net.initialised;
  }

  /** Whether net1 answers ARP (1.12's `init` turns it off, its first eip-add turns it back on). */
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

  /** `ip route` lines (main table, IPv4), without the trailing space iproute2 prints. */
  routes(): string[] {
    return routeTable(this.net)
      .split('\n')
      .filter(Boolean)
      .map((l) => l.trimEnd());
  }

  /** The default route's gateway and device, if there is one. */
  defaultRoute(): { via?: string; dev: string; onlink?: boolean } | undefined {
    const r = this.net.routes.find((x) => x.dst.prefix === 0 && x.dst.family === 4);
    if (!r) return undefined;
    return {
      dev: r.dev,
      ...(r.via ? { via: formatIp(r.via.family, r.via.value) } : {}),
      ...(r.onlink ? { onlink: true } : {}),
    };
  }

  /** A device's qdiscs (net1 by default), as `ingress` / `htb 1:` / `fq_codel 8001:`. */
  qdiscs(dev = 'net1'): string[] {
    return this.net.qdiscs
      .filter((q) => q.dev === dev)
      .map((q) => (q.kind === 'ingress' ? 'ingress' : `${q.kind} ${q.handle}`));
  }

  /** A device's htb classes, as `1:42b3 rate 10Mbit ceil 10Mbit burst 5Mb`. */
  tcClasses(dev = 'net1'): string[] {
    return this.net.classes
      .filter((c) => c.dev === dev)
      .map(
        (c) =>
          `${formatClassId(c.major, c.minor)} rate ${formatRate(c.rate)} ceil ${formatRate(c.ceil)} burst ${formatSize(keptSize(c.rate, c.burst))}`,
      );
  }

  /** Every EIP QoS filter (one matching an address) on every device, by device, then qdisc, then prio. */
  tcFilters(): TcFilter[] {
    return this.net.qdiscs.flatMap((q) =>
      [...q.prios]
        .sort((a, b) => a.prio - b.prio)
        .flatMap((p) =>
          // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
          p.nodes.flatMap((n): TcFilter[] => {
            if (!n.key) return [];
            const cls = this.net.classes.find(
              (c) => c.dev === q.dev && formatClassId(c.major, c.minor) === n.flowid,
            );
            return [
              {
                direction: n.key.direction === 'dst' ? 'ingress' : 'egress',
                dev: q.dev,
                parent: q.handle,
                match: n.key.direction,
                ip: formatIp(n.key.match.family, n.key.match.value),
                prefix: n.key.match.prefix,
                prio: p.prio,
                handle: n.handle,
                rate: formatRate(n.police?.rate ?? cls?.rate ?? 0n),
                burst: formatSize(
                  n.police
                    ? keptSize(n.police.rate, n.police.burst)
                    : cls
                      ? keptSize(cls.rate, cls.burst)
                      : 0,
                ),
                ...(cls && { classid: formatClassId(cls.major, cls.minor) }),
              },
            ];
          }),
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

  /** A file of the container (e.g. /etc/kube-ovn/nat-gateway.env), if it exists. */
  file(path: string): string | undefined {
    return this.net.files.get(path);
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
    if (name === 'kill') return kill(rest);
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
    const r = runScript(DIALECTS[this.release], (a) => this.tool(a), this.net, this.env, args);
    return { stdout: r.out, stderr: r.err, exitCode: r.code };
  }

  /** The programs on the gateway image's PATH that the simulation knows (through the exec's hook, if any). */
  private tool(argv: readonly string[]): ToolResult {
    const hook = this.hook;
    return hook ? hook(argv, () => this.program(argv)) : this.program(argv);
  }

  private program(argv: readonly string[]): ToolResult {
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
        return arping(this.net, args, (t) => this.segment?.answerer(t, this));
      case 'ipcalc':
        return ipcalc(args);
      case 'cat':
        return cat(this.net, args);
      case 'modprobe':
        return modprobe(args);
      case 'lsmod':
        return lsmod();
      case 'sleep':
      case 'true':
        return ok();
      case 'false':
        return fail('', 1);
      default:
        return fail(`bash: ${cmd}: command not found\n`, 127);
    }
  }
}

function kill(args: readonly string[]): ExecOutcome {
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
  // The container dies with its PID 1. The caller restarts it (restart()) and re-runs its initialisation.
  return { stdout: '', stderr: '', exitCode: 0, restart: true };
}

function programName(cmd: string): string {
  const dir = BIN_DIRS.find((d) => cmd.startsWith(d));
  return dir ? cmd.slice(dir.length) : cmd;
}
