/**
 * HTTP routing of the local Kubernetes API: discovery, OpenAPI, resource paths (core `/api/v1` and
 * `/apis/<group>/<version>`, cluster and namespace scoped), watches, the pods/exec upgrade, and a small admin
 * surface under `/_emulator/` that kubectl never touches. Every response carries a Content-Type.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Admission, AdmissionRequest } from './admission.js';
import type { Authenticator, UserInfo } from './auth.js';
import {
  aggregatedContentType,
  aggregatedDiscovery,
  aggregatedMediaType,
  apiGroupDoc,
  apiGroupList,
  apiResourceList,
  apiVersions,
  openApiGroupVersion,
  openApiRoot,
  VERSION_INFO,
} from './discovery.js';
import {
  ApiError,
  badRequest,
  expired,
  internalError,
  methodNotAllowed,
  notAcceptable,
  pathNotFound,
  status,
} from './errors.js';
import { type ExecServer, upgradeRequired, writeHttpError } from './exec.js';
import type { ExecMatch, Faults, Verb } from './faults.js';
import { isObject, type JsonObject, type JsonValue } from './json.js';
import type { Admit, DeleteOptions, FieldValidation, Objects, WriteContext } from './objects.js';
import { encodeOpenApiV2, OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_ANSWER, openApiV2 } from './openapi-v2.js';
import { decodeProtobufObject, PROTOBUF } from './protobuf.js';
import { answerReview, forbidden, identify, type Rbac, requestAttributes } from './rbac.js';
import type { Registry, ResourceDef } from './registry.js';
import { type Filter, parseFieldSelector, parseLabelSelector } from './selectors.js';
import { objectKey, type Store } from './store.js';
import { type IncludeObject, type TableOptions, toTable } from './table.js';
import { checkBuiltinDecodes } from './typed-kinds.js';
import type { Watches } from './watch.js';

export interface RequestRecord {
  time: string;
  method: string;
  path: string;
  /** The raw query string without `?`. */
  query: string;
  headers: Record<string, string>;
  /** Request body (first 8 KiB) for writes. */
  body?: string;
  /** HTTP status answered (101 for an accepted exec upgrade). */
  status?: number;
  /** The user the request acted as (after impersonation); absent when authentication failed. */
  user?: string;
  /** Audit annotations admission added (a ValidatingAdmissionPolicy bound with the Audit action). */
  annotations?: Record<string, string>;
}

const LOGGED_HEADERS = [
  'accept',
  'content-type',
  'user-agent',
  'upgrade',
  'sec-websocket-protocol',
  'authorization',
];

export class RequestLog {
  private entries: RequestRecord[] = [];
  private readonly listeners = new Set<(r: RequestRecord) => void>();

  private readonly slack: number;

  constructor(private readonly limit = 5000) {
    this.slack = Math.ceil(limit / 10);
  }

  /** Calls `fn` with every request from now on (the log keeps only the last `limit`); returns the unsubscribe. */
  subscribe(fn: (r: RequestRecord) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  add(req: IncomingMessage): RequestRecord {
    const url = new URL(req.url ?? '/', 'http://local');
    const headers: Record<string, string> = {};
    for (const h of LOGGED_HEADERS) {
      const v = req.headers[h];
      if (v === undefined) continue;
      const text = Array.isArray(v) ? v.join(', ') : v;
      // Credentials never go into the log: only their scheme.
      headers[h] = h === 'authorization' ? `${text.split(' ')[0] ?? ''} <redacted>` : text;
    }
    const rec: RequestRecord = {
      time: new Date().toISOString(),
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.search.slice(1),
      headers,
    };
    this.entries.push(rec);
    for (const fn of this.listeners) fn(rec);
    // The oldest go a tenth of the limit at a time: dropping one per request moved the whole array every time.
    if (this.entries.length > this.limit + this.slack)
      this.entries.splice(0, this.entries.length - this.limit);
    return rec;
  }

  all(): readonly RequestRecord[] {
    return this.entries.slice(-this.limit);
  }

  clear(): void {
    this.entries = [];
  }
}

export interface ServerDeps {
  authn: Authenticator;
  rbac: Rbac;
  admission: Admission;
  registry: Registry;
  store: Store;
  objects: Objects;
  watches: Watches;
  exec: ExecServer;
  faults: Faults;
  requests: RequestLog;
  hostPort: () => string;
  /** Default watch duration when the client gives no timeoutSeconds. */
  watchTimeoutSeconds: number;
  log: (line: string) => void;
}

interface ResourceRoute {
  def: ResourceDef;
  namespace?: string;
  name?: string;
  subresource?: string;
}

const MAX_BODY = 3 * 1024 * 1024;

function parseBool(v: string | null): boolean {
  return v !== null && ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v);
}

