/**
 * Gateway work batched and serialised per pod (docs/adr/0110-gateway-work-batched-per-pod.md). Every nat-gateway.sh
 * call of a container goes through one queue per gateway pod: calls of the same op that wait together go out as one
 * exec (`<op> rule1 rule2 …`, chunked to what one exec may carry and take), and only the holder of the pod's gateway
 * lease (./gateway-lease.ts) execs into the pod. Each call gets what its own call would have given
 * (./batch-settle.ts). A job (the gateway redo, ./redo.ts) can hold a pod's queue and lease for a while.
 *
 * A burst coalesces by itself: calls arriving while an exec runs wait for the next one. While other invocations of
 * the container are running but not yet at a gateway, a call also waits for them, at most `windowMs`; in a Lambda
 * container, which runs one invocation at a time, it never waits. The lease is kept while any invocation of the container is running and
 * given back when the last one ends (or when a drain ends with none left), before that invocation returns.
 */
import { classifyFailure, type Dialect, ruleCostMs } from '../domain/dialect/index.js';
import { DeadlineError, GatewayCommandError } from '../domain/errors.js';
import type { NatGwCall } from '../domain/nat-gateway.js';
import { chunkArgs, MAX_EXEC_ARG_BYTES } from '../domain/nat-gateway-batch.js';
import type { BatchSettings, Deps, ExecResult, GatewayPod, NatGwOp } from '../ports.js';
import { type ExecArgs, type Outcome, settleRules } from './batch-settle.js';
import { PodLease, podLeaseKey } from './gateway-lease.js';
import type { Invocation } from './invocation.js';

/** The exec timeout of one rule when nothing else is configured (the adapter's default, EXEC_TIMEOUT_MS). */
const DEFAULT_EXEC_TIMEOUT_MS = 20_000;
const DEFAULTS: Required<BatchSettings> = {
  windowMs: 50,
  maxArgBytes: MAX_EXEC_ARG_BYTES,
  maxRules: 10_000,
  execTimeoutMs: DEFAULT_EXEC_TIMEOUT_MS,
  lanes: 8,
};
/** Work of one op worth a second exec beside the first: below it, one exec carries all (ADR 0125). */
const SPREAD_MS = 5_000;
/** The longest one exec is planned to take: chunks are sized below it by the pod's measured time per rule. */
const MAX_CHUNK_MS = 60_000;
/** Time kept free before the latest deadline of a chunk's callers. */
const DEADLINE_MARGIN_MS = 2_000;
/** The shortest time per rule an estimate goes down to. */
const MIN_RULE_MS = 1;

/** A call and the dialect it was built for (which classifies its failures). */
export interface GatewayCall {
  call: NatGwCall;
  dialect?: Dialect;
}

/** The key of a call: one rule of one op. */
export const callKey = (op: NatGwOp, arg: string): string => `${op} ${arg}`;

/** What a job holding a pod's queue can do. */
export interface PodSession {
  readonly pod: GatewayPod;
  /**
   * Holds the pod's gateway lease for at least `ms` more, waiting while another container has it; false when
   * `stopIf` said, during the wait, that it is no longer needed (PodLease.hold).
   */
  hold(ms: number, deadline: number, stopIf?: () => Promise<boolean>): Promise<boolean>;
  /** Runs the calls (grouped by op, groups in the order of their first call) and gives each outcome by callKey. */
  run(calls: readonly GatewayCall[], deadline: number): Promise<Map<string, Outcome>>;
}

interface Entry extends GatewayCall {
  inv: Invocation;
  pod: GatewayPod;
  settle(o: Outcome): void;
}

/** The time calls may take: until `deadline`; `signal` aborts the exec; `whole`: a job's calls (PodSession). */
interface Budget {
  deadline: number;
  signal?: AbortSignal;
  whole?: boolean;
}

interface Job {
  run(session: PodSession): Promise<void>;
}

class PodQueue {
  readonly entries: Entry[] = [];
  readonly jobs: Job[] = [];
  draining = false;
  /** Calls of the exec under way. */
  running = 0;
  constructor(
    public pod: GatewayPod,
    readonly lease: PodLease,
  ) {}
}

/** A signal that aborts once every one of `signals` has; `dispose` takes its listeners off them. */
function allAborted(signals: readonly AbortSignal[]): { signal: AbortSignal; dispose(): void } {
  const distinct = [...new Set(signals)];
  const c = new AbortController();
  let left = distinct.length;
  const one = (s: AbortSignal) => () => {
    left -= 1;
    if (left === 0) c.abort(s.reason);
  };
  const listeners = distinct.map((s) => [s, one(s)] as const);
  for (const [s, f] of listeners) {
    if (s.aborted) f();
    else s.addEventListener('abort', f, { once: true });
  }
  return {
    signal: c.signal,
    dispose: () => {
      for (const [s, f] of listeners) s.removeEventListener('abort', f);
    },
  };
}

