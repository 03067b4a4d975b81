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
  /**
   * Each pod of its gateway the last drift check read, `<namespace>/<name>`, and whether its address was on that
   * pod's external interface; empty before a check, or when the EIP has no address.
   */
  pods: { pod: string; carries: boolean }[];
}

/** One pod of a NAT gateway, as the API lists it and the last drift check read it. */
export interface GatewayPodRow {
  gateway: string;
  namespace: string;
  name: string;
  phase: string;
  terminating: boolean;
  /** The vpc-nat-gw container: `running` (ready), `not ready`, or `none` (no status yet). */
  container: 'running' | 'not ready' | 'none';
  restarts: number;
  /** The redo token of its current container run (ADR 0003): when the container last started. */
  token: string;
  /** The kube-ovn release line the last check read it as, else its image's tag. */
  release: string;
  /** How many EIP addresses it carried when the last check read it; undefined when it was not read. */
  carries?: number;
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
  /** Every gateway pod, by gateway then name. */
  gatewayPods: GatewayPodRow[];
  subnets: SubnetUse[];
  deadLetters: DeadLetterView[];
  outcomes: readonly OutcomeRow[];
  drift?: DriftView;
  widgets: LocalWidget[];
}
