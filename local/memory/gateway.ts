/**
 * In-memory Gateway: each gateway pod (by uid) is backed by the same simulated nat-gateway.sh the local
 * Kubernetes API uses (local/natgw), so tests see real effects — net1 addresses, tc filters, the script's exit
 * codes — not just a list of calls. It also records every call and can be told to fail the next ones.
 */

import { GatewayCommandError } from '../../shared/domain/errors.js';
import { natGatewayArgv } from '../../shared/domain/nat-gateway.js';
import type { ExecResult, Gateway, GatewayPod, GatewayRunOptions, NatGwOp } from '../../shared/ports.js';
import { formatIp, networkOf, parsePrefix } from '../natgw/addr.js';
import { atLeast, DEFAULT_RELEASE, type KubeOvnRelease } from '../natgw/releases.js';
import { NatGatewaySim } from '../natgw/sim.js';

/** The external subnet's gateway as kube-ovn defaults it: the first host of net1's network (172.18.0.1 without one). */
function gatewayOf(net1: string | undefined): string {
  const own = net1 ? parsePrefix(net1) : undefined;
  return own ? formatIp(own.family, networkOf(own) + 1n) : '172.18.0.1';
}

export interface GatewayCall {
  pod: string;
  op: NatGwOp;
  args: string[];
  argv: string[];
}

export interface MemoryGatewayOptions {
  /** The kube-ovn release whose nat-gateway.sh the sims run (default: the lab's, local/natgw/releases.ts). */
  release?: KubeOvnRelease;
  /** Argument of 1.12's init (its init container's); from 1.13 init takes none. */
  init?: string;
  /** The pod's own net1 address (CIDR form). */
  net1?: string;
}

export class MemoryGateway implements Gateway {
  readonly calls: GatewayCall[] = [];
  private readonly sims = new Map<string, NatGatewaySim>();
  private readonly delays: number[] = [];
  private failures: {
    remaining: number;
    match?: NatGwOp;
    pod?: string;
    exitCode: number | undefined;
    stdout: string;
    stderr: string;
  }[] = [];

  constructor(private readonly options: MemoryGatewayOptions = {}) {}

  /** The simulated gateway behind a pod, initialised as its init container would on first use. */
  sim(pod: Pick<GatewayPod, 'uid'>): NatGatewaySim {
    let sim = this.sims.get(pod.uid);
    if (!sim) {
      const release = this.options.release ?? DEFAULT_RELEASE;
      // From 1.13 the CNI routes the pod (routes annotations), from 1.15 the pod spec carries the external gateway.
      sim = new NatGatewaySim({
        release,
        ...(this.options.net1 && { net1: this.options.net1 }),
        ...(atLeast(release, '1.13') && {
          routes: [{ dst: '0.0.0.0/0', via: gatewayOf(this.options.net1), dev: 'net1' }],
        }),
        ...(atLeast(release, '1.15') && {
          env: { GATEWAY_V4: gatewayOf(this.options.net1), GATEWAY_V6: '' },
        }),
      });
      this.initialise(sim);
      this.sims.set(pod.uid, sim);
    }
    return sim;
  }

  /** A container restart: the pod's network state is lost and its init container runs again. */
  restart(pod: Pick<GatewayPod, 'uid'>): void {
    const sim = this.sim(pod);
    sim.restart();
    this.initialise(sim);
  }

  /**
   * The next `count` calls (of `op`, if given; into pod `pod`, by name, if given) exit with `exitCode` (default 1;
   * null: a stream lost before any exit status), `stdout` and `stderr`, without running.
   */
  failNext(
    count: number,
    options: { op?: NatGwOp; pod?: string; exitCode?: number | null; stdout?: string; stderr?: string } = {},
  ): void {
    this.failures.push({
      remaining: count,
      ...(options.op && { match: options.op }),
      ...(options.pod && { pod: options.pod }),
      exitCode: options.exitCode === null ? undefined : (options.exitCode ?? 1),
      stdout: options.stdout ?? '',
      stderr: options.stderr ?? 'injected failure',
    });
  }

  /** The next call takes `ms` before it runs (it is abandoned if the caller's signal aborts meanwhile). */
  slowNext(ms: number): void {
    this.delays.push(ms);
  }

  async run(
    pod: GatewayPod,
    op: NatGwOp,
    args: readonly string[],
    signal?: AbortSignal,
    _options?: GatewayRunOptions,
  ): Promise<ExecResult> {
    const argv = natGatewayArgv(op, args);
    const delay = this.delays.shift();
    if (delay) await abortableSleep(delay, signal);
    if (signal?.aborted) throw new GatewayCommandError(`${op} aborted before it ran`, undefined, '', '');
    this.calls.push({ pod: pod.name, op, args: [...args], argv });
    const fault = this.failures.find(
      (f) => f.remaining > 0 && (!f.match || f.match === op) && (!f.pod || f.pod === pod.name),
    );
    if (fault) {
      fault.remaining -= 1;
      // Exit status 0 with output on stderr (a tool's warning) is not a failure
      // (docs/kube-ovn-differences.md#stderr-alone-is-not-a-failure).
      if (fault.exitCode === 0) return { stdout: fault.stdout, stderr: fault.stderr };
      throw new GatewayCommandError(
        fault.exitCode === undefined
          ? 'exec stream closed before the command reported an exit status'
          : `command terminated with non-zero exit code: exit status ${fault.exitCode}`,
        fault.exitCode,
        fault.stdout,
        fault.stderr,
      );
    }
    const out = this.sim(pod).exec(argv);
    if (out.exitCode !== 0)
      throw new GatewayCommandError(
        `command terminated with non-zero exit code: exit status ${out.exitCode}`,
        out.exitCode,
        out.stdout,
        out.stderr,
      );
    return { stdout: out.stdout, stderr: out.stderr };
  }

  private initialise(sim: NatGatewaySim): void {
    const args = atLeast(sim.release, '1.13') ? [] : [this.options.init ?? '10.96.0.0/12,10.0.1.1'];
    const out = sim.exec(['bash', '/kube-ovn/nat-gateway.sh', 'init', ...args]);
    if (out.exitCode !== 0)
      throw new Error(`simulated gateway failed to initialise: ${out.stderr || out.stdout}`);
  }
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
