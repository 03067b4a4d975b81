/**
 * The bridge container's configuration, read once from the environment and validated; every problem is reported
 * at once (a ConfigError listing them).
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `KUBECONFIG` | kubeconfig file; without it the in-cluster ServiceAccount is used | in-cluster |
 * | `EIP_NAMESPACE` | namespace of the NAT gateway pods (kube-ovn's controller namespace) | `kube-system` |
 * | `BRIDGE_SINK` | `eventbridge`, `lambda` or `in-process` | `eventbridge` |
 * | `EVENT_BUS_NAME` | EventBridge bus (eventbridge sink) | the default bus |
 * | `ADD_FUNCTION`, `UPDATE_FUNCTION`, `RESET_FUNCTION`, `DELETE_FUNCTION` | function name or ARN per handler (lambda sink) | — |
 * | `RESYNC_SECONDS` | period of the resync that re-sends every EIP to update; 0 = off | `600` |
 * | `RESYNC_RATE` | the most EIPs a resync sends per second: it spreads them evenly over its period, and takes longer when they do not fit (resync.ts) | `20` |
 * | `CONCURRENCY` | EIPs handled at once | `16` |
 * | `EVENT_BATCH_MAX` | eventbridge and lambda sinks: events of one handler and gateway in one entry or invocation at most (ADR 0112); 1 = one event each | `8` |
 * | `EVENT_BATCH_WINDOW_MS` | how long an event waits for others to share its entry or invocation (the eventbridge sink's linger) | `100` |
 * | `HEALTH_PORT`, `HEALTH_HOST` | /healthz, /readyz, /metrics; port 0 = ephemeral | `8080`, `0.0.0.0` |
 * | `DRAIN_SECONDS` | how long SIGTERM waits for queued events (keep below terminationGracePeriodSeconds) | `25` |
 * | `STATS_SECONDS` | how often the counters are logged; 0 = never | `60` |
 * | `LOG_LEVEL` | `debug`, `info`, `warn`, `error` | `info` |
 * | `QUEUE_LIMIT` | waiting events at which the watches pause until the queue is half empty | `10000` |
 * | `BRIDGE_METRICS` | where the bridge's CloudWatch metrics go: `cloudwatch` (PutMetricData), `emf` (stdout), `none` | `cloudwatch`; `none` with the in-process sink |
 * | `HEARTBEAT_SECONDS` | heartbeat and metrics period; 0 = off | `60` |
 * | `STAGE` | the stack's stage: the metrics go to `EipLambdas/<STAGE>`, where its alarms look (ADR 0080); required unless `BRIDGE_METRICS=none` | — |
 * | `AWS_REGION`, `AWS_DEFAULT_REGION` | region of the bus, the functions and CloudWatch; else the AWS profile's (shared/config/region.ts) | required but for the in-process sink without metrics |
 * | `BRIDGE_COEXISTENCE_CHECK` | the check at start that kube-ovn's IPAM stays out of the dedicated EIP range (ADR 0096): `refuse` a conflict, `warn` and start, `off` | `refuse` |
 *
 * The in-process sink runs the handlers inside the bridge and reads their configuration too (TABLE_NAME, …; see
 * shared/config/config.ts). AWS clients take their credentials from the usual AWS_* variables.
 */
import { ConfigError } from '../config/config.js';
import { REGION_NAME, resolveRegion } from '../config/region.js';
import { HANDLERS, type HandlerName, MAX_BATCH_EVENTS } from '../events.js';
import { type Level, levelFromEnv } from '../observability/log.js';
import { metricsNamespace, STAGE_NAME } from '../observability/metrics.js';
import { DEFAULT_GROUP_EVENTS, DEFAULT_GROUP_WINDOW_MS } from './sinks/group.js';

export const SINKS = ['eventbridge', 'lambda', 'in-process'] as const;
export type SinkKind = (typeof SINKS)[number];
export const METRICS_TARGETS = ['cloudwatch', 'emf', 'none'] as const;
export type MetricsTarget = (typeof METRICS_TARGETS)[number];
export const COEXISTENCE_CHECKS = ['refuse', 'warn', 'off'] as const;
export type CoexistenceCheck = (typeof COEXISTENCE_CHECKS)[number];

