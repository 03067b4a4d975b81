/**
 * The bridge: informers → Tracker (last-seen copy + pure routing) → work queue (one event in flight per EIP,
 * coalescing, bounded) → sink. It never decides state; handlers are level-triggered and re-read the object.
 * An event the sink gives up on is queued again with backoff (ADR 0019); a periodic resync re-sends every known
 * EIP as the last safety net.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { isNamespaceName } from '../domain/gateway-pod.js';
import { blockedRetryAfter } from '../domain/retry.js';
import { type EipEvent, eventId } from '../events.js';
import { jsonLogger } from '../observability/log.js';
import type { Logger, Metrics } from '../ports.js';
import { backoffDelay, sleep } from './backoff.js';
import { CoexistenceConflict, checkCoexistence } from './coexistence.js';
import { ForeignWriterWatch } from './foreign.js';
import { startHealthServer } from './health.js';
import { field, isTerminating, type KubeObject, nameOf, rvOf, uidOf } from './objects.js';
import { SpreadResync, type SpreadResyncOptions, type Timers } from './resync.js';
import type { Sink } from './sinks/sink.js';
import { errorText, SinkGaveUp } from './sinks/sink.js';
import { InformerSource } from './source.js';
import { type BridgeStats, Counters } from './stats.js';
import { Tracker } from './tracker.js';
import { WorkQueue } from './work-queue.js';

export interface BridgeOptions {
  kubeConfig: KubeConfig;
  /** Where the NAT gateway pods and the nat-gw ConfigMaps live (kube-ovn's controller namespace). Default kube-system. */
  namespace?: string;
  sink: Sink;
  /** Period of the resync that re-sends every EIP to update. Default 10 minutes; 0 turns it off. */
  resyncMs?: number;
  /**
   * The most EIPs a periodic resync sends per second; it spreads them evenly over its period, and takes longer when
   * this rate cannot fit them all (resync.ts). Default 20.
   */
  resyncRate?: number;
  /** The resync's clock (tests). Default: Node's timers. */
  resyncTimers?: Timers;
  /** EIPs handled at once (events for one EIP never overlap). Default 16. */
  concurrency?: number;
  /**
   * Waiting events at which the bridge pauses its watches until the queue is half empty (back-pressure; ADR 0018).
   * Default 10 000.
   */
  queueLimit?: number;
  /** First and longest delay before an event the sink gave up on is sent again. Defaults 1 s and 60 s. */
  requeueBackoffMs?: number;
  maxRequeueBackoffMs?: number;
  log?: Logger;
  /** Where the bridge's own metrics go (heartbeat, failures, queue depth, foreign writers). */
  metrics?: Metrics & { flush?(): Promise<void> };
  /** Heartbeat period: every period the bridge counts BridgeHeartbeat while healthy and flushes metrics. Default 60 s; 0 = off. */
  heartbeatMs?: number;
  /** Field managers that are the product itself (default: the k8s adapter's). Others writing EIP status are reported. */
  ownFieldManagers?: readonly string[];
  /** undefined = no HTTP server; 0 = an ephemeral port. */
  healthPort?: number;
  /** Address the health server binds. Default 127.0.0.1 (the container entry point binds 0.0.0.0). */
  healthHost?: string;
  /** How often the counters are logged as one JSON line. Default 60 s; 0 turns it off. */
  statsIntervalMs?: number;
  /** First delay before restarting a failed watch (doubles up to 30 s). Default 500 ms. */
  restartBackoffMs?: number;
  /**
   * The coexistence check at start (shared/bridge/coexistence.ts, ADR 0096): `refuse` (default) does not start on a
   * conflict between kube-ovn's IPAM and the dedicated EIP range, `warn` logs it and starts, `off` skips the check.
   */
  coexistenceCheck?: 'refuse' | 'warn' | 'off';
}