export class GatewayBatcher {
  private readonly queues = new Map<string, PodQueue>();
  private readonly perRuleMs = new Map<string, number>();
  /** Pods whose iptables exits on a held xtables lock (older than 1.8.9): one exec at a time there. */
  private readonly serialPods = new Set<string>();
  private readonly settings: Required<BatchSettings>;
  private readonly waiters = new Set<() => void>();
  private active = 0;
  /** Holds of a pod's lease that are waiting for another container (PodLease's `waiting`). */
  private leaseWaits = 0;

  constructor(private readonly deps: Deps) {
    this.settings = { ...DEFAULTS, ...definedOf(deps.batching) };
  }

  /** Counts an invocation of this container as running; the function returned ends it (once). */
  enter(): () => Promise<void> {
    this.active++;
    let left = false;
    return async () => {
      if (left) return;
      left = true;
      this.active--;
      if (this.active > 0) return;
      for (const q of this.queues.values()) if (!q.draining) await this.giveBack(q);
    };
  }

  /** Runs one call in the pod, batched with others of its op that wait with it. */
  exec(inv: Invocation, pod: GatewayPod, call: NatGwCall, dialect?: Dialect): Promise<ExecResult> {
    if (inv.signal.aborted)
      return Promise.reject(new DeadlineError('invocation deadline reached before the gateway call'));
    return new Promise<ExecResult>((resolve, reject) => {
      let done = false;
      const onAbort = () =>
        settle({
          ok: false,
          error: new DeadlineError('invocation deadline reached while the gateway call waited'),
        });
      const settle = (o: Outcome): void => {
        if (done) return;
        done = true;
        inv.signal.removeEventListener('abort', onAbort);
        if (o.ok) resolve(o.result);
        else reject(o.error);
      };
      inv.signal.addEventListener('abort', onAbort, { once: true });
      const q = this.queueOf(pod);
      q.entries.push({ inv, pod, call, ...(dialect && { dialect }), settle });
      for (const wake of [...this.waiters]) wake();
      this.kick(q);
    });
  }

