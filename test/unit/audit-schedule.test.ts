/**
 * The maintenance schedule (ADR 0088) on the in-memory world and the manual clock: its parameters and what they cost
 * a month, the scheduled invocation's passes `period` apart (collection only in its minute), and drift of every kind
 * repaired within one pass — a foreign address on the second consecutive pass that sees it, with the default grace.
 */
import { describe, expect, it } from 'vitest';
import { MemoryAuditStore } from '../../local/memory/audit-store.js';
import { memoryInspector } from '../../local/memory/inspect.js';
import { KUBE_OVN_RELEASES } from '../../local/natgw/releases.js';
import { type AuditDeps, DEFAULT_ORPHAN_GRACE_MS, repairDrift, runAudit } from '../../shared/audit/audit.js';
import { scheduledMaintenance } from '../../shared/audit/live.js';
import { collectsAt, DEFAULT_SCHEDULE, monthlyCost } from '../../shared/audit/schedule.js';
import { loadConfig } from '../../shared/config/config.js';
import { DIALECTS, inspectionExecs, lineOfMinor } from '../../shared/domain/dialect/index.js';
import { DEFAULT_EXTERNAL_SUBNET, Label } from '../../shared/domain/kube-ovn.js';
import type { GatewayInspector } from '../../shared/ports.js';
import { type World, world } from '../support/world.js';

function setup(): { w: World; deps: AuditDeps } {
  const w = world();
  w.qos('q', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '1' }]);
  const deps: AuditDeps = {
    ...w.deps,
    inspector: memoryInspector(w.gateway),
    store: new MemoryAuditStore(w.ipam, w.leases),
  };
  return { w, deps };
}
const exec = (w: World, ...argv: string[]) => {
  const r = w.gateway.sim(w.pod()).exec(argv);
  if (r.exitCode !== 0) throw new Error(r.stderr);
};
const ENV = { KUBECONFIG: '/tmp/kc', TABLE_NAME: 'eip-ipam', AWS_REGION: 'eu-west-1' };
const maintenanceSchedule = (env: Record<string, string>) => loadConfig({ ...ENV, ...env }).maintenance;
const onNet1 = (w: World, addr: string) => w.net1().some((a) => a.startsWith(`${addr}/`));

describe('the maintenance schedule', () => {
  it('defaults to a pass every 30 s (two per scheduled minute) and collection every hour', () => {
    const s = maintenanceSchedule({});
    expect(s).toEqual({ driftPeriodMs: 30_000, passesPerMinute: 2, gcEveryMinutes: 60 });
    expect(DEFAULT_SCHEDULE).toEqual(s);
    // 730 hours a month: 43,800 invocations, 87,600 passes, 730 collections; per gateway 3 execs a pass on
    // 1.12–1.14 (262,800 a month, 6 a minute), 4 on 1.15, at most 8 on 1.16+ (700,800, 16 a minute).
    expect(monthlyCost(s)).toEqual({
      invocations: 43_800,
      passes: 87_600,
      collections: 730,
      execsPerGateway: {
        '1.12': 262_800,
        '1.13': 262_800,
        '1.15': 350_400,
        '1.16': 700_800,
        master: 700_800,
      },
    });
    expect(maintenanceSchedule({ DRIFT_PERIOD_SECONDS: '60', GC_EVERY_MINUTES: '10' })).toEqual({
      driftPeriodMs: 60_000,
      passesPerMinute: 1,
      gcEveryMinutes: 10,
    });
  });

  it('refuses a period that does not divide the minute, and a collection interval out of range', () => {
    expect(() => maintenanceSchedule({ DRIFT_PERIOD_SECONDS: '45' })).toThrow(
      /DRIFT_PERIOD_SECONDS must be one of/,
    );
    expect(() => maintenanceSchedule({ GC_EVERY_MINUTES: '0' })).toThrow(
      /GC_EVERY_MINUTES must be an integer/,
    );
  });

  it.each(KUBE_OVN_RELEASES)('a pass reads a %s gateway with the execs the cost counts', async (release) => {
    const w = world({ release });
    // From 1.13 the world's pod has its own net1 address, as kube-ovn gives it (not an orphan).
    if (release !== '1.12') w.pod().addresses = { [DEFAULT_EXTERNAL_SUBNET]: '172.18.0.254' };
    const reads: string[][] = [];
    const inner = memoryInspector(w.gateway);
    const inspector: GatewayInspector = {
      read: (pod, argv, signal) => {
        reads.push([...argv]);
        return inner.read(pod, argv, signal);
      },
    };
    const deps: AuditDeps = { ...w.deps, inspector, store: new MemoryAuditStore(w.ipam, w.leases) };
    w.eip('a');
    await w.run('add', 'a', 'added');
    await runAudit(deps); // the first read of a pod may read its state once to tell its release (cached per pod)
    reads.length = 0;
    expect((await runAudit(deps)).drift).toEqual([]);
    const line = release === 'master' ? 'master' : lineOfMinor(Number(release.split('.')[1]))!;
    const { min, max } = inspectionExecs(DIALECTS[line]);
    expect(reads.length).toBeGreaterThanOrEqual(min);
    expect(reads.length).toBeLessThanOrEqual(max);
  });

  it('collects in the invocation of every n-th minute only', () => {
    const hour = Date.parse('2026-12-01T10:00:00Z');
    expect(collectsAt(hour, 60)).toBe(true);
    expect(collectsAt(hour + 60_000, 60)).toBe(false);
    expect(collectsAt(hour + 10 * 60_000, 10)).toBe(true);
  });

  it('one scheduled invocation: collection when asked, then its passes period apart on the clock', async () => {
    const { w, deps } = setup();
    w.eip('a');
    await w.run('add', 'a', 'added');
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
      w.clock.advance(ms);
    };
    const run = await scheduledMaintenance(w.deps, () => deps, {
      collect: true,
      passes: 2,
      periodMs: 30_000,
      sleep,
    });
    expect(run).toMatchObject({ passes: 2, drift: 0, repaired: 0, failures: [] });
    expect(run.gc).toMatchObject({ orphans: 0, released: 0 });
    expect(waits).toEqual([30_000]);
    const quiet = await scheduledMaintenance(w.deps, () => deps, {
      collect: false,
      passes: 1,
      periodMs: 30_000,
    });
    expect(quiet.gc).toBeUndefined();
  });
});

