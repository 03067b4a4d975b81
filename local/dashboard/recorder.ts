/**
 * The local stack's metrics, kept for the local dashboard: every data point the handlers, the IPAM adapter, the
 * drift check and the bridge emit through the Metrics port, with the dimensions CloudWatch would see (the
 * emitter's `service` plus the point's own), aggregated per period with the statistic of the dashboard
 * definition (local/dashboard/definition.ts). Points older than the window are dropped.
 */

import type { Metrics } from '../../shared/ports.js';
import { DASHBOARD_ROWS, isSearchLine, type SearchLine, type Stat, searchExpression } from './definition.js';
import type { LocalLine, Stat as LocalStat, LocalWidget } from './state.js';

export interface Point {
  /** Epoch ms. */
  t: number;
  name: string;
  dimensions: Record<string, string>;
  value: number;
}

/** CloudWatch periods are divided by this locally (300 s → 10 s) so the page moves while you watch. */
export const LOCAL_PERIOD_DIVISOR = 30;
/** Buckets per chart. */
export const BUCKETS = 30;
/** At most this many points are kept per metric name (the oldest half goes when it is reached). */
const MAX_POINTS_PER_METRIC = 20_000;
const PRUNE_EVERY = 1_000;

/** How long a metric's points are kept: the window of the longest chart it is on (5 min for a 300 s period). */
function windowMs(): Map<string, number> {
  const out = new Map<string, number>();
  for (const w of DASHBOARD_ROWS.flat())
    for (const l of w.lines.filter(isSearchLine)) {
      const ms = (w.period / LOCAL_PERIOD_DIVISOR) * 1000 * BUCKETS;
      out.set(l.metric, Math.max(out.get(l.metric) ?? 0, ms));
    }
  return out;
}
const WINDOWS = windowMs();
const DEFAULT_WINDOW_MS = (300 / LOCAL_PERIOD_DIVISOR) * 1000 * BUCKETS;

/** Points per metric name, oldest first; each metric keeps only its charts' window. Memory stays bounded. */
export class MetricRecorder {
  private byName = new Map<string, Point[]>();
  private sincePrune = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** A Metrics port whose points carry `service` (as EMF and PutMetricData add it). */
  forService(service: string): Metrics {
    const record = (name: string, value: number, dimensions: Record<string, string> = {}) =>
      this.record(name, value, { service, ...dimensions });
    return {
      count: (name, value = 1, dimensions) => record(name, value, dimensions),
      timing: (name, ms, dimensions) => record(name, ms, dimensions),
    };
  }

  record(name: string, value: number, dimensions: Record<string, string>): void {
    let list = this.byName.get(name);
    if (!list) {
      list = [];
      this.byName.set(name, list);
    }
    list.push({ t: this.now(), name, dimensions, value });
    if (list.length > MAX_POINTS_PER_METRIC) list.splice(0, MAX_POINTS_PER_METRIC / 2);
    if (++this.sincePrune >= PRUNE_EVERY) this.prune();
  }

  /** Drops each metric's points older than its window. */
  prune(): void {
    this.sincePrune = 0;
    const now = this.now();
    for (const [name, list] of this.byName) {
      const cutoff = now - (WINDOWS.get(name) ?? DEFAULT_WINDOW_MS);
      const first = list.findIndex((p) => p.t >= cutoff);
      if (first < 0) this.byName.delete(name);
      else if (first > 0) list.splice(0, first);
    }
  }

  all(): readonly Point[] {
    return [...this.byName.values()].flat();
  }
}

export type { LocalWidget } from './state.js';

// The page's copy of the statistic union must stay the definition's: this fails to compile if they part.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const _sameStat: Same<Stat, LocalStat> = true;

export function statOf(stat: Stat, values: number[]): number {
  if (values.length === 0) return 0;
  if (stat === 'Sum') return values.reduce((a, b) => a + b, 0);
  if (stat === 'Maximum') return Math.max(...values);
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;
}

/** Does a point belong to a SEARCH line? Same name and exactly the same dimension set, as CloudWatch matches. */
export function matches(line: SearchLine, p: Point): boolean {
  if (p.name !== line.metric) return false;
  const keys = Object.keys(p.dimensions);
  return keys.length === line.dimensions.length && line.dimensions.every((d) => d in p.dimensions);
}

/** Every widget of the definition, with its SEARCH lines evaluated over the recorded points. */
export function localWidgets(points: readonly Point[], now: number): LocalWidget[] {
  return DASHBOARD_ROWS.flatMap((row, r) => row.map((w) => ({ ...w, row: r }))).map((w) => {
    const localPeriod = Math.max(1, Math.round(w.period / LOCAL_PERIOD_DIVISOR));
    const end = Math.floor(now / 1000 / localPeriod) * localPeriod + localPeriod;
    const start = end - localPeriod * BUCKETS;
    const times = Array.from({ length: BUCKETS }, (_, i) => start + i * localPeriod);
    const lines: LocalLine[] = w.lines.filter(isSearchLine).map((line) => {
      const groups = new Map<string, number[][]>();
      for (const p of points) {
        const sec = p.t / 1000;
        if (sec < start || sec >= end || !matches(line, p)) continue;
        const label = [line.metric, ...line.dimensions.map((d) => `${d}=${p.dimensions[d]}`)].join(' ');
        let buckets = groups.get(label);
        if (!buckets) {
          buckets = times.map(() => []);
          groups.set(label, buckets);
        }
        buckets[Math.floor((sec - start) / localPeriod)]!.push(p.value);
      }
      const series = [...groups.entries()]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([label, buckets]) => ({
          label,
          values: buckets.map((b) => (b.length ? statOf(line.stat, b) : null)),
          total:
            line.stat === 'p99'
              ? statOf('p99', buckets.flat())
              : statOf(
                  line.stat,
                  buckets.filter((b) => b.length).map((b) => statOf(line.stat, b)),
                ),
        }));
      return {
        id: line.id,
        metric: line.metric,
        dimensions: line.dimensions,
        stat: line.stat,
        expression: searchExpression(line, w.period),
        series,
      };
    });
    return {
      title: w.title,
      row: w.row,
      width: w.width,
      period: w.period,
      localPeriod,
      times,
      lines,
      ...(w.local && { local: w.local }),
    };
  });
}