export interface Bridge {
  /** Resolves once every informer has listed and is watching. */
  ready(): Promise<void>;
  stats(): BridgeStats;
  /** Re-sends every known EIP to update (reason `resync`) now. */
  resyncNow(): Promise<void>;
  /**
   * Graceful stop: stops the watches and the resync, stops the sink's retries (what is running finishes and gives
   * its lease back), lets queued events reach the sink (and the sink flush) until the deadline, then stops. Events
   * still queued then are dropped with a log line: the next bridge's start-up list sends every EIP again.
   */
  drain(timeoutMs?: number): Promise<void>;
  /** Resolves once nothing is queued in the bridge or in flight to the sink (retries waiting for later do not count). */
  idle(): Promise<void>;
  /** http://host:port of the health server, when there is one. */
  healthUrl?: string;
}

interface Queued {
  event: EipEvent;
  /** When the change that caused it was observed (epoch ms). */
  observedAt: number;
}

/**
 * The coalescing slot of an event: one per EIP object, handler, and — for `qos-policy-changed`, the one reason a
 * handler acts on — reason. A newer event in a slot replaces a waiting older one: handlers re-read the object, so
 * the newer event does everything the older would have.
 */
export function slotOf(e: EipEvent): string {
  return `${e.object.name}|${e.object.uid ?? ''}|${e.handler}|${e.reason === 'qos-policy-changed' ? 'qos' : ''}`;
}

/** Calls `fn` every `ms` (0 or less: never), on a timer that does not keep the process alive. */
function every(ms: number, fn: () => void): NodeJS.Timeout | undefined {
  if (ms <= 0) return undefined;
  const timer = setInterval(fn, ms);
  timer.unref();
  return timer;
}

/** The periodic resync of the options (resync.ts): every `resyncMs`, at most `resyncRate` EIPs per second; 0: none. */
function periodicResync(
  options: BridgeOptions,
  round: Pick<SpreadResyncOptions<string>, 'list' | 'send' | 'onRound'>,
): SpreadResync<string> | undefined {
  const periodMs = options.resyncMs ?? 600_000;
  if (periodMs <= 0) return undefined;
  return new SpreadResync<string>({
    periodMs,
    ratePerSecond: options.resyncRate ?? 20,
    ...round,
    ...(options.resyncTimers && { timers: options.resyncTimers }),
  });
}

