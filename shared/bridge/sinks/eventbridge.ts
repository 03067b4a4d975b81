/**
 * EventBridge PutEvents: events are buffered, sent in batches of up to 10 entries (the API's limit), and an entry
 * that fails (`FailedEntryCount` / `Entries[i].ErrorCode`, or the whole call throwing) is retried with
 * exponential backoff and jitter. The buffer is bounded (retrying entries count; one batch may be in flight on
 * top), so `send()` waits while it is full: a slow or failing bus slows the bridge down instead of growing memory
 * without limit.
 */
import type {
  DescribeEventBusCommand,
  DescribeEventBusCommandOutput,
  PutEventsCommand,
  PutEventsCommandOutput,
} from '@aws-sdk/client-eventbridge';
import { detailTypeOf, type EipEvent, EVENT_SOURCE } from '../../events.js';
import type { Logger } from '../../ports.js';
import { backoffDelay, sleep } from '../backoff.js';
import {
  awsCodeOf,
  emptySinkStats,
  errorText,
  PERMANENT_AWS_CODES,
  type Sink,
  type SinkListener,
  type SinkStats,
} from './sink.js';

/** The seam: a real `EventBridgeClient`, or a fake with the same `send`. */
export interface PutEventsClient {
  send(
    command: PutEventsCommand | DescribeEventBusCommand,
  ): Promise<PutEventsCommandOutput | DescribeEventBusCommandOutput>;
}

export interface EventBridgeSinkOptions {
  client: PutEventsClient;
  /** The bus; the account's default bus when absent. */
  eventBusName?: string;
  /** Entries held at most (accepted but not yet delivered, including retries). Default 100. */
  bufferSize?: number;
  /** Entries per PutEvents call, 1–10. Default 10. */
  batchSize?: number;
  /** How long a partial batch waits for company before it is sent. Default 20 ms. */
  lingerMs?: number;
  /** Delivery attempts per entry before it is given up. Default 8. */
  maxAttempts?: number;
  /** First retry delay; doubles per attempt up to maxBackoffMs. Defaults 200 ms and 20 s. */
  backoffMs?: number;
  maxBackoffMs?: number;
  log?: Logger;
  random?: () => number;
  /**
   * Check that the bus exists (DescribeEventBus) before the first delivery and every `verifyEveryMs` (default
   * 5 minutes): PutEvents to a bus that does not exist can answer success, and the events vanish. A missing bus
   * is a permanent failure. An identity not allowed to describe the bus skips the check (with one warning).
   */
  verifyBus?: boolean;
  verifyEveryMs?: number;
}

interface Entry {
  event: EipEvent;
  attempts: number;
  notBefore: number;
}

const MAX_BATCH = 10;

