/**
 * The bridge's own counters: events in (routed) and out (accepted by the sink) per handler, duplicates dropped,
 * retries, failures and dead letters (from the sink), queue depth, and the lag from a watch event to the sink
 * accepting what it caused. Logged periodically as one JSON line and served at /metrics in the Prometheus text
 * format.
 */
import { HANDLERS, type HandlerName } from '../events.js';
import type { WatchStatus } from './source.js';

/** Upper bounds (seconds) of the lag histogram buckets. */
export const LAG_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300] as const;

export interface LagStats {
  count: number;
  /** Seconds. */
  sum: number;
  max: number;
  last: number;
  /** Cumulative counts per LAG_BUCKETS bound. */
  buckets: number[];
}

export interface BridgeStats {
  eventsIn: Record<HandlerName, number>;
  /** Events the sink accepted (handed over), per handler. */
  eventsOut: Record<HandlerName, number>;
  /** Events that reached their destination (the sink's own count; for a sink without one, eventsOut). */
  delivered: number;
  /** Events dropped because an event with the same id was already waiting. */
  duplicates: number;
  /** Waiting events replaced by a newer event for the same EIP and handler. */
  coalesced: number;
  /** Events queued again after the sink gave up on them. */
  requeued: number;
  retries: number;
  /** Events the sink gave up on (including dead letters and permanent failures); each is queued again. */
  failures: number;
  /** Of the sink's give-ups, those for an error retrying cannot heal (unknown bus, access denied). */
  permanentFailures: number;
  /** Events still queued or refused when a drain stopped the bridge. */
  droppedOnDrain: number;
  deadLetters: number;
  /** Events waiting or in flight in the bridge's queue. */
  queueDepth: number;
  /** Events waiting for their retry delay. */
  queueRetrying: number;
  queueLimit: number;
  /** Times the queue filled up and the watches were paused. */
  queuePauses: number;
  /** Events the sink accepted but has not delivered yet (EventBridge buffer). */
  sinkBuffered: number;
  /** Set while the sink keeps failing permanently: the last error. */
  sinkFailingPermanently?: string;
  /** Foreign writes of EIP status or finalizers seen, per field manager. */
  foreignWrites: Record<string, number>;
  lagSeconds: LagStats;
  resyncs: number;
  /** `blocked-retry` updates scheduled for EIPs waiting on something that may clear. */
  blockedRetries: number;
  heartbeats: number;
  /** Every watch has listed and is watching. */
  watchesReady: boolean;
  /** Watches ready and the sink not failing permanently: what /readyz answers. */
  ready: boolean;
  watches: WatchStatus[];
}

const perHandler = (): Record<HandlerName, number> =>
  Object.fromEntries(HANDLERS.map((h) => [h, 0])) as Record<HandlerName, number>;

export class Counters {
  readonly eventsIn = perHandler();
  readonly eventsOut = perHandler();
  duplicates = 0;
  coalesced = 0;
  requeued = 0;
  failures = 0;
  droppedOnDrain = 0;
  pauses = 0;
  resyncs = 0;
  blockedRetries = 0;
  heartbeats = 0;
  readonly foreignWrites: Record<string, number> = {};
  readonly lag: LagStats = { count: 0, sum: 0, max: 0, last: 0, buckets: LAG_BUCKETS.map(() => 0) };

  observeLag(ms: number): void {
    const s = Math.max(0, ms) / 1000;
    this.lag.count++;
    this.lag.sum += s;
    this.lag.last = s;
    if (s > this.lag.max) this.lag.max = s;
    LAG_BUCKETS.forEach((le, i) => {
      if (s <= le) this.lag.buckets[i]!++;
    });
  }
}

