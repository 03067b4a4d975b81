/**
 * The Gateway port on pods/exec over WebSocket (rest.ts, ADR 0027): one nat-gateway.sh run as an argv array,
 * turned into one promise.
 *
 * `KubeRest.exec()` resolves when the socket opens; the outcome arrives later on the status channel. So the
 * promise here settles on exactly one of: a Success status (resolve), a Failure status (GatewayCommandError with
 * the exit code from the NonZeroExitCode details), the socket closing without a status, the hard timeout, or the
 * caller's AbortSignal — the last three close the socket. stdout and stderr are always captured, and stderr alone is not a failure
 * (docs/kube-ovn-differences.md#stderr-alone-is-not-a-failure).
 */
import {
  ClusterUnavailableError,
  type EipError,
  GatewayCommandError,
  GatewayNotReadyError,
} from '../../domain/errors.js';
import { GATEWAY_CONTAINER } from '../../domain/kube-ovn.js';
import { natGatewayArgv } from '../../domain/nat-gateway.js';
import type { ExecResult, Gateway, GatewayPod, NatGwOp } from '../../ports.js';
import { type ExecSocket, type ExecStatus, KubeRest, type KubeSource } from './rest.js';

export interface K8sGatewayOptions {
  /** Where the API server is: a KubeEndpoint, a lazy one, or a client-node KubeConfig (local runs, tests). */
  kubeConfig: KubeSource;
  /** Hard limit for one exec, from connect to exit status. */
  timeoutMs?: number;
}

export const DEFAULT_EXEC_TIMEOUT_MS = 20_000;

/** WebSocket.CLOSED */
const CLOSED = 3;

export function createK8sGateway(options: K8sGatewayOptions): Gateway {
  const exec = new KubeRest(options.kubeConfig);
  const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
  return {
    run: (pod, op, args, signal, o) => runOnce(exec, o?.timeoutMs ?? timeoutMs, pod, op, args, signal),
  };
}

/** The exit code a Status carries: 0 for Success, N for NonZeroExitCode, undefined for anything else. */
export function exitCodeOf(status: ExecStatus): number | undefined {
  if (status.status === 'Success') return 0;
  if (status.reason !== 'NonZeroExitCode') return undefined;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  const code = Number.parseInt(cause?.message ?? '', 10);
  return Number.isInteger(code) ? code : undefined;
}

class Collector {
  private readonly chunks: Buffer[] = [];

  write(chunk: Buffer): void {
    this.chunks.push(Buffer.from(chunk));
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/** A failed WebSocket upgrade: ws rejects with "Unexpected server response: N". */
function connectError(e: unknown, target: string): EipError {
  const message = e instanceof Error ? e.message : String((e as { message?: unknown })?.message ?? e);
  const status = Number(/Unexpected server response: (\d{3})/.exec(message)?.[1]);
  const what = `exec in ${target}: ${message}`;
  // 400/404 before the upgrade: the pod or its container is not there (any more).
  if (status === 404 || status === 400) return new GatewayNotReadyError(what, { cause: e });
  return new ClusterUnavailableError(what, Number.isNaN(status) ? undefined : status, { cause: e });
}

async function runOnce(
  exec: KubeRest,
  timeoutMs: number,
  pod: GatewayPod,
  op: NatGwOp,
  args: readonly string[],
  signal: AbortSignal | undefined,
): Promise<ExecResult> {
  // A batch's label names its first rules only (errors and logs stay readable).
  const shown = args.length > 3 ? [...args.slice(0, 3), `… (${args.length} rules)`] : args;
  const label = `nat-gateway.sh ${op} ${shown.join(' ')}`.trimEnd();
  return runArgv(exec, timeoutMs, pod, natGatewayArgv(op, args), label, signal);
}

/**
 * One argv exec in the pod's vpc-nat-gw container, settled as described at the top of this file. Callers build
 * `argv` from constants or validated values only (nat-gateway.sh ops above; the audit's read-only inspection).
 */
export async function runArgv(
  exec: KubeRest,
  timeoutMs: number,
  pod: GatewayPod,
  argv: string[],
  label: string,
  signal: AbortSignal | undefined,
): Promise<ExecResult> {
  const target = `${pod.namespace}/${pod.name}`;
  const stdout = new Collector();
  const stderr = new Collector();

  return new Promise<ExecResult>((resolve, reject) => {
    let socket: ExecSocket | undefined;
    let settled = false;
    const fail = (message: string, exitCode: number | undefined, cause?: unknown): void =>
      settle(() =>
        reject(
          new GatewayCommandError(
            `${label} in ${target}: ${message}`,
            exitCode,
            stdout.text(),
            stderr.text(),
            cause === undefined ? undefined : { cause },
          ),
        ),
      );
    const onAbort = (): void =>
      fail(`aborted (${String(signal?.reason ?? 'signal')})`, undefined, signal?.reason);
    const timer = setTimeout(() => fail(`no exit status after ${timeoutMs} ms`, undefined), timeoutMs);

    function settle(finish: () => void): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket?.close();
      finish();
    }

    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });

    const onStatus = (status: ExecStatus): void => {
      const code = exitCodeOf(status);
      if (code === 0) {
        settle(() => resolve({ stdout: stdout.text(), stderr: stderr.text() }));
        return;
      }
      const detail = stderr.text().trim().split('\n').pop() || stdout.text().trim().split('\n').pop() || '';
      const why = code === undefined ? (status.message ?? status.reason ?? 'failed') : `exit code ${code}`;
      fail(`${why}${detail ? `: ${detail}` : ''}`, code);
    };

    exec
      .exec(pod.namespace, pod.name, GATEWAY_CONTAINER, argv, {
        stdout: (c) => stdout.write(c),
        stderr: (c) => stderr.write(c),
        status: onStatus,
      })
      .then((ws) => {
        socket = ws;
        if (settled) {
          socket.close();
          return;
        }
        socket.on('error', (err) => fail(`exec stream error: ${err.message}`, undefined, err));
        const closed = (): void =>
          fail('exec stream closed before the command reported an exit status', undefined);
        socket.on('close', closed);
        if (socket.readyState === CLOSED) closed();
      })
      .catch((e: unknown) => settle(() => reject(connectError(e, target))));
  });
}
