/**
 * Direct asynchronous Lambda invoke (`InvocationType: 'Event'`): one function per handler, the bare event as the
 * payload. Lambda queues the event and owns retries and the on-failure destination from there; this sink only
 * retries getting it accepted (throttling, network, 5xx) with exponential backoff and jitter. Events of one handler
 * on one gateway sent within `windowMs` of each other go as one invocation, a batch (./group.ts,
 * docs/adr/0112-one-gateways-burst-in-one-invocation.md); `send` resolves when that invocation was accepted.
 */
import type { InvokeCommand, InvokeCommandOutput } from '@aws-sdk/client-lambda';
import { detailOf, type EipEvent, type HandlerName } from '../../events.js';
import type { Logger } from '../../ports.js';
import { backoffDelay, sleep } from '../backoff.js';
import { DEFAULT_GROUP_WINDOW_MS, type GatewayOf, Group, groupKey, groupLimits } from './group.js';
import {
  emptySinkStats,
  errorText,
  isPermanentAwsError,
  type Sink,
  SinkGaveUp,
  type SinkStats,
} from './sink.js';

/** The seam: a real `LambdaClient`, or a fake with the same `send`. */
export interface InvokeClient {
  send(command: InvokeCommand): Promise<InvokeCommandOutput>;
}

export interface LambdaSinkOptions {
  client: InvokeClient;
  /** Function name or ARN per handler. */
  functions: Record<HandlerName, string>;
  /** Attempts per event before it is given up. Default 6. */
  maxAttempts?: number;
  /** First retry delay, doubling up to maxBackoffMs. Defaults 200 ms and 10 s. */
  backoffMs?: number;
  maxBackoffMs?: number;
  log?: Logger;
  random?: () => number;
  /** How long the first event of a group waits for others of its handler and gateway. Default 100 ms (./group.ts). */
  windowMs?: number;
  /** Events in one invocation at most (1: one event an invocation). Default 8 (./group.ts). */
  groupEvents?: number;
  /** Bytes of one invocation's payload at most. Default 24 KiB (./group.ts). */
  groupBytes?: number;
  /** The gateway of an event's EIP (the bridge's cache); the bridge also sets it with `knowGateways`. */
  gatewayOf?: GatewayOf;
}

interface Open {
  group: Group<EipEvent>;
  waiters: { resolve(): void; reject(e: unknown): void }[];
  timer: NodeJS.Timeout;
}

export class LambdaInvokeError extends SinkGaveUp {
  override readonly name = 'LambdaInvokeError';
}

export function lambdaSink(options: LambdaSinkOptions): Sink & { knowGateways(lookup: GatewayOf): void } {
  const maxAttempts = options.maxAttempts ?? 6;
  const backoffMs = options.backoffMs ?? 200;
  const maxBackoffMs = options.maxBackoffMs ?? 10_000;
  const stats: SinkStats = emptySinkStats();
  let Command: typeof InvokeCommand | undefined;
  const encoder = new TextEncoder();
  const windowMs = options.windowMs ?? DEFAULT_GROUP_WINDOW_MS;
  const limits = groupLimits(options.groupEvents, options.groupBytes);
  let gatewayOf = options.gatewayOf;
  const open = new Map<string, Open>();

  /** Sends a group now; each of its senders hears how its invocation went. */
  function flush(o: Open): void {
    clearTimeout(o.timer);
    if (open.get(o.group.key!) === o) open.delete(o.group.key!);
    invoke(o.group.events).then(
      () => {
        for (const w of o.waiters) w.resolve();
      },
      (e: unknown) => {
        for (const w of o.waiters) w.reject(e);
      },
    );
  }

  /** Joins the open group of its handler and gateway, or opens one (sent after windowMs, or once full). */
  function join(event: EipEvent, key: string): Promise<void> {
    let o = open.get(key);
    const bytes = Buffer.byteLength(JSON.stringify(event), 'utf8');
    if (o && !o.group.tryAdd(event, key, bytes)) {
      flush(o);
      o = undefined;
    }
    if (!o) {
      const group = new Group<EipEvent>(key, limits, (e) => e);
      group.tryAdd(event, key, bytes);
      const created: Open = { group, waiters: [], timer: setTimeout(() => flush(created), windowMs) };
      open.set(key, created);
      o = created;
    }
    const done = new Promise<void>((resolve, reject) => o.waiters.push({ resolve, reject }));
    if (o.group.full) flush(o);
    return done;
  }

  async function invoke(events: EipEvent[]): Promise<void> {
    const event = events[0]!;
    Command ??= (await import('@aws-sdk/client-lambda')).InvokeCommand;
    const FunctionName = options.functions[event.handler];
    const Payload = encoder.encode(JSON.stringify(detailOf(events)));
    const eips = events.map((e) => e.object.name);
    for (let attempt = 1; ; attempt++) {
      let failure: string;
      let permanent = false;
      try {
        const out = await options.client.send(
          new Command({ FunctionName, InvocationType: 'Event', Payload }),
        );
        if (out.StatusCode === 202) {
          stats.delivered += events.length;
          delete stats.failingPermanently;
          return;
        }
        failure = `unexpected status ${out.StatusCode}`;
      } catch (e) {
        failure = errorText(e);
        permanent = isPermanentAwsError(e);
      }
      if (permanent) {
        stats.failures += events.length;
        stats.permanentFailures += events.length;
        stats.failingPermanently = failure;
        options.log?.error('event not delivered: permanent error', {
          eventId: event.id,
          eip: eips.join(','),
          function: FunctionName,
          error: failure,
        });
        throw new LambdaInvokeError(`invoke ${FunctionName} failed: ${failure}`, true);
      }
      if (attempt >= maxAttempts) {
        stats.failures += events.length;
        options.log?.error('event dropped after retries', {
          eventId: event.id,
          eip: eips.join(','),
          function: FunctionName,
          attempts: attempt,
          error: failure,
        });
        throw new LambdaInvokeError(`invoke ${FunctionName} failed ${attempt} times: ${failure}`);
      }
      stats.retries++;
      options.log?.warn('invoke will be retried', { eventId: event.id, attempts: attempt, error: failure });
      await sleep(backoffDelay(attempt, backoffMs, maxBackoffMs, options.random));
    }
  }

  return {
    name: 'lambda',
    send(event: EipEvent): Promise<void> {
      const key = limits.maxEvents > 1 ? groupKey(event, gatewayOf) : undefined;
      return key === undefined ? invoke([event]) : join(event, key);
    },
    knowGateways(lookup: GatewayOf): void {
      gatewayOf ??= lookup;
    },
    stats: () => ({ ...stats }),
  };
}
