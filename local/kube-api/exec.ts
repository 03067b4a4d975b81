/**
 * pods/exec over WebSocket: the same validation before any upgrade (WebSocket or SPDY), the
 * subprotocols v5.channel.k8s.io, v4.channel.k8s.io and v4.base64.channel.k8s.io, an empty frame on the
 * first writable channel, output frames before exactly one status frame on channel 3, then a close frame
 * 1000. The server never sends channel 255. SPDY is refused after validation with a clear message.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import { GATEWAY_CONTAINER, Label } from '../../shared/domain/kube-ovn.js';
import type { ExecModel } from '../natgw/exec-model.js';
import { ApiError, badRequest, internalError, notFound, type Status, status } from './errors.js';
import type { Faults } from './faults.js';
import { isObject, type JsonObject } from './json.js';
import type { Objects } from './objects.js';
import { type ExecOutcome, type Kubelet, readsStdin } from './pods.js';
import type { ResourceDef } from './registry.js';

export const SUPPORTED_PROTOCOLS = [
  'v5.channel.k8s.io',
  'v4.channel.k8s.io',
  'v4.base64.channel.k8s.io',
] as const;

export interface ExecParams {
  namespace: string;
  pod: string;
  container: string;
  command: string[];
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

function truthy(v: string | null): boolean {
  return v !== null && ['true', '1', 't', 'T', 'TRUE', 'True'].includes(v);
}

const STDIN = 0;
const STDOUT = 1;
const STDERR = 2;
const STATUS = 3;
const CLOSE = 255;
/** How long an exec waits for the client's pong before it runs anyway. */
const PONG_WAIT_MS = 2000;
/**
 * After the pong, how long the command takes to "start" before its first frame. The pong proves the client's reader
 * runs, not that its streams exist yet: on a starved machine (hundreds of kubectl processes on two cores) the
 * goroutine that creates them can lag the reader by a scheduling slice. A real container runtime takes longer than
 * this to start a process, so nothing a real server sends could arrive sooner.
 */
const START_GRACE_MS = 25;

/** The status frame payload (Go's encoding of metav1.Status without kind/apiVersion). */
export function exitStatus(exitCode: number): Record<string, unknown> {
  if (exitCode === 0) return { metadata: {}, status: 'Success' };
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: command terminated with exit code ${exitCode}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
  };
}

function internalStatus(message: string): Record<string, unknown> {
  return {
    metadata: {},
    status: 'Failure',
    message: `Internal error occurred: ${message}`,
    reason: 'InternalError',
    details: { causes: [{ message }] },
    code: 500,
  };
}

export interface ExecDeps {
  objects: Objects;
  pods: ResourceDef;
  kubelet: Kubelet;
  faults: Faults;
  log: (line: string) => void;
  /** What an exec into a gateway container costs (local/natgw/exec-model.ts); none: instant. */
  execModel?: ExecModel;
}