const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/** The Prometheus text exposition (version 0.0.4) of the bridge's stats. */
export function prometheusText(s: BridgeStats): string {
  const out: string[] = [];
  const metric = (name: string, type: string, help: string, samples: [string, number][]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) out.push(`${name}${labels} ${Number.isFinite(value) ? value : 0}`);
  };
  const byHandler = (r: Record<HandlerName, number>): [string, number][] =>
    HANDLERS.map((h) => [`{handler="${h}"}`, r[h]]);
  metric('eip_bridge_events_in_total', 'counter', 'Events routed to a handler.', byHandler(s.eventsIn));
  metric(
    'eip_bridge_events_out_total',
    'counter',
    'Events the sink accepted, per handler.',
    byHandler(s.eventsOut),
  );
  metric('eip_bridge_duplicates_total', 'counter', 'Events dropped because the same id was already queued.', [
    ['', s.duplicates],
  ]);
  metric('eip_bridge_delivered_total', 'counter', 'Events that reached their destination.', [
    ['', s.delivered],
  ]);
  metric(
    'eip_bridge_coalesced_total',
    'counter',
    'Waiting events replaced by a newer one for the same EIP.',
    [['', s.coalesced]],
  );
  metric('eip_bridge_requeued_total', 'counter', 'Events queued again after the sink gave up on them.', [
    ['', s.requeued],
  ]);
  metric('eip_bridge_retries_total', 'counter', 'Delivery retries in the sink.', [['', s.retries]]);
  metric('eip_bridge_failures_total', 'counter', 'Events the sink gave up on (each is queued again).', [
    ['', s.failures],
  ]);
  metric('eip_bridge_permanent_failures_total', 'counter', 'Give-ups for errors retrying cannot heal.', [
    ['', s.permanentFailures],
  ]);
  metric('eip_bridge_sink_failing', 'gauge', '1 while the sink keeps failing permanently.', [
    ['', s.sinkFailingPermanently ? 1 : 0],
  ]);
  metric('eip_bridge_dropped_on_drain_total', 'counter', 'Events left undelivered by a drain.', [
    ['', s.droppedOnDrain],
  ]);
  metric('eip_bridge_queue_retrying', 'gauge', 'Events waiting for their retry delay.', [
    ['', s.queueRetrying],
  ]);
  metric('eip_bridge_queue_limit', 'gauge', 'Waiting events at which the watches pause.', [
    ['', s.queueLimit],
  ]);
  metric('eip_bridge_queue_pauses_total', 'counter', 'Times a full queue paused the watches.', [
    ['', s.queuePauses],
  ]);
  metric(
    'eip_bridge_foreign_writes_total',
    'counter',
    'Writes of EIP status or finalizers by another field manager.',
    Object.entries(s.foreignWrites).map(([m, n]) => [`{manager="${esc(m)}"}`, n]),
  );
  metric('eip_bridge_blocked_retries_total', 'counter', 'blocked-retry updates scheduled for waiting EIPs.', [
    ['', s.blockedRetries],
  ]);
  metric('eip_bridge_heartbeats_total', 'counter', 'Heartbeats counted while healthy.', [['', s.heartbeats]]);
  metric('eip_bridge_dead_letters_total', 'counter', 'Events parked as dead letters (in-process sink).', [
    ['', s.deadLetters],
  ]);
  metric('eip_bridge_queue_depth', 'gauge', 'Events waiting or in flight in the bridge queue.', [
    ['', s.queueDepth],
  ]);
  metric('eip_bridge_sink_buffered', 'gauge', 'Events accepted by the sink but not yet delivered.', [
    ['', s.sinkBuffered],
  ]);
  metric('eip_bridge_resyncs_total', 'counter', 'Periodic resyncs run.', [['', s.resyncs]]);
  metric('eip_bridge_ready', 'gauge', '1 when every watch is up and the sink is not failing permanently.', [
    ['', s.ready ? 1 : 0],
  ]);
  metric(
    'eip_bridge_watch_up',
    'gauge',
    '1 while the watch of this kind is open.',
    s.watches.map((w) => [`{kind="${esc(w.kind)}"}`, w.watching ? 1 : 0]),
  );
  metric(
    'eip_bridge_watch_restarts_total',
    'counter',
    'Watch restarts after an error.',
    s.watches.map((w) => [`{kind="${esc(w.kind)}"}`, w.restarts]),
  );
  const lag = s.lagSeconds;
  out.push(
    '# HELP eip_bridge_lag_seconds Time from a watch event to the sink accepting the event it caused.',
    '# TYPE eip_bridge_lag_seconds histogram',
  );
  LAG_BUCKETS.forEach((le, i) => {
    out.push(`eip_bridge_lag_seconds_bucket{le="${le}"} ${lag.buckets[i]}`);
  });
  out.push(
    `eip_bridge_lag_seconds_bucket{le="+Inf"} ${lag.count}`,
    `eip_bridge_lag_seconds_sum ${lag.sum}`,
    `eip_bridge_lag_seconds_count ${lag.count}`,
  );
  metric('eip_bridge_lag_seconds_max', 'gauge', 'Largest lag seen since start.', [['', lag.max]]);
  return `${out.join('\n')}\n`;
}
