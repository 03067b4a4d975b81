/**
 * The three sinks through their public contract, with fakes only at the AWS client's `send` seam (the in-process
 * sink runs the real handlers on the in-memory world).
 */
import {
  DescribeEventBusCommand,
  type PutEventsCommand,
  type PutEventsCommandOutput,
} from '@aws-sdk/client-eventbridge';
import type { InvokeCommand, InvokeCommandOutput } from '@aws-sdk/client-lambda';
import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../../local/memory/logger.js';
import { backoffDelay } from '../../shared/bridge/backoff.js';
import { eventBridgeSink } from '../../shared/bridge/sinks/eventbridge.js';
import {
  IN_PROCESS_RETRY_FOR_MS,
  inProcessSink,
  retrySchedule,
} from '../../shared/bridge/sinks/in-process.js';
import { LambdaInvokeError, lambdaSink } from '../../shared/bridge/sinks/lambda.js';
import { SinkGaveUp } from '../../shared/bridge/sinks/sink.js';
import type { Outcome } from '../../shared/core/outcome.js';
import { LEASE_MAX_MS } from '../../shared/domain/lease.js';
import {
  detailTypeOf,
  type EipEvent,
  EVENT_SOURCE,
  type HandlerName,
  parseEipEvent,
} from '../../shared/events.js';
import { POD, world } from '../support/world.js';

const event = (n: number, handler: HandlerName = 'add'): EipEvent => ({
  version: 1,
  id: `uid-${n}:${n}:added`,
  handler,
  reason: 'added',
  object: { kind: 'IptablesEIP', name: `eip-${n}`, uid: `uid-${n}`, resourceVersion: String(n) },
  emittedAt: '2026-11-29T10:00:00.000Z',
});

type Put = { Entries: { Source?: string; DetailType?: string; Detail?: string; Time?: Date }[] };

/** A fake EventBridge client: answers each call with the next scripted reply (default: all entries accepted). */
function fakeEventBridge(
  script: ((input: Put) => PutEventsCommandOutput | Promise<PutEventsCommandOutput>)[] = [],
) {
  const calls: Put[] = [];
  const client = {
    async send(command: PutEventsCommand): Promise<PutEventsCommandOutput> {
      const input = command.input as Put;
      calls.push(input);
      const step = script.shift();
      if (step) return step(input);
      return ok(input);
    },
  };
  const delivered = () =>
    calls.flatMap((c, i) => c.Entries.map((e) => ({ call: i, id: (JSON.parse(e.Detail!) as EipEvent).id })));
  return { client, calls, delivered };
}

const ok = (input: Put): PutEventsCommandOutput => ({
  $metadata: {},
  FailedEntryCount: 0,
  Entries: input.Entries.map((_, i) => ({ EventId: `e-${i}` })),
});

/** Entries at the given positions fail with ThrottlingException. */
const failing =
  (positions: number[]) =>
  (input: Put): PutEventsCommandOutput => ({
    $metadata: {},
    FailedEntryCount: positions.length,
    Entries: input.Entries.map((_, i) =>
      positions.includes(i)
        ? { ErrorCode: 'ThrottlingException', ErrorMessage: 'Rate exceeded' }
        : { EventId: `e-${i}` },
    ),
  });

