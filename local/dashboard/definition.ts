/**
 * The one definition of the dashboard: the CloudWatch dashboard body in infra/dashboard.yml is generated from it
 * (`npx tsx local/dashboard/generate-cloudwatch.ts`), and the local dashboard of `npm start` (local/dashboard)
 * draws the same widgets from it, with the same metric names, dimension sets and statistics
 * (docs/adr/0040-one-dashboard-definition.md). test/unit/dashboard-definition.test.ts keeps the file and this
 * definition equal.
 */
export type Stat = 'Sum' | 'Maximum' | 'p99';

/** One SEARCH line: a metric of the namespace, the exact dimension set it is emitted with, and the statistic. */
export interface SearchLine {
  id: string;
  metric: string;
  /** Dimension names in the order written in the SEARCH schema (always including `service`). */
  dimensions: readonly string[];
  stat: Stat;
}

/** A line of an AWS-owned metric (SQS, Lambda): plotted on CloudWatch only. */
export interface AwsLine {
  namespace: 'AWS/SQS' | 'AWS/Lambda';
  metric: string;
  dimension: string;
  /** A CloudFormation substitution such as `${AddLambdaFunction}`. */
  value: string;
  stat: Stat;
  label: string;
  yAxis?: 'right';
}

export interface Widget {
  title: string;
  /** Grid columns (of 24). */
  width: number;
  /** CloudWatch period in seconds. */
  period: number;
  lines: readonly (SearchLine | AwsLine)[];
  /** What the local dashboard shows instead of AWS-owned metrics. */
  local?: 'dead-letters' | 'aws-only';
}

const FUNCTIONS = ['add', 'update', 'reset', 'delete', 'gc'] as const;
/** A CloudFormation Fn::Sub reference, `${Name}`. */
const cfn = (name: string): string => ['${', name, '}'].join('');
const cfnFunction = (f: string) => cfn(`${f[0]!.toUpperCase()}${f.slice(1)}LambdaFunction`);

const s = (id: string, metric: string, dimensions: string, stat: Stat = 'Sum'): SearchLine => ({
  id,
  metric,
  dimensions: dimensions.split(','),
  stat,
});

/** Rows of widgets, top to bottom; every widget is 6 units high. */
export const DASHBOARD_ROWS: readonly (readonly Widget[])[] = [
  [
    {
      title: 'Handler outcomes (count)',
      width: 8,
      period: 300,
      lines: [s('e1', 'Outcomes', 'service,handler,status')],
    },
    {
      title: 'Handler duration (p99 ms)',
      width: 8,
      period: 300,
      lines: [s('e2', 'HandlerDuration', 'service,handler', 'p99')],
    },
    { title: 'Rejections by code', width: 8, period: 300, lines: [s('e3', 'Rejections', 'service,code')] },
  ],
  [
    {
      title: 'EIP allocations and releases',
      width: 8,
      period: 300,
      lines: [s('e4', 'Allocations', 'service,subnet'), s('e5', 'Releases', 'service')],
    },
    {
      title: 'IPAM claims, conflicts, retries',
      width: 8,
      period: 300,
      lines: [
        s('e6', 'IpamAllocations', 'service,source,subnet'),
        s('e7', 'IpamConflicts', 'service,subnet'),
        s('e8', 'IpamAllocationRetries', 'service,subnet'),
        s('e9', 'IpamReleases', 'service,subnet'),
      ],
    },
    {
      title: 'Subnet utilisation (%) and exhaustion',
      width: 8,
      period: 300,
      lines: [
        s('e10', 'IpamSubnetUtilisation', 'service,family,subnet', 'Maximum'),
        s('e11', 'IpamExhausted', 'service,subnet'),
      ],
    },
  ],
  [
    {
      title: 'Gateway exec duration (p99 ms)',
      width: 8,
      period: 300,
      lines: [s('e12', 'ExecDuration', 'service,op', 'p99')],
    },
    {
      title: 'Gateway execs, the rules they carried, failures',
      width: 8,
      period: 300,
      lines: [
        s('e13', 'ExecFailures', 'service,op'),
        s('e40', 'GatewayExecs', 'service,op'),
        s('e41', 'GatewayBatchRules', 'service,op'),
      ],
    },
    {
      title: 'Contention: leases, write conflicts, DynamoDB retries',
      width: 8,
      period: 300,
      lines: [
        s('e14', 'LeaseContention', 'service'),
        s('e42', 'GatewayLeaseWaits', 'service'),
        s('e15', 'WriteConflicts', 'service'),
        s('e16', 'IpamStoreRetries', 'service,op'),
      ],
    },
  ],
  [
    {
      title: 'IPAM garbage collection',
      width: 8,
      period: 300,
      lines: [s('e17', 'IpamGcOrphans', 'service'), s('e18', 'IpamGcReleased', 'service')],
    },
    {
      title: 'Gateway drift (hourly check, docs/audit.md)',
      width: 8,
      period: 3600,
      lines: [
        s('drift1', 'DriftFound', 'service,kind'),
        s('drift2', 'DriftRepaired', 'service,kind'),
        s('drift3', 'DriftCheckFailures', 'service'),
      ],
    },
  ],
  [
    {
      title: 'Bridge: heartbeat and events it failed to deliver',
      width: 8,
      period: 300,
      lines: [s('b1', 'BridgeHeartbeat', 'service'), s('b2', 'BridgeEventsFailed', 'service')],
    },
    {
      title: 'Bridge: queue depth, foreign writers of EIPs',
      width: 8,
      period: 300,
      lines: [s('b3', 'BridgeQueueDepth', 'service', 'Maximum'), s('b4', 'ForeignWriter', 'manager,service')],
    },
    {
      title: 'Dead-letter queue: events that failed every retry',
      width: 8,
      period: 300,
      local: 'dead-letters',
      lines: [
        {
          namespace: 'AWS/SQS',
          metric: 'ApproximateNumberOfMessagesVisible',
          dimension: 'QueueName',
          value: cfn('DeadLetterQueue.QueueName'),
          stat: 'Maximum',
          label: 'waiting',
        },
        {
          namespace: 'AWS/SQS',
          metric: 'ApproximateAgeOfOldestMessage',
          dimension: 'QueueName',
          value: cfn('DeadLetterQueue.QueueName'),
          stat: 'Maximum',
          label: 'age of oldest (s)',
          yAxis: 'right',
        },
      ],
    },
  ],
  [
    {
      title: 'Function errors and throttles',
      width: 12,
      period: 300,
      local: 'aws-only',
      lines: FUNCTIONS.flatMap((f) =>
        (['Errors', 'Throttles'] as const).map(
          (metric): AwsLine => ({
            namespace: 'AWS/Lambda',
            metric,
            dimension: 'FunctionName',
            value: cfnFunction(f),
            stat: 'Sum',
            label: `${f} ${metric.toLowerCase()}`,
          }),
        ),
      ),
    },
    {
      title: 'Function concurrency (reserved: parameters <fn>Concurrency)',
      width: 12,
      period: 300,
      local: 'aws-only',
      lines: FUNCTIONS.map(
        (f): AwsLine => ({
          namespace: 'AWS/Lambda',
          metric: 'ConcurrentExecutions',
          dimension: 'FunctionName',
          value: cfnFunction(f),
          stat: 'Maximum',
          label: f,
        }),
      ),
    },
  ],
];

