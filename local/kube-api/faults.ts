/**
 * Fault injection for tests: failing, slow, status-less or hanging execs, API errors on chosen verbs and
 * resources, watch-history compaction and dropped watches. Each rule fires a bounded number of times
 * (`times`, default 1) and returns a handle to inspect or cancel it.
 */
import { ApiError, conflict, internalError, status, tooManyRequests } from './errors.js';
import type { ResourceDef } from './registry.js';

export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

export interface FaultHandle {
  /** How many more times the rule fires (Infinity for `times: Infinity`). */
  readonly remaining: number;
  /** How many times it has fired. */
  readonly hits: number;
  cancel(): void;
}

/** Which exec sessions a rule applies to. Every given field must match. */
export interface ExecMatch {
  namespace?: string;
  pod?: string;
  container?: string;
  /** A substring of the argv joined with spaces (e.g. `'eip-add'`), or a RegExp tested against it. */
  command?: string | RegExp;
  /** How many sessions the rule applies to (default 1; `Infinity` for all). */
  times?: number;
}

export type ExecEffect =
  | { kind: 'delay'; ms: number }
  | { kind: 'hold'; until: Promise<void> }
  | { kind: 'exit'; exitCode: number; stdout: string; stderr: string }
  | { kind: 'error'; message: string }
  | { kind: 'drop-status' }
  | { kind: 'hang' };

export interface ApiMatch {
  /** One verb or several; all verbs when omitted. */
  verb?: Verb | readonly Verb[];
  /** `plural` (main resource only), `plural/subresource` (e.g. `iptables-eips/status`, `pods/exec`) or `*`. Default `*`. */
  resource?: string;
  name?: string;
  namespace?: string;
  times?: number;
}

export interface ApiErrorFault extends ApiMatch {
  /** The HTTP status to answer with: 409 Conflict, 429 TooManyRequests, 500, 503, 504, or any other. */
  code: number;
  message?: string;
  /** For 429: the Retry-After seconds (default 1). */
  retryAfterSeconds?: number;
}

export interface ExecCall {
  namespace: string;
  pod: string;
  container: string;
  command: readonly string[];
}

export interface ApiCall {
  verb: Verb;
  def: ResourceDef;
  subresource?: string;
  name?: string;
  namespace?: string;
}

interface Rule<M, E> {
  match: M;
  effect: E;
  remaining: number;
  hits: number;
}

function handle<M, E>(list: Rule<M, E>[], rule: Rule<M, E>): FaultHandle {
  list.push(rule);
  return {
    get remaining() {
      return rule.remaining;
    },
    get hits() {
      return rule.hits;
    },
    cancel() {
      rule.remaining = 0;
    },
  };
}

function execMatches(m: ExecMatch, call: ExecCall): boolean {
  if (m.namespace !== undefined && m.namespace !== call.namespace) return false;
  if (m.pod !== undefined && m.pod !== call.pod) return false;
  if (m.container !== undefined && m.container !== call.container) return false;
  if (m.command !== undefined) {
    const line = call.command.join(' ');
    if (typeof m.command === 'string' ? !line.includes(m.command) : !m.command.test(line)) return false;
  }
  return true;
}

function apiMatches(m: ApiMatch, call: ApiCall): boolean {
  if (m.verb !== undefined) {
    const verbs = typeof m.verb === 'string' ? [m.verb] : m.verb;
    if (!verbs.includes(call.verb)) return false;
  }
  const resource = call.subresource ? `${call.def.plural}/${call.subresource}` : call.def.plural;
  if (m.resource !== undefined && m.resource !== '*' && m.resource !== resource) return false;
  if (m.name !== undefined && m.name !== call.name) return false;
  if (m.namespace !== undefined && m.namespace !== call.namespace) return false;
  return true;
}

function take<M, E>(list: Rule<M, E>[], pred: (m: M) => boolean): E[] {
  const out: E[] = [];
  for (const r of list) {
    if (r.remaining <= 0 || !pred(r.match)) continue;
    r.remaining -= 1;
    r.hits += 1;
    out.push(r.effect);
  }
  return out;
}

export interface FaultHooks {
  compact(): void;
  dropWatches(): number;
}

/** The fault-injection API (`api.faults`). */
export class Faults {
  private execRules: Rule<ExecMatch, ExecEffect>[] = [];
  private apiRules: Rule<
    ApiMatch,
    { kind: 'error'; fault: ApiErrorFault } | { kind: 'delay'; ms: number }
  >[] = [];

  constructor(private readonly hooks: FaultHooks) {}

  private addExec(match: ExecMatch, effect: ExecEffect): FaultHandle {
    return handle(this.execRules, { match, effect, remaining: match.times ?? 1, hits: 0 });
  }

  /** The next matching exec answers with this exit code (default 1) and output, without running the command. */
  failExec(options: ExecMatch & { exitCode?: number; stdout?: string; stderr?: string } = {}): FaultHandle {
    return this.addExec(options, {
      kind: 'exit',
      exitCode: options.exitCode ?? 1,
      stdout: options.stdout ?? '',
      stderr: options.stderr ?? 'injected exec failure\n',
    });
  }

