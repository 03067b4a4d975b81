/**
 * One definition drives both dashboards: infra/dashboard.yml (the CloudWatch body) is generated from
 * local/dashboard/definition.ts, and the local dashboard evaluates the same widgets over the
 * metric points the local stack records (local/dashboard/recorder.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { cloudWatchBody, DASHBOARD_ROWS, dashboardYaml } from '../../local/dashboard/definition.js';
import { localWidgets, MetricRecorder, matches, statOf } from '../../local/dashboard/recorder.js';

const root = join(import.meta.dirname, '../..');
const file = readFileSync(join(root, 'infra/dashboard.yml'), 'utf8');

interface CwWidget {
  properties: { title: string; period: number; metrics: unknown[][] };
}

describe('the dashboard definition', () => {
  it('infra/dashboard.yml is exactly what the definition generates', () => {
    expect(file).toBe(dashboardYaml());
    expect(JSON.parse(parse(file).body)).toEqual(cloudWatchBody());
  });

  it('the local dashboard has the CloudWatch widgets, in order, with the same SEARCH expressions', () => {
    const cw = (JSON.parse(parse(file).body) as { widgets: CwWidget[] }).widgets;
    const local = localWidgets([], Date.UTC(2026, 0, 1));
    expect(local.map((w) => w.title)).toEqual(cw.map((w) => w.properties.title));
    local.forEach((w, i) => {
      const cwWidget = cw[i]!.properties;
      expect(w.period).toBe(cwWidget.period);
      const searches = cwWidget.metrics
        .map((m) => m[0])
        .filter((m): m is { expression: string; id: string } => typeof m === 'object' && m !== null)
        .map((m) => [m.id, m.expression]);
      expect(w.lines.map((l) => [l.id, l.expression])).toEqual(searches);
      // A widget without any SEARCH (AWS-owned metrics) says what it shows locally instead.
      if (searches.length === 0) expect(w.local).toBeDefined();
    });
  });

  it('lays widgets out in rows of at most 24 columns', () => {
    for (const row of DASHBOARD_ROWS) expect(row.reduce((n, w) => n + w.width, 0)).toBeLessThanOrEqual(24);
  });
});

describe('local evaluation of the widgets', () => {
  const t0 = Date.UTC(2026, 0, 1, 12, 0, 0);

  it('matches a point by name and exact dimension set, as CloudWatch SEARCH does', () => {
    const line = {
      id: 'x',
      metric: 'Outcomes',
      dimensions: ['service', 'handler', 'status'],
      stat: 'Sum' as const,
    };
    const p = (dimensions: Record<string, string>) => ({ t: t0, name: 'Outcomes', dimensions, value: 1 });
    expect(matches(line, p({ service: 's', handler: 'add', status: 'applied' }))).toBe(true);
    expect(matches(line, p({ service: 's', handler: 'add' }))).toBe(false);
    expect(matches(line, p({ service: 's', handler: 'add', status: 'applied', extra: 'x' }))).toBe(false);
    expect(matches(line, { ...p({ service: 's', handler: 'add', status: 'applied' }), name: 'Other' })).toBe(
      false,
    );
  });

  it('computes Sum, Maximum and p99 per period', () => {
    expect(statOf('Sum', [1, 2, 3])).toBe(6);
    expect(statOf('Maximum', [4, 9, 2])).toBe(9);
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(statOf('p99', hundred)).toBe(99);
    expect(statOf('p99', [5])).toBe(5);
  });

  it('aggregates recorded points into per-period series with the emitter service as a dimension', () => {
    let now = t0;
    const rec = new MetricRecorder(() => now);
    const handlers = rec.forService('eip-lambdas');
    handlers.count('Outcomes', 1, { handler: 'add', status: 'applied' });
    handlers.count('Outcomes', 1, { handler: 'add', status: 'applied' });
    now += 10_000;
    handlers.count('Outcomes', 1, { handler: 'add', status: 'applied' });
    handlers.count('Outcomes', 1, { handler: 'delete', status: 'applied' });
    handlers.timing('HandlerDuration', 30, { handler: 'add' });
    handlers.timing('HandlerDuration', 70, { handler: 'add' });
    rec.forService('eip-bridge').count('BridgeQueueDepth', 4);
    rec.forService('eip-bridge').count('BridgeQueueDepth', 2);
    const widgets = localWidgets(rec.all(), now);
    const byTitle = (t: string) => widgets.find((w) => w.title === t)!;

    const outcomes = byTitle('Handler outcomes (count)').lines[0]!.series;
    expect(outcomes.map((s) => [s.label, s.total])).toEqual([
      ['Outcomes service=eip-lambdas handler=add status=applied', 3],
      ['Outcomes service=eip-lambdas handler=delete status=applied', 1],
    ]);
    const add = outcomes[0]!.values;
    expect(add.slice(-2)).toEqual([2, 1]);
    expect(add.filter((v) => v !== null)).toHaveLength(2);

    const duration = byTitle('Handler duration (p99 ms)').lines[0]!.series[0]!;
    expect(duration.total).toBe(70);
    const depth = byTitle('Bridge: queue depth, foreign writers of EIPs').lines[0]!.series[0]!;
    expect(depth.label).toBe('BridgeQueueDepth service=eip-bridge');
    expect(depth.total).toBe(4);
  });

  it("keeps each metric's points for its charts' window only (5 min at a 300 s period, 1 h for drift)", () => {
    let now = t0;
    const rec = new MetricRecorder(() => now);
    rec.forService('s').count('Releases');
    rec.forService('s').count('DriftFound', 1, { kind: 'orphan-address' });
    now += 6 * 60_000;
    rec.forService('s').count('Releases');
    rec.prune();
    expect(
      rec
        .all()
        .map((p) => p.name)
        .sort(),
    ).toEqual(['DriftFound', 'Releases']);
    now += 3600_000;
    rec.prune();
    expect(rec.all()).toHaveLength(0);
  });

  it('prunes by itself while recording, without anyone reading', () => {
    let now = t0;
    const rec = new MetricRecorder(() => now);
    for (let i = 0; i < 5_000; i++) {
      now += 1_000;
      rec.forService('s').count('Releases');
    }
    // 5 min window at one point a second: about 300 kept, never the 5,000 recorded.
    expect(rec.all().length).toBeLessThanOrEqual(300 + 1_000);
    expect(rec.all().length).toBeGreaterThanOrEqual(300);
  });
});
