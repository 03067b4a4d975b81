/**
 * What an exec into a gateway pod costs, for the lab: the simulator (sim.ts) answers at once, a real pod does not.
 * The local API (local/kube-api/exec.ts) runs every exec into a gateway container through an ExecModel:
 *
 * - **start latency**: the exec waits `startMs` before its command runs — API server to kubelet to the container
 *   runtime starting a process in the container. Execs start in parallel (nothing in the runtime serialises them);
 * - **per-command cost** (simulated gateways only; the netns gateway, local/netns/, has real costs): each program the
 *   command runs — the script's `ip`, `tc`, `iptables`, `iptables-save`, `arping`, `sleep` — takes its measured time
 *   on a virtual clock, and the exec answers when its last command would have ended. `arping` takes one second per
 *   probe (iputils sends one a second and waits a second after the last; `-c 3` takes 3 s, whether `-D`, `-A` or
 *   `-U`) unless duplicate address detection got an answer. The hook sees every program of every release's
 *   simulated script (dialects/), so 1.12's eip-add (`-D` then `-A`) takes 6 s, 1.13's 3 s (`-D`), 1.15's 3 s (`-U`);
 * - **the xtables lock**: `iptables` (legacy) takes /run/xtables.lock for its whole run, and so does the script's
 *   preamble (`iptables-legacy -t nat -S INPUT 1`, which picks the backend). Per pod, as the lock file lives in the
 *   container's /run. `wait`: a command waits for the lock (iptables 1.8.9 without `-w`, measured); `fail`: it exits
 *   4 at once with the message older releases print; `none`: no lock (iptables-nft takes none).
 *
 * The simulator still changes its state when the exec runs (before the answer), so a concurrent exec may see a
 * change its predecessor has not answered yet; what a real pod does then is a race either way. See
 * local/natgw/README.md (Exec costs) for the figures and how they were measured.
 */
import { NAT_GATEWAY_SCRIPT } from '../../shared/domain/kube-ovn.js';
import type { ExecOutcome, ToolHook } from './sim.js';
import type { ToolResult } from './state.js';

export type XtablesLock = 'wait' | 'fail' | 'none';

/** The time each program takes in a gateway pod, in ms (the lock is held for the whole of an iptables run). */
export interface CommandCosts {
  /** bash starting the script and its preamble (the `which` lookups), the backend check apart. */
  script: number;
  ip: number;
  tc: number;
  /** One iptables run, holding the xtables lock. */
  iptables: number;
  /** iptables-save takes no lock (measured). */
  iptablesSave: number;
  /** One arping probe interval: iputils sends a probe a second. */
  arpingProbe: number;
  /** anything else (true, false, a DAD answered at once). */
  other: number;
}

/**
 * Measured in this machine's network-namespace gateway with kube-ovn 1.12.35's nat-gateway.sh
 * (`npm run bench -- exec-cost`, bench/results/exec-cost-netns.json, its `derived` figures): the median CPU time
 * (user + system) of each program run alone in the pod's namespace; `script` is the preamble's (an unknown op) less
 * its backend check, which is charged as an iptables run. arping's second per probe is iputils' own interval, not
 * this machine's (measured: 1.02 s a probe, the exec's own overhead included).
 */
export const MEASURED_COSTS: Readonly<CommandCosts> = Object.freeze({
  script: 16,
  ip: 3,
  tc: 3,
  iptables: 2,
  iptablesSave: 2,
  arpingProbe: 1000,
  other: 2,
});

/**
 * The start latency `npm start` and the cost bench give an exec into a gateway pod (ADR 0100): 50 docker execs
 * started at once, serialised by dockerd, took ~3 s (moby/moby#45624); the kubelet's path adds the API server's hop
 * to the kubelet, not measured here.
 */
export const DEFAULT_EXEC_LATENCY_MS = 60;

export const XTABLES_LOCK_HELD =
  'Another app is currently holding the xtables lock. Perhaps you want to use the -w option?\n';

