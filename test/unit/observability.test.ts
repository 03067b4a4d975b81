import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { BRIDGE_METRIC_NAMES } from '../../shared/bridge/metrics.js';
import { loadConfig } from '../../shared/config/config.js';
import { jsonLogger, levelFromEnv } from '../../shared/observability/log.js';
import { EmfMetrics, METRIC_NAMES, metricsNamespace } from '../../shared/observability/metrics.js';

const root = join(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('metrics', () => {
  it('the catalogue lists exactly the metric names the code emits', () => {
    const emitted = new Set<string>();
    for (const file of [...sources(join(root, 'shared')), ...sources(join(root, 'functions'))]) {
      for (const m of readFileSync(file, 'utf8').matchAll(/metrics\??\.(?:count|timing)\(\s*'([A-Za-z]+)'/g))
        emitted.add(m[1]!);
    }
    // The bridge's metrics have their own catalogue (shared/bridge/metrics.ts), checked in bridge-observability.
    const handlers = [...emitted].filter((n) => !(n in BRIDGE_METRIC_NAMES));
    expect(handlers.sort()).toEqual(Object.keys(METRIC_NAMES).sort());
  });

  it('the dashboard plots exactly the catalogue, in the namespace the code writes to', () => {
    const sls = readFileSync(join(root, 'serverless.yml'), 'utf8');
    expect(sls).toContain(['${file', '(infra/dashboard.yml):body}'].join(''));
    // serverless.yml gives the body's namespace the stage's, as the handlers of that stage write to (ADR 0080).
    const stage = (
      parse(sls.replace(/<<: \*\w+/g, '')) as {
        resources: {
          Resources?: {
            Dashboard?: { Properties: { DashboardBody: { 'Fn::Sub': [string, Record<string, string>] } } };
          };
        }[];
      }
    ).resources.find((r) => r.Resources?.Dashboard)!.Resources!.Dashboard!.Properties.DashboardBody[
      'Fn::Sub'
    ][1];
    expect(stage.MetricsNamespace!.replace(['${', 'sls:stage}'].join(''), 'prod')).toBe(
      metricsNamespace('prod'),
    );
    const body = JSON.parse(parse(readFileSync(join(root, 'infra/dashboard.yml'), 'utf8')).body) as {
      widgets: { properties: { metrics: { expression: string }[][] } }[];
    };
    const plotted = new Set<string>();
    // The bridge's and AWS's own metrics (last rows) are checked against their emitters in infra-alarms.test.ts.
    const others = /MetricName="(Bridge\w+|ForeignWriter)"/;
    for (const w of body.widgets)
      for (const [m] of w.properties.metrics) {
        if (typeof m !== 'object' || others.test(m.expression)) continue;
        const match = /SEARCH\('\{([^,]+),[^}]*\} MetricName="([A-Za-z]+)"'/.exec(m!.expression);
        expect(match, m!.expression).not.toBeNull();
        expect(match![1]).toBe(['${', 'MetricsNamespace}'].join(''));
        plotted.add(match![2]!);
      }
    expect([...plotted].sort()).toEqual(Object.keys(METRIC_NAMES).sort());
  });

  it('writes CloudWatch embedded metric format with the unit from the catalogue', () => {
    const lines: string[] = [];
    new EmfMetrics(
      'eip-lambdas-dev-add',
      (l) => lines.push(l),
      () => 1_700_000_000_000,
    ).timing('ExecDuration', 42, { op: 'eip-add' });
    expect(JSON.parse(lines[0]!)).toEqual({
      _aws: {
        Timestamp: 1_700_000_000_000,
        CloudWatchMetrics: [
          {
            Namespace: 'EipLambdas',
            Dimensions: [['service', 'op']],
            Metrics: [{ Name: 'ExecDuration', Unit: 'Milliseconds' }],
          },
        ],
      },
      service: 'eip-lambdas-dev-add',
      op: 'eip-add',
      ExecDuration: 42,
    });
  });

  it("writes a deployed stage's metrics to that stage's namespace (ADR 0080)", () => {
    const lines: string[] = [];
    const config = loadConfig({
      KUBECONFIG: '/k',
      TABLE_NAME: 't-ipam',
      AWS_REGION: 'eu-west-1',
      STAGE: 'prod',
    });
    expect(config.metricsNamespace).toBe(metricsNamespace('prod'));
    expect(metricsNamespace('prod')).toBe('EipLambdas/prod');
    new EmfMetrics('eip-lambdas-prod-add', (l) => lines.push(l), Date.now, config.metricsNamespace).count(
      'Outcomes',
    );
    expect(JSON.parse(lines[0]!)._aws.CloudWatchMetrics[0].Namespace).toBe('EipLambdas/prod');
    expect(() =>
      loadConfig({ KUBECONFIG: '/k', TABLE_NAME: 't-ipam', AWS_REGION: 'eu-west-1', STAGE: 'a b' }),
    ).toThrow(/STAGE "a b" is not a stage name/);
  });
});

describe('logs', () => {
  it('are one JSON object per line, carrying the child logger fields, filtered by level', () => {
    const lines: string[] = [];
    const log = jsonLogger({ level: 'info', write: (l) => lines.push(l), now: () => 0 }).child({
      eventId: 'e1',
      eip: 'a',
    });
    log.debug('hidden');
    log.info('outcome', { status: 'applied' });
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      {
        time: '1970-01-01T00:00:00.000Z',
        level: 'info',
        message: 'outcome',
        eventId: 'e1',
        eip: 'a',
        status: 'applied',
      },
    ]);
  });

  it('carry the X-Ray trace id of the invocation, read at each line', () => {
    const lines: string[] = [];
    const env: NodeJS.ProcessEnv = {};
    const log = jsonLogger({ write: (l) => lines.push(l), now: () => 0, env });
    log.info('before');
    env._X_AMZN_TRACE_ID = 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1';
    log.child({ eip: 'a' }).info('during');
    expect(lines.map((l) => JSON.parse(l).xrayTraceId)).toEqual([
      undefined,
      '1-5759e988-bd862e3fe1be46a994272793',
    ]);
  });

  it("take their level from AWS_LAMBDA_LOG_LEVEL when the function's logging configuration sets one", () => {
    expect(levelFromEnv('debug')).toBe('debug');
    expect(levelFromEnv('debug', 'WARN')).toBe('warn');
    expect(levelFromEnv(undefined, 'TRACE')).toBe('debug');
    expect(levelFromEnv('info', 'FATAL')).toBe('error');
    expect(levelFromEnv('nonsense')).toBe('info');
  });
});
