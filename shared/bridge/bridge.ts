/**
 * The bridge: informers → Tracker (last-seen copy + pure routing) → keyed queue (one event in flight per EIP,
 * duplicates dropped) → sink. It never decides state; handlers are level-triggered and re-read the object.
 * A periodic resync re-sends every known EIP to update, because watches lose events and sinks give up.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { type EipEvent, eventId } from '../events.js';
import { jsonLogger } from '../observability/log.js';
import type { Logger } from '../ports.js';
import { startHealthServer } from './health.js';
import { KeyedQueue } from './keyed-queue.js';
import { nameOf, rvOf, uidOf } from './objects.js';
import type { Sink } from './sinks/sink.js';
import { errorText, sleep } from './sinks/sink.js';
import { InformerSource } from './source.js';
import { type BridgeStats, Counters } from './stats.js';
import { Tracker } from './tracker.js';

export interface BridgeOptions {
  kubeConfig: KubeConfig;
  /** Where the NAT gateway pods live (kube-ovn's controller namespace). Default kube-system. */
  namespace?: string;
  sink: Sink;
  /** Period of the resync that re-sends every EIP to update. Default 10 minutes; 0 turns it off. */
  resyncMs?: number;
  /** EIPs handled at once (events for one EIP never overlap). Default 16. */
  concurrency?: number;
  log?: Logger;
  /** undefined = no HTTP server; 0 = an ephemeral port. */
  healthPort?: number;
  /** Address the health server binds. Default 127.0.0.1 (the container entry point binds 0.0.0.0). */
  healthHost?: string;
  /** How often the counters are logged as one JSON line. Default 60 s; 0 turns it off. */
  statsIntervalMs?: number;
  /** First delay before restarting a failed watch (doubles up to 30 s). Default 500 ms. */
  restartBackoffMs?: number;
}

export interface Bridge {
  /** Resolves once every informer has listed and is watching. */
  ready(): Promise<void>;
  stats(): BridgeStats;
  /** Re-sends every known EIP to update (reason `resync`) now. */
  resyncNow(): Promise<void>;
  /**
   * Graceful stop: stops the watches and the resync, lets queued events reach the sink (and the sink flush) until
   * the deadline, then stops. Events still queued then are dropped with a log line: the next bridge's start-up
   * list sends every EIP again.
   */
  drain(timeoutMs?: number): Promise<void>;
  /** Resolves once nothing is queued in the bridge or in flight to the sink. */
  idle(): Promise<void>;
  /** http://host:port of the health server, when there is one. */
  healthUrl?: string;
}

interface Queued {
  event: EipEvent;
  /** When the change that caused it was observed (epoch ms). */
  observedAt: number;
}

export async function startBridge(options: BridgeOptions): Promise<Bridge> {
  const log = (options.log ?? jsonLogger()).child({ component: 'bridge' });
  const namespace = options.namespace ?? 'kube-system';
  const { sink } = options;
  const counters = new Counters();
  const tracker = new Tracker();
  let draining = false;

  const queue = new KeyedQueue<Queued>({
    concurrency: options.concurrency ?? 16,
    keyOf: (q) => q.event.object.name,
    idOf: (q) => q.event.id,
    run: async (q) => {
      await sink.send(q.event);
      counters.eventsOut[q.event.handler]++;
      counters.observeLag(Date.now() - q.observedAt);
    },
    onError: (q, e) => {
      counters.failures++;
      log.error('event not delivered', {
        eventId: q.event.id,
        eip: q.event.object.name,
        handler: q.event.handler,
        reason: q.event.reason,
        error: errorText(e),
      });
    },
  });

  const enqueue = (events: EipEvent[], observedAt: number): void => {
    const emittedAt = new Date(observedAt).toISOString();
    for (const event of events) {
      event.emittedAt = emittedAt;
      if (queue.push({ event, observedAt })) {
        counters.eventsIn[event.handler]++;
        log.debug('routed', {
          eventId: event.id,
          eip: event.object.name,
          handler: event.handler,
          reason: event.reason,
        });
      } else if (!draining) {
        counters.duplicates++;
      }
    }
  };

  const source = new InformerSource({
    kubeConfig: options.kubeConfig,
    namespace,
    log,
    ...(options.restartBackoffMs !== undefined && { restartBackoffMs: options.restartBackoffMs }),
    onChange: (kind, type, object, { initial }) => {
      if (draining) return;
      enqueue(tracker.observe(kind, type, object, { initial }), Date.now());
    },
  });

  const stats = (): BridgeStats => {
    const s = sink.stats?.();
    return {
      eventsIn: { ...counters.eventsIn },
      eventsOut: { ...counters.eventsOut },
      duplicates: counters.duplicates,
      retries: s?.retries ?? 0,
      failures: counters.failures + (s?.failures ?? 0),
      deadLetters: s?.deadLetters ?? 0,
      queueDepth: queue.depth(),
      sinkBuffered: s?.buffered ?? 0,
      lagSeconds: { ...counters.lag, buckets: [...counters.lag.buckets] },
      resyncs: counters.resyncs,
      ready: source.ready(),
      watches: source.status(),
    };
  };

  const health =
    options.healthPort === undefined
      ? undefined
      : await startHealthServer(options.healthPort, options.healthHost ?? '127.0.0.1', stats);

  const started = source.start().then(() => log.info('ready: every watch has listed', { namespace }));
  started.catch(() => undefined);

  const resyncNow = async (): Promise<void> => {
    if (draining) return;
    counters.resyncs++;
    const events: EipEvent[] = [];
    for (const eip of tracker.eips()) {
      const uid = uidOf(eip);
      const rv = rvOf(eip);
      events.push({
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
      });
    }
    enqueue(events, Date.now());
    log.info('resync', { eips: events.length });
  };

  const resyncMs = options.resyncMs ?? 600_000;
  const resyncTimer = resyncMs > 0 ? setInterval(() => void resyncNow(), resyncMs) : undefined;
  resyncTimer?.unref();
  const statsMs = options.statsIntervalMs ?? 60_000;
  const statsTimer =
    statsMs > 0
      ? setInterval(() => {
          const { watches, lagSeconds, ...rest } = stats();
          log.info('bridge stats', {
            ...rest,
            lagSeconds: { count: lagSeconds.count, max: lagSeconds.max, last: lagSeconds.last },
            watchRestarts: Object.fromEntries(watches.map((w) => [w.kind, w.restarts])),
          });
        }, statsMs)
      : undefined;
  statsTimer?.unref();

  let drained: Promise<void> | undefined;
  const drain = (timeoutMs = 25_000): Promise<void> => {
    drained ??= (async () => {
      draining = true;
      clearInterval(resyncTimer);
      clearInterval(statsTimer);
      queue.close();
      await source.stop();
      const deadline = new AbortController();
      const finished = (async () => {
        await queue.idle();
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