export interface ExecModelOptions {
  /** Exec start latency in ms (default 0). */
  startMs?: number;
  /** Per-command costs: the measured table, one figure for every program, or none (default none: instant). */
  commands?: 'measured' | 'none' | number | CommandCosts;
  /** What a second iptables does while another holds the lock (default wait). */
  xtablesLock?: XtablesLock;
  /** Injected for tests. */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export interface ExecStats {
  /** Execs into gateway containers since the start (or the last reset). */
  execs: number;
  byPod: Record<string, number>;
  /**
   * Total time the execs took, each from its arrival to its answer, in ms: what their callers waited for (a handler's
   * Lambda is billed for it). Execs still running are not in it.
   */
  execMs: number;
  /** Total time commands waited for an xtables lock another exec held, in ms. */
  lockWaitMs: number;
  /** iptables runs that failed because the lock was held (xtablesLock fail). */
  lockFailures: number;
}

/** An exec's command, given a hook that sees each program it runs (undefined: no per-command cost applies). */
export type RunExec = (hook: ToolHook | undefined) => ExecOutcome | Promise<ExecOutcome>;

const BIN_DIRS = /^\/(usr\/)?(local\/)?s?bin\//;
const program = (cmd: string | undefined): string => (cmd ?? '').replace(BIN_DIRS, '');

/** Whether argv runs kube-ovn's script (`bash|sh <script> …` or the script itself). */
export function runsScript(argv: readonly string[]): boolean {
  const p = program(argv[0]);
  return argv[0] === NAT_GATEWAY_SCRIPT || ((p === 'bash' || p === 'sh') && argv[1] === NAT_GATEWAY_SCRIPT);
}

function costsOf(c: ExecModelOptions['commands']): CommandCosts | undefined {
  if (c === undefined || c === 'none' || c === 0) return undefined;
  if (c === 'measured') return { ...MEASURED_COSTS };
  if (typeof c === 'number')
    return {
      script: c,
      ip: c,
      tc: c,
      iptables: c,
      iptablesSave: c,
      arpingProbe: c,
      other: c,
    };
  return { ...c };
}

/** How long one program runs, given what it answered. */
export function commandMs(costs: CommandCosts, argv: readonly string[], result: ToolResult): number {
  switch (program(argv[0])) {
    case 'ip':
      return costs.ip;
    case 'tc':
      return costs.tc;
    case 'iptables':
    case 'iptables-legacy':
      return costs.iptables;
    case 'iptables-save':
    case 'iptables-legacy-save':
      return costs.iptablesSave;
    case 'arping': {
      // DAD (-D) that got an answer ends at the first reply (exit 1); otherwise every probe is sent, a second apart.
      if (argv.includes('-D') && result.code === 1) return costs.other;
      const c = argv.indexOf('-c');
      const count = c >= 0 ? Number(argv[c + 1]) : 3;
      return (Number.isInteger(count) && count > 0 ? count : 3) * costs.arpingProbe;
    }
    case 'sleep': {
      const s = Number(argv[1]);
      return Number.isFinite(s) && s > 0 ? s * 1000 : costs.other;
    }
    default:
      return costs.other;
  }
}

const takesLock = (argv: readonly string[]): boolean => {
  const p = program(argv[0]);
  // `iptables --version` / `-V` print and exit before taking the lock.
  return (p === 'iptables' || p === 'iptables-legacy') && !argv.includes('--version') && !argv.includes('-V');
};

/** The xtables lock of one pod on the virtual clock: the intervals iptables runs hold it. */
class LockTimeline {
  private held: [number, number][] = [];

  /** The earliest start ≥ `at` for a hold of `ms` that overlaps no other. */
  freeFrom(at: number, ms: number): number {
    let t = at;
    for (const [s, e] of this.held) if (s < t + ms && e > t) t = e;
    return t;
  }

  busy(at: number, ms: number): boolean {
    return this.held.some(([s, e]) => s < at + Math.max(ms, 1e-6) && e > at);
  }

  hold(at: number, ms: number): void {
    this.held.push([at, at + ms]);
    this.held.sort((a, b) => a[0] - b[0]);
  }

  prune(before: number): void {
    this.held = this.held.filter(([, e]) => e > before);
  }
}

export class ExecModel {
  readonly startMs: number;
  readonly costs: CommandCosts | undefined;
  readonly xtablesLock: XtablesLock;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly locks = new Map<string, LockTimeline>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private counts = new Map<string, number>();
  private waited = 0;
  private failures = 0;
  private busy = 0;

