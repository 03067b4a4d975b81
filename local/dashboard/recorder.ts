/**
 * The local stack's metrics, kept for the local dashboard: every data point the handlers, the IPAM adapter, the
 * drift check and the bridge emit through the Metrics port, with the dimensions CloudWatch would see (the
 * emitter's `service` plus the point's own), aggregated per period with the statistic of the dashboard
 * definition (shared/observability/dashboard-definition.ts). Points older than the window are dropped.
 */
import {
  DASHBOARD_ROWS,
  isSearchLine,
  type SearchLine,
  type Stat,
  searchExpression,
} from '../../shared/observability/dashboard-definition.js';
import type { Metrics } from '../../shared/ports.js';

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
const MAX_POINTS = 200_000;

export class MetricRecorder {
  private points: Point[] = [];

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
    this.points.push({ t: this.now(), name, dimensions, value });
    if (this.points.length > MAX_POINTS) this.points.splice(0, this.points.length - MAX_POINTS / 2);
  }

  /** Drops points older than the longest chart window. */
  prune(): void {
    const longest = Math.max(...DASHBOARD_ROWS.flat().map((w) => w.period)) / LOCAL_PERIOD_DIVISOR;
    const cutoff = this.now() - longest * 1000 * BUCKETS;
    const first = this.points.findIndex((p) => p.t >= cutoff);
    if (first > 0) this.points.splice(0, first);
    else if (first < 0) this.points.length = 0;
  }

  all(): readonly Point[] {
    return this.points;
  }
}

export interface LocalSeries {
  /** `Outcomes service=eip-lambdas handler=add status=applied` — the metric and its dimension values. */
  label: string;
  /** One value per bucket; null where the period had no data point (CloudWatch leaves a gap there too). */
  values: (number | null)[];
  /** The statistic over the whole window (Sum of sums, Maximum of maxima, p99 of all points). */
  total: number;
}

export interface LocalLine {
  id: string;
  metric: string;
  dimensions: readonly string[];
  stat: Stat;
  /** The expression the CloudWatch dashboard runs for this line. */
  expression: string;
  series: LocalSeries[];
}

export interface LocalWidget {
  title: string;
  /** The row of the CloudWatch layout the widget is on (a new row starts at the left edge). */
  row: number;
  width: number;
  /** CloudWatch period (s) and the local one. */
  period: number;
  localPeriod: number;
  /** Bucket start times (epoch seconds). */
  times: number[];
  lines: LocalLine[];
  local?: 'dead-letters' | 'aws-only';
}

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
