/**
 * The edge: the one middy chain all four handlers share. It parses and validates the event (an invalid one
 * resolves at once as a `rejected` outcome), gives the operation a logger that carries the event's correlation
 * fields, and aborts early enough before Lambda's deadline that the lease and any exec can be abandoned cleanly.
 *
 * Error policy (ADR 0004): the operations resolve every permanent error themselves, as a recorded `rejected`
 * outcome, in one place (`settle` in shared/core/settle.ts); whatever reaches `onError` is rethrown so Lambda
 * retries and the on-failure destination keeps what never succeeds.
 */
import middy, { type MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { invalidEvent, operations } from '../core/operations.js';
import type { Outcome } from '../core/outcome.js';
import { DeadlineError, EipError, InvalidEventError } from '../domain/errors.js';
import { nameProblem } from '../domain/validation.js';
import { type EipEvent, type HandlerName, parseEipEvent } from '../events.js';
import type { Deps } from '../ports.js';

export interface EipHandlerOptions {
  /** Abort this long before Lambda's deadline (middy's timeoutEarlyInMillis). */
  timeoutEarlyInMillis?: number;
  /** Budget when there is no Lambda context (local runs, tests). */
  defaultBudgetMs?: number;
}

type Internal = { started: number; deps?: Deps };

/**
 * `request.event` goes in as unknown and leaves as a validated EipEvent naming this handler; an invalid event
 * ends the invocation here with a `rejected` outcome (retrying it cannot help).
 */
function parseEvent(
  handler: HandlerName,
  getDeps: () => Promise<Deps>,
): MiddlewareObj<EipEvent, Outcome, Error, Context> {
  return {
    before: async (request) => {
      try {
        const event = parseEipEvent(request.event);
        if (event.handler !== handler)
          throw new InvalidEventError(
            `invalid event: handler is "${event.handler}" but this is the ${handler} handler`,
          );
        request.event = event;
      } catch (error) {
        if (!(error instanceof InvalidEventError)) throw error;
        const deps = await getDeps().catch(() => undefined);
        deps?.log.warn('event rejected', { handler, code: error.code, message: error.message });
        deps?.metrics.count('Outcomes', 1, { handler, status: 'rejected' });
        // The outcome names the object only when its name is a valid one: never echo a hostile value back.
        const name = (request.event as Partial<EipEvent> | undefined)?.object?.name;
        return invalidEvent(typeof name === 'string' && nameProblem(name) === undefined ? name : '', error);
      }
      return undefined;
    },
  };
}

function errorPolicy(
  handler: HandlerName,
  getDeps: () => Promise<Deps>,
): MiddlewareObj<EipEvent, Outcome, Error, Context> {
  return {
    onError: async (request) => {
      const error = request.error;
      const deps = await getDeps().catch(() => undefined);
      const name = (request.event as Partial<EipEvent> | undefined)?.object?.name ?? '';
      deps?.metrics.count('Outcomes', 1, { handler, status: 'retry' });
      deps?.log.error('will be retried', {
        handler,
        eip: name,
        code: error instanceof EipError ? error.code : 'Unexpected',
        error: error?.message,
        ...(!(error instanceof EipError) && { stack: error?.stack }),
      });
      // request.response stays undefined: middy rethrows, Lambda retries.
    },
  };
}

/**
 * Builds the Lambda handler for one operation. `getDeps` is called once per invocation and should return a cached
 * promise (built at cold start from validated configuration).
 */
export function eipHandler(
  handler: HandlerName,
  getDeps: () => Promise<Deps>,
  options: EipHandlerOptions = {},
) {
  const timeoutEarlyInMillis = options.timeoutEarlyInMillis ?? 3_000;
  const defaultBudgetMs = options.defaultBudgetMs ?? 60_000;
  const operation = operations[handler];
  return middy<EipEvent, Outcome, Error, Context, Internal>({
    timeoutEarlyInMillis,
    timeoutEarlyResponse: () => {
      throw new DeadlineError(
        `${handler} handler gave up ${timeoutEarlyInMillis} ms before the Lambda deadline`,
      );
    },
  })
    .use(parseEvent(handler, getDeps))
    .use(errorPolicy(handler, getDeps))
    .handler(async (event, context, { signal }) => {
      const deps = await getDeps();
      const started = deps.clock.now();
      const remaining =
        typeof context?.getRemainingTimeInMillis === 'function'
          ? context.getRemainingTimeInMillis() - timeoutEarlyInMillis
          : defaultBudgetMs;
      const log = deps.log.child({
        eventId: event.id,
        eip: event.object.name,
        handler,
        reason: event.reason,
        ...(context?.awsRequestId && { requestId: context.awsRequestId }),
      });
      log.info('event received');
      try {
        const outcome = await operation(
          { event, signal, deadline: started + remaining, log },
          { ...deps, log },
        );
        deps.metrics.count('Outcomes', 1, { handler, status: outcome.status });
        log.info('outcome', { outcome });
        return outcome;
      } finally {
        deps.metrics.timing('HandlerDuration', deps.clock.now() - started, { handler });
      }
    });
}