export class ExecServer {
  private readonly wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (offered) => this.pick(offered) || false,
  });
  private readonly sessions = new Set<WebSocket>();
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(private readonly deps: ExecDeps) {}

  private pick(offered: Set<string>): string | undefined {
    return SUPPORTED_PROTOCOLS.find((p) => offered.has(p));
  }

  /** Parses and validates an exec request in the apiserver's order. Throws ApiError. */
  validate(
    namespace: string,
    podName: string,
    query: URLSearchParams,
  ): { params: ExecParams; pod: JsonObject } {
    const { objects, pods } = this.deps;
    const pod = objects.store.get('/pods', namespace, podName);
    if (!pod) throw notFound(pods, podName);
    const spec = isObject(pod.spec) ? pod.spec : {};
    const containers = (Array.isArray(spec.containers) ? spec.containers : [])
      .filter(isObject)
      .map((c) => String(c.name));
    let container = query.get('container') ?? '';
    if (container === '') {
      if (containers.length !== 1) {
        throw badRequest(
          `a container name must be specified for pod ${podName}, choose one of: [${containers.join(' ')}]`,
        );
      }
      container = containers[0] as string;
    } else if (!containers.includes(container)) {
      throw badRequest(`container ${container} is not valid for pod ${podName}`);
    }
    if (!spec.nodeName) throw badRequest(`pod ${podName} does not have a host assigned`);
    const command = query.getAll('command');
    const params: ExecParams = {
      namespace,
      pod: podName,
      container,
      command,
      stdin: truthy(query.get('stdin')),
      stdout: truthy(query.get('stdout')),
      stderr: truthy(query.get('stderr')),
      tty: truthy(query.get('tty')),
    };
    if (command.length === 0) throw badRequest('you must specify at least 1 command');
    if (!params.stdin && !params.stdout && !params.stderr) {
      throw badRequest('you must specify at least 1 of stdin, stdout, stderr');
    }
    if (params.tty && params.stderr) params.stderr = false; // a TTY folds stderr into stdout
    return { params, pod };
  }

  /** Handles an HTTP upgrade to pods/exec (WebSocket, or SPDY which is refused). */
  upgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    target: { namespace: string; pod: string; query: URLSearchParams },
    record: (code: number) => void,
  ): void {
    const { namespace, pod: podName, query } = target;
    const answer = (err: ApiError): void => {
      record(err.code);
      writeHttpError(socket, err.status);
    };
    try {
      const { params, pod } = this.validate(namespace, podName, query);
      // Injected API errors, then what the kubelet would answer (the container must be running), before the
      // transport: the SPDY refusal must not hide the real cause.
      const fault = this.deps.faults.takeApi({
        verb: 'create',
        def: this.deps.pods,
        subresource: 'exec',
        name: podName,
        namespace,
      });
      if (fault.error) throw fault.error;
      if (!this.deps.kubelet.containerRunning(pod, params.container)) {
        throw internalError(`unable to upgrade connection: container not found ("${params.container}")`);
      }
      const upgradeTo = String(req.headers.upgrade ?? '').toLowerCase();
      if (upgradeTo.startsWith('spdy')) {
        throw badRequest(
          'SPDY/3.1 is not supported by this local Kubernetes API; use WebSocket with subprotocol v5.channel.k8s.io (kubectl 1.30+ does by default)',
        );
      }
      if (upgradeTo !== 'websocket') throw badRequest('Upgrade request required');
      const offered = new Set(
        String(req.headers['sec-websocket-protocol'] ?? '')
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      );
      if (!this.pick(offered)) {
        throw badRequest(
          `unable to upgrade connection: none of the offered subprotocols [${[...offered].join(' ')}] is supported; expected one of [${SUPPORTED_PROTOCOLS.join(' ')}]`,
        );
      }
      record(101);
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        this.session(ws, params);
      });
    } catch (e) {
      if (e instanceof ApiError) answer(e);
      else answer(internalError(String(e)));
    }
  }

  private session(ws: WebSocket, p: ExecParams): void {
    this.sessions.add(ws);
    ws.on('close', () => this.sessions.delete(ws));
    ws.on('error', () => this.sessions.delete(ws));
    const base64 = ws.protocol.includes('base64');
    const send = (channel: number, data: Buffer, sent?: () => void): void => {
      if (ws.readyState !== ws.OPEN) return;
      if (base64) ws.send(`${channel}${data.toString('base64')}`, sent);
      else ws.send(Buffer.concat([Buffer.from([channel]), data]), sent);
    };

    const stdinChunks: Buffer[] = [];
    let stdinDone = !p.stdin;
    let onStdinEnd: (() => void) | undefined;
    ws.on('message', (data, isBinary) => {
      let frame: Buffer;
      if (isBinary || !base64) frame = Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer);
      else {
        const text = data.toString();
        frame = Buffer.concat([Buffer.from([Number(text[0])]), Buffer.from(text.slice(1), 'base64')]);
      }
      const channel = frame[0];
      if (channel === STDIN) stdinChunks.push(frame.subarray(1));
      else if (channel === CLOSE && frame[1] === STDIN) {
        stdinDone = true;
        onStdinEnd?.();
      }
      // channel 4 (resize) and anything else: ignored
    });
    ws.on('close', () => {
      stdinDone = true;
      onStdinEnd?.();
    });

    // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
    const run = async (): Promise<void> => {
      // Nothing is sent before the client can route it. client-go (kubectl) starts reading the socket in one
      // goroutine and creates its stdout/stderr/error streams in another; a frame that arrives before its stream
      // exists is discarded ("Unknown stream id 1, discarding message"), and the close frame that follows then
      // fails the stream creation ("closed all streams") — about 0.5 % of execs under load, with the output
      // lost. A WebSocket ping answered by a pong proves the client's reader runs; kubectl creates its streams
      // right after starting that reader, before it could have answered. See local/kube-api/README.md.
      await this.clientReady(ws);
      if (ws.readyState !== ws.OPEN) return;
      // "Connected": an empty frame on the lowest writable channel.
      send(p.stdout ? STDOUT : p.stderr ? STDERR : STATUS, Buffer.alloc(0));
      const { delayMs, holds, effect } = this.deps.faults.takeExec({
        namespace: p.namespace,
        pod: p.pod,
        container: p.container,
        command: p.command,
      });
      if (effect?.kind === 'hang') return;
      if (holds.length > 0) await Promise.all(holds);
      if (delayMs > 0) await this.sleep(delayMs);
      if (ws.readyState !== ws.OPEN) return;
      let outcome: ExecOutcome;
      let statusPayload: Record<string, unknown>;
      if (effect?.kind === 'error') {
        outcome = { stdout: '', stderr: '', exitCode: 1 };
        statusPayload = internalStatus(effect.message);
      } else if (effect?.kind === 'exit') {
        outcome = { stdout: effect.stdout, stderr: effect.stderr, exitCode: effect.exitCode };
        statusPayload = exitStatus(effect.exitCode);
      } else {
        const pod = this.deps.objects.store.get('/pods', p.namespace, p.pod);
        if (!pod) {
          outcome = { stdout: '', stderr: '', exitCode: 1 };
          statusPayload = internalStatus(`pod ${p.namespace}/${p.pod} is gone`);
        } else {
          if (p.stdin && !stdinDone && readsStdin(p.command)) {
            await new Promise<void>((resolve) => {
              onStdinEnd = resolve;
            });
            if (ws.readyState !== ws.OPEN) return;
          }
          try {
            // The simulator answers at once; a gateway backend (local/kube-api/backend.ts) asynchronously; the exec
            // model, when there is one, makes a gateway's exec take the time a real pod's would.
            outcome = await this.run(pod, p, Buffer.concat(stdinChunks).toString());
          } catch (e) {
            this.deps.log(`exec ${p.namespace}/${p.pod} ${JSON.stringify(p.command)} threw: ${String(e)}`);
            outcome = { stdout: '', stderr: '', exitCode: 1 };
            statusPayload = internalStatus(`error executing command in container: ${(e as Error).message}`);
          }
          // A command that killed PID 1 ends the session as the dying container would.
          statusPayload ??= exitStatus(outcome.restart ? 137 : clampExit(outcome.exitCode));
        }
      }
      const out = p.tty ? outcome.stdout + outcome.stderr : outcome.stdout;
      const frames: [number, Buffer][] = [];
      if (p.stdout && out) frames.push([STDOUT, Buffer.from(out)]);
      if (p.stderr && !p.tty && outcome.stderr) frames.push([STDERR, Buffer.from(outcome.stderr)]);
      const drop = effect?.kind === 'drop-status';
      // A dropped status breaks the connection once the output is on its way (over TLS, through the TLS socket).
      frames.forEach(([ch, data], i) => {
        send(ch, data, drop && i === frames.length - 1 ? () => ws.terminate() : undefined);
      });
      if (drop) {
        if (frames.length === 0) ws.terminate();
      } else {
        send(STATUS, Buffer.from(JSON.stringify(statusPayload)));
        ws.close(1000);
      }
      if (outcome.restart) {
        this.deps.execModel?.forget(`${p.namespace}/${p.pod}`);
        this.deps.kubelet.restartContainer(p.namespace, p.pod, p.container);
      }
    };
    run().catch((e: unknown) => {
      this.deps.log(`exec session failed: ${String(e)}`);
      ws.terminate();
    });
  }

  /** Runs the command in the pod: through the exec model when it is a gateway pod's gateway container. */
  private run(pod: JsonObject, p: ExecParams, stdin: string): Promise<ExecOutcome> | ExecOutcome {
    const { kubelet, execModel } = this.deps;
    const labels = isObject(pod.metadata) && isObject(pod.metadata.labels) ? pod.metadata.labels : {};
    if (!execModel || p.container !== GATEWAY_CONTAINER || labels[Label.vpcNatGw] !== 'true')
      return kubelet.exec(pod, p.container, p.command, stdin);
    const simulated = kubelet.gateway(p.namespace, p.pod) !== undefined;
    return execModel.exec(
      `${p.namespace}/${p.pod}`,
      p.command,
      (hook) => kubelet.exec(pod, p.container, p.command, stdin, hook),
      simulated,
    );
  }

  /** Resolves once the client answered a ping (or after PONG_WAIT_MS, for a client that never pongs). */
  private clientReady(ws: WebSocket): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.timers.delete(timer);
        ws.off('pong', done);
        ws.off('close', done);
        // The client's stream set-up runs beside its reader: give it the time a process start would take.
        setTimeout(resolve, START_GRACE_MS);
      };
      const timer = setTimeout(done, PONG_WAIT_MS);
      this.timers.add(timer);
      ws.on('pong', done);
      ws.on('close', done);
      ws.ping();
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      this.timers.add(t);
    });
  }

  get openSessions(): number {
    return this.sessions.size;
  }

  close(): void {
    for (const t of this.timers) clearTimeout(t);
    for (const ws of this.sessions) ws.terminate();
    this.sessions.clear();
    this.wss.close();
  }
}

function clampExit(code: number): number {
  return Number.isInteger(code) && code >= 0 && code <= 255 ? code : 1;
}

export function writeHttpError(socket: Duplex, s: Status): void {
  const body = JSON.stringify(s);
  const reason =
    {
      400: 'Bad Request',
      401: 'Unauthorized',
      403: 'Forbidden',
      404: 'Not Found',
      429: 'Too Many Requests',
      500: 'Internal Server Error',
    }[s.code] ?? 'Error';
  socket.end(
    `HTTP/1.1 ${s.code} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export function upgradeRequired(): ApiError {
  return new ApiError(status(400, 'BadRequest', 'Upgrade request required'));
}
