/**
 * The production path the in-process sink short-cuts, modelled in the lab (docs/adr/0112-one-gateways-burst-in-one-invocation.md):
 * the bridge's own eventbridge sink (shared/bridge/sinks/eventbridge.ts, its grouping of one gateway's events
 * included) puts entries on a bus whose rules deliver each to its handler's function by detail-type, as
 * serverless.yml's rules do (or, `via: 'lambda'`, the lambda sink invokes the functions itself), and each function
 * runs every invocation in a container of its own pool that runs one invocation at a time, as Lambda does. A container is its own Deps view with its own Gateway object, so it
 * has its own gateway batcher (shared/core/batch.ts keys it by the adapter): what its invocation's members send
 * batches together, what other containers send does not, and the gateway lease serialises them (ADR 0110). At most
 * `containers` run per function (its reserved concurrency); an invocation beyond waits, as Lambda's queue holds it.
 * A thrown invocation is retried twice, then parked (the on-failure destination), as the functions are configured
 * (serverless.yml: maximumRetryAttempts 2), one minute and then two later, as Lambda does.
 *
 * What it does not model: the containers share the process's other adapters (the read cache of ADR 0028 among them;
 * a real container has its own), EventBridge's and Lambda's delivery latency and cold starts. The seams are the AWS
 * clients' `send` (PutEvents, Invoke): the sinks are the product's, unchanged.
 */
import type { PutEventsCommand, PutEventsCommandOutput } from '@aws-sdk/client-eventbridge';
import type { InvokeCommand, InvokeCommandOutput } from '@aws-sdk/client-lambda';
import type { Context } from 'aws-lambda';
import { eventBridgeSink, type PutEventsClient } from '../shared/bridge/sinks/eventbridge.js';
import { DEFAULT_GROUP_WINDOW_MS } from '../shared/bridge/sinks/group.js';
import type { DeadLetter, InProcessSink } from '../shared/bridge/sinks/in-process.js';
import { lambdaSink } from '../shared/bridge/sinks/lambda.js';
import { emptySinkStats, errorText, type Sink, SinkGaveUp } from '../shared/bridge/sinks/sink.js';
import type { Outcome } from '../shared/core/outcome.js';
import { type EipEvent, EVENT_SOURCE, HANDLERS, type HandlerName, parseEipEvents } from '../shared/events.js';
import { type BatchOutcome, type EipLambda, eipHandler } from '../shared/lambda/eip-handler.js';
import type { Deps, Logger } from '../shared/ports.js';

export interface LambdaModelOptions {
  /** Containers per function at most (its reserved concurrency). */
  containers: number;
  /** The lambda sink's events per invocation (EVENT_BATCH_MAX); 1: one event an invocation. */
  groupEvents: number;
  /** The sink's window (EVENT_BATCH_WINDOW_MS). Default DEFAULT_GROUP_WINDOW_MS, as the bridge's. */
  windowMs?: number;
  /** First retry delay of a thrown invocation, doubling. Default 60 s: Lambda's, one minute then two. */
  retryBackoffMs?: number;
  /** How the bridge reaches the functions: through EventBridge (production, the default) or invoking them. */
  via?: 'eventbridge' | 'lambda';
}

/** The functions' timeout (serverless.yml): each invocation's context counts down from it. */
const FUNCTION_TIMEOUT_MS = 30_000;
/** Lambda's asynchronous retries of a failed invocation (serverless.yml: maximumRetryAttempts). */
const ASYNC_RETRIES = 2;

interface Container {
  run: EipLambda;
  busy: boolean;
}

/** A Gateway with its own identity (so its own batcher) whose calls go to `gateway`. */
function ownGateway(gateway: Deps['gateway']): Deps['gateway'] {
  return { run: (...args) => gateway.run(...args) };
}

function contextOf(fn: string): Context {
  const end = Date.now() + FUNCTION_TIMEOUT_MS;
  return {
    awsRequestId: `${fn}-${Math.random().toString(36).slice(2, 10)}`,
    functionName: `eip-${fn}`,
    getRemainingTimeInMillis: () => end - Date.now(),
  } as unknown as Context;
}