function mediaParts(accept: string): { type: string; params: Map<string, string> }[] {
  return accept
    .split(',')
    .map((part) => {
      const [type = '', ...params] = part.split(';').map((s) => s.trim());
      return {
        type: type.toLowerCase(),
        params: new Map(params.map((p) => p.split('=').map((s) => s.trim()) as [string, string])),
      };
    })
    .filter((p) => p.type !== '');
}

function acceptsJson(accept: string): boolean {
  const parts = mediaParts(accept);
  return (
    parts.length === 0 || parts.some((p) => ['application/json', '*/*', 'application/*'].includes(p.type))
  );
}

/** The meta.k8s.io version of the first `as=<as>` entry in Accept. */
function asVersion(accept: string, as: string): 'v1' | 'v1beta1' | undefined {
  for (const p of mediaParts(accept)) {
    if (p.type !== 'application/json' || p.params.get('as') !== as || p.params.get('g') !== 'meta.k8s.io')
      continue;
    const v = p.params.get('v');
    if (v === 'v1' || v === 'v1beta1') return v;
  }
  return undefined;
}

function tableContentType(v: 'v1' | 'v1beta1'): string {
  return `application/json;as=Table;v=${v};g=meta.k8s.io`;
}

function sendJson(
  res: ServerResponse,
  code: number,
  body: unknown,
  contentType = 'application/json',
  headers: Record<string, string | string[]> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(code, {
    'Content-Type': contentType,
    'Cache-Control': 'no-cache, private',
    ...headers,
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        // Answer 413 at once and discard the rest of the upload (so the client reads the answer instead of a
        // reset connection); a client that keeps sending far beyond the limit is cut off.
        if (!tooLarge) {
          tooLarge = true;
          chunks.length = 0;
          reject(
            new ApiError(status(413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728')),
          );
        }
        if (size > 16 * MAX_BODY) req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * Go's encoding/json refuses JSON nested deeper than 10000 levels, and the API server answers 400. The local API's
 * object handling recurses, so it refuses the same way from a lower depth (README: Size limits).
 */
export const MAX_JSON_DEPTH = 1000;

/** The bracket that opens level `limit + 1` of a JSON text (strings skipped), or undefined if none does. */
function tooDeep(text: string, limit: number): string | undefined {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') i = stringEnd(text, i);
    else if (c === '}' || c === ']') depth--;
    else if ((c === '{' || c === '[') && ++depth > limit) return c;
  }
  return undefined;
}

/** The index of the quote that closes the JSON string opened at `start` (escapes skipped), or the text's length. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
  return i;
}

/** 400 for a body nested too deep, in the API server's words (Go's scanner error). */
function checkDepth(text: string): void {
  const c = tooDeep(text, MAX_JSON_DEPTH);
  if (c !== undefined)
    throw badRequest(
      `couldn't get version/kind; json parse error: invalid character '${c}' exceeded max depth`,
    );
}

function parseJsonBody(text: string): unknown {
  checkDepth(text);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(`couldn't get version/kind; json parse error: ${(e as Error).message}`);
  }
}

/**
 * The options object a CONNECT is admitted with, from its query, as unstructured: false booleans and an empty
 * container are left out (omitempty); an exec's command is always there.
 */
function connectOptions(sub: string, query: URLSearchParams): JsonObject {
  const kind = { exec: 'PodExecOptions', attach: 'PodAttachOptions' }[sub] ?? 'PodPortForwardOptions';
  const options: JsonObject = { kind, apiVersion: 'v1' };
  if (sub === 'portforward') {
    const ports = query
      .getAll('ports')
      .flatMap((p) => p.split(','))
      .filter((p) => /^\d+$/.test(p));
    if (ports.length > 0) options.ports = ports.map(Number);
    return options;
  }
  for (const k of ['stdin', 'stdout', 'stderr', 'tty'] as const)
    if (parseBool(query.get(k))) options[k] = true;
  const container = query.get('container');
  if (container) options.container = container;
  if (sub === 'exec') {
    const command = query.getAll('command');
    options.command = command.length > 0 ? command : null;
  }
  return options;
}

function warningHeader(warnings: readonly string[]): Record<string, string[]> {
  if (warnings.length === 0) return {};
  return { Warning: [...new Set(warnings)].map((w) => `299 - ${JSON.stringify(w)}`) };
}

function continueToken(rv: number, start: string): string {
  return Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv, start: `${start}\n` })).toString('base64url');
}

