/**
 * The one middy chain all four handlers share: parse and validate the event, give the operation a logger that
 * carries the event's correlation fields, enforce the error policy, and abort early enough before Lambda's
 * deadline that the lease and any exec can be abandoned cleanly.
 *
 * Error policy (ADR 0004): a permanent error resolves (a `rejected` outcome; the core has already recorded it on
 * the EIP) so Lambda does not retry it; anything else is rethrown so Lambda retries and the on-failure
 * destination keeps what never succeeds.
 */
import middy, { type MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { operations } from '../core/operations.js';
import type { Outcome } from '../core/outcome.js';
import { DeadlineError, EipError, InvalidEventError, PermanentError } from '../domain/errors.js';
import { type EipEvent, type HandlerName, parseEipEvent } from '../events.js';
import type { Deps } from '../ports.js';

export interface EipHandlerOptions {
  /** Abort this long before Lambda's deadline (middy's timeoutEarlyInMillis). */
  timeoutEarlyInMillis?: number;
  /** Budget when there is no Lambda context (local runs, tests). */
  defaultBudgetMs?: number;
}

type Internal = { started: number; deps?: Deps };

/** `request.event` goes in as unknown and leaves as a validated EipEvent naming this handler. */
function parseEvent(handler: HandlerName): MiddlewareObj<EipEvent, Outcome, Error, Context> {
  return {
    before: (request) => {
      const event = parseEipEvent(request.event);
      if (event.handler !== handler)
        throw new InvalidEventError(
          `invalid event: handler is "${event.handler}" but this is the ${handler} handler`,
        );
      request.event = event;
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
      if (error instanceof PermanentError) {
        // Only InvalidEventError reaches here as permanent: the core turns the others into outcomes itself.
        deps?.log.warn('event rejected', { handler, code: error.code, message: error.message });
        deps?.metrics.count('Outcomes', 1, { handler, status: 'rejected' });
        request.response = { status: 'rejected', eip: name, code: error.code, message: error.message };
        return;
      }
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
    .use(parseEvent(handler))
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