export function lambdaModelSink(
  options: LambdaModelOptions & {
    getDeps: () => Promise<Deps>;
    log?: Logger;
    onOutcome?: (event: EipEvent, outcome: Outcome) => void;
  },
): InProcessSink {
  const pools = new Map<HandlerName, Container[]>(HANDLERS.map((h) => [h, []]));
  const waiting = new Map<HandlerName, (() => void)[]>(HANDLERS.map((h) => [h, []]));
  const parked = new Map<string, DeadLetter>();
  const stats = emptySinkStats();
  const closing = new AbortController();
  let running = 0;
  let idleWaiters: (() => void)[] = [];
  const backoffMs = options.retryBackoffMs ?? 60_000;

  const settled = () => {
    if (running > 0) return;
    const w = idleWaiters;
    idleWaiters = [];
    for (const f of w) f();
  };

  /** A free container of the function, a new one while the pool has room, else the next one freed. */
  async function container(fn: HandlerName): Promise<Container> {
    const pool = pools.get(fn)!;
    for (;;) {
      const free = pool.find((c) => !c.busy);
      if (free) return free;
      if (pool.length < options.containers) {
        const base = await options.getDeps();
        const deps: Deps = { ...base, gateway: ownGateway(base.gateway) };
        const c: Container = { run: eipHandler(fn, async () => deps), busy: false };
        pool.push(c);
        return c;
      }
      await new Promise<void>((r) => waiting.get(fn)!.push(r));
    }
  }

  function outcomes(payload: unknown, out: Outcome | BatchOutcome): void {
    const events = parseEipEvents(payload).members.flatMap((m) => ('event' in m ? [m.event] : []));
    const list = 'batch' in out ? out.batch : [out];
    stats.delivered += list.length;
    list.forEach((o, i) => {
      const e = events[i];
      if (e) {
        parked.delete(`${e.object.name}|${e.handler}`);
        options.onOutcome?.(e, o);
      }
    });
  }

  function park(payload: unknown, error: unknown, attempts: number): void {
    let events: EipEvent[] = [];
    try {
      events = parseEipEvents(payload).members.flatMap((m) => ('event' in m ? [m.event] : []));
    } catch {
      // An invalid payload resolves as rejected: it is never thrown, so never parked.
    }
    for (const event of events) {
      parked.set(`${event.object.name}|${event.handler}`, {
        event,
        error: errorText(error),
        attempts,
        at: new Date().toISOString(),
      });
      stats.deadLetters++;
      stats.failures++;
    }
    options.log?.error('invocation parked after its retries', { attempts, error: errorText(error) });
  }

  /** One asynchronous invocation, with Lambda's retries, in a container of the function. */
  async function invoke(fn: HandlerName, payload: unknown): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const c = await container(fn);
      c.busy = true;
      try {
        outcomes(payload, await c.run(payload, contextOf(fn)));
        return;
      } catch (e) {
        if (attempt > ASYNC_RETRIES || closing.signal.aborted) {
          park(payload, e, attempt);
          return;
        }
        stats.retries++;
      } finally {
        c.busy = false;
        waiting.get(fn)!.shift()?.();
      }
      await new Promise((r) => setTimeout(r, backoffMs * 2 ** (attempt - 1)));
    }
  }

  /** Lambda accepts an asynchronous invocation (202) and runs it later. */
  function accept(fn: HandlerName, payload: unknown): void {
    if (closing.signal.aborted) throw new SinkGaveUp('the model is closed');
    running++;
    void invoke(fn, payload).finally(() => {
      running--;
      settled();
    });
  }

  const invoker = {
    async send(command: InvokeCommand): Promise<InvokeCommandOutput> {
      const payload: unknown = JSON.parse(new TextDecoder().decode(command.input.Payload as Uint8Array));
      accept(command.input.FunctionName as HandlerName, payload);
      return { $metadata: {}, StatusCode: 202 };
    },
  };
  /** The bus and its four rules: source and detail-type pick the function; it receives the envelope. */
  const bus = {
    async send(command: PutEventsCommand): Promise<PutEventsCommandOutput> {
      const entries = command.input.Entries ?? [];
      for (const e of entries) {
        const fn = HANDLERS.find((h) => e.DetailType === `IptablesEIP ${h}`);
        if (e.Source !== EVENT_SOURCE || !fn) continue; // no rule matches: EventBridge drops it
        accept(fn, {
          version: '0',
          source: e.Source,
          'detail-type': e.DetailType,
          detail: JSON.parse(e.Detail!),
        });
      }
      return {
        $metadata: {},
        FailedEntryCount: 0,
        Entries: entries.map((_, i) => ({ EventId: `model-${i}` })),
      };
    },
  };
  const windowMs = options.windowMs ?? DEFAULT_GROUP_WINDOW_MS;
  const sink =
    options.via === 'lambda'
      ? lambdaSink({
          client: invoker,
          functions: Object.fromEntries(HANDLERS.map((h) => [h, h])) as Record<HandlerName, string>,
          groupEvents: options.groupEvents,
          windowMs,
          ...(options.log && { log: options.log }),
        })
      : eventBridgeSink({
          client: bus as PutEventsClient,
          groupEvents: options.groupEvents,
          lingerMs: windowMs,
          ...(options.log && { log: options.log }),
        });

  return {
    name: 'lambda-model',
    send: (event) => sink.send(event),
    knowGateways: (lookup) => sink.knowGateways(lookup),
    deadLetters: () => [...parked.values()],
    async idle(): Promise<void> {
      for (;;) {
        if (running > 0) await new Promise<void>((r) => idleWaiters.push(r));
        await sink.flush?.();
        await new Promise((r) => setTimeout(r, windowMs + 5));
        if (running === 0) return;
      }
    },
    async close(): Promise<void> {
      closing.abort();
      if (running > 0) await new Promise<void>((r) => idleWaiters.push(r));
    },
    subscribe: (listener) => (sink as Sink).subscribe?.(listener),
    stats: () => ({ ...stats, ...sink.stats!(), deadLetters: stats.deadLetters, retries: stats.retries }),
  };
}
