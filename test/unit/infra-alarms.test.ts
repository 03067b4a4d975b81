// biome-ignore-all lint/suspicious/noTemplateCurlyInString: CloudFormation Fn::Sub references, not templates
/**
 * Alarms and dashboard against what the code really emits. CloudWatch matches a metric by namespace, name and the
 * exact set of dimension names: an alarm (or a SEARCH) with one dimension more or less than the emitter watches a
 * metric that never gets a data point. The emitters are found in the source (shared/, functions/): every
 * `.count('Name', value, { dims })` and `.timing(...)` call, parsed with the TypeScript compiler, plus the `service`
 * dimension both the handlers' EMF writer and the bridge's publisher add to every point. The namespace is the
 * stage's (ADR 0080): infra/alarms.yml is read for a stage the way osls resolves it, and compared with the namespace
 * the code derives from that stage; infra-template.test.ts checks the packaged stacks of two stages end to end.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadBridgeConfig } from '../../shared/bridge/config.js';
import { BRIDGE_SERVICE } from '../../shared/bridge/metrics.js';
import { loadConfig } from '../../shared/config/config.js';
import { METRICS_NAMESPACE, metricsNamespace } from '../../shared/observability/metrics.js';

const root = join(import.meta.dirname, '../..');
// biome-ignore lint/suspicious/noExplicitAny: CloudFormation and dashboard JSON are dynamic
type Any = any;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** `metric|dimension` → the literal values it is emitted with (`{ status: 'retry' }`). */
const literalValues = new Map<string, Set<string>>();

/** A dimension's name in an emitter's object literal; a literal value is recorded in `literalValues`. */
function dimensionName(p: ts.ObjectLiteralElementLike, metric: string, file: string): string {
  const plain =
    (ts.isPropertyAssignment(p) || ts.isShorthandPropertyAssignment(p)) && ts.isIdentifier(p.name);
  if (!plain) throw new Error(`${file}: a dimension of ${metric} has no plain name`);
  const name = (p.name as ts.Identifier).text;
  if (ts.isPropertyAssignment(p) && ts.isStringLiteral(p.initializer)) {
    const k = `${metric}|${name}`;
    literalValues.set(k, (literalValues.get(k) ?? new Set()).add(p.initializer.text));
  }
  return name;
}