function decodeContinue(token: string): { rv: number; start: string } {
  try {
    const v = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as {
      rv?: unknown;
      start?: unknown;
    };
    if (typeof v.rv !== 'number' || typeof v.start !== 'string') throw new Error('bad');
    return { rv: v.rv, start: v.start.replace(/\n$/, '') };
  } catch {
    throw badRequest(
      'continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)',
    );
  }
}

export class ApiServer {
  constructor(private readonly d: ServerDeps) {}

  // ---------------------------------------------------------------- entry points

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rec = this.d.requests.add(req);
    res.on('finish', () => {
      rec.status = res.statusCode;
    });
    try {
      const url = new URL(req.url ?? '/', 'http://local');
      const method = (req.method ?? 'GET').toUpperCase();
      // The emulator's own surface (faults, request log) is not part of the Kubernetes API: no authentication.
      const emulator = url.pathname === '/_emulator' || url.pathname.startsWith('/_emulator/');
      const user = emulator ? undefined : this.authorize(req, method, url, rec);
      let raw: Buffer = Buffer.alloc(0);
      if (method !== 'GET' && method !== 'HEAD') raw = await readBody(req);
      const body = raw.toString('utf8');
      if (raw.length > 0) {
        rec.body = String(req.headers['content-type'] ?? '').startsWith(PROTOBUF)
          ? `<protobuf, ${raw.length} bytes>`
          : body.slice(0, 8192);
      }
      await this.route(method, url, req, res, body, raw, user, rec);
      rec.status = res.statusCode;
    } catch (e) {
      const err = e instanceof ApiError ? e : internalError(e instanceof Error ? e.message : String(e));
      if (!(e instanceof ApiError))
        this.d.log(`internal error on ${req.method} ${req.url}: ${(e as Error)?.stack ?? String(e)}`);
      if (res.headersSent) {
        res.end();
        return;
      }
      rec.status = err.code;
      sendJson(res, err.code, err.status, 'application/json', err.headers);
    }
  }

  /**
   * Authentication, impersonation and authorization, before the body is read (as the API server's filters run
   * before its handlers). Returns who the request acts as; throws 401 or 403.
   */
  private authorize(req: IncomingMessage, method: string, url: URL, rec: RequestRecord): UserInfo {
    const user = identify(req, this.d.authn, this.d.rbac);
    rec.user = user.username;
    const attrs = requestAttributes(method, url, user);
    const d = this.d.rbac.authorize(attrs);
    if (!d.allowed) throw forbidden(attrs, d.reason);
    return user;
  }

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const rec = this.d.requests.add(req);
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', 'http://local');
    const user = this.orRefuse(socket, rec, () =>
      this.authorize(req, (req.method ?? 'GET').toUpperCase(), url, rec),
    );
    if (!user) return;
    const other = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/(attach|portforward)$/.exec(url.pathname);
    if (other) {
      // Not served here, but admitted first as the API server would, so that policies on them can be exercised.
      const [, ns = '', pod = '', sub = ''] = other.map((x) => decodeURIComponent(x));
      this.orRefuse(socket, rec, () => {
        this.connectAdmitted(ns, pod, sub, url.searchParams, user, rec);
        throw badRequest(`pods/${sub} is not served by this local Kubernetes API (only pods/exec)`);
      });
      return;
    }
    const route = this.resolveResource(url.pathname);
    const namespace = route?.namespace ?? '';
    const pod = route?.name ?? '';
    if (
      route?.def.plural !== 'pods' ||
      route.def.group !== '' ||
      route.subresource !== 'exec' ||
      !pod ||
      !namespace
    ) {
      rec.status = 404;
      const text = JSON.stringify(pathNotFound().status);
      socket.end(
        `HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      );
      return;
    }
    // A CONNECT is admitted with its PodExecOptions before the pod is looked at (ConnectResource).
    const admitted = this.orRefuse(socket, rec, () => {
      this.connectAdmitted(namespace, pod, 'exec', url.searchParams, user, rec);
      return true;
    });
    if (!admitted) return;
    this.d.exec.upgrade(req, socket, head, { namespace, pod, query: url.searchParams }, (code) => {
      rec.status = code;
    });
  }

  /** `run`'s result; when it throws, the error's Status is written to the socket and the result is undefined. */
  private orRefuse<T>(socket: Duplex, rec: RequestRecord, run: () => T): T | undefined {
    try {
      return run();
    } catch (e) {
      const err = e instanceof ApiError ? e : internalError(String(e));
      rec.status = err.code;
      writeHttpError(socket, err.status);
      return undefined;
    }
  }

  /** Admission of a CONNECT with its options object (v1.PodExecOptions, PodAttachOptions, PodPortForwardOptions). */
  private connectAdmitted(
    namespace: string,
    pod: string,
    sub: string,
    query: URLSearchParams,
    user: UserInfo,
    rec: RequestRecord,
  ): void {
    const options = connectOptions(sub, query);
    const out = this.d.admission.validate({
      operation: 'CONNECT',
      group: '',
      version: 'v1',
      resource: 'pods',
      subresource: sub,
      kind: { group: '', version: 'v1', kind: String(options.kind) },
      namespace,
      name: pod,
      object: options,
      oldObject: null,
      user,
      dryRun: false,
    });
    if (Object.keys(out.audit).length > 0) rec.annotations = out.audit;
  }

  /** Validating admission for one client write, its warnings and audit annotations kept for the answer. */
  private admitter(
    user: UserInfo | undefined,
    dryRun: boolean,
    warnings: string[],
    rec: RequestRecord,
  ): Admit {
    return (w) => {
      if (!user) return;
      const a: AdmissionRequest = {
        operation: w.operation,
        group: w.def.group,
        version: w.def.version,
        resource: w.def.plural,
        subresource: w.subresource ?? '',
        kind: { group: w.def.group, version: w.def.version, kind: w.def.kind },
        namespace: w.namespace ?? '',
        name: w.name,
        object: w.object,
        oldObject: w.oldObject,
        user,
        dryRun,
      };
      const out = this.d.admission.validate(a);
      warnings.push(...out.warnings);
      if (Object.keys(out.audit).length > 0) rec.annotations = { ...rec.annotations, ...out.audit };
    };
  }

  // ---------------------------------------------------------------- routing

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private async route(
    method: string,
    url: URL,
    req: IncomingMessage,
    res: ServerResponse,
    body: string,
    raw: Buffer,
    user: UserInfo | undefined,
    rec: RequestRecord,
  ): Promise<void> {
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const accept = String(req.headers.accept ?? '');
    const { registry } = this.d;
    if (path === '/version') return sendJson(res, 200, VERSION_INFO);
    if (path === '/healthz' || path === '/livez' || path === '/readyz') {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end('ok');
      return;
    }
    if (path.startsWith('/_emulator/') || path === '/_emulator') return this.admin(method, path, body, res);
    if (path === '/api' || path === '/apis') {
      const agg = aggregatedMediaType(accept);
      if (agg)
        return sendJson(
          res,
          200,
          aggregatedDiscovery(registry, path === '/api', agg),
          aggregatedContentType(agg),
        );
      return sendJson(res, 200, path === '/api' ? apiVersions(this.d.hostPort()) : apiGroupList(registry));
    }
    if (path === '/openapi/v2') {
      const doc = openApiV2(registry, VERSION_INFO.gitVersion);
      if (!accept.includes(OPENAPI_V2_PROTOBUF) && !accept.includes(OPENAPI_V2_PROTOBUF_ANSWER))
        return sendJson(res, 200, doc);
      const body = encodeOpenApiV2(doc);
      res.writeHead(200, {
        'Content-Type': OPENAPI_V2_PROTOBUF_ANSWER,
        'Cache-Control': 'no-cache, private',
        'Content-Length': body.length,
      });
      res.end(body);
      return;
    }
    if (path === '/openapi/v3') return sendJson(res, 200, openApiRoot(registry));
    if (path.startsWith('/openapi/v3/')) {
      const parts = path.slice('/openapi/v3/'.length).split('/');
      const doc =
        parts[0] === 'api' && parts.length === 2
          ? openApiGroupVersion(registry, '', parts[1] as string)
          : parts[0] === 'apis' && parts.length === 3
            ? openApiGroupVersion(registry, parts[1] as string, parts[2] as string)
            : undefined;
      if (!doc) throw pathNotFound();
      return sendJson(res, 200, doc, 'application/json', {
        'Cache-Control': url.searchParams.has('hash') ? 'public, immutable' : 'no-cache, private',
      });
    }
    const segs = path.split('/').filter(Boolean);
    if (segs[0] === 'api' && segs.length === 2) {
      const doc = apiResourceList(registry, '', segs[1] as string);
      if (!doc) throw pathNotFound();
      return sendJson(res, 200, doc);
    }
    if (segs[0] === 'apis' && segs.length === 2) {
      const doc = apiGroupDoc(registry, segs[1] as string);
      if (!doc) throw pathNotFound();
      return sendJson(res, 200, doc);
    }
    if (segs[0] === 'apis' && segs.length === 3) {
      const doc = apiResourceList(registry, segs[1] as string, segs[2] as string);
      if (!doc) throw pathNotFound();
      return sendJson(res, 200, doc);
    }
    const route = this.resolveResource(path);
    if (!route) throw pathNotFound();
    return this.resource(
      method,
      route,
      url.searchParams,
      accept,
      String(req.headers['content-type'] ?? ''),
      { text: body, raw, userAgent: String(req.headers['user-agent'] ?? ''), user, rec },
      res,
    );
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private resolveResource(path: string): ResourceRoute | undefined {
    const segs = path.split('/').filter(Boolean).map(decodeURIComponent);
    let group: string;
    let version: string;
    let rest: string[];
    if (segs[0] === 'api' && segs.length >= 3) {
      group = '';
      version = segs[1] as string;
      rest = segs.slice(2);
    } else if (segs[0] === 'apis' && segs.length >= 4) {
      group = segs[1] as string;
      version = segs[2] as string;
      rest = segs.slice(3);
    } else {
      return undefined;
    }
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3 && rest[2] !== 'status' && rest[2] !== 'finalize') {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    if (rest.length < 1 || rest.length > 3) return undefined;
    const def = this.d.registry.get(group, version, rest[0] as string);
    if (!def) return undefined;
    if (namespace !== undefined && !def.namespaced) return undefined;
    const route: ResourceRoute = { def };
    if (namespace !== undefined) route.namespace = namespace;
    if (rest[1] !== undefined) route.name = rest[1];
    if (rest[2] !== undefined) {
      const sub = rest[2];
      if (!((sub === 'status' && def.statusSubresource) || ((sub === 'exec' || sub === 'log') && def.exec)))
        return undefined;
      route.subresource = sub;
    }
    // A namespaced object needs its namespace in the path (collections may be listed across namespaces).
    if (def.namespaced && namespace === undefined && route.name !== undefined) return undefined;
    return route;
  }

  private verbOf(method: string, r: ResourceRoute, query: URLSearchParams): Verb | undefined {
    switch (method) {
      case 'GET':
        return r.name ? 'get' : parseBool(query.get('watch')) ? 'watch' : 'list';
      case 'POST':
        return r.name ? undefined : 'create';
      case 'PUT':
        return r.name ? 'update' : undefined;
      case 'PATCH':
        return r.name ? 'patch' : undefined;
      case 'DELETE':
        return r.name ? 'delete' : 'deletecollection';
      default:
        return undefined;
    }
  }

  private writeContext(
    query: URLSearchParams,
    payload: { userAgent: string; user: UserInfo | undefined; rec: RequestRecord },
  ): WriteContext {
    const fv = query.get('fieldValidation');
    const fieldValidation: FieldValidation = fv === 'Strict' || fv === 'Ignore' ? fv : 'Warn';
    // As the API server: the fieldManager parameter, else the User-Agent up to its first '/'.
    const fieldManager = query.get('fieldManager') || payload.userAgent.split('/')[0] || 'unknown';
    const dryRun = query.getAll('dryRun').includes('All');
    const warnings: string[] = [];
    const admit = this.admitter(payload.user, dryRun, warnings, payload.rec);
    return { fieldValidation, dryRun, warnings, fieldManager, admit };
  }

  private filter(r: ResourceRoute, query: URLSearchParams): Filter {
    const f: Filter = {
      labels: parseLabelSelector(query.get('labelSelector') ?? ''),
      fields: parseFieldSelector(query.get('fieldSelector') ?? '', r.def.fieldLabels),
    };
    if (r.namespace !== undefined) f.namespace = r.namespace;
    return f;
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private async resource(
    method: string,
    r: ResourceRoute,
    query: URLSearchParams,
    accept: string,
    contentType: string,
    payload: { text: string; raw: Buffer; userAgent: string; user: UserInfo | undefined; rec: RequestRecord },
    res: ServerResponse,
  ): Promise<void> {
    const { objects } = this.d;
    const body = payload.text;
    // kubectl's typed commands (create namespace, create configmap) send protobuf; everything else JSON.
    const decode = (): unknown =>
      contentType.startsWith(PROTOBUF) ? decodeProtobufObject(payload.raw) : parseJsonBody(body);
    if (r.subresource === 'exec') throw upgradeRequired();
    if (r.subresource === 'log') return this.podLog(method, r, query, res);
    const verb = this.verbOf(method, r, query);
    if (!verb) throw methodNotAllowed(method);
    if (r.def.review) {
      if (verb !== 'create' || !payload.user) throw methodNotAllowed(method);
      const review = decode();
      if (!isObject(review)) throw badRequest('the body of the request must be a JSON object');
      checkBuiltinDecodes(r.def, review);
      return sendJson(res, 201, answerReview(r.def, review, payload.user, this.d.rbac));
    }
    if (r.subresource === 'status' && (verb === 'delete' || verb === 'deletecollection'))
      throw methodNotAllowed(method);
    const fault = this.d.faults.takeApi({
      verb,
      def: r.def,
      subresource: r.subresource,
      name: r.name,
      namespace: r.namespace,
    });
    if (fault.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
    if (fault.error) throw fault.error;
    if ((verb === 'get' || verb === 'list' || verb === 'watch') && !acceptsJson(accept))
      throw notAcceptable();
    const table = asVersion(accept, 'Table');
    const includeObject = (query.get('includeObject') ?? 'Metadata') as IncludeObject;
    const tableOpts: TableOptions | undefined = table ? { includeObject, version: table } : undefined;
    switch (verb) {
      case 'get': {
        const obj = objects.get(r.def, r.namespace, r.name as string);
        if (tableOpts) {
          const rv = String((obj.metadata as JsonObject).resourceVersion ?? '');
          return sendJson(
            res,
            200,
            toTable(r.def, [obj], { resourceVersion: rv }, tableOpts),
            tableContentType(tableOpts.version),
          );
        }
        const pom = asVersion(accept, 'PartialObjectMetadata');
        if (pom) {
          return sendJson(
            res,
            200,
            { kind: 'PartialObjectMetadata', apiVersion: `meta.k8s.io/${pom}`, metadata: obj.metadata ?? {} },
            `application/json;as=PartialObjectMetadata;v=${pom};g=meta.k8s.io`,
          );
        }
        return sendJson(res, 200, obj);
      }
      case 'list':
        return this.list(r, query, accept, tableOpts, res);
      case 'watch': {
        const timeout = query.get('timeoutSeconds');
        const seconds =
          timeout !== null && /^\d+$/.test(timeout) ? Number(timeout) : this.d.watchTimeoutSeconds;
        this.d.watches.serve(
          {
            def: r.def,
            filter: this.filter(r, query),
            resourceVersion: query.get('resourceVersion') ?? '',
            allowBookmarks: parseBool(query.get('allowWatchBookmarks')),
            timeoutSeconds: seconds,
            sendInitialEvents: parseBool(query.get('sendInitialEvents')),
            ...(tableOpts ? { table: tableOpts } : {}),
            contentType: tableOpts ? tableContentType(tableOpts.version) : 'application/json',
          },
          res,
        );
        return;
      }
      case 'create': {
        const ctx = this.writeContext(query, payload);
        const out = objects.create(r.def, r.namespace, decode(), ctx);
        return sendJson(res, out.code, out.body, 'application/json', warningHeader(ctx.warnings));
      }
      case 'update': {
        const ctx = this.writeContext(query, payload);
        const out = objects.replace(r.def, r.namespace, r.name as string, r.subresource, decode(), ctx);
        return sendJson(res, out.code, out.body, 'application/json', warningHeader(ctx.warnings));
      }
      case 'patch': {
        checkDepth(body);
        const ctx = this.writeContext(query, payload);
        const out = objects.patch(
          r.def,
          r.namespace,
          r.name as string,
          r.subresource,
          contentType,
          body,
          ctx,
        );
        return sendJson(res, out.code, out.body, 'application/json', warningHeader(ctx.warnings));
      }
      case 'delete': {
        const warnings: string[] = [];
        const opts = this.deleteOptions(body, query);
        opts.admit = this.admitter(payload.user, opts.dryRun === true, warnings, payload.rec);
        const out = objects.delete(r.def, r.namespace, r.name as string, opts);
        return sendJson(res, out.code, out.body, 'application/json', warningHeader(warnings));
      }
      case 'deletecollection': {
        const warnings: string[] = [];
        const opts = this.deleteOptions(body, query);
        opts.admit = this.admitter(payload.user, opts.dryRun === true, warnings, payload.rec);
        const out = objects.deleteCollection(r.def, this.filter(r, query), opts);
        return sendJson(res, 200, out, 'application/json', warningHeader(warnings));
      }
    }
  }

  /** pods/log: the local containers write nothing to their stdout, so every log is empty. */
  private async podLog(
    method: string,
    r: ResourceRoute,
    query: URLSearchParams,
    res: ServerResponse,
  ): Promise<void> {
    if (method !== 'GET') throw methodNotAllowed(method);
    const pod = this.d.objects.getStored(r.def, r.namespace, r.name as string);
    const spec = isObject(pod.spec) ? pod.spec : {};
    const names = [
      ...(Array.isArray(spec.containers) ? spec.containers : []),
      ...(Array.isArray(spec.initContainers) ? spec.initContainers : []),
    ]
      .filter(isObject)
      .map((c) => String(c.name));
    const container = query.get('container');
    if (
      container === null &&
      names.length > 1 &&
      !(Array.isArray(spec.containers) && spec.containers.length === 1)
    ) {
      throw badRequest(
        `a container name must be specified for pod ${r.name as string}, choose one of: [${names.join(' ')}]`,
      );
    }
    if (container !== null && !names.includes(container)) {
      throw badRequest(`container ${container} is not valid for pod ${r.name as string}`);
    }
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': 0 });
    res.end();
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private deleteOptions(body: string, query: URLSearchParams): DeleteOptions {
    const opts: DeleteOptions = {};
    if (body.trim() !== '') {
      const b = parseJsonBody(body);
      if (isObject(b)) {
        if (typeof b.gracePeriodSeconds === 'number') opts.gracePeriodSeconds = b.gracePeriodSeconds;
        if (typeof b.propagationPolicy === 'string') opts.propagationPolicy = b.propagationPolicy;
        if (isObject(b.preconditions)) {
          const p: NonNullable<DeleteOptions['preconditions']> = {};
          if (typeof b.preconditions.uid === 'string') p.uid = b.preconditions.uid;
          if (typeof b.preconditions.resourceVersion === 'string')
            p.resourceVersion = b.preconditions.resourceVersion;
          opts.preconditions = p;
        }
        if (Array.isArray(b.dryRun) && b.dryRun.includes('All')) opts.dryRun = true;
      }
    }
    const grace = query.get('gracePeriodSeconds');
    if (grace !== null && /^-?\d+$/.test(grace)) opts.gracePeriodSeconds = Number(grace);
    const policy = query.get('propagationPolicy');
    if (policy) opts.propagationPolicy = policy;
    if (query.getAll('dryRun').includes('All')) opts.dryRun = true;
    return opts;
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private async list(
    r: ResourceRoute,
    query: URLSearchParams,
    accept: string,
    tableOpts: TableOptions | undefined,
    res: ServerResponse,
  ): Promise<void> {
    const { objects, store } = this.d;
    const filter = this.filter(r, query);
    const rvParam = query.get('resourceVersion') ?? '';
    if (rvParam !== '' && !/^\d+$/.test(rvParam)) throw badRequest(`invalid resource version: ${rvParam}`);
    const current = store.resourceVersion;
    if (rvParam !== '' && Number(rvParam) > current) {
      throw new ApiError(
        status(504, 'Timeout', `Too large resource version: ${rvParam}, current: ${current}`, {
          causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
          retryAfterSeconds: 1,
        }),
      );
    }
    if (
      query.get('resourceVersionMatch') === 'Exact' &&
      rvParam !== '' &&
      Number(rvParam) < store.compactedRevision
    ) {
      throw expired(`too old resource version: ${rvParam} (${store.compactedRevision})`);
    }
    let listRv = current;
    const all = objects.select(r.def, filter);
    const keyed = all.map((o) => {
      const m = o.metadata as JsonObject;
      return { key: objectKey(m.namespace as string | undefined, String(m.name)), o };
    });
    let startIdx = 0;
    const cont = query.get('continue');
    if (cont) {
      const tok = decodeContinue(cont);
      if (tok.rv < store.compactedRevision) {
        throw expired(
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
        );
      }
      listRv = tok.rv;
      startIdx = keyed.findIndex((k) => k.key > tok.start);
      if (startIdx < 0) startIdx = keyed.length;
    }
    const limitRaw = query.get('limit');
    const limit = limitRaw && /^\d+$/.test(limitRaw) ? Number(limitRaw) : 0;
    const page = limit > 0 ? keyed.slice(startIdx, startIdx + limit) : keyed.slice(startIdx);
    const remaining = keyed.length - startIdx - page.length;
    const listMeta: JsonObject = { resourceVersion: String(listRv) };
    if (remaining > 0 && page.length > 0) {
      listMeta.continue = continueToken(listRv, (page[page.length - 1] as { key: string }).key);
      listMeta.remainingItemCount = remaining;
    }
    const items = page.map((k) => objects.present(r.def, k.o));
    if (tableOpts)
      return sendJson(
        res,
        200,
        toTable(r.def, items, listMeta, tableOpts),
        tableContentType(tableOpts.version),
      );
    const pom = asVersion(accept, 'PartialObjectMetadataList');
    if (pom) {
      return sendJson(
        res,
        200,
        {
          kind: 'PartialObjectMetadataList',
          apiVersion: `meta.k8s.io/${pom}`,
          metadata: listMeta,
          items: items.map((o) => ({
            kind: 'PartialObjectMetadata',
            apiVersion: `meta.k8s.io/${pom}`,
            metadata: o.metadata ?? {},
          })),
        },
        `application/json;as=PartialObjectMetadataList;v=${pom};g=meta.k8s.io`,
      );
    }
    // Built-in list items carry no kind/apiVersion; CR list items do.
    const listItems: JsonValue[] = r.def.custom
      ? items
      : items.map((o) => {
          const { apiVersion: _a, kind: _k, ...rest } = o;
          return rest;
        });
    return sendJson(res, 200, {
      apiVersion: r.def.group ? `${r.def.group}/${r.def.version}` : r.def.version,
      kind: r.def.listKind,
      metadata: listMeta,
      items: listItems,
    });
  }

  // ---------------------------------------------------------------- /_emulator admin surface

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private async admin(method: string, path: string, body: string, res: ServerResponse): Promise<void> {
    const { faults } = this.d;
    const json = (): JsonObject => {
      const b = body.trim() === '' ? {} : parseJsonBody(body);
      if (!isObject(b)) throw badRequest('expected a JSON object');
      return b;
    };
    const rule = (h: { remaining: number; hits: number }): JsonObject => ({
      remaining: h.remaining,
      hits: h.hits,
    });
    switch (`${method} ${path}`) {
      case 'GET /_emulator/requests':
        return sendJson(res, 200, this.d.requests.all());
      case 'DELETE /_emulator/requests':
        this.d.requests.clear();
        return sendJson(res, 200, {});
      case 'POST /_emulator/compact':
        faults.compact();
        return sendJson(res, 200, { compactedRevision: this.d.store.compactedRevision });
      case 'POST /_emulator/watches/drop':
        return sendJson(res, 200, { dropped: faults.dropWatches() });
      case 'DELETE /_emulator/faults':
        faults.clear();
        return sendJson(res, 200, {});
      case 'POST /_emulator/faults/exec': {
        const b = json();
        const match: ExecMatch = {};
        for (const k of ['namespace', 'pod', 'container', 'command'] as const)
          if (typeof b[k] === 'string') match[k] = b[k] as string;
        if (typeof b.times === 'number') match.times = b.times;
        switch (b.effect) {
          case 'fail':
            return sendJson(
              res,
              200,
              rule(faults.failExec({ ...match, ...pick(b, ['exitCode', 'stdout', 'stderr']) })),
            );
          case 'error':
            return sendJson(res, 200, rule(faults.errorExec({ ...match, ...pick(b, ['message']) })));
          case 'delay':
            return sendJson(res, 200, rule(faults.delayExec({ ...match, ms: Number(b.ms ?? 0) })));
          case 'drop-status':
            return sendJson(res, 200, rule(faults.dropExecStatus(match)));
          case 'hang':
            return sendJson(res, 200, rule(faults.hangExec(match)));
          default:
            throw badRequest('effect must be one of fail, error, delay, drop-status, hang');
        }
      }
      case 'POST /_emulator/faults/api': {
        const b = json();
        const match: Record<string, unknown> = {};
        for (const k of ['resource', 'name', 'namespace', 'times', 'message', 'retryAfterSeconds'] as const) {
          if (b[k] !== undefined) match[k] = b[k];
        }
        if (typeof b.verb === 'string' || Array.isArray(b.verb)) match.verb = b.verb;
        if (typeof b.delayMs === 'number')
          return sendJson(res, 200, rule(faults.delayApi({ ...match, ms: b.delayMs })));
        if (typeof b.code !== 'number') throw badRequest('code (an HTTP status) or delayMs is required');
        return sendJson(res, 200, rule(faults.apiError({ ...match, code: b.code })));
      }
      default:
        throw pathNotFound();
    }
  }
}

function pick(b: JsonObject, keys: readonly string[]): Record<string, never> {
  const out: Record<string, unknown> = {};
  for (const k of keys) if (b[k] !== undefined) out[k] = b[k];
  return out as Record<string, never>;
}
