/**
 * The local stack's sink: runs the real Lambda handler (`eipHandler`, the same middy chain) in this process.
 * It behaves like Lambda's asynchronous invocation, only faster: a thrown (retryable) error is retried with
 * exponential backoff, then the event is parked in a dead-letter list a person can read and handed back to the
 * bridge, which queues it again with a longer backoff (ADR 0019). A permanent error resolves as a `rejected`
 * outcome inside the handler and is not retried.
 *
 * The retries last at least as long as a lease can: a lease left behind by a crashed run (kill -9) blocks the EIP
 * until it expires, and giving up before then would leave the EIP waiting for the next change or resync.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import type { Outcome } from '../../core/outcome.js';
import { LEASE_MAX_MS } from '../../domain/lease.js';
import { type EipEvent, HANDLERS, type HandlerName } from '../../events.js';
import { eipHandler } from '../../lambda/eip-handler.js';
import type { Deps, Logger } from '../../ports.js';
import { backoffCeiling, sleep } from '../backoff.js';
import {
  emptySinkStats,
  errorText,
  type Sink,
  SinkGaveUp,
  type SinkListener,
  type SinkStats,
} from './sink.js';

export interface DeadLetter {
  event: EipEvent;
  /** The last error, as text. */
  error: string;
  attempts: number;
  /** When it was parked (RFC 3339). */
  at: string;
}

/** How long the in-process sink keeps retrying by default: the longest a lease can be held. */
export const IN_PROCESS_RETRY_FOR_MS = LEASE_MAX_MS;

export interface InProcessSinkOptions {
  getDeps: () => Promise<Deps>;
  /** Retries after the first attempt before an event may be parked (at least). Default 3. */
  retries?: number;
  /** First retry delay; doubles per retry up to maxBackoffMs. Defaults 1000 ms and 5 s. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /**
   * Keep retrying at least this long after the first attempt (and at least `retries` times). Default: the longest
   * lease (IN_PROCESS_RETRY_FOR_MS), so a lease left by a crashed run has expired before the sink gives up.
   */
  retryForMs?: number;
  log?: Logger;
  /** Called with every handler outcome (the local stack prints them; tests count them). */
  onOutcome?: (event: EipEvent, outcome: Outcome) => void;
  now?: () => number;
}

export type InProcessSink = Sink & {
  /** Events that failed every retry and have not succeeded since, newest per EIP and handler. */
  deadLetters(): DeadLetter[];
  /** Resolves once no event is being handled or waiting for a retry. */
  idle(): Promise<void>;
  close(): Promise<void>;
};

/** The retry delays of one event: at least `retries` of them, and together at least `retryForMs`. */
export function retrySchedule(options: {
  retries: number;
  backoffMs: number;
  maxBackoffMs: number;
  retryForMs: number;
}): number[] {
  const out: number[] = [];
  let total = 0;
  for (let n = 1; n <= options.retries || total < options.retryForMs; n++) {
    const d = backoffCeiling(n, options.backoffMs, options.maxBackoffMs);
    out.push(d);
    total += d;
    if (out.length > 10_000) break; // a zero backoff with a positive retryForMs must not spin forever
  }
  return out;
}

export function inProcessSink(options: InProcessSinkOptions): InProcessSink {
  const schedule = retrySchedule({
    retries: options.retries ?? 3,
    backoffMs: options.backoffMs ?? 1_000,
    maxBackoffMs: options.maxBackoffMs ?? 5_000,
    retryForMs: options.retryForMs ?? IN_PROCESS_RETRY_FOR_MS,
  });
  const handlers = Object.fromEntries(HANDLERS.map((h) => [h, eipHandler(h, options.getDeps)])) as Record<
    HandlerName,
    ReturnType<typeof eipHandler>
  >;
  const parked = new Map<string, DeadLetter>();
  const listeners: SinkListener[] = [];
  const stats: SinkStats = emptySinkStats();
  const closing = new AbortController();
  let inFlight = 0;
  let idleWaiters: (() => void)[] = [];
  const letterKey = (e: EipEvent) => `${e.object.name}|${e.handler}`;

  const settle = () => {
    if (inFlight > 0) return;
    const w = idleWaiters;
    idleWaiters = [];
    for (const f of w) f();
  };

  /** A handled event: counted, its dead letter (if any) cleared, and a blocked EIP's retry delay passed on. */
  function delivered(event: EipEvent, outcome: Outcome): void {
    stats.delivered++;
    parked.delete(letterKey(event));
    options.onOutcome?.(event, outcome);
    if (outcome.status === 'rejected' && outcome.retryAfterMs !== undefined && outcome.retryAfterMs > 0)
      for (const l of listeners) l.retryAfter?.(event, outcome.retryAfterMs);
  }

  /** Out of retries: the event is parked as a dead letter, and the sink gives up on it. */
  function park(event: EipEvent, error: unknown, attempts: number): SinkGaveUp {
    const letter: DeadLetter = { event, error: errorText(error), attempts, at: new Date().toISOString() };
    parked.set(letterKey(event), letter);
    stats.deadLetters++;
    stats.failures++;
    options.log?.error('event parked as a dead letter', {
      eventId: event.id,
      eip: event.object.name,
      handler: event.handler,
      attempts,
      error: letter.error,
    });
    return new SinkGaveUp(`parked as a dead letter after ${attempts} attempts: ${letter.error}`);
  }

  async function handle(event: EipEvent): Promise<void> {
    const handler = handlers[event.handler];
    for (let attempt = 1; ; attempt++) {
      try {
        const context = {
          awsRequestId: randomUUID(),
          functionName: `eip-${event.handler}`,
        } as unknown as Context;
        delivered(event, await handler(event, context));
        return;
      } catch (e) {
        if (closing.signal.aborted)
          throw new SinkGaveUp(`not retried: the sink is closing (${errorText(e)})`);
        const delay = schedule[attempt - 1];
        if (delay === undefined) throw park(event, e, attempt);
        stats.retries++;
        options.log?.warn('handler failed; will retry', {
          eventId: event.id,
          eip: event.object.name,
          handler: event.handler,
          attempt,
          retryInMs: delay,
          error: errorText(e),
        });
        await sleep(delay, closing.signal);
      }
    }
  }

  return {
    name: 'in-process',
    async send(event: EipEvent): Promise<void> {
      if (closing.signal.aborted) throw new SinkGaveUp('the sink is closed');
      inFlight++;
      try {
        await handle(event);
      } finally {
        inFlight--;
        settle();
      }
    },
    deadLetters: () => [...parked.values()],
    async idle(): Promise<void> {
      // The bridge hands the next event for an EIP over in the microtasks right after the previous one finished;
      // idle means nothing in flight and nothing handed over by the next turn of the event loop.
      for (;;) {
        if (inFlight > 0) await new Promise<void>((r) => idleWaiters.push(r));
        await new Promise((r) => setImmediate(r));
        if (inFlight === 0) return;
      }
    },
    /**
     * Stops taking events and cuts every retry wait short (those events end as not delivered); handlers already
     * running finish and give their leases back. Resolves when nothing runs.
     */
    async close(): Promise<void> {
      closing.abort();
      if (inFlight > 0) await new Promise<void>((r) => idleWaiters.push(r));
    },
    subscribe(listener: SinkListener): void {
      listeners.push(listener);
    },
    stats: () => ({ ...stats }),
  };
}