/** metric name → the dimension-name sets it is emitted with (sorted, comma-joined), and where. */
function emitters(): Map<string, Map<string, string[]>> {
  const out = new Map<string, Map<string, string[]>>();
  for (const file of [...sources(join(root, 'shared')), ...sources(join(root, 'functions'))]) {
    const text = readFileSync(file, 'utf8');
    if (!/\.(count|timing)\(/.test(text)) continue;
    const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
    const visit = (n: ts.Node) => {
      if (
        ts.isCallExpression(n) &&
        ts.isPropertyAccessExpression(n.expression) &&
        ['count', 'timing'].includes(n.expression.name.text) &&
        /metrics/i.test(n.expression.expression.getText(sf)) &&
        n.arguments[0] &&
        ts.isStringLiteral(n.arguments[0])
      ) {
        const name = n.arguments[0].text;
        const dimsArg = n.arguments[2];
        let dims: string[] = [];
        if (dimsArg) {
          if (!ts.isObjectLiteralExpression(dimsArg))
            throw new Error(`${file}: dimensions of ${name} are not an object literal; list them inline`);
          dims = dimsArg.properties.map((p) => dimensionName(p, name, file));
        }
        const key = ['service', ...dims].sort().join(',');
        const byDims = out.get(name) ?? new Map<string, string[]>();
        byDims.set(key, [...(byDims.get(key) ?? []), file.slice(root.length + 1)]);
        out.set(name, byDims);
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return out;
}

const emitted = emitters();
const STAGE = 'prod';
/** infra/alarms.yml for one stage: `${sls:stage}` resolved as osls resolves it. */
const alarmsOf = (stage: string) =>
  Object.entries(
    parse(readFileSync(join(root, 'infra/alarms.yml'), 'utf8').replaceAll('${sls:stage}', stage))
      .Resources as Any,
  ).filter(([, r]: Any) => r.Type === 'AWS::CloudWatch::Alarm') as [string, Any][];
const alarms = alarmsOf(STAGE);
/** Where the code of that stage publishes: the handlers' EMF (config.ts) and the bridge (bridge/config.ts). */
const NAMESPACE = loadConfig({
  KUBECONFIG: '/k',
  TABLE_NAME: 't-ipam',
  AWS_REGION: 'eu-west-1',
  STAGE,
}).metricsNamespace;
const sls = readFileSync(join(root, 'serverless.yml'), 'utf8');
const functions = Object.keys(parse(sls.replace(/<<: \*\w+/g, '')).functions as Any);
/** infra/dashboard.yml with its namespace substituted as serverless.yml has CloudFormation do it for a stage. */
const dashboard = JSON.parse(
  parse(readFileSync(join(root, 'infra/dashboard.yml'), 'utf8')).body.replaceAll(
    ['${', 'MetricsNamespace}'].join(''),
    /MetricsNamespace: '([^']+)'/.exec(sls)![1]!.replace(['${', 'sls:stage}'].join(''), STAGE),
  ),
) as {
  widgets: { properties: { title: string; metrics: Any[][] } }[];
};

/**
 * `SELECT SUM(M) FROM SCHEMA("NS", a, b) [WHERE d = 'v']` or `SEARCH('{NS,a,b} MetricName="M"', …)` → namespace,
 * name, dims (and the WHERE's dimension and value).
 */
function query(expression: string): {
  namespace: string;
  name: string;
  dims: string;
  where?: [string, string];
} {
  const select =
    /^SELECT \w+\((\w+)\) FROM SCHEMA\("([^"]+)"((?:, *\w+)*)\)(?: WHERE (\w+) = '([^']*)')?$/.exec(
      expression,
    );
  if (select)
    return {
      name: select[1]!,
      namespace: select[2]!,
      dims: select[3]!
        .split(',')
        .map((d) => d.trim())
        .filter(Boolean)
        .sort()
        .join(','),
      ...(select[4] && { where: [select[4], select[5]!] as [string, string] }),
    };
  const search = /^SEARCH\('\{([^,}]+),([^}]*)\} MetricName="(\w+)"'/.exec(expression);
  if (search)
    return {
      namespace: search[1]!,
      name: search[3]!,
      dims: search[2]!
        .split(',')
        .map((d) => d.trim())
        .sort()
        .join(','),
    };
  throw new Error(`unrecognised metric query: ${expression}`);
}

function expectEmitted(where: string, namespace: string, name: string, dims: string, ns = NAMESPACE): void {
  expect(namespace, where).toBe(ns);
  const sets = emitted.get(name);
  expect(sets, `${where}: no code emits ${name}`).toBeDefined();
  expect([...sets!.keys()], `${where}: ${name} is emitted with other dimensions`).toContain(dims);
}

describe('alarms (infra/alarms.yml)', () => {
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
  it('watch only metrics the code emits, with their exact dimension sets', () => {
    let checked = 0;
    for (const [id, a] of alarms) {
      const p = a.Properties;
      if (p.Namespace?.startsWith(METRICS_NAMESPACE)) {
        const dims = (p.Dimensions as { Name: string; Value: string }[]).map((d) => d.Name).sort();
        expectEmitted(id, p.Namespace, p.MetricName, dims.join(','));
        const service = p.Dimensions.find((d: Any) => d.Name === 'service').Value;
        if (p.MetricName.startsWith('Bridge')) expect(service, id).toBe(BRIDGE_SERVICE);
        checked++;
      } else if (p.Metrics) {
        for (const m of p.Metrics as Any[]) {
          const q = query(m.Expression);
          expectEmitted(id, q.namespace, q.name, q.dims);
          // A WHERE on a dimension value the code never writes would match nothing.
          if (q.where)
            expect([...(literalValues.get(`${q.name}|${q.where[0]}`) ?? [])], id).toContain(q.where[1]);
          checked++;
        }
      } else {
        expect(['AWS/Lambda', 'AWS/SQS'], id).toContain(p.Namespace);
      }
    }
    expect(checked).toBeGreaterThanOrEqual(4); // exhaustion, handler failures, bridge heartbeat, bridge delivery
  });

  it("of every stage look in that stage's namespace, where its handlers and its bridge publish", () => {
    expect(NAMESPACE).toBe(metricsNamespace(STAGE));
    const bridge = loadBridgeConfig({
      KUBERNETES_SERVICE_HOST: '10.0.0.1',
      STAGE,
      AWS_REGION: 'eu-west-1',
      AWS_CONFIG_FILE: '/nonexistent',
    });
    expect(bridge.metricsNamespace).toBe(NAMESPACE);
    for (const stage of ['dev', 'prod']) {
      const namespaces = alarmsOf(stage).flatMap(([, a]) =>
        a.Properties.Metrics
          ? (a.Properties.Metrics as Any[]).map((m) => query(m.Expression).namespace)
          : [a.Properties.Namespace as string],
      );
      const own = namespaces.filter((n) => !n.startsWith('AWS/'));
      expect(own.length).toBeGreaterThanOrEqual(4);
      expect(new Set(own), stage).toEqual(new Set([metricsNamespace(stage)]));
    }
  });

  it('cover IPAM exhaustion over every subnet, whatever dimensions it carries', () => {
    const [, a] = alarms.find(([, x]) => JSON.stringify(x).includes('IpamExhausted'))!;
    const q = query(a.Properties.Metrics[0].Expression);
    expect(q.name).toBe('IpamExhausted');
    expect([...emitted.get('IpamExhausted')!.keys()]).toEqual([q.dims]); // one emitter, the dims the query sums over
  });

  it('alarm on events that fail for good and on failures that persist, never on one ordinary retry', () => {
    const on = (ns: string, metric: string) =>
      alarms.filter(([, a]) => a.Properties.Namespace === ns && a.Properties.MetricName === metric);
    const dlq = [{ Name: 'QueueName', Value: { 'Fn::GetAtt': ['DeadLetterQueue', 'QueueName'] } }];
    // Dead letters: the queue's depth (something to look at) and its arrivals (new failures after every retry).
    expect(
      on('AWS/SQS', 'ApproximateNumberOfMessagesVisible').map(([, a]) => a.Properties.Dimensions),
    ).toEqual([dlq]);
    const [[, arrivals]] = on('AWS/SQS', 'NumberOfMessagesSent') as [[string, Any]];
    expect(arrivals.Properties).toMatchObject({ Dimensions: dlq, Statistic: 'Sum', Threshold: 0 });
    // No handler alarm on AWS/Lambda Errors or Throttles: both count attempts that Lambda retries. Only gc, which
    // is never retried, alarms on its Errors (a failed run), and on its absence.
    const lambdaAlarms = alarms.filter(([, a]) => a.Properties.Namespace === 'AWS/Lambda');
    expect(
      lambdaAlarms.map(([, a]) => [a.Properties.MetricName, a.Properties.Dimensions[0].Value.Ref]).sort(),
    ).toEqual([
      ['Errors', 'GcLambdaFunction'],
      ['Invocations', 'GcLambdaFunction'],
    ]);
    expect(parse(sls.replace(/<<: \*\w+/g, '')).functions.gc.maximumRetryAttempts).toBe(0);
    // Persistent handler failures, from the handlers' own count of failed attempts, over three periods in a row.
    const [, failures] = alarms.find(([id]) => id === 'HandlerFailuresAlarm')!;
    expect(query(failures.Properties.Metrics[0].Expression)).toMatchObject({
      name: 'Outcomes',
      where: ['status', 'retry'],
    });
    expect(failures.Properties).toMatchObject({ EvaluationPeriods: 3, DatapointsToAlarm: 3 });
    expect(failures.Properties.Threshold).toBeGreaterThan(1);
    const [[, heartbeat]] = on(NAMESPACE, 'BridgeHeartbeat') as [[string, Any]];
    expect(heartbeat.Properties).toMatchObject({
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
    });
  });
});

describe('dashboard (infra/dashboard.yml)', () => {
  const entries = dashboard.widgets.flatMap((w) =>
    w.properties.metrics.map((m) => ({ title: w.properties.title, m })),
  );

  it('searches only metrics the code emits, with their exact dimension sets', () => {
    const searched = entries.filter((e) => typeof e.m[0] === 'object' && e.m[0].expression);
    expect(searched.length).toBeGreaterThan(10);
    for (const { title, m } of searched) {
      const q = query(m[0].expression);
      expectEmitted(`widget "${title}"`, q.namespace, q.name, q.dims);
    }
  });

  it('has widgets for the bridge (every metric it publishes) and for the dead-letter queue', () => {
    const searchedNames = entries
      .filter((e) => typeof e.m[0] === 'object')
      .map((e) => query(e.m[0].expression).name);
    for (const name of ['BridgeHeartbeat', 'BridgeEventsFailed', 'BridgeQueueDepth', 'ForeignWriter'])
      expect(searchedNames).toContain(name);
    const dlq = entries.filter((e) => e.m[0] === 'AWS/SQS');
    expect(dlq.map((e) => e.m.slice(0, 4))).toContainEqual([
      'AWS/SQS',
      'ApproximateNumberOfMessagesVisible',
      'QueueName',
      '${DeadLetterQueue.QueueName}',
    ]);
    const lambda = entries.filter((e) => e.m[0] === 'AWS/Lambda' && e.m[1] === 'Errors').map((e) => e.m[3]);
    expect(lambda.sort()).toEqual(
      functions.map((f) => `\${${f[0]!.toUpperCase()}${f.slice(1)}LambdaFunction}`).sort(),
    );
  });
});
