/**
 * The edge: the one middy chain all four handlers share. It parses and validates the event (an invalid one
 * resolves at once as a `rejected` outcome), gives the operation a logger that carries the event's correlation
 * fields, and aborts early enough before Lambda's deadline that the lease and any exec can be abandoned cleanly.
 *
 * A batch (several events of this handler, docs/adr/0112-one-gateways-burst-in-one-invocation.md) runs each member
 * as its own invocation, side by side in this container, so the container's gateway batching coalesces their calls:
 * each has its own lease, outcome, logs and metrics, and the invocation's deadline. A member refused as invalid is
 * its own `rejected` outcome; a member that fails retryably is thrown after every member ran (BatchMembersFailed,
 * naming them), so Lambda retries the batch, whose members that succeeded are then no-ops.
 *
 * Error policy (ADR 0004): the operations resolve every permanent error themselves, as a recorded `rejected`
 * outcome, in one place (`settle` in shared/core/settle.ts); whatever reaches `onError` is rethrown so Lambda
 * retries and the on-failure destination keeps what never succeeds.
 */
import { setMaxListeners } from 'node:events';
import middy, { type MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { invalidEvent, operations } from '../core/operations.js';
import type { Outcome } from '../core/outcome.js';
import { DeadlineError, EipError, InvalidEventError, RetryableError } from '../domain/errors.js';
import { nameProblem } from '../domain/validation.js';
import { type EipEvent, type HandlerName, type Member, parseEipEvents } from '../events.js';
import type { Deps } from '../ports.js';

export interface EipHandlerOptions {
  /** Abort this long before Lambda's deadline (middy's timeoutEarlyInMillis). */
  timeoutEarlyInMillis?: number;
  /** Budget when there is no Lambda context (local runs, tests). */
  defaultBudgetMs?: number;
}

/** What a batch resolves to: each member's outcome, in the batch's order. */
export interface BatchOutcome {
  batch: Outcome[];
}

/** Some members of a batch failed retryably (each logged and counted on its own): Lambda retries the batch. */
export class BatchMembersFailedError extends RetryableError {
  readonly code = 'BatchMembersFailed';
  constructor(
    readonly failed: { eip: string; eventId: string; code: string }[],
    readonly total: number,
  ) {
    super(
      `${failed.length} of ${total} events will be retried: ${failed.map((f) => `${f.eip} (${f.code})`).join(', ')}`,
    );
  }
}

/** The handler as Lambda and the local runs call it: a single event resolves to its outcome, a batch to theirs. */
export interface EipLambda {
  (event: EipEvent, context: Context): Promise<Outcome>;
  (event: unknown, context: Context): Promise<Outcome | BatchOutcome>;
}

type Parsed = { handler: HandlerName; members: Member[]; batch: boolean };
type Internal = { started: number; deps?: Deps };

/** The outcome of an invalid event, naming its object only when that name is a valid one. */
function refused(name: unknown, error: InvalidEventError): Outcome {
  return invalidEvent(typeof name === 'string' && nameProblem(name) === undefined ? name : '', error);
}

function logRejected(deps: Deps | undefined, handler: HandlerName, error: InvalidEventError): void {
  deps?.log.warn('event rejected', { handler, code: error.code, message: error.message });
  deps?.metrics.count('Outcomes', 1, { handler, status: 'rejected' });
}

const codeOf = (error: unknown): string => (error instanceof EipError ? error.code : 'Unexpected');

function logRetry(
  deps: Deps | undefined,
  handler: HandlerName,
  name: string,
  error: Error | undefined,
): void {
  deps?.metrics.count('Outcomes', 1, { handler, status: 'retry' });
  deps?.log.error('will be retried', {
    handler,
    eip: name,
    code: codeOf(error),
    error: error?.message,
    ...(!(error instanceof EipError) && { stack: error?.stack }),
  });
}

/**
 * `request.event` goes in as unknown and leaves as the parsed members; an invalid single event (or batch frame) ends
 * the invocation here with a `rejected` outcome (retrying it cannot help).
 */
function parseEvent(
  handler: HandlerName,
  getDeps: () => Promise<Deps>,
): MiddlewareObj<unknown, Outcome | BatchOutcome, Error, Context> {
  return {
    before: async (request) => {
      try {
        const parsed = parseEipEvents(request.event);
        if (parsed.handler !== handler)
          throw new InvalidEventError(
            `invalid event: handler is "${parsed.handler}" but this is the ${handler} handler`,
          );
        request.event = { ...parsed, batch: parsed.members.length > 1 } satisfies Parsed;
      } catch (error) {
        if (!(error instanceof InvalidEventError)) throw error;
        logRejected(await getDeps().catch(() => undefined), handler, error);
        return refused((request.event as Partial<EipEvent> | undefined)?.object?.name, error);
      }
      return undefined;
    },
  };
}

function errorPolicy(
  handler: HandlerName,
  getDeps: () => Promise<Deps>,
): MiddlewareObj<unknown, Outcome | BatchOutcome, Error, Context> {
  return {
    onError: async (request) => {
      const error = request.error;
      const deps = await getDeps().catch(() => undefined);
      if (error instanceof BatchMembersFailedError) {
        // Each member was counted and logged when it failed.
        deps?.log.error('batch will be retried', { handler, failed: error.failed, total: error.total });
        return;
      }
      const parsed = request.event as Partial<Parsed> | undefined;
      const only = parsed?.members?.length === 1 ? parsed.members[0] : undefined;
      logRetry(deps, handler, only && 'event' in only ? only.event.object.name : '', error ?? undefined);
      // request.response stays undefined: middy rethrows, Lambda retries.
    },
  };
}

/** Runs members side by side, those of one EIP one after another in the batch's order. */
function eachInOrder<T>(events: EipEvent[], run: (e: EipEvent) => Promise<T>): Promise<T>[] {
  const last = new Map<string, Promise<unknown>>();
  return events.map((e) => {
    const before = last.get(e.object.name) ?? Promise.resolve();
    const p = before.catch(() => undefined).then(() => run(e));
    last.set(e.object.name, p);
    return p;
  });
}

/**
 * Builds the Lambda handler for one operation. `getDeps` is called once per invocation and should return a cached
 * promise (built at cold start from validated configuration).
 */
export function eipHandler(
  handler: HandlerName,
  getDeps: () => Promise<Deps>,
  options: EipHandlerOptions = {},
): EipLambda {
  const timeoutEarlyInMillis = options.timeoutEarlyInMillis ?? 3_000;
  const defaultBudgetMs = options.defaultBudgetMs ?? 60_000;
  const operation = operations[handler];

  async function runOne(
    event: EipEvent,
    deps: Deps,
    at: { started: number; deadline: number; signal: AbortSignal; context?: Context; batch?: number },
  ): Promise<Outcome> {
    const log = deps.log.child({
      eventId: event.id,
      eip: event.object.name,
      handler,
      reason: event.reason,
      ...(at.context?.awsRequestId && { requestId: at.context.awsRequestId }),
      ...(at.batch !== undefined && { batch: at.batch }),
    });
    log.info('event received');
    const started = deps.clock.now();
    try {
      const outcome = await operation(
        { event, signal: at.signal, deadline: at.deadline, log },
        { ...deps, log },
      );
      deps.metrics.count('Outcomes', 1, { handler, status: outcome.status });
      log.info('outcome', { outcome });
      return outcome;
    } finally {
      deps.metrics.timing('HandlerDuration', deps.clock.now() - started, { handler });
    }
  }

  /** A batch: every member runs; the retryable failures are thrown together once all have ended. */
  async function runBatch(
    members: Member[],
    deps: Deps,
    at: Parameters<typeof runOne>[2],
  ): Promise<BatchOutcome> {
    deps.log.info('batch received', { handler, events: members.length });
    const valid = members.flatMap((m) => ('event' in m ? [m.event] : []));
    const settled = await Promise.allSettled(
      eachInOrder(valid, (e) => runOne(e, deps, { ...at, batch: members.length })),
    );
    const byEvent = new Map(valid.map((e, i) => [e, settled[i]!]));
    const failed: BatchMembersFailedError['failed'] = [];
    const batch: Outcome[] = [];
    for (const m of members) {
      if ('error' in m) {
        logRejected(deps, handler, m.error);
        batch.push(refused(m.name, m.error));
        continue;
      }
      const r = byEvent.get(m.event)!;
      if (r.status === 'fulfilled') {
        batch.push(r.value);
        continue;
      }
      const error = r.reason instanceof Error ? r.reason : new Error(String(r.reason));
      logRetry(deps, handler, m.event.object.name, error);
      failed.push({ eip: m.event.object.name, eventId: m.event.id, code: codeOf(error) });
    }
    if (failed.length > 0) throw new BatchMembersFailedError(failed, members.length);
    return { batch };
  }

  const chain = middy<unknown, Outcome | BatchOutcome, Error, Context, Internal>({
    timeoutEarlyInMillis,
    timeoutEarlyResponse: () => {
      throw new DeadlineError(
        `${handler} handler gave up ${timeoutEarlyInMillis} ms before the Lambda deadline`,
      );
    },
  })
    .use(parseEvent(handler, getDeps))
    .use(errorPolicy(handler, getDeps))
    .handler(async (parsed, context, { signal }) => {
      const { members, batch } = parsed as Parsed;
      const deps = await getDeps();
      const started = deps.clock.now();
      const remaining =
        typeof context?.getRemainingTimeInMillis === 'function'
          ? context.getRemainingTimeInMillis() - timeoutEarlyInMillis
          : defaultBudgetMs;
      // Every gateway call of every member listens on this one signal while it waits (shared/core/batch.ts), on
      // each pod of a replicated gateway and for each QoS rule, and takes its listener off when it settles: one EIP
      // on a 4-pod gateway with a 2-rule policy passes Node's default warning threshold of 10 without any leak. The
      // signal lives for this invocation only, so nothing can pile up on it beyond the invocation: no threshold.
      setMaxListeners(0, signal);
      const at = { started, deadline: started + remaining, signal, context };
      if (!batch) return runOne((members[0] as { event: EipEvent }).event, deps, at);
      return runBatch(members, deps, at);
    });
  return ((event: unknown, context: Context) => chain(event, context)) as EipLambda;
}
