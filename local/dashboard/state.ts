/**
 * What /api/state answers: the one contract between the dashboard's server (server.ts, recorder.ts) and its page
 * (page/main.ts, which imports these types only, so nothing of the server is bundled into the page).
 */

import type { OutcomeStatus } from '../../shared/core/outcome.js';

/**
 * A CloudWatch statistic the dashboard uses: the same union as local/dashboard/definition.ts's
 * `Stat` (recorder.ts fails to compile if they part), written here because the page cannot type-check that module
 * (it writes to process.stdout through metrics.ts).
 */
export type Stat = 'Sum' | 'Maximum' | 'p99';

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

export interface SubnetUse {
  subnet: string;
  family: number;
  cidr: string;
  used: number;
  free: number;
  excluded: number;
  error?: string;
}

export interface EipRow {
  name: string;
  ip: string;
  gateway: string;
  qosPolicy: string;
  ready: boolean;
  lastTransition: string;
}

export interface OutcomeRow {
  at: string;
  handler: string;
  eip: string;
  reason: string;
  status: OutcomeStatus;
  detail: string;
}

export interface DeadLetterView {
  at: string;
  handler: string;
  eip: string;
  reason: string;
  attempts: number;
  error: string;
}

export interface DriftView {
  at: string;
  failed: boolean;
  items: { kind: string; target: string; message: string; repair?: string }[];
}

export interface DashboardState {
  at: string;
  errors: string[];
  eips: EipRow[];
  subnets: SubnetUse[];
  deadLetters: DeadLetterView[];
  outcomes: readonly OutcomeRow[];
  drift?: DriftView;
  widgets: LocalWidget[];
}