describe('EventBridge sink', () => {
  it('sends batches of at most 10 entries with the bridge source, the handler’s detail-type and the event as detail', async () => {
    const eb = fakeEventBridge();
    const sink = eventBridgeSink({ client: eb.client, eventBusName: 'eip-bus', lingerMs: 5 });
    const events = Array.from({ length: 25 }, (_, i) => event(i, i % 2 ? 'update' : 'add'));
    for (const e of events) await sink.send(e);
    await sink.flush();
    expect(eb.calls.map((c) => c.Entries.length)).toEqual([10, 10, 5]);
    const entries = eb.calls.flatMap((c) => c.Entries);
    entries.forEach((entry, i) => {
      const e = events[i]!;
      expect(entry).toMatchObject({
        Source: EVENT_SOURCE,
        DetailType: detailTypeOf(e.handler),
        EventBusName: 'eip-bus',
      });
      expect(JSON.parse(entry.Detail!)).toEqual(e);
      // What arrives at the handler as an EventBridge envelope parses back to the same event.
      expect(
        parseEipEvent({
          source: entry.Source,
          'detail-type': entry.DetailType,
          detail: JSON.parse(entry.Detail!),
        }),
      ).toEqual(e);
    });
  });

  it('retries only the entries EventBridge reports as failed, until each is delivered exactly once', async () => {
    const eb = fakeEventBridge([failing([1, 3]), failing([0])]);
    const sink = eventBridgeSink({ client: eb.client, backoffMs: 1, lingerMs: 5 });
    for (let i = 0; i < 10; i++) await sink.send(event(i));
    await sink.flush();
    // Call 1: 10 entries, those at index 1 and 3 fail. Call 2: those two, the first fails again. Call 3: the last one.
    expect(eb.calls.map((c) => c.Entries.length)).toEqual([10, 2, 1]);
    const accepted = eb.delivered().filter((d) => {
      const failedAt: Record<number, number[]> = { 0: [1, 3], 1: [0] };
      const pos = eb.calls[d.call]!.Entries.findIndex((e) => (JSON.parse(e.Detail!) as EipEvent).id === d.id);
      return !(failedAt[d.call] ?? []).includes(pos);
    });
    expect(accepted.map((d) => d.id).sort()).toEqual(
      Array.from({ length: 10 }, (_, i) => event(i).id).sort(),
    );
    expect(sink.stats!()).toMatchObject({ retries: 3, failures: 0, buffered: 0 });
  });

  it('retries a whole batch when the call itself fails (throttled, network), with growing delays', async () => {
    const throttled = () =>
      Promise.reject(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    const eb = fakeEventBridge([throttled, throttled]);
    const log = memoryLogger();
    const sink = eventBridgeSink({ client: eb.client, backoffMs: 5, lingerMs: 0, log, random: () => 1 });
    await sink.send(event(1));
    await sink.flush();
    expect(eb.calls).toHaveLength(3);
    expect(sink.stats!()).toMatchObject({ retries: 2, failures: 0 });
    expect(log.lines.filter((l) => l.message === 'event will be retried').map((l) => l.error)).toEqual([
      'ThrottlingException: Rate exceeded',
      'ThrottlingException: Rate exceeded',
    ]);
  });

  it('gives an entry up after maxAttempts and says so in the log', async () => {
    const always = () => failing([0]);
    const eb = fakeEventBridge(Array.from({ length: 10 }, always));
    const log = memoryLogger();
    const sink = eventBridgeSink({ client: eb.client, backoffMs: 1, lingerMs: 0, maxAttempts: 3, log });
    await sink.send(event(7));
    await sink.flush();
    expect(eb.calls).toHaveLength(3);
    expect(sink.stats!()).toMatchObject({ retries: 2, failures: 1, buffered: 0 });
    expect(log.lines.find((l) => l.message === 'event dropped after retries')).toMatchObject({
      eventId: event(7).id,
      attempts: 3,
    });
  });

  it('makes send() wait while the buffer is full, and resumes when EventBridge catches up', async () => {
    let unblock!: () => void;
    const blocked = new Promise<void>((r) => {
      unblock = r;
    });
    const eb = fakeEventBridge([
      async (input) => {
        await blocked;
        return ok(input);
      },
    ]);
    const sink = eventBridgeSink({ client: eb.client, bufferSize: 10, lingerMs: 50 });
    // The first 10 leave the buffer as one full batch (stuck in flight); the next 10 fill the buffer.
    for (let i = 0; i < 20; i++) await sink.send(event(i));
    let accepted = false;
    const twentyFirst = sink.send(event(20)).then(() => {
      accepted = true;
    });
    await new Promise((r) => setTimeout(r, 30));
    expect(accepted).toBe(false);
    expect(sink.stats!().buffered).toBe(10);
    unblock();
    await twentyFirst;
    expect(accepted).toBe(true);
    await sink.flush();
    expect(new Set(eb.delivered().map((d) => d.id)).size).toBe(21);
  });

  it('gives up at once on a permanent error, tells the bridge, and reports it until a delivery succeeds', async () => {
    const denied = () =>
      Promise.reject(
        Object.assign(new Error('not authorized to perform: events:PutEvents'), {
          name: 'AccessDeniedException',
        }),
      );
    const eb = fakeEventBridge([denied, denied]);
    const log = memoryLogger();
    const gaveUp: string[] = [];
    const sink = eventBridgeSink({ client: eb.client, backoffMs: 1, lingerMs: 0, maxAttempts: 8, log });
    sink.subscribe({ gaveUp: (e, _error, permanent) => gaveUp.push(`${e.id} ${permanent}`) });
    await sink.send(event(1));
    await sink.flush();
    expect(eb.calls).toHaveLength(1); // not retried
    expect(gaveUp).toEqual([`${event(1).id} true`]);
    expect(sink.stats!()).toMatchObject({ failures: 1, permanentFailures: 1, delivered: 0, retries: 0 });
    expect(sink.stats!().failingPermanently).toMatch(/AccessDeniedException/);
    expect(log.lines.some((l) => l.message === 'event not delivered: permanent error')).toBe(true);
    // the permission is fixed: the next delivery clears the state
    await sink.send(event(2));
    await sink.flush();
    expect(sink.stats!().failingPermanently).toMatch(/AccessDeniedException/);
    await sink.send(event(3));
    await sink.flush();
    expect(sink.stats!().failingPermanently).toBeUndefined();
    expect(sink.stats!()).toMatchObject({ delivered: 1, failures: 2 });
  });

  it('checks that the bus exists: a missing bus fails every event permanently, none is put', async () => {
    const puts: unknown[] = [];
    let exists = false;
    const client = {
      async send(command: unknown) {
        if (command instanceof DescribeEventBusCommand) {
          if (!exists)
            throw Object.assign(new Error('Event bus nope does not exist.'), {
              name: 'ResourceNotFoundException',
            });
          return { $metadata: {}, Name: 'nope' };
        }
        const input = (command as PutEventsCommand).input as Put;
        puts.push(input);
        return ok(input);
      },
    };
    const gaveUp: boolean[] = [];
    const sink = eventBridgeSink({
      client,
      eventBusName: 'nope',
      verifyBus: true,
      verifyEveryMs: 0,
      lingerMs: 0,
    });
    sink.subscribe({ gaveUp: (_e, _error, permanent) => gaveUp.push(permanent) });
    await sink.send(event(1));
    await sink.send(event(2));
    await sink.flush();
    expect(puts).toEqual([]);
    expect(gaveUp).toEqual([true, true]);
    expect(sink.stats!().failingPermanently).toMatch(/event bus nope does not exist/);
    exists = true; // created by the deploy that was missing
    await sink.send(event(3));
    await sink.flush();
    expect(puts).toHaveLength(1);
    expect(sink.stats!()).toMatchObject({ delivered: 1, permanentFailures: 2 });
    expect(sink.stats!().failingPermanently).toBeUndefined();
  });

  it('backs off exponentially with jitter, capped', () => {
    expect([1, 2, 3, 4].map((a) => backoffDelay(a, 100, 1000, () => 0))).toEqual([50, 100, 200, 400]);
    expect([1, 2, 3, 4, 5].map((a) => backoffDelay(a, 100, 1000, () => 1))).toEqual([
      100, 200, 400, 800, 1000,
    ]);
  });
});

describe('Lambda sink', () => {
  function fakeLambda(replies: (() => Promise<InvokeCommandOutput>)[]) {
    const calls: InvokeCommand['input'][] = [];
    return {
      calls,
      client: {
        async send(command: InvokeCommand): Promise<InvokeCommandOutput> {
          calls.push(command.input);
          const r = replies.shift();
          return r ? r() : { $metadata: {}, StatusCode: 202 };
        },
      },
    };
  }
  const functions = { add: 'eip-add', update: 'eip-update', reset: 'eip-reset', delete: 'eip-delete' };

  it('invokes the handler’s function asynchronously with the bare event, retrying throttling', async () => {
    const throttled = () =>
      Promise.reject(Object.assign(new Error('Rate exceeded'), { name: 'TooManyRequestsException' }));
    const fake = fakeLambda([throttled]);
    const sink = lambdaSink({ client: fake.client, functions, backoffMs: 1 });
    const e = event(3, 'reset');
    await sink.send(e);
    expect(fake.calls).toHaveLength(2);
    expect(fake.calls[1]).toMatchObject({ FunctionName: 'eip-reset', InvocationType: 'Event' });
    expect(parseEipEvent(JSON.parse(new TextDecoder().decode(fake.calls[1]!.Payload as Uint8Array)))).toEqual(
      e,
    );
    expect(sink.stats!()).toMatchObject({ retries: 1, failures: 0 });
  });

  it('rejects after maxAttempts, so the bridge counts the failure', async () => {
    const refused = () => Promise.resolve({ $metadata: {}, StatusCode: 500 });
    const fake = fakeLambda([refused, refused]);
    const sink = lambdaSink({ client: fake.client, functions, backoffMs: 1, maxAttempts: 2 });
    await expect(sink.send(event(1, 'delete'))).rejects.toThrow(LambdaInvokeError);
    expect(fake.calls.map((c) => c.FunctionName)).toEqual(['eip-delete', 'eip-delete']);
    expect(sink.stats!()).toMatchObject({ retries: 1, failures: 1 });
  });
});

describe('Lambda sink, permanent errors', () => {
  it('does not retry a missing function or a denied invoke, and marks the error permanent', async () => {
    const calls: unknown[] = [];
    const client = {
      async send(command: InvokeCommand): Promise<InvokeCommandOutput> {
        calls.push(command.input);
        throw Object.assign(new Error('Function not found: eip-add'), { name: 'ResourceNotFoundException' });
      },
    };
    const functions = { add: 'eip-add', update: 'eip-update', reset: 'eip-reset', delete: 'eip-delete' };
    const sink = lambdaSink({ client, functions, backoffMs: 1, maxAttempts: 6 });
    const failure = await sink.send(event(1)).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(LambdaInvokeError);
    expect((failure as SinkGaveUp).permanent).toBe(true);
    expect(calls).toHaveLength(1);
    expect(sink.stats!()).toMatchObject({ failures: 1, permanentFailures: 1, retries: 0 });
    expect(sink.stats!().failingPermanently).toMatch(/ResourceNotFoundException/);
  });
});

describe('in-process sink', () => {
  it('runs the real handler and reports its outcome', async () => {
    const w = world();
    w.eip('eip-1');
    const outcomes: Outcome[] = [];
    const sink = inProcessSink({ getDeps: async () => w.deps, onOutcome: (_e, o) => outcomes.push(o) });
    await sink.send(w.event('add', 'eip-1', 'added'));
    expect(outcomes).toEqual([expect.objectContaining({ status: 'applied', eip: 'eip-1' })]);
    expect(w.get('eip-1')?.status?.ready).toBe(true);
    expect(sink.deadLetters()).toEqual([]);
  });

  it('retries a retryable failure with backoff and succeeds once the world allows it', async () => {
    const w = world();
    w.eip('eip-1');
    const pod = w.pod();
    w.cluster.pods.delete(`kube-system/${POD}`); // gateway not ready: retryable
    const log = memoryLogger();
    const sink = inProcessSink({ getDeps: async () => w.deps, retries: 3, backoffMs: 20, log });
    const sent = sink.send(w.event('add', 'eip-1', 'added'));
    setTimeout(() => w.cluster.putPod(pod), 30); // the gateway comes back during the second backoff
    await sent;
    expect(w.get('eip-1')?.status?.ready).toBe(true);
    expect(sink.deadLetters()).toEqual([]);
    expect(sink.stats!().retries).toBeGreaterThanOrEqual(1);
    expect(log.lines.some((l) => l.message === 'handler failed; will retry')).toBe(true);
  });

  it('parks an event that keeps failing as a dead letter after the bounded retries', async () => {
    const w = world();
    w.eip('eip-1');
    const pod = w.pod();
    w.cluster.pods.delete(`kube-system/${POD}`);
    const sink = inProcessSink({ getDeps: async () => w.deps, retries: 2, backoffMs: 1, retryForMs: 0 });
    const e = w.event('add', 'eip-1', 'added');
    // handed back to the bridge, which queues it again with backoff
    await expect(sink.send(e)).rejects.toThrow(SinkGaveUp);
    const [letter, ...more] = sink.deadLetters();
    expect(more).toEqual([]);
    expect(letter).toMatchObject({ event: e, attempts: 3 });
    expect(letter!.error).toMatch(/GatewayNotReady|not found/);
    expect(Date.parse(letter!.at)).not.toBeNaN();
    expect(sink.stats!()).toMatchObject({ retries: 2, deadLetters: 1, failures: 1 });
    // the same EIP and handler failing again replaces its letter; a success clears it
    await expect(sink.send(e)).rejects.toThrow(SinkGaveUp);
    expect(sink.deadLetters()).toHaveLength(1);
    w.cluster.putPod(pod);
    await sink.send(e);
    expect(sink.deadLetters()).toEqual([]);
    expect(sink.stats!()).toMatchObject({ deadLetters: 2, delivered: 1 });
  });

  it('keeps retrying at least as long as a lease can be held before it gives up', () => {
    expect(IN_PROCESS_RETRY_FOR_MS).toBeGreaterThanOrEqual(LEASE_MAX_MS);
    // the local stack's settings (5 retries from 500 ms): the schedule outlasts a lease left by a crashed run
    const schedule = retrySchedule({
      retries: 5,
      backoffMs: 500,
      maxBackoffMs: 5_000,
      retryForMs: IN_PROCESS_RETRY_FOR_MS,
    });
    expect(schedule.slice(0, 5)).toEqual([500, 1000, 2000, 4000, 5000]);
    expect(schedule.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(LEASE_MAX_MS);
    expect(retrySchedule({ retries: 2, backoffMs: 10, maxBackoffMs: 100, retryForMs: 0 })).toEqual([10, 20]);
  });

  it('close() waits for a handler in the middle of an exec, which finishes and gives its lease back', async () => {
    const w = world();
    w.eip('eip-1');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let inExec!: () => void;
    const execStarted = new Promise<void>((r) => (inExec = r));
    const gateway = {
      async run(...args: Parameters<typeof w.deps.gateway.run>) {
        inExec();
        await gate;
        return w.deps.gateway.run(...args);
      },
    };
    const outcomes: Outcome[] = [];
    const sink = inProcessSink({
      getDeps: async () => ({ ...w.deps, gateway }),
      onOutcome: (_e, o) => outcomes.push(o),
    });
    const sent = sink.send(w.event('add', 'eip-1', 'added'));
    await execStarted;
    // The EIP's lease, held across the exec, and the pod's gateway lease, held for it (ADR 0110).
    expect([...w.leases.held.keys()].map((k) => k.split('#')[0])).toEqual(['eip', 'pod']);
    let closed = false;
    const closing = sink.close().then(() => {
      closed = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(closed).toBe(false); // a drain does not cut a running handler off
    release();
    await closing;
    await sent;
    expect(outcomes.map((o) => o.status)).toEqual(['applied']);
    expect(w.leases.held.size).toBe(0); // given back: a restarted stack does not wait for it to expire
  });

  it('close() cuts retry waits short and refuses new events; a running handler finishes', async () => {
    const w = world();
    w.eip('eip-1');
    w.cluster.pods.delete(`kube-system/${POD}`);
    const sink = inProcessSink({ getDeps: async () => w.deps, retries: 5, backoffMs: 60_000 });
    const sent = sink.send(w.event('add', 'eip-1', 'added'));
    await new Promise((r) => setTimeout(r, 20)); // the first attempt failed; it waits a minute for the retry
    await sink.close();
    await expect(sent).rejects.toThrow(/closing/);
    await expect(sink.send(w.event('add', 'eip-1', 'added'))).rejects.toThrow(/closed/);
    expect(sink.deadLetters()).toEqual([]); // not parked: it was never given up on, only interrupted
  });

  it('does not retry a permanent error: the handler resolves it as rejected', async () => {
    const w = world();
    w.eip('eip-1', { natGwDp: '' });
    const outcomes: Outcome[] = [];
    const sink = inProcessSink({
      getDeps: async () => w.deps,
      retries: 3,
      backoffMs: 1,
      onOutcome: (_e, o) => outcomes.push(o),
    });
    await sink.send(w.event('add', 'eip-1', 'added'));
    expect(outcomes.map((o) => o.status)).toEqual(['rejected']);
    expect(sink.stats!()).toMatchObject({ retries: 0, deadLetters: 0 });
  });

  it('is idle only when no event is being handled or waiting for a retry', async () => {
    const w = world();
    w.eip('eip-1');
    const pod = w.pod();
    w.cluster.pods.delete(`kube-system/${POD}`);
    const sink = inProcessSink({ getDeps: async () => w.deps, retries: 5, backoffMs: 20 });
    let idle = false;
    const sent = sink.send(w.event('add', 'eip-1', 'added'));
    const waiting = sink.idle().then(() => {
      idle = true;
    });
    await new Promise((r) => setTimeout(r, 25));
    expect(idle).toBe(false);
    w.cluster.putPod(pod);
    await sent;
    await waiting;
    expect(idle).toBe(true);
  });
});