export const WIDGET_HEIGHT = 6;

export function isSearchLine(line: SearchLine | AwsLine): line is SearchLine {
  return 'id' in line;
}

/**
 * The namespace of every SEARCH: a CloudFormation substitution that serverless.yml sets to the stage's namespace,
 * `EipLambdas/<stage>` (ADR 0080), so that one stage's dashboard shows only its own metrics.
 */
const NAMESPACE_REF = cfn('MetricsNamespace');

/** The SEARCH expression CloudWatch runs for a line. */
export function searchExpression(line: SearchLine, period: number): string {
  return `SEARCH('{${[NAMESPACE_REF, ...line.dimensions].join(',')}} MetricName="${line.metric}"', '${line.stat}', ${period})`;
}

/** The CloudWatch dashboard body (before CloudFormation substitutes ${AWS::Region} and the resource names). */
export function cloudWatchBody(): { widgets: unknown[] } {
  const widgets: unknown[] = [];
  DASHBOARD_ROWS.forEach((row, r) => {
    let x = 0;
    for (const w of row) {
      widgets.push({
        type: 'metric',
        x,
        y: r * WIDGET_HEIGHT,
        width: w.width,
        height: WIDGET_HEIGHT,
        properties: {
          title: w.title,
          region: cfn('AWS::Region'),
          view: 'timeSeries',
          stacked: false,
          period: w.period,
          metrics: w.lines.map((l) =>
            isSearchLine(l)
              ? [{ expression: searchExpression(l, w.period), id: l.id }]
              : [
                  l.namespace,
                  l.metric,
                  l.dimension,
                  l.value,
                  { stat: l.stat, label: l.label, ...(l.yAxis && { yAxis: l.yAxis }) },
                ],
          ),
        },
      });
      x += w.width;
    }
  });
  return { widgets };
}

const YAML_HEADER = `# The CloudWatch dashboard body (CloudFormation Fn::Sub string; \${AWS::Region}, \${DeadLetterQueue.QueueName} and
# \${<Fn>LambdaFunction} are substituted at deploy, and \${MetricsNamespace} with the stage's namespace
# EipLambdas/<stage> by serverless.yml: one dashboard per stage, showing only that stage's metrics, ADR 0080).
# GENERATED from local/dashboard/definition.ts, the one definition the local dashboard of
# \`npm start\` draws too: edit that file, then run \`npx tsx local/dashboard/generate-cloudwatch.ts\`
# (test/unit/dashboard-definition.test.ts fails when this file and the definition differ).
# It plots exactly the metrics the handlers emit (shared/observability/metrics.ts METRIC_NAMES);
# test/unit/observability.test.ts keeps the two in step. SEARCH expressions pick up every dimension value
# (handler, op, subnet, ...) without listing them here; test/unit/infra-alarms.test.ts checks each SEARCH's
# dimension set against the emitting code. The last rows: the bridge (shared/bridge/metrics.ts), the dead-letter
# queue, and the functions' errors, throttles and concurrency.
`;

/** The whole text of infra/dashboard.yml. */
export function dashboardYaml(): string {
  const json = JSON.stringify(cloudWatchBody(), null, 1);
  return `${YAML_HEADER}body: |\n${json
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n')}\n`;
}
