/**
 * A thin Kubernetes client for the Lambda functions: the few REST calls the Cluster port makes (GET, LIST, PATCH,
 * POST as JSON over node:https with one keep-alive agent) and the pods/exec WebSocket of the Gateway port (`ws`).
 * It replaces @kubernetes/client-node in the bundles, whose generated API, YAML parser and fetch polyfills were
 * three quarters of every function's code and most of its cold start (ADR 0027).
 *
 * Where to connect comes from a `KubeEndpoint` (EKS: endpoint, CA and a token minted from the role) or from any
 * object with client-node's KubeConfig methods (local runs, tests): that conversion uses the instance's own
 * methods, so this module never imports client-node.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import { createSecureContext, type SecureContext } from 'node:tls';
import WebSocket from 'ws';

/** Sent with every request: API server audit logs and the local API's request log tell this product apart. */
export const USER_AGENT = 'eip-lambdas';

/** How to reach one API server. */
export interface KubeEndpoint {
  /** https://host[:port] (or http:// for the local API). */
  server: string;
  /** PEM of the CA that signed the server's certificate (none: the system's CAs). */
  ca?: string | Buffer;
  /** Client certificate and key (PEM), when the kubeconfig authenticates by certificate. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Skip TLS verification (kubeconfig insecure-skip-tls-verify only; never on EKS). */
  insecure?: boolean;
  /** Extra headers per request, e.g. `Authorization: Bearer …` (asked for before every request). */
  headers?: () => Promise<Record<string, string>> | Record<string, string>;
}

/** The part of client-node's KubeConfig this module uses (duck-typed: no import of client-node here). */
export interface KubeConfigLike {
  getCurrentCluster(): { server: string; skipTLSVerify?: boolean } | null;
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
}

export type KubeSource = KubeEndpoint | KubeConfigLike | (() => Promise<KubeEndpoint>);

/** A response outside 2xx: the status and the raw body (usually a metav1.Status as JSON). */
export class KubeHttpError extends Error {
  override readonly name = 'KubeHttpError';
  constructor(
    readonly status: number,
    readonly body: string,
    what: string,
  ) {
    super(`${what}: HTTP ${status}`);
  }
}

/** What an exec reports on its status channel (metav1.Status). */
export interface ExecStatus {
  status?: string;
  reason?: string;
  message?: string;
  details?: { causes?: { reason?: string; message?: string }[] };
}

export interface ExecHandlers {
  stdout(chunk: Buffer): void;
  stderr(chunk: Buffer): void;
  status(status: ExecStatus): void;
}