describe('drift repaired by the next pass', () => {
  it('every kind of hand edit on a gateway or an EIP is repaired by one pass; a foreign address by the second', async () => {
    const { w, deps } = setup();
    for (const [n, spec] of [
      ['gone', {}],
      ['unpoliced', { qosPolicy: 'q' }],
      ['relabelled', {}],
      ['restated', {}],
      ['policed', {}],
    ] as const) {
      w.eip(n, spec);
      expect(await w.run('add', n, 'added')).toMatchObject({ status: 'applied' });
    }
    const ip = (n: string) => w.get(n)!.status!.ip!;
    expect((await runAudit(deps)).drift).toEqual([]);
    exec(w, 'ip', 'addr', 'del', `${ip('gone')}/24`, 'dev', 'net1');
    exec(w, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-ingress-qos-del', ip('unpoliced'));
    const r = w.get('relabelled')!;
    w.cluster.putEip({
      ...r,
      metadata: { ...r.metadata, labels: { ...r.metadata.labels, [Label.natGwName]: 'elsewhere' } },
    });
    await w.cluster.patchEipStatus('restated', { ip: '172.18.0.123' });
    exec(w, 'ip', 'addr', 'add', '172.18.0.99/24', 'dev', 'net1');
    exec(w, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-egress-qos-add', `${ip('policed')},1,5,5`);

    const first = await repairDrift(deps, await runAudit(deps));
    expect(first.map((a) => [a.kind, a.target.split(' ')[0], a.result]).sort()).toEqual([
      ['label-mismatch', 'relabelled', 'done'],
      ['missing-address', 'gone', 'done'],
      ['orphan-address', '172.18.0.99/24', 'waiting'],
      ['qos-drift', ip('policed'), 'done'],
      ['qos-drift', 'unpoliced', 'done'],
      ['status-mismatch', 'restated', 'done'],
    ]);
    expect(onNet1(w, ip('gone'))).toBe(true);
    expect(w.tc().some((f) => f.ip === ip('unpoliced') && f.direction === 'ingress')).toBe(true);
    expect(w.get('relabelled')!.metadata.labels?.[Label.natGwName]).toBe('gw1');
    expect(w.get('restated')!.status?.ip).not.toBe('172.18.0.123');
    expect(w.tc().filter((f) => f.ip === ip('policed'))).toEqual([]);

    // A pass 10 s later: too soon; the next one, 30 s after the first sighting, removes it.
    w.clock.advance(10_000);
    expect((await repairDrift(deps, await runAudit(deps)))[0]).toMatchObject({ result: 'waiting' });
    w.clock.advance(30_000 - 10_000);
    expect(DEFAULT_ORPHAN_GRACE_MS).toBeLessThanOrEqual(30_000);
    expect((await repairDrift(deps, await runAudit(deps)))[0]).toMatchObject({
      kind: 'orphan-address',
      result: 'done',
    });
    expect(onNet1(w, '172.18.0.99')).toBe(false);
    expect((await runAudit(deps)).drift).toEqual([]);
  });
});