export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  const log = (options.log ?? jsonLogger()).child({ component: 'bridge' });
  const namespace = options.namespace ?? 'kube-system';
  const { sink, metrics } = options;
  await runCoexistenceCheck(options.kubeConfig, namespace, log, options.coexistenceCheck ?? 'refuse');
  const counters = new Counters();
  const tracker = new Tracker();
  const foreign = new ForeignWriterWatch();
  const requeueBase = options.requeueBackoffMs ?? 1_000;
  const requeueMax = options.maxRequeueBackoffMs ?? 60_000;
  const queueLimit = options.queueLimit ?? 10_000;
  let draining = false;
  let source: InformerSource | undefined;
  let failedSinceFlush = 0;

  /** Permanent failures wait longer: they heal only when someone fixes the configuration or the permissions. */
  const requeueDelay = (attempt: number, permanent: boolean) =>
    permanent
      ? backoffDelay(attempt, Math.max(requeueBase, 10_000), Math.max(requeueMax, 300_000))
      : backoffDelay(attempt, requeueBase, requeueMax);

  const fields = (q: Queued) => ({
    eventId: q.event.id,
    eip: q.event.object.name,
    handler: q.event.handler,
    reason: q.event.reason,
  });

  const queue: WorkQueue<Queued> = new WorkQueue<Queued>({
    concurrency: options.concurrency ?? 16,
    limit: queueLimit,
    keyOf: (q) => q.event.object.name,
    slotOf: (q) => slotOf(q.event),
    idOf: (q) => q.event.id,
    run: async (q) => {
      // status.nat as the rule informers see it now, once every watch has listed: a hint the handlers use only when
      // it matches the EIP's status.nat (ADR 0041). While a watch is away, nothing is claimed: they list.
      const nat = source?.ready() ? tracker.natOf(q.event.object.name) : undefined;
      const { nat: _stale, ...event } = q.event; // a requeued event may carry a hint from an earlier attempt
      await sink.send(nat === undefined ? event : { ...event, nat });
      counters.eventsOut[q.event.handler]++;
      counters.observeLag(Date.now() - q.observedAt);
      // A blocked EIP is sent again after its backoff even when no watch event comes (its condition, unchanged,
      // is not written again).
      const cached = tracker.get('IptablesEIP', q.event.object.name);
      if (cached && (!q.event.object.uid || uidOf(cached) === q.event.object.uid)) scheduleBlocked(cached);
    },
    retry: (_q, e, attempt) =>
      draining ? undefined : requeueDelay(attempt, e instanceof SinkGaveUp && e.permanent),
    onError: (q, e, { attempt, retryInMs }) => {
      if (draining) {
        counters.droppedOnDrain++;
        log.warn('event not delivered: the bridge is draining', { ...fields(q), error: errorText(e) });
        return;
      }
      counters.failures++;
      failedSinceFlush++;
      if (retryInMs !== undefined) counters.requeued++;
      log.error('event not delivered; queued again', {
        ...fields(q),
        error: errorText(e),
        attempt,
        retryInMs,
      });
    },
    onPressure: (full) => {
      if (full) {
        counters.pauses++;
        log.warn('queue full: pausing the watches', { waiting: queue.waitingCount(), limit: queueLimit });
        void source?.pause();
      } else {
        log.info('queue has room again: resuming the watches', { waiting: queue.waitingCount() });
        if (!draining) source?.resume();
      }
    },
  });

  /** The `blocked-retry` update of an EIP (ADR 0016: blocked rejections are tried again with backoff). */
  const blockedEvent = (name: string, uid: string | undefined, rv: string | undefined): EipEvent => ({
    version: 1,
    id: eventId(uid, rv, 'blocked-retry'),
    handler: 'update',
    reason: 'blocked-retry',
    object: { kind: 'IptablesEIP', name, ...(uid && { uid }), ...(rv && { resourceVersion: rv }) },
  });

  /** Schedules the next `blocked-retry` of an EIP whose conditions say it waits on something that may clear. */
  function scheduleBlocked(eip: KubeObject): void {
    if (draining || isTerminating(eip)) return;
    const delay = blockedRetryAfter(eip as Parameters<typeof blockedRetryAfter>[0], Date.now());
    if (delay === undefined) return;
    const event = blockedEvent(nameOf(eip), uidOf(eip), rvOf(eip));
    event.emittedAt = new Date(Date.now() + delay).toISOString();
    counters.blockedRetries++;
    queue.later({ event, observedAt: Date.now() + delay }, delay);
  }

  // The sinks that feed Lambda group one gateway's events into one invocation (ADR 0112).
  sink.knowGateways?.(
    (e) => field(tracker.get('IptablesEIP', e.object.name), 'spec', 'natGwDp') || undefined,
  );
  sink.subscribe?.({
    gaveUp: (event, error, permanent) => {
      if (draining) {
        counters.droppedOnDrain++;
        return;
      }
      counters.failures++;
      failedSinceFlush++;
      const q = { event, observedAt: Date.now() };
      const delay = requeueDelay(queue.attemptsOf(q) + 1, permanent);
      counters.requeued++;
      log.warn('sink gave up on an event; queued again', {
        ...fields(q),
        error,
        permanent,
        retryInMs: delay,
      });
      queue.pushLater(q, delay);
    },
    retryAfter: (event, delayMs) => {
      if (draining) return;
      const again = blockedEvent(event.object.name, event.object.uid, event.object.resourceVersion);
      again.emittedAt = new Date(Date.now() + delayMs).toISOString();
      counters.blockedRetries++;
      queue.later({ event: again, observedAt: Date.now() + delayMs }, delayMs);
    },
  });

  const enqueue = (events: EipEvent[], observedAt: number): void => {
    const emittedAt = new Date(observedAt).toISOString();
    for (const event of events) {
      event.emittedAt = emittedAt;
      const result = queue.push({ event, observedAt });
      if (result === 'queued' || result === 'replaced') {
        counters.eventsIn[event.handler]++;
        if (result === 'replaced') counters.coalesced++;
        log.debug('routed', {
          eventId: event.id,
          eip: event.object.name,
          handler: event.handler,
          reason: event.reason,
          ...(result === 'replaced' && { coalesced: true }),
        });
      } else if (result === 'duplicate') {
        counters.duplicates++;
      }
    }
  };

  /** Counts and logs the writes of another controller on an EIP (each once per EIP and manager, ADR 0030). */
  const reportForeignWrites = (object: KubeObject): void => {
    for (const w of foreign.observe(object, options.ownFieldManagers)) {
      counters.foreignWrites[w.manager] = (counters.foreignWrites[w.manager] ?? 0) + 1;
      metrics?.count('ForeignWriter', 1, { manager: w.manager });
      // Warn once per EIP and manager; a controller at work writes often.
      const say = w.first ? log.warn.bind(log) : log.debug.bind(log);
      say('another controller writes this EIP; leaving it alone', {
        eip: nameOf(object),
        manager: w.manager,
        fields: w.fields,
        at: w.time,
        note: 'run one controller per EIP: docs/adr/0030-coexistence-with-kube-ovn-controller.md',
      });
    }
  };

  source = new InformerSource({
    kubeConfig: options.kubeConfig,
    namespace,
    log,
    ...(options.restartBackoffMs !== undefined && { restartBackoffMs: options.restartBackoffMs }),
    onChange: (kind, type, object, { initial }) => {
      if (draining) return;
      if (kind === 'IptablesEIP' && type === 'DELETED') foreign.forget(object);
      else if (kind === 'IptablesEIP') reportForeignWrites(object);
      enqueue(tracker.observe(kind, type, object, { initial }), Date.now());
      if (kind === 'IptablesEIP' && type !== 'DELETED') scheduleBlocked(object);
      // kube-ovn master puts a gateway's pods where its spec.namespace says: watch them there too (ADR 0105).
      const podNamespace =
        kind === 'VpcNatGateway' && type !== 'DELETED' && field(object, 'spec', 'namespace');
      if (podNamespace && isNamespaceName(podNamespace)) source?.watchGatewayPodsIn(podNamespace);
    },
  });

  const sinkFailing = (): string | undefined => sink.stats?.()?.failingPermanently;

  const stats = (): BridgeStats => {
    const s = sink.stats?.();
    const watchesReady = source!.ready();
    return {
      eventsIn: { ...counters.eventsIn },
      eventsOut: { ...counters.eventsOut },
      delivered: s?.delivered ?? Object.values(counters.eventsOut).reduce((a, b) => a + b, 0),
      duplicates: counters.duplicates,
      coalesced: counters.coalesced,
      requeued: counters.requeued,
      retries: s?.retries ?? 0,
      failures: counters.failures,
      droppedOnDrain: counters.droppedOnDrain,
      permanentFailures: s?.permanentFailures ?? 0,
      deadLetters: s?.deadLetters ?? 0,
      queueDepth: queue.depth(),
      queueRetrying: queue.retrying(),
      queueLimit,
      queuePauses: counters.pauses,
      sinkBuffered: s?.buffered ?? 0,
      ...(s?.failingPermanently && { sinkFailingPermanently: s.failingPermanently }),
      foreignWrites: { ...counters.foreignWrites },
      lagSeconds: { ...counters.lag, buckets: [...counters.lag.buckets] },
      resyncs: counters.resyncs,
      blockedRetries: counters.blockedRetries,
      heartbeats: counters.heartbeats,
      watchesReady,
      ready: watchesReady && !s?.failingPermanently,
      watches: source!.status(),
    };
  };

  const health =
    options.healthPort === undefined
      ? undefined
      : await startHealthServer(options.healthPort, options.healthHost ?? '127.0.0.1', stats);

  const started = source.start().then(() => log.info('ready: every watch has listed', { namespace }));
  started.catch(() => undefined);

  const resyncEvent = (eip: KubeObject): EipEvent => {
    const uid = uidOf(eip);
    const rv = rvOf(eip);
    return {
      version: 1,
      id: eventId(uid, rv, 'resync'),
      handler: 'update',
      reason: 'resync',
      object: {
        kind: 'IptablesEIP',
        name: nameOf(eip),
        ...(uid && { uid }),
        ...(rv && { resourceVersion: rv }),
      },
    };
  };

  /** Every known EIP at once (a manual resync). */
  const resyncNow = async (): Promise<void> => {
    if (draining) return;
    counters.resyncs++;
    const events = [...tracker.eips()].map(resyncEvent);
    enqueue(events, Date.now());
    log.info('resync', { eips: events.length });
  };

  // The periodic resync: the EIPs listed at the round's start, each sent at its turn as the tracker sees it then
  // (one deleted meanwhile is skipped), spread over the period at a bounded rate.
  const periodic = periodicResync(options, {
    list: () => [...tracker.eips()].map(nameOf),
    send: (name) => {
      const eip = draining ? undefined : tracker.get('IptablesEIP', name);
      if (eip) enqueue([resyncEvent(eip)], Date.now());
    },
    onRound: ({ items, spreadMs }) => {
      counters.resyncs++;
      log.info('resync', { eips: items, overSeconds: Math.round(spreadMs / 1000) });
    },
  });
  periodic?.start();

  const heartbeat = async (): Promise<void> => {
    if (!metrics) return;
    const failing = sinkFailing();
    if (source!.ready() && !failing) {
      counters.heartbeats++;
      metrics.count('BridgeHeartbeat', 1);
    }
    metrics.count('BridgeEventsFailed', failedSinceFlush);
    failedSinceFlush = 0;
    metrics.count('BridgeQueueDepth', queue.depth());
    await metrics.flush?.();
  };

  const heartbeatTimer = metrics ? every(options.heartbeatMs ?? 60_000, () => void heartbeat()) : undefined;
  const statsTimer = every(options.statsIntervalMs ?? 60_000, () => {
    const { watches, lagSeconds, ...rest } = stats();
    log.info('bridge stats', {
      ...rest,
      lagSeconds: { count: lagSeconds.count, max: lagSeconds.max, last: lagSeconds.last },
      watchRestarts: Object.fromEntries(watches.map((w) => [w.kind, w.restarts])),
    });
  });

  let drained: Promise<void> | undefined;
  const drain = (timeoutMs = 25_000): Promise<void> => {
    drained ??= (async () => {
      draining = true;
      periodic?.stop();
      clearInterval(statsTimer);
      clearInterval(heartbeatTimer);
      queue.close();
      await source!.stop();
      const deadline = new AbortController();
      // The sink stops retrying first: a queued event should not wait behind another's backoff, and a handler
      // that is running finishes and gives its lease back.
      const closing = sink.close?.();
      const finished = (async () => {
        await queue.idle();
        await closing;
        await sink.flush?.();
      })();
      const outcome = await Promise.race([
        finished.then(() => 'done' as const),
        sleep(timeoutMs, deadline.signal).then(() => 'deadline' as const),
      ]);
      deadline.abort();
      const left = queue.takeWaiting();
      log.info('drained', {
        outcome,
        dropped: left.length,
        inFlight: queue.running(),
        ...(left.length > 0 && { note: 'the next start-up list re-sends every EIP' }),
      });
      await metrics?.flush?.();
      await health?.close();
    })();
    return drained;
  };

  return {
    ready: () => started,
    stats,
    resyncNow,
    drain,
    idle: () => queue.idle(),
    ...(health && { healthUrl: health.url }),
  };
}

/** The coexistence check before any watch starts; an API it cannot reach is the informers' problem, not a refusal. */
async function runCoexistenceCheck(
  kubeConfig: KubeConfig,
  namespace: string,
  log: Logger,
  mode: 'refuse' | 'warn' | 'off',
): Promise<void> {
  if (mode === 'off') return;
  try {
    await checkCoexistence(kubeConfig, namespace, log, mode);
  } catch (e) {
    if (e instanceof CoexistenceConflict) throw e;
    log.warn('coexistence check could not run; starting without it', { error: errorText(e) });
  }
}