  constructor(options: ExecModelOptions = {}) {
    const startMs = options.startMs ?? 0;
    if (!(Number.isFinite(startMs) && startMs >= 0)) throw new RangeError('startMs must be ≥ 0');
    this.startMs = startMs;
    this.costs = costsOf(options.commands);
    this.xtablesLock = options.xtablesLock ?? 'wait';
    this.now = options.now ?? (() => performance.now());
    this.sleep =
      options.sleep ??
      ((ms) =>
        new Promise((resolve) => {
          const t = setTimeout(() => {
            this.timers.delete(t);
            resolve();
          }, ms);
          this.timers.add(t);
        }));
  }

  /** Whether execs cost anything at all (otherwise they run exactly as without a model). */
  get costly(): boolean {
    return this.startMs > 0 || this.costs !== undefined;
  }

  /**
   * One exec into the gateway container of pod `pod` (namespace/name): the start latency, then the command; with
   * `simulated` its programs are timed through the hook (a real backend's take their own time).
   */
  async exec(pod: string, argv: readonly string[], run: RunExec, simulated: boolean): Promise<ExecOutcome> {
    this.counts.set(pod, (this.counts.get(pod) ?? 0) + 1);
    const arrived = this.now();
    try {
      return await this.costed(pod, argv, run, simulated);
    } finally {
      this.busy += this.now() - arrived;
    }
  }

  private async costed(
    pod: string,
    argv: readonly string[],
    run: RunExec,
    simulated: boolean,
  ): Promise<ExecOutcome> {
    if (this.startMs > 0) await this.sleep(this.startMs);
    const costs = this.costs;
    if (!simulated || !costs) return run(undefined);
    const lock = this.lockOf(pod);
    const t0 = this.now();
    lock.prune(t0);
    const clock = { at: t0, nft: false };
    if (runsScript(argv)) {
      // The preamble's backend check (iptables-legacy -t nat -S INPUT 1) takes the lock like any iptables run; when
      // it cannot, the script picks iptables-nft, whose runs take no lock (the simulator keeps one rule set).
      clock.nft = !this.acquire(lock, clock, costs.iptables);
      clock.at += costs.script;
    }
    const hook: ToolHook = (cmd, runTool) => {
      if (takesLock(cmd) && !clock.nft && !this.acquire(lock, clock, costs.iptables))
        return { out: '', err: XTABLES_LOCK_HELD, code: 4 };
      const result = runTool();
      if (!takesLock(cmd) || clock.nft) clock.at += commandMs(costs, cmd, result);
      return result;
    };
    const outcome = await run(hook);
    const rest = clock.at - this.now();
    if (rest > 0) await this.sleep(rest);
    return outcome;
  }

  /** An iptables run of `ms` at the clock: waits for the lock or fails (false) as the mode says; advances the clock. */
  private acquire(lock: LockTimeline, clock: { at: number }, ms: number): boolean {
    if (this.xtablesLock === 'none') {
      clock.at += ms;
      return true;
    }
    if (this.xtablesLock === 'fail' && lock.busy(clock.at, ms)) {
      this.failures++;
      clock.at += ms;
      return false;
    }
    const start = lock.freeFrom(clock.at, ms);
    this.waited += start - clock.at;
    lock.hold(start, ms);
    clock.at = start + ms;
    return true;
  }

  private lockOf(pod: string): LockTimeline {
    let l = this.locks.get(pod);
    if (!l) {
      l = new LockTimeline();
      this.locks.set(pod, l);
    }
    return l;
  }

  /** The pod's container restarted or the pod went: its lock goes with its processes. */
  forget(pod: string): void {
    this.locks.delete(pod);
  }

  stats(): ExecStats {
    return {
      execs: [...this.counts.values()].reduce((a, b) => a + b, 0),
      byPod: Object.fromEntries(this.counts),
      execMs: Math.round(this.busy),
      lockWaitMs: Math.round(this.waited),
      lockFailures: this.failures,
    };
  }

  resetStats(): void {
    this.counts = new Map();
    this.waited = 0;
    this.failures = 0;
    this.busy = 0;
  }

  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