export function eventBridgeSink(
  options: EventBridgeSinkOptions,
): Sink & { flush(): Promise<void>; subscribe(listener: SinkListener): void } {
  const bufferSize = options.bufferSize ?? 100;
  const batchSize = Math.min(MAX_BATCH, Math.max(1, options.batchSize ?? MAX_BATCH));
  const lingerMs = options.lingerMs ?? 20;
  const maxAttempts = options.maxAttempts ?? 8;
  const backoffMs = options.backoffMs ?? 200;
  const maxBackoffMs = options.maxBackoffMs ?? 20_000;
  const random = options.random ?? Math.random;
  const log = options.log;
  if (bufferSize < batchSize) throw new RangeError('bufferSize must hold at least one batch');

  const buffer: Entry[] = [];
  const stats: SinkStats = emptySinkStats();
  const listeners: SinkListener[] = [];
  const verifyEveryMs = options.verifyEveryMs ?? 300_000;
  let verifiedAt: number | undefined;
  let busMissing: string | undefined;
  let DescribeCommand: typeof DescribeEventBusCommand | undefined;
  const spaceWaiters: (() => void)[] = [];
  let flushWaiters: (() => void)[] = [];
  let running = false;
  /** Set while the loop sleeps: for a backoff (any new entry wakes it) or to let a partial batch fill up. */
  let nap: { why: 'backoff' | 'linger'; wake: AbortController } | undefined;
  let Command: typeof PutEventsCommand | undefined;

  const notifySpace = () => {
    while (spaceWaiters.length > 0 && buffer.length < bufferSize) spaceWaiters.shift()!();
  };
  const notifyFlushed = () => {
    if (buffer.length > 0) return;
    const w = flushWaiters;
    flushWaiters = [];
    for (const f of w) f();
  };

  function toEntry(event: EipEvent) {
    return {
      Source: EVENT_SOURCE,
      DetailType: detailTypeOf(event.handler),
      Detail: JSON.stringify(event),
      ...(options.eventBusName && { EventBusName: options.eventBusName }),
      ...(event.emittedAt && { Time: new Date(event.emittedAt) }),
    };
  }

  /**
   * After a failed DescribeEventBus: why the bus is missing (it does not exist), or undefined when the check is not
   * allowed (the bus is taken to exist). Anything else (throttling, network) leaves the last answer and checks again
   * with the next batch.
   */
  function verifyFailed(code: string | undefined): string | undefined {
    if (code === 'ResourceNotFoundException') {
      verifiedAt = Date.now();
      return `ResourceNotFoundException: event bus ${options.eventBusName} does not exist`;
    }
    if (code === 'AccessDeniedException') {
      if (verifiedAt === undefined)
        log?.warn('cannot check that the event bus exists (events:DescribeEventBus denied)', {
          eventBus: options.eventBusName,
        });
      verifiedAt = Date.now();
      return undefined;
    }
    return busMissing;
  }

  /** Undefined when the bus is known to exist (or cannot be checked); else why it does not. */
  async function verify(): Promise<string | undefined> {
    if (!options.verifyBus || !options.eventBusName) return undefined;
    if (verifiedAt !== undefined && Date.now() - verifiedAt < verifyEveryMs) return busMissing;
    DescribeCommand ??= (await import('@aws-sdk/client-eventbridge')).DescribeEventBusCommand;
    try {
      await options.client.send(new DescribeCommand({ Name: options.eventBusName }));
      busMissing = undefined;
      verifiedAt = Date.now();
    } catch (e) {
      busMissing = verifyFailed(awsCodeOf(e));
    }
    return busMissing;
  }

  async function put(batch: Entry[]): Promise<void> {
    Command ??= (await import('@aws-sdk/client-eventbridge')).PutEventsCommand;
    let results: ({ error: string; permanent: boolean } | undefined)[];
    const missing = await verify();
    if (missing) results = batch.map(() => ({ error: missing, permanent: true }));
    else
      try {
        const out = (await options.client.send(
          new Command({ Entries: batch.map((e) => toEntry(e.event)) }),
        )) as PutEventsCommandOutput;
        results = batch.map((_, i) => {
          const r = out.Entries?.[i];
          if (r?.ErrorCode)
            return {
              error: `${r.ErrorCode}: ${r.ErrorMessage ?? ''}`,
              permanent: PERMANENT_AWS_CODES.has(r.ErrorCode),
            };
          // No per-entry result while the call reports failures: treat that entry as failed, to be safe.
          if (!r && (out.FailedEntryCount ?? 0) > 0)
            return { error: 'no result for entry', permanent: false };
          return undefined;
        });
      } catch (e) {
        const failure = { error: errorText(e), permanent: PERMANENT_AWS_CODES.has(awsCodeOf(e) ?? '') };
        results = batch.map(() => failure);
      }
    const now = Date.now();
    const again: Entry[] = [];
    batch.forEach((entry, i) => {
      const result = results[i];
      if (result === undefined) {
        stats.delivered++;
        delete stats.failingPermanently;
        return;
      }
      const failure = result.error;
      entry.attempts++;
      if (result.permanent || entry.attempts >= maxAttempts) {
        stats.failures++;
        if (result.permanent) {
          stats.permanentFailures++;
          stats.failingPermanently = failure;
        }
        log?.error(
          result.permanent ? 'event not delivered: permanent error' : 'event dropped after retries',
          {
            eventId: entry.event.id,
            eip: entry.event.object.name,
            handler: entry.event.handler,
            attempts: entry.attempts,
            error: failure,
          },
        );
        for (const l of listeners) l.gaveUp?.(entry.event, failure, result.permanent);
        return;
      }
      stats.retries++;
      entry.notBefore = now + backoffDelay(entry.attempts, backoffMs, maxBackoffMs, random);
      log?.warn('event will be retried', {
        eventId: entry.event.id,
        eip: entry.event.object.name,
        attempts: entry.attempts,
        error: failure,
      });
      again.push(entry);
    });
    // Failed entries go back to the front, ahead of newer events for the same EIP.
    buffer.unshift(...again);
  }

  /** Takes up to one batch of entries whose backoff has passed, preserving order. */
  function takeBatch(now: number): Entry[] {
    const batch: Entry[] = [];
    for (let i = 0; i < buffer.length && batch.length < batchSize; ) {
      if (buffer[i]!.notBefore <= now) batch.push(buffer.splice(i, 1)[0]!);
      else i++;
    }
    return batch;
  }

  async function loop(): Promise<void> {
    running = true;
    try {
      while (buffer.length > 0) {
        const now = Date.now();
        const due = buffer.filter((e) => e.notBefore <= now).length;
        if (due === 0) {
          const next = Math.min(...buffer.map((e) => e.notBefore));
          await napFor('backoff', next - now);
          continue;
        }
        if (due < batchSize && lingerMs > 0 && flushWaiters.length === 0 && buffer.length < bufferSize) {
          await napFor('linger', lingerMs);
        }
        const batch = takeBatch(Date.now());
        if (batch.length === 0) continue;
        stats.buffered = buffer.length;
        notifySpace(); // a batch in flight no longer holds buffer space; its failures come back to the front
        await put(batch);
        stats.buffered = buffer.length;
        notifySpace();
      }
    } finally {
      running = false;
      stats.buffered = buffer.length;
      notifySpace();
      notifyFlushed();
    }
  }

  async function napFor(why: 'backoff' | 'linger', ms: number): Promise<void> {
    nap = { why, wake: new AbortController() };
    try {
      await sleep(ms, nap.wake.signal);
    } finally {
      nap = undefined;
    }
  }

  function kick(): void {
    if (!running) {
      void loop();
      return;
    }
    // A fresh entry should not sit out another entry's backoff; a full batch or a flush not the linger.
    if (nap?.why === 'backoff' || buffer.length >= batchSize || flushWaiters.length > 0) nap?.wake.abort();
  }

  return {
    name: 'eventbridge',
    async send(event: EipEvent): Promise<void> {
      while (buffer.length >= bufferSize) await new Promise<void>((r) => spaceWaiters.push(r));
      buffer.push({ event, attempts: 0, notBefore: 0 });
      stats.buffered = buffer.length;
      kick();
    },
    flush(): Promise<void> {
      if (buffer.length === 0 && !running) return Promise.resolve();
      const p = new Promise<void>((r) => flushWaiters.push(r));
      kick();
      return p;
    },
    subscribe(listener: SinkListener): void {
      listeners.push(listener);
    },
    stats: () => ({ ...stats }),
  };
}