export interface BridgeConfig {
  kubeconfig?: string;
  namespace: string;
  sink: SinkKind;
  eventBusName?: string;
  functions?: Record<HandlerName, string>;
  resyncMs: number;
  /** EIPs per second at most during a resync (spread over its period). */
  resyncRate: number;
  concurrency: number;
  /** Events in one EventBridge entry or Lambda invocation at most (ADR 0112); 1: one each. */
  eventBatchMax: number;
  /** How long an event waits for others to share its entry or invocation. */
  eventBatchWindowMs: number;
  healthPort: number;
  healthHost: string;
  drainMs: number;
  statsMs: number;
  logLevel: Level;
  queueLimit: number;
  metrics: MetricsTarget;
  /** Where the metrics go: `EipLambdas/<STAGE>`. */
  metricsNamespace: string;
  /** Region of the AWS clients (bus, functions, CloudWatch); undefined only when none is used. */
  region?: string;
  heartbeatMs: number;
  coexistenceCheck: CoexistenceCheck;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** A function name, a name with alias/version, or an ARN (partial or full). */
const FUNCTION = /^(arn:[a-z-]+:lambda:[a-z0-9-]+:\d{12}:function:)?[A-Za-z0-9_-]{1,140}(:[A-Za-z0-9$_-]+)?$/;
const BUS = /^(arn:[a-z-]+:events:[a-z0-9-]+:\d{12}:event-bus\/)?[A-Za-z0-9._\-/]{1,256}$/;

export const functionVariable = (h: HandlerName): string => `${h.toUpperCase()}_FUNCTION`;

/** STAGE, required when the metrics go anywhere: the stack's alarms watch `EipLambdas/<stage>` (ADR 0080). */
function stageOf(stage: string | undefined, metrics: MetricsTarget, problems: string[]): string | undefined {
  if (stage && !STAGE_NAME.test(stage))
    problems.push(`STAGE "${stage}" is not a stage name (letters, digits, - and _, up to 64)`);
  if (!stage && (metrics === 'cloudwatch' || metrics === 'emf'))
    problems.push(
      `BRIDGE_METRICS=${metrics} needs STAGE: the stack's alarms watch the namespace EipLambdas/<stage> (or set BRIDGE_METRICS=none)`,
    );
  return stage;
}

/** The AWS clients' region, as the AWS CLI finds it (shared/config/region.ts); required but for a lab bridge. */
function regionOf(
  env: NodeJS.ProcessEnv,
  sink: SinkKind,
  metrics: MetricsTarget,
  problems: string[],
): string | undefined {
  const region = resolveRegion(env);
  if (region && !REGION_NAME.test(region.region))
    problems.push(`the AWS region "${region.region}" (from ${region.from}) is not a region name`);
  if (!region && (sink !== 'in-process' || metrics === 'cloudwatch'))
    problems.push(
      'no AWS region: set AWS_REGION (the kustomize parameter region), or a region in the AWS profile',
    );
  return region?.region;
}

/** `value` as one of `allowed` (a problem naming `name` when it is not). */
function oneOf<T extends string>(name: string, value: string, allowed: readonly T[], problems: string[]): T {
  if (!(allowed as readonly string[]).includes(value))
    problems.push(`${name} must be one of ${allowed.join(', ')}, got "${value}"`);
  return value as T;
}

/** Reads an integer setting in [min, max]; a problem, and the default, when it is out of range. */
function intReader(text: (k: string) => string | undefined, problems: string[]) {
  return (k: string, def: number, min: number, max: number): number => {
    const raw = text(k);
    if (raw === undefined) return def;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${k} must be an integer from ${min} to ${max}, got "${raw}"`);
      return def;
    }
    return n;
  };
}

/** The function of each handler, for the lambda sink: every one named, each a function name or ARN. */
function lambdaFunctionsOf(
  text: (k: string) => string | undefined,
  problems: string[],
): Record<HandlerName, string> {
  const entries = HANDLERS.map((h) => [h, text(functionVariable(h))] as const);
  const missing = entries.filter(([, v]) => !v).map(([h]) => functionVariable(h));
  if (missing.length) problems.push(`the lambda sink needs ${missing.join(', ')}`);
  for (const [h, v] of entries)
    if (v && !FUNCTION.test(v)) problems.push(`${functionVariable(h)} "${v}" is not a function name or ARN`);
  return Object.fromEntries(entries) as Record<HandlerName, string>;
}

/** The first file KUBECONFIG names; without one the bridge must run in a pod (its ServiceAccount). */
function kubeconfigOf(env: NodeJS.ProcessEnv, problems: string[]): string | undefined {
  const kubeconfig = env.KUBECONFIG?.split(':')
    .find((p) => p.trim() !== '')
    ?.trim();
  if (!kubeconfig && !env.KUBERNETES_SERVICE_HOST)
    problems.push('no Kubernetes API: set KUBECONFIG, or run in a pod (KUBERNETES_SERVICE_HOST)');
  return kubeconfig;
}

export function loadBridgeConfig(env: NodeJS.ProcessEnv = process.env): Readonly<BridgeConfig> {
  const problems: string[] = [];
  const text = (k: string) => env[k]?.trim() || undefined;
  const int = intReader(text, problems);

  const namespace = text('EIP_NAMESPACE') ?? 'kube-system';
  if (!DNS_LABEL.test(namespace) || namespace.length > 63)
    problems.push(`EIP_NAMESPACE "${namespace}" is not a namespace name`);

  const choice = <T extends string>(k: string, def: T, allowed: readonly T[]): T =>
    oneOf(k, text(k) ?? def, allowed, problems);
  const sink = choice('BRIDGE_SINK', 'eventbridge', SINKS);

  const eventBusName = text('EVENT_BUS_NAME');
  if (eventBusName && !BUS.test(eventBusName))
    problems.push(`EVENT_BUS_NAME "${eventBusName}" is not a bus name or ARN`);

  const functions = sink === 'lambda' ? lambdaFunctionsOf(text, problems) : undefined;

  const resyncMs = int('RESYNC_SECONDS', 600, 0, 86_400) * 1000;
  const resyncRate = int('RESYNC_RATE', 20, 1, 10_000);
  const concurrency = int('CONCURRENCY', 16, 1, 1000);
  const eventBatchMax = int('EVENT_BATCH_MAX', DEFAULT_GROUP_EVENTS, 1, MAX_BATCH_EVENTS);
  const eventBatchWindowMs = int('EVENT_BATCH_WINDOW_MS', DEFAULT_GROUP_WINDOW_MS, 0, 1000);
  const healthPort = int('HEALTH_PORT', 8080, 0, 65_535);
  const healthHost = text('HEALTH_HOST') ?? '0.0.0.0';
  const drainMs = int('DRAIN_SECONDS', 25, 0, 3600) * 1000;
  const statsMs = int('STATS_SECONDS', 60, 0, 86_400) * 1000;
  const queueLimit = int('QUEUE_LIMIT', 10_000, 1, 1_000_000);
  const heartbeatMs = int('HEARTBEAT_SECONDS', 60, 0, 3600) * 1000;
  const metrics = choice('BRIDGE_METRICS', sink === 'in-process' ? 'none' : 'cloudwatch', METRICS_TARGETS);
  const coexistenceCheck = choice('BRIDGE_COEXISTENCE_CHECK', 'refuse', COEXISTENCE_CHECKS);
  const kubeconfig = kubeconfigOf(env, problems);
  const stage = stageOf(text('STAGE'), metrics, problems);
  const region = regionOf(env, sink, metrics, problems);

  if (problems.length) throw new ConfigError(problems);
  return Object.freeze({
    ...(kubeconfig && { kubeconfig }),
    namespace,
    sink,
    ...(eventBusName && { eventBusName }),
    ...(functions && { functions }),
    resyncMs,
    resyncRate,
    concurrency,
    eventBatchMax,
    eventBatchWindowMs,
    healthPort,
    healthHost,
    drainMs,
    statsMs,
    logLevel: levelFromEnv(env.LOG_LEVEL),
    queueLimit,
    metrics,
    metricsNamespace: metricsNamespace(stage),
    ...(region && { region }),
    heartbeatMs,
    coexistenceCheck,
  });
}
