/**
 * The bridge's CloudWatch metrics, for alarms: a heartbeat while the bridge is healthy, events it failed to
 * deliver, its queue depth, and foreign writers. Namespace `EipLambdas/<stage>` (the handlers' namespace of the same
 * stage, ADR 0080), dimension `service=eip-bridge` on every metric, plus `manager` on ForeignWriter. Published either with PutMetricData
 * (`BRIDGE_METRICS=cloudwatch`, the default in a cluster: no log agent needed) or as embedded-metric-format lines
 * on stdout (`emf`, for a CloudWatch agent or Fluent Bit that extracts EMF), or not at all (`none`).
 */
import { METRICS_NAMESPACE } from '../observability/metrics.js';
import type { Metrics } from '../ports.js';
import { errorText } from './watch.js';

/** The namespace without a stage; a deployed bridge publishes in `metricsNamespace(STAGE)` (config.ts). */
export const BRIDGE_METRICS_NAMESPACE = METRICS_NAMESPACE;
export const BRIDGE_SERVICE = 'eip-bridge';

/** Every metric the bridge publishes, with its unit and its dimension names (besides `service`). */
export const BRIDGE_METRIC_NAMES = {
  /** 1 per heartbeat period while every watch is up and the sink is not failing permanently. */
  BridgeHeartbeat: { unit: 'Count', dimensions: [] },
  /** Events the sink gave up on in the period (they are queued again with backoff). */
  BridgeEventsFailed: { unit: 'Count', dimensions: [] },
  /** Events waiting or in flight in the bridge's queue, sampled once per period. */
  BridgeQueueDepth: { unit: 'Count', dimensions: [] },
  /** Writes of an EIP's status or finalizers by another field manager (another controller). */
  ForeignWriter: { unit: 'Count', dimensions: ['manager'] },
} as const;

/** The seam: a real CloudWatchClient, or a fake with the same `send`. */
export interface PutMetricDataClient {
  // biome-ignore lint/suspicious/noExplicitAny: the command type comes from an optional import
  send(command: any): Promise<unknown>;
}

interface Datum {
  name: string;
  dimensions: Record<string, string>;
  value: number;
}

/**
 * Collects counts and flushes them as one PutMetricData call (or EMF lines) per flush. Counts with the same name
 * and dimensions are summed between flushes. Publishing errors are logged, never thrown: metrics must not stop
 * the bridge.
 */
export class BridgeMetrics implements Metrics {
  private pending = new Map<string, Datum>();

  constructor(
    private readonly publish: (data: Datum[], at: Date) => Promise<void>,
    private readonly onError: (error: string) => void = () => {},
  ) {}

  count(name: string, value = 1, dimensions: Record<string, string> = {}): void {
    const dims = { service: BRIDGE_SERVICE, ...dimensions };
    const key = `${name}|${JSON.stringify(Object.entries(dims).sort())}`;
    const d = this.pending.get(key);
    if (d) d.value += value;
    else this.pending.set(key, { name, dimensions: dims, value });
  }

  timing(name: string, ms: number, dimensions?: Record<string, string>): void {
    this.count(name, ms, dimensions);
  }

  async flush(at = new Date()): Promise<void> {
    if (this.pending.size === 0) return;
    const data = [...this.pending.values()];
    this.pending = new Map();
    try {
      await this.publish(data, at);
    } catch (e) {
      this.onError(errorText(e));
    }
  }
}

/** PutMetricData, at most 1000 data points per call, in `namespace` (the stage's: `EipLambdas/<stage>`). */
export function cloudWatchPublisher(client: PutMetricDataClient, namespace = BRIDGE_METRICS_NAMESPACE) {
  let Command: (new (input: unknown) => unknown) | undefined;
  return async (data: Datum[], at: Date): Promise<void> => {
    Command ??= (await import('@aws-sdk/client-cloudwatch')).PutMetricDataCommand as unknown as new (
      input: unknown,
    ) => unknown;
    for (let i = 0; i < data.length; i += 1000) {
      await client.send(
        new Command({
          Namespace: namespace,
          MetricData: data.slice(i, i + 1000).map((d) => ({
            MetricName: d.name,
            Dimensions: Object.entries(d.dimensions).map(([Name, Value]) => ({ Name, Value })),
            Timestamp: at,
            Value: d.value,
            Unit: 'Count',
          })),
        }),
      );
    }
  };
}

/** One embedded-metric-format line per data point, in `namespace`. */
export function emfPublisher(
  write: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
  namespace = BRIDGE_METRICS_NAMESPACE,
) {
  return async (data: Datum[], at: Date): Promise<void> => {
    for (const d of data)
      write(
        JSON.stringify({
          _aws: {
            Timestamp: at.getTime(),
            CloudWatchMetrics: [
              {
                Namespace: namespace,
                Dimensions: [Object.keys(d.dimensions)],
                Metrics: [{ Name: d.name, Unit: 'Count' }],
              },
            ],
          },
          ...d.dimensions,
          [d.name]: d.value,
        }),
      );
  };
}