  /** Runs `fn` holding the pod's queue (no other call of this container runs meanwhile). */
  withPod<T>(pod: GatewayPod, fn: (s: PodSession) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const q = this.queueOf(pod);
      q.jobs.push({ run: (s) => fn(s).then(resolve, reject) });
      this.kick(q);
    });
  }

  private queueOf(pod: GatewayPod): PodQueue {
    const key = podLeaseKey(pod);
    let q = this.queues.get(key);
    if (!q) {
      q = new PodQueue(pod, new PodLease(this.deps, key, (on) => this.leaseWaiting(on)));
      this.queues.set(key, q);
    }
    q.pod = pod;
    return q;
  }

  private kick(q: PodQueue): void {
    if (q.draining) return;
    q.draining = true;
    void this.drain(q);
  }

  private async drain(q: PodQueue): Promise<void> {
    try {
      for (;;) {
        const job = q.jobs.shift();
        if (job) {
          await job.run(this.session(q));
          continue;
        }
        if (q.entries.length === 0) break;
        await this.gather();
        await this.runEntries(q, q.entries.splice(0));
      }
    } finally {
      q.draining = false;
      if (this.active === 0 || this.leaseWaits > 0) await this.giveBack(q);
    }
  }

  /**
   * Never hold one pod's lease idle while waiting for another's: two containers each holding one pod of a
   * replicated gateway, each waiting for the other's, would wait until their deadlines (the order in which they take
   * pods is the order their calls come in). While a hold waits, every queue with nothing to do gives its lease back,
   * and so does each that becomes idle (drain). A queue with work finishes it (it needs only its own pod), then idles.
   */
  private async leaseWaiting(on: boolean): Promise<void> {
    this.leaseWaits += on ? 1 : -1;
    if (!on) return;
    for (const q of [...this.queues.values()])
      if (!q.draining && q.entries.length === 0 && q.jobs.length === 0 && q.lease.held)
        await this.giveBack(q);
  }

  /**
   * While some invocations of this container are running but not at a gateway (waiting for a call or in one), a call
   * waits up to `windowMs` for them to join: until each is at a gateway, or the window ends.
   */
  private async gather(): Promise<void> {
    const end = Date.now() + this.settings.windowMs;
    while (this.active > this.atGateways() && Date.now() < end) await this.arrival(end - Date.now());
  }

  /** Invocations with a call waiting or running, in every queue. */
  private atGateways(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.entries.length + q.running;
    return n;
  }

  /** Resolves at the next call's arrival, or after `ms`. */
  private arrival(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.waiters.add(wake);
    });
  }

  /** Gives the pod's lease back, and forgets an idle queue (a container meets pods come and go). */
  private async giveBack(q: PodQueue): Promise<void> {
    await q.lease.release().catch((e: unknown) => {
      this.deps.log.warn('gateway lease release failed; it expires on its own', {
        lease: q.lease.key,
        error: String(e),
      });
    });
    if (!q.draining && q.entries.length === 0 && q.jobs.length === 0 && !q.lease.held)
      this.queues.delete(q.lease.key);
  }

  /** Runs the waiting entries, an exec per op and chunk, and settles each. */
  private async runEntries(q: PodQueue, all: Entry[]): Promise<void> {
    // A caller whose invocation has given up was answered already: its call is not sent.
    const entries = all.filter((e) => !e.inv.signal.aborted);
    if (entries.length === 0) return;
    const deadline = Math.max(...entries.map((e) => e.inv.deadline));
    const aborts = allAborted(entries.map((e) => e.inv.signal));
    q.running = entries.length;
    const outcomes = await this.runCalls(q, entries, { deadline, signal: aborts.signal }).finally(() => {
      aborts.dispose();
      q.running = 0;
    });
    for (const e of entries) e.settle(outcomes.get(callKey(e.call.op, e.call.args[0]!))!);
  }

  private session(q: PodQueue): PodSession {
    return {
      pod: q.pod,
      hold: (ms, deadline, stopIf) => q.lease.hold(ms, deadline, stopIf),
      run: (calls, deadline) => this.runCalls(q, calls, { deadline, whole: true }),
    };
  }

  private async runCalls(
    q: PodQueue,
    calls: readonly GatewayCall[],
    by: Budget,
  ): Promise<Map<string, Outcome>> {
    const groups = new Map<string, { op: NatGwOp; dialect: Dialect | undefined; args: string[] }>();
    for (const { call, dialect } of calls) {
      const key = `${call.op} ${dialect?.line ?? ''}`;
      const g = groups.get(key) ?? { op: call.op, dialect, args: [] };
      g.args.push(...call.args);
      groups.set(key, g);
    }
    const out = new Map<string, Outcome>();
    for (const g of groups.values()) {
      const settled = await this.runGroup(q, g.op, g.dialect, [...new Set(g.args)], by);
      for (const [arg, o] of settled) out.set(callKey(g.op, arg), o);
    }
    return out;
  }

  /**
   * One op's rules, chunk by chunk, in up to `lanes` execs at once when the rules would take long one after another
   * (ADR 0125); a failure to get the lease or a deadline settles what is left with it. A job (`whole`) starts no
   * chunk its time would not cover.
   */
  private async runGroup(
    q: PodQueue,
    op: NatGwOp,
    d: Dialect | undefined,
    args: readonly string[],
    by: Budget,
  ): Promise<Map<string, Outcome>> {
    const out = new Map<string, Outcome>();
    const lanes = this.lanesFor(q.pod, op, d, args.length);
    const most = Math.ceil(args.length / lanes);
    const exec: ExecArgs = (a) => this.execOnce(q, op, d, a, by);
    let rest = args;
    let failure: { error: unknown } | undefined;
    const lane = async (): Promise<void> => {
      while (rest.length > 0 && !failure) {
        const chunk = this.nextChunk(q.pod, op, d, rest, by, most);
        if (chunk.length === 0) {
          failure = { error: new DeadlineError('no time left to run the rest of the gateway work') };
          return;
        }
        rest = rest.slice(chunk.length);
        const failed = await settleChunk(exec, chunk, d, out);
        failure ??= failed;
      }
    };
    await Promise.all(Array.from({ length: lanes }, lane));
    if (failure) for (const a of rest) out.set(a, { ok: false, error: failure.error });
    return out;
  }

  /**
   * Execs to spread an op's rules over: one unless they would take more than SPREAD_MS one after another, then as
   * many as that work fills, up to the pod's lanes (1 once its iptables refused to wait for the xtables lock).
   */
  private lanesFor(pod: GatewayPod, op: NatGwOp, d: Dialect | undefined, rules: number): number {
    const most = this.serialPods.has(pod.uid) ? 1 : this.settings.lanes;
    const spread = Math.ceil((rules * this.costOf(pod, op, d)) / SPREAD_MS);
    return Math.max(1, Math.min(most, spread, rules));
  }

  /**
   * The next chunk: within the bytes and rules one exec carries and the time its callers have left (at least one
   * rule, unless `whole`: then none when not even one fits).
   */
  private nextChunk(
    pod: GatewayPod,
    op: NatGwOp,
    d: Dialect | undefined,
    args: readonly string[],
    by: Budget,
    most: number,
  ): readonly string[] {
    const budget = Math.min(MAX_CHUNK_MS, by.deadline - this.deps.clock.now() - DEADLINE_MARGIN_MS);
    const fits = Math.floor(budget / this.costOf(pod, op, d));
    if (by.whole && fits < 1) return [];
    const byTime = Math.max(1, fits);
    const count = Math.min(this.settings.maxRules, byTime, most);
    return chunkArgs(args, this.settings.maxArgBytes, count)[0] ?? [];
  }

  private costOf(pod: GatewayPod, op: NatGwOp, d: Dialect | undefined): number {
    return this.perRuleMs.get(`${pod.uid} ${op}`) ?? ruleCostMs(d, op);
  }

  /** One exec under the pod's lease, timed: what it took per rule sizes the next chunks. */
  private async execOnce(
    q: PodQueue,
    op: NatGwOp,
    d: Dialect | undefined,
    args: readonly string[],
    by: Budget,
  ): Promise<ExecResult> {
    const { clock, gateway, metrics } = this.deps;
    const perRule = this.costOf(q.pod, op, d);
    const left = by.deadline - clock.now();
    if (left <= 0) throw new DeadlineError('no time left for the gateway call');
    const timeoutMs = Math.max(
      1_000,
      Math.min(this.settings.execTimeoutMs + 2 * args.length * perRule, left),
    );
    await q.lease.hold(timeoutMs, by.deadline);
    const started = clock.now();
    metrics.count('GatewayExecs', 1, { op });
    metrics.count('GatewayBatchRules', args.length, { op });
    try {
      const r = await gateway.run(q.pod, op, args, by.signal, { timeoutMs });
      this.learn(q.pod, op, Math.max(MIN_RULE_MS, (clock.now() - started) / args.length));
      return r;
    } catch (e) {
      const took = clock.now() - started;
      if (e instanceof GatewayCommandError && e.exitCode === undefined && took >= 0.9 * timeoutMs)
        this.learn(q.pod, op, Math.max(perRule, (2 * took) / args.length));
      if (e instanceof GatewayCommandError && classifyFailure(e, d).reason === 'xtables-lock')
        this.serialise(q.pod);
      throw e;
    }
  }

  /** The pod's iptables does not wait for the xtables lock: from now on one exec at a time there. */
  private serialise(pod: GatewayPod): void {
    if (this.serialPods.has(pod.uid)) return;
    this.serialPods.add(pod.uid);
    while (this.serialPods.size > 512) this.serialPods.delete(this.serialPods.values().next().value!);
    this.deps.log.warn('gateway pod refused concurrent iptables runs; its execs go one at a time', {
      pod: `${pod.namespace}/${pod.name}`,
    });
  }

  private learn(pod: GatewayPod, op: NatGwOp, ms: number): void {
    const key = `${pod.uid} ${op}`;
    this.perRuleMs.delete(key);
    this.perRuleMs.set(key, ms);
    while (this.perRuleMs.size > 512) this.perRuleMs.delete(this.perRuleMs.keys().next().value!);
  }
}

/** Settles one chunk into `out`; a failure that ends the op (the lease, a deadline) is returned, its rules failed. */
async function settleChunk(
  exec: ExecArgs,
  chunk: readonly string[],
  d: Dialect | undefined,
  out: Map<string, Outcome>,
): Promise<{ error: unknown } | undefined> {
  try {
    for (const [a, o] of await settleRules(exec, chunk, d)) out.set(a, o);
    return undefined;
  } catch (error) {
    for (const a of chunk) out.set(a, { ok: false, error });
    return { error };
  }
}

function definedOf(s: BatchSettings | undefined): BatchSettings {
  return Object.fromEntries(Object.entries(s ?? {}).filter(([, v]) => v !== undefined));
}

const batchers = new WeakMap<object, GatewayBatcher>();

/**
 * The batcher of a container: one per Gateway adapter (the handlers and the audit of one process share it, a
 * crash-point test's wrapped ports get their own).
 */
export function batcherOf(deps: Deps): GatewayBatcher {
  let b = batchers.get(deps.gateway);
  if (!b) {
    b = new GatewayBatcher(deps);
    batchers.set(deps.gateway, b);
  }
  return b;
}
