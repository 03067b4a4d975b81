/**
 * The local stack's sink: runs the real Lambda handler (`eipHandler`, the same middy chain) in this process.
 * It behaves like Lambda's asynchronous invocation, only faster (ADR 0013): a thrown (retryable) error is
 * retried with exponential backoff a bounded number of times, then the event is parked in a dead-letter list a
 * person can read. A permanent error resolves as a `rejected` outcome inside the handler and is not retried.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import type { Outcome } from '../../core/outcome.js';
import { type EipEvent, HANDLERS, type HandlerName } from '../../events.js';
import { eipHandler } from '../../lambda/eip-handler.js';
import type { Deps, Logger } from '../../ports.js';
import { errorText, type Sink, type SinkStats, sleep } from './sink.js';

export interface DeadLetter {
  event: EipEvent;
  /** The last error, as text. */
  error: string;
  attempts: number;
  /** When it was parked (RFC 3339). */
  at: string;
}

export interface InProcessSinkOptions {
  getDeps: () => Promise<Deps>;
  /** Retries after the first attempt before an event is parked. Default 3 (Lambda's async default is 2). */
  retries?: number;
  /** First retry delay; doubles per retry. Default 1000 ms. */
  backoffMs?: number;
  log?: Logger;
  /** Called with every handler outcome (the local stack prints them; tests count them). */
  onOutcome?: (event: EipEvent, outcome: Outcome) => void;
}

export type InProcessSink = Sink & {
  deadLetters(): DeadLetter[];
  /** Resolves once no event is being handled or waiting for a retry. */
  idle(): Promise<void>;
};

export function inProcessSink(options: InProcessSinkOptions): InProcessSink {
  const retries = options.retries ?? 3;
  const backoffMs = options.backoffMs ?? 1_000;
  const handlers = Object.fromEntries(HANDLERS.map((h) => [h, eipHandler(h, options.getDeps)])) as Record<
    HandlerName,
    ReturnType<typeof eipHandler>
  >;
  const parked: DeadLetter[] = [];
  const stats: SinkStats = { retries: 0, failures: 0, deadLetters: 0, buffered: 0 };
  let inFlight = 0;
  let idleWaiters: (() => void)[] = [];

  const settle = () => {
    if (inFlight > 0) return;
    const w = idleWaiters;
    idleWaiters = [];
    for (const f of w) f();
  };

  async function handle(event: EipEvent): Promise<void> {
    const handler = handlers[event.handler];
    for (let attempt = 1; ; attempt++) {
      try {
        const context = {
          awsRequestId: randomUUID(),
          functionName: `eip-${event.handler}`,
        } as unknown as Context;
        const outcome = await handler(event, context);
        options.onOutcome?.(event, outcome);
        return;
      } catch (e) {
        if (attempt > retries) {
          const letter: DeadLetter = {
            event,
            error: errorText(e),
            attempts: attempt,
            at: new Date().toISOString(),
          };
          parked.push(letter);
          stats.deadLetters++;
          stats.failures++;
          options.log?.error('event parked as a dead letter', {
            eventId: event.id,
            eip: event.object.name,
            handler: event.handler,
            attempts: attempt,
            error: letter.error,
          });
          return;
        }
        stats.retries++;
        const delay = backoffMs * 2 ** (attempt - 1);
        options.log?.warn('handler failed; will retry', {
          eventId: event.id,
          eip: event.object.name,
          handler: event.handler,
          attempt,
          retryInMs: delay,
          error: errorText(e),
        });
        await sleep(delay);
      }
    }
  }

  return {
    name: 'in-process',
    async send(event: EipEvent): Promise<void> {
      inFlight++;
      try {
        await handle(event);
      } finally {
        inFlight--;
        settle();
      }
    },
    deadLetters: () => [...parked],
    async idle(): Promise<void> {
      // The bridge hands the next event for an EIP over in the microtasks right after the previous one finished;
      // idle means nothing in flight and nothing handed over by the next turn of the event loop.
      for (;;) {
        if (inFlight > 0) await new Promise<void>((r) => idleWaiters.push(r));
        await new Promise((r) => setImmediate(r));
        if (inFlight === 0) return;
      }
    },
    stats: () => ({ ...stats }),
  };
}