/** The subset of a WebSocket the exec caller needs. */
export interface ExecSocket {
  readonly readyState: number;
  close(): void;
  on(event: 'close', listener: () => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

interface Resolved {
  url: URL;
  agent: HttpAgent | HttpsAgent;
  /** For the exec WebSockets: one TLS context made once (tls.connect would parse the CA and keys again for each). */
  wsTls: Pick<RequestOptions, 'rejectUnauthorized'> & { secureContext?: SecureContext };
  headers(): Promise<Record<string, string>>;
}

function isKubeConfig(s: KubeSource): s is KubeConfigLike {
  return typeof (s as KubeConfigLike).applyToHTTPSOptions === 'function';
}

async function endpointOf(source: KubeSource): Promise<KubeEndpoint> {
  if (typeof source === 'function') return source();
  if (!isKubeConfig(source)) return source;
  return endpointOfKubeConfig(source);
}

/** Headers a KubeConfig puts on a request: its own, and user:password (`auth`) as a Basic Authorization header. */
async function headersOf(kc: KubeConfigLike): Promise<Record<string, string>> {
  const o: RequestOptions = {};
  await kc.applyToHTTPSOptions(o);
  const headers = Object.fromEntries(Object.entries(o.headers ?? {}).map(([k, v]) => [k, String(v)]));
  if (o.auth && !Object.keys(headers).some((k) => k.toLowerCase() === 'authorization'))
    headers.Authorization = `Basic ${Buffer.from(o.auth).toString('base64')}`;
  return headers;
}

/** The endpoint a client-node KubeConfig names: server, TLS material, and its credentials per request. */
export async function endpointOfKubeConfig(source: KubeConfigLike): Promise<KubeEndpoint> {
  const cluster = source.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const probe: RequestOptions = {};
  await source.applyToHTTPSOptions(probe);
  return {
    server: cluster.server,
    ...(probe.ca !== undefined && { ca: probe.ca as string | Buffer }),
    ...(probe.cert !== undefined && { cert: probe.cert as string | Buffer }),
    ...(probe.key !== undefined && { key: probe.key as string | Buffer }),
    insecure: cluster.skipTLSVerify === true || probe.rejectUnauthorized === false,
    // Tokens (static, exec plugins, OIDC) are renewed by the KubeConfig: ask it again for every request.
    headers: () => headersOf(source),
  };
}

/**
 * How long a kept-alive socket may sit idle before the agent lets it go. Node's agent obeys a server's announced idle
 * timeout (`Keep-Alive: timeout=N`, as Node's servers and the local API send: the socket goes a second before N)
 * only when it has a timeout of its own; without one it keeps idle sockets forever and sends the next request on a
 * socket the server is closing, which resets it. A server that announces nothing (kube-apiserver) is taken to keep
 * an idle connection at least this long.
 */
const IDLE_SOCKET_MS = 30_000;

/** How a request sent on a socket the server had already closed fails. */
const STALE_SOCKET = new Set(['ECONNRESET', 'EPIPE']);

export class KubeRest {
  private resolved: Promise<Resolved> | undefined;

  constructor(private readonly source: KubeSource) {}

  private connection(): Promise<Resolved> {
    this.resolved ??= endpointOf(this.source).then((e) => {
      const url = new URL(e.server);
      const tls = {
        ...(e.ca !== undefined && { ca: e.ca }),
        ...(e.cert !== undefined && { cert: e.cert }),
        ...(e.key !== undefined && { key: e.key }),
        rejectUnauthorized: !e.insecure,
      };
      // The timeout also reaches a socket in use, where it only emits 'timeout' (nothing here listens): the agent
      // closes a socket on it only when idle.
      const agent =
        url.protocol === 'http:'
          ? new HttpAgent({ keepAlive: true, timeout: IDLE_SOCKET_MS })
          : new HttpsAgent({ keepAlive: true, timeout: IDLE_SOCKET_MS, ...tls });
      const wsTls =
        url.protocol === 'http:'
          ? {}
          : { secureContext: createSecureContext(tls), rejectUnauthorized: tls.rejectUnauthorized };
      return { url, agent, wsTls, headers: async () => (e.headers ? await e.headers() : {}) };
    });
    this.resolved.catch(() => {
      this.resolved = undefined; // a failed resolution (say, a missing kubeconfig) is tried again next time
    });
    return this.resolved;
  }

  /**
   * One request; resolves with the parsed JSON body of a 2xx answer.
   * @throws KubeHttpError for any other status; the socket's own error when there is no answer at all
   */
  async request<T>(
    method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
    path: string,
    options: { query?: Record<string, string | undefined>; body?: unknown; contentType?: string } = {},
  ): Promise<T> {
    const c = await this.connection();
    const url = new URL(path, c.url);
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
    const headers: Record<string, string> = {
      Accept: 'application/json',
      'User-Agent': USER_AGENT,
      ...(await c.headers()),
      ...(payload && {
        'Content-Type': options.contentType ?? 'application/json',
        'Content-Length': String(payload.length),
      }),
    };
    const send = url.protocol === 'http:' ? httpRequest : httpsRequest;
    const once = () =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = send(url, { method, headers, agent: c.agent }, (res: IncomingMessage) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => chunks.push(d));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
          );
          res.on('error', reject);
        });
        req.on('error', (e: NodeJS.ErrnoException) =>
          reject(Object.assign(e, { staleSocket: req.reusedSocket && STALE_SOCKET.has(e.code ?? '') })),
        );
        req.end(payload);
      });
    // A kept-alive socket the server closed while idle fails the request sent on it before any answer (the server's
    // idle timeout meeting the next request): a GET is sent once more, on a new socket. Writes are not: their caller
    // reads again and decides.
    const { status, body } = await once().catch((e: { staleSocket?: boolean }) => {
      if (method === 'GET' && e.staleSocket) return once();
      throw e;
    });
    if (status < 200 || status > 299) throw new KubeHttpError(status, body, `${method} ${url.pathname}`);
    return (body ? JSON.parse(body) : {}) as T;
  }

  /**
   * Opens pods/exec for `argv` in `container` (stdout and stderr, no stdin, no tty) over WebSocket, subprotocol
   * v5 or v4.channel.k8s.io: every binary frame starts with its channel (1 stdout, 2 stderr, 3 status).
   * Resolves once the socket is open; the outcome arrives on `handlers.status`.
   */
  async exec(
    namespace: string,
    pod: string,
    container: string,
    argv: readonly string[],
    handlers: ExecHandlers,
  ): Promise<ExecSocket> {
    const c = await this.connection();
    const url = new URL(
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/exec`,
      c.url,
    );
    url.protocol = c.url.protocol === 'http:' ? 'ws:' : 'wss:';
    for (const a of argv) url.searchParams.append('command', a);
    url.searchParams.set('container', container);
    url.searchParams.set('stdout', 'true');
    url.searchParams.set('stderr', 'true');
    url.searchParams.set('stdin', 'false');
    url.searchParams.set('tty', 'false');
    const ws = new WebSocket(url, ['v5.channel.k8s.io', 'v4.channel.k8s.io'], {
      headers: { 'User-Agent': USER_AGENT, ...(await c.headers()) },
      ...c.wsTls,
    });
    ws.binaryType = 'nodebuffer';
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary || data.length === 0) return;
      const channel = data[0];
      const rest = data.subarray(1);
      if (channel === 1) handlers.stdout(rest);
      else if (channel === 2) handlers.stderr(rest);
      else if (channel === 3 && rest.length > 0) {
        try {
          handlers.status(JSON.parse(rest.toString('utf8')) as ExecStatus);
        } catch {
          handlers.status({ status: 'Failure', message: `unreadable exec status: ${rest.toString('utf8')}` });
        }
      }
    });
    await new Promise<void>((resolve, reject) => {
      const onError = (e: Error): void => {
        ws.off('open', onOpen);
        reject(e);
      };
      const onOpen = (): void => {
        ws.off('error', onError);
        resolve();
      };
      ws.once('open', onOpen);
      ws.once('error', onError);
    });
    return ws;
  }
}
