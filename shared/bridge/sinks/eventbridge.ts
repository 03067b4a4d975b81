/**
 * EventBridge PutEvents: events are buffered, sent in batches of up to 10 entries (the API's limit), and an entry
 * that fails (`FailedEntryCount` / `Entries[i].ErrorCode`, or the whole call throwing) is retried with
 * exponential backoff and jitter. The buffer is bounded (retrying entries count; one batch may be in flight on
 * top), so `send()` waits while it is full: a slow or failing bus slows the bridge down instead of growing memory
 * without limit. Events of one handler on one gateway that wait together share an entry, as a batch detail
 * (./group.ts, docs/adr/0112-one-gateways-burst-in-one-invocation.md): one Lambda invocation then runs them.
 */
import type {
  DescribeEventBusCommand,
  DescribeEventBusCommandOutput,
  PutEventsCommand,
  PutEventsCommandOutput,
} from '@aws-sdk/client-eventbridge';
import { detailOf, detailTypeOf, type EipEvent, EVENT_SOURCE } from '../../events.js';
import type { Logger } from '../../ports.js';
import { backoffDelay, sleep } from '../backoff.js';
import { type GatewayOf, type Group, groupLimits, takeGroups } from './group.js';
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
  /** How long a partial batch waits for company before it is sent (and a group for members). Default 20 ms. */
  lingerMs?: number;
  /** Events of one handler and gateway in one entry at most (1: one event an entry). Default 8 (./group.ts). */
  groupEvents?: number;
  /** Bytes of one entry's detail at most. Default 24 KiB (./group.ts). */
  groupBytes?: number;
  /** The gateway of an event's EIP (the bridge's cache); the bridge also sets it with `knowGateways`. */
  gatewayOf?: GatewayOf;
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
/**
 * What one PutEvents call may carry: its entries' sizes (Time 14 bytes, Source, DetailType and Detail in UTF-8)
 * must stay below 256 KB; 256,000 bytes is below it however KB is read.
 */
export const MAX_PUT_EVENTS_BYTES = 256_000;
const ENTRY_OVERHEAD_BYTES = 14 + Buffer.byteLength(EVENT_SOURCE) + Buffer.byteLength(detailTypeOf('update'));

export function eventBridgeSink(options: EventBridgeSinkOptions): Sink & {
  flush(): Promise<void>;
  subscribe(listener: SinkListener): void;
  knowGateways(lookup: GatewayOf): void;
} {
  const bufferSize = options.bufferSize ?? 100;
  const batchSize = Math.min(MAX_BATCH, Math.max(1, options.batchSize ?? MAX_BATCH));
  const lingerMs = options.lingerMs ?? 20;
  const maxAttempts = options.maxAttempts ?? 8;
  const backoffMs = options.backoffMs ?? 200;
  const maxBackoffMs = options.maxBackoffMs ?? 20_000;
  const random = options.random ?? Math.random;
  const log = options.log;
  if (bufferSize < batchSize) throw new RangeError('bufferSize must hold at least one batch');
  const limits = groupLimits(options.groupEvents, options.groupBytes);
  /** Events one call carries when every entry is a full group. */
  const callEvents = batchSize * limits.maxEvents;
  let gatewayOf = options.gatewayOf;

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

  function toEntry(group: Group<Entry>) {
    const events = group.events;
    const first = events[0]!;
    return {
      Source: EVENT_SOURCE,
      DetailType: detailTypeOf(first.handler),
      Detail: JSON.stringify(detailOf(events)),
      ...(options.eventBusName && { EventBusName: options.eventBusName }),
      ...(first.emittedAt && { Time: new Date(first.emittedAt) }),
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

  /** Counts an entry's delivery or failure; true when it is to be sent again. */
  function settleEntry(
    entry: Entry,
    result: { error: string; permanent: boolean } | undefined,
    now: number,
  ): boolean {
    if (result === undefined) {
      stats.delivered++;
      delete stats.failingPermanently;
      return false;
    }
    const failure = result.error;
    entry.attempts++;
    if (result.permanent || entry.attempts >= maxAttempts) {
      stats.failures++;
      if (result.permanent) {
        stats.permanentFailures++;
        stats.failingPermanently = failure;
      }
      log?.error(result.permanent ? 'event not delivered: permanent error' : 'event dropped after retries', {
        eventId: entry.event.id,
        eip: entry.event.object.name,
        handler: entry.event.handler,
        attempts: entry.attempts,
        error: failure,
      });
      for (const l of listeners) l.gaveUp?.(entry.event, failure, result.permanent);
      return false;
    }
    stats.retries++;
    entry.notBefore = now + backoffDelay(entry.attempts, backoffMs, maxBackoffMs, random);
    log?.warn('event will be retried', {
      eventId: entry.event.id,
      eip: entry.event.object.name,
      attempts: entry.attempts,
      error: failure,
    });
    return true;
  }

  async function put(groups: Group<Entry>[]): Promise<void> {
    Command ??= (await import('@aws-sdk/client-eventbridge')).PutEventsCommand;
    let results: ({ error: string; permanent: boolean } | undefined)[];
    const missing = await verify();
    if (missing) results = groups.map(() => ({ error: missing, permanent: true }));
    else
      try {
        const out = (await options.client.send(
          new Command({ Entries: groups.map(toEntry) }),
        )) as PutEventsCommandOutput;
        results = groups.map((_, i) => {
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
        results = groups.map(() => failure);
      }
    const now = Date.now();
    const again: Entry[] = [];
    groups.forEach((g, i) => {
      for (const entry of g.items) if (settleEntry(entry, results[i], now)) again.push(entry);
    });
    // Failed entries go back to the front, ahead of newer events for the same EIP.
    buffer.unshift(...again);
  }

  /** Takes up to one call's groups of entries whose backoff has passed, preserving order. */
  function takeBatch(now: number): Group<Entry>[] {
    const due = buffer.filter((e) => e.notBefore <= now);
    const { groups, taken } = takeGroups(due, {
      limits,
      eventOf: (e) => e.event,
      ...(gatewayOf && { lookup: gatewayOf }),
      maxGroups: batchSize,
      maxTotalBytes: MAX_PUT_EVENTS_BYTES,
      overheadBytes: ENTRY_OVERHEAD_BYTES,
    });
    const took = new Set(due.slice(0, taken));
    for (let i = buffer.length - 1; i >= 0; i--) if (took.has(buffer[i]!)) buffer.splice(i, 1);
    return groups;
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
        if (due < callEvents && lingerMs > 0 && flushWaiters.length === 0 && buffer.length < bufferSize) {
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
    if (nap?.why === 'backoff' || buffer.length >= callEvents || flushWaiters.length > 0) nap?.wake.abort();
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
    knowGateways(lookup: GatewayOf): void {
      gatewayOf ??= lookup;
    },
    stats: () => ({ ...stats }),
  };
}
