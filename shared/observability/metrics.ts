/**
 * Metrics behind the Metrics port. In Lambda they are written as CloudWatch embedded metric format (EMF) lines
 * under the stage's namespace; everywhere else they are tallied in memory (the local stack prints them, tests read
 * them). METRIC_NAMES is the catalogue: the dashboard in infra/ plots exactly these, and a test keeps the two in
 * step.
 */
import type { Metrics } from '../ports.js';

/** The product's namespace without a stage: local runs and tests, which publish nothing to CloudWatch. */
export const METRICS_NAMESPACE = 'EipLambdas';

/**
 * One namespace per stage, `EipLambdas/<stage>`, for the handlers and the bridge alike: two stages in one account
 * never mix in an alarm or on a dashboard, and the bridge's PutMetricData is allowed in its own stage's namespace
 * only (docs/adr/0080-metrics-namespace-per-stage.md).
 */
export function metricsNamespace(stage: string | undefined): string {
  return stage ? `${METRICS_NAMESPACE}/${stage}` : METRICS_NAMESPACE;
}

/** A stage name as the namespace and the stack's resource names allow it. */
export const STAGE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Every metric the code emits, with its unit. */
export const METRIC_NAMES = {
  Allocations: 'Count',
  Releases: 'Count',
  Rejections: 'Count',
  WriteConflicts: 'Count',
  ExecFailures: 'Count',
  ExecDuration: 'Milliseconds',
  HandlerDuration: 'Milliseconds',
  Outcomes: 'Count',
  LeaseContention: 'Count',
  // Emitted by the per-pod gateway batching (shared/core/batch.ts, gateway-lease.ts): execs by op, the rules they
  // carried, and waits for a gateway pod another container holds.
  GatewayExecs: 'Count',
  GatewayBatchRules: 'Count',
  GatewayLeaseWaits: 'Count',
  // Emitted by the DynamoDB IPAM adapter (shared/adapters/dynamo).
  IpamAllocations: 'Count',
  IpamAllocationRetries: 'Count',
  IpamConflicts: 'Count',
  IpamExhausted: 'Count',
  IpamReleases: 'Count',
  IpamStoreRetries: 'Count',
  IpamSubnetUtilisation: 'Percent',
  IpamGcOrphans: 'Count',
  IpamGcReleased: 'Count',
  // Emitted by the gateway drift check (shared/audit, functions/gc).
  DriftFound: 'Count',
  DriftRepaired: 'Count',
  DriftCheckFailures: 'Count',
} as const;

export class TallyMetrics implements Metrics {
  readonly counts = new Map<string, number>();
  readonly timings = new Map<string, number[]>();

  count(name: string, value = 1, dimensions?: Record<string, string>): void {
    const k = keyOf(name, dimensions);
    this.counts.set(k, (this.counts.get(k) ?? 0) + value);
  }

  timing(name: string, ms: number, dimensions?: Record<string, string>): void {
    const k = keyOf(name, dimensions);
    const list = this.timings.get(k) ?? [];
    list.push(ms);
    this.timings.set(k, list);
  }

  /** Sum of a counter over all its dimension values. */
  total(name: string): number {
    let n = 0;
    for (const [k, v] of this.counts) if (k === name || k.startsWith(`${name}{`)) n += v;
    return n;
  }
}

function keyOf(name: string, dimensions?: Record<string, string>): string {
  if (!dimensions || Object.keys(dimensions).length === 0) return name;
  return `${name}{${Object.entries(dimensions)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join(',')}}`;
}

/**
 * EMF: one JSON line per data point, which CloudWatch turns into metrics without any API call from the Lambda.
 * Dimension sets are [service] plus the point's own dimensions (e.g. [service, op]).
 */
export class EmfMetrics implements Metrics {
  constructor(
    private readonly service: string,
    private readonly write: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
    private readonly now: () => number = Date.now,
    private readonly namespace: string = METRICS_NAMESPACE,
  ) {}

  count(name: string, value = 1, dimensions?: Record<string, string>): void {
    this.emit(name, value, dimensions);
  }

  timing(name: string, ms: number, dimensions?: Record<string, string>): void {
    this.emit(name, ms, dimensions);
  }

  private emit(name: string, value: number, dimensions: Record<string, string> = {}): void {
    const unit = (METRIC_NAMES as Record<string, string>)[name] ?? 'None';
    const dims = { service: this.service, ...dimensions };
    this.write(
      JSON.stringify({
        _aws: {
          Timestamp: this.now(),
          CloudWatchMetrics: [
            {
              Namespace: this.namespace,
              Dimensions: [Object.keys(dims)],
              Metrics: [{ Name: name, Unit: unit }],
            },
          ],
        },
        ...dims,
        [name]: value,
      }),
    );
  }
}