  /** The next matching exec ends with an InternalError status (the command could not be started). */
  errorExec(options: ExecMatch & { message?: string } = {}): FaultHandle {
    return this.addExec(options, {
      kind: 'error',
      message: options.message ?? 'error executing command in container: injected fault',
    });
  }

  /** The next matching exec waits `ms` before running (combines with one other exec fault). */
  delayExec(options: ExecMatch & { ms: number }): FaultHandle {
    return this.addExec(options, { kind: 'delay', ms: options.ms });
  }

  /**
   * The matching execs wait, connected, until `release()` is called, then run (combines with one other exec
   * fault). `hits` counts the sessions that reached the hold, so a test can wait for N sessions in flight.
   */
  holdExec(options: ExecMatch = {}): FaultHandle & { release(): void } {
    let release = (): void => {};
    const until = new Promise<void>((resolve) => {
      release = resolve;
    });
    return Object.assign(this.addExec(options, { kind: 'hold', until }), { release });
  }

  /** The next matching exec runs and sends its output, then the connection breaks without a status frame. */
  dropExecStatus(options: ExecMatch = {}): FaultHandle {
    return this.addExec(options, { kind: 'drop-status' });
  }

  /** The next matching exec never answers (until the client gives up or the API closes). */
  hangExec(options: ExecMatch = {}): FaultHandle {
    return this.addExec(options, { kind: 'hang' });
  }

  /** The next matching API request is answered with an error Status (see ApiErrorFault). */
  apiError(fault: ApiErrorFault): FaultHandle {
    return handle(this.apiRules, {
      match: fault,
      effect: { kind: 'error', fault },
      remaining: fault.times ?? 1,
      hits: 0,
    });
  }

  /** The next matching API request is answered `ms` later. */
  delayApi(options: ApiMatch & { ms: number }): FaultHandle {
    return handle(this.apiRules, {
      match: options,
      effect: { kind: 'delay', ms: options.ms },
      remaining: options.times ?? 1,
      hits: 0,
    });
  }

  /** Drops the watch history: a watch (or continue token) from any older resourceVersion gets 410 Expired. */
  compact(): void {
    this.hooks.compact();
  }

  /** Ends every open watch stream now; returns how many were open. */
  dropWatches(): number {
    return this.hooks.dropWatches();
  }

  /** Removes every pending rule. */
  clear(): void {
    this.execRules = [];
    this.apiRules = [];
  }

  /** @internal Consumes the exec rules matching `call`: the summed delay and the first other effect. */
  takeExec(call: ExecCall): {
    delayMs: number;
    holds: Promise<void>[];
    effect?: Exclude<ExecEffect, { kind: 'delay' | 'hold' }>;
  } {
    let delayMs = 0;
    const holds: Promise<void>[] = [];
    let effect: Exclude<ExecEffect, { kind: 'delay' | 'hold' }> | undefined;
    for (const e of take(this.execRules, (m) => execMatches(m, call))) {
      if (e.kind === 'delay') delayMs += e.ms;
      else if (e.kind === 'hold') holds.push(e.until);
      else effect ??= e;
    }
    return effect === undefined ? { delayMs, holds } : { delayMs, holds, effect };
  }

  /** @internal Consumes the API rules matching `call`: the summed delay and the error to answer with. */
  takeApi(call: ApiCall): { delayMs: number; error?: ApiError } {
    let delayMs = 0;
    let error: ApiError | undefined;
    for (const e of take(this.apiRules, (m) => apiMatches(m, call))) {
      if (e.kind === 'delay') delayMs += e.ms;
      else error ??= faultError(e.fault, call);
    }
    return error === undefined ? { delayMs } : { delayMs, error };
  }
}

function faultError(f: ApiErrorFault, call: ApiCall): ApiError {
  const name = call.name ?? '';
  switch (f.code) {
    case 409:
      return f.message === undefined ? conflict(call.def, name) : conflict(call.def, name, f.message);
    case 429:
      return tooManyRequests(f.retryAfterSeconds ?? 1);
    case 500:
      return internalError(f.message ?? 'injected fault');
    case 503:
      return new ApiError(
        status(
          503,
          'ServiceUnavailable',
          f.message ?? 'the server is currently unable to handle the request',
        ),
      );
    case 504:
      return new ApiError(
        status(
          504,
          'Timeout',
          f.message ?? 'the server was unable to return a response in the time allotted',
        ),
      );
    case 401:
      return new ApiError(status(401, 'Unauthorized', 'Unauthorized'));
    case 403:
      return new ApiError(
        status(403, 'Forbidden', f.message ?? `${call.def.plural} "${name}" is forbidden: injected fault`, {
          name,
          kind: call.def.plural,
        }),
      );
    default:
      return new ApiError(status(f.code, 'InternalError', f.message ?? `injected fault (${f.code})`));
  }
}
