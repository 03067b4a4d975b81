// biome-ignore-all lint/suspicious/noTemplateCurlyInString: CloudFormation Fn::Sub references, not templates
/**
 * Alarms and dashboard against what the code really emits. CloudWatch matches a metric by namespace, name and the
 * exact set of dimension names: an alarm (or a SEARCH) with one dimension more or less than the emitter watches a
 * metric that never gets a data point. The emitters are found in the source (shared/, functions/): every
 * `.count('Name', value, { dims })` and `.timing(...)` call, parsed with the TypeScript compiler, plus the `service`
 * dimension both the handlers' EMF writer and the bridge's publisher add to every point.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { BRIDGE_METRICS_NAMESPACE, BRIDGE_SERVICE } from '../../shared/bridge/metrics.js';
import { METRICS_NAMESPACE } from '../../shared/observability/metrics.js';

const root = join(import.meta.dirname, '../..');
// biome-ignore lint/suspicious/noExplicitAny: CloudFormation and dashboard JSON are dynamic
type Any = any;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
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
          dims = dimsArg.properties.map((p) => {
            if (
              (ts.isPropertyAssignment(p) || ts.isShorthandPropertyAssignment(p)) &&
              ts.isIdentifier(p.name)
            )
              return p.name.text;
            throw new Error(`${file}: a dimension of ${name} has no plain name`);
          });
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
const alarms = Object.entries(
  parse(readFileSync(join(root, 'infra/alarms.yml'), 'utf8')).Resources as Any,
).filter(([, r]: Any) => r.Type === 'AWS::CloudWatch::Alarm') as [string, Any][];
const sls = readFileSync(join(root, 'serverless.yml'), 'utf8');
const functions = Object.keys(parse(sls.replace(/<<: \*\w+/g, '')).functions as Any);
const dashboard = JSON.parse(parse(readFileSync(join(root, 'infra/dashboard.yml'), 'utf8')).body) as {
  widgets: { properties: { title: string; metrics: Any[][] } }[];
};

/** `SELECT SUM(M) FROM SCHEMA("NS", a, b)` or `SEARCH('{NS,a,b} MetricName="M"', …)` → namespace, name, dims. */
function query(expression: string): { namespace: string; name: string; dims: string } {
  const select = /^SELECT \w+\((\w+)\) FROM SCHEMA\("([^"]+)"((?:, *\w+)*)\)$/.exec(expression);
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

function expectEmitted(where: string, namespace: string, name: string, dims: string): void {
  expect([METRICS_NAMESPACE, BRIDGE_METRICS_NAMESPACE], where).toContain(namespace);
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
      if (p.Namespace === METRICS_NAMESPACE) {
        const dims = (p.Dimensions as { Name: string; Value: string }[]).map((d) => d.Name).sort();
        expectEmitted(id, p.Namespace, p.MetricName, dims.join(','));
        const service = p.Dimensions.find((d: Any) => d.Name === 'service').Value;
        if (p.MetricName.startsWith('Bridge')) expect(service, id).toBe(BRIDGE_SERVICE);
        checked++;
      } else if (p.Metrics) {
        for (const m of p.Metrics as Any[]) {
          const q = query(m.Expression);
          expectEmitted(id, q.namespace, q.name, q.dims);
          checked++;
        }
      } else {
        expect(['AWS/Lambda', 'AWS/SQS'], id).toContain(p.Namespace);
      }
    }
    expect(checked).toBeGreaterThanOrEqual(3); // exhaustion, bridge heartbeat, bridge delivery
  });

  it('cover IPAM exhaustion over every subnet, whatever dimensions it carries', () => {
    const [, a] = alarms.find(([, x]) => JSON.stringify(x).includes('IpamExhausted'))!;
    const q = query(a.Properties.Metrics[0].Expression);
    expect(q.name).toBe('IpamExhausted');
    expect([...emitted.get('IpamExhausted')!.keys()]).toEqual([q.dims]); // one emitter, the dims the query sums over
  });

  it('cover errors and throttles of every function, the dead-letter queue, gc failures and the bridge heartbeat', () => {
    const on = (ns: string, metric: string) =>
      alarms.filter(([, a]) => a.Properties.Namespace === ns && a.Properties.MetricName === metric);
    const functionsOf = (list: [string, Any][]) =>
      list
        .map(([, a]) => a.Properties.Dimensions[0].Value.Ref.replace(/LambdaFunction$/, '').toLowerCase())
        .sort();
    expect(functionsOf(on('AWS/Lambda', 'Errors'))).toEqual([...functions].sort());
    expect(functionsOf(on('AWS/Lambda', 'Throttles'))).toEqual([...functions].sort());
    expect(
      on('AWS/SQS', 'ApproximateNumberOfMessagesVisible').map(([, a]) => a.Properties.Dimensions),
    ).toEqual([[{ Name: 'QueueName', Value: { 'Fn::GetAtt': ['DeadLetterQueue', 'QueueName'] } }]]);
    // gc: its errors (a failed run) and its absence (no run for two hours).
    expect(on('AWS/Lambda', 'Invocations').map(([id]) => id)).toEqual(['GcNotRunningAlarm']);
    const [[, heartbeat]] = on(METRICS_NAMESPACE, 'BridgeHeartbeat') as [[string, Any]];
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
