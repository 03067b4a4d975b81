/**
 * Audit and repair on the in-memory world (the simulated gateway behind MemoryGateway, the in-memory IPAM and
 * leases), on the manual test clock: what each repair does, the orphan grace period as time passes, what happens when
 * the gateway refuses, and the periodic runner. The same flows on the real adapters: test/integration/audit.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { MemoryAuditStore } from '../../local/memory/audit-store.js';
import { memoryInspector } from '../../local/memory/inspect.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { type AuditDeps, repairDrift, runAudit } from '../../shared/audit/audit.js';
import { auditAndRepair, startDriftRepair } from '../../shared/audit/live.js';
import { type World, world } from '../support/world.js';

const MIN = 60_000;

function setup(): { w: World; deps: AuditDeps; ip: Record<string, string> } {
  const w = world();
  w.qos('q', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '1' }], {
    shared: true,
  });
  w.eip('a', { qosPolicy: 'q' });
  w.eip('b');
  const deps: AuditDeps = {
    ...w.deps,
    inspector: memoryInspector(w.gateway),
    store: new MemoryAuditStore(w.ipam, w.leases),
  };
  return { w, deps, ip: {} };
}

async function ready(w: World, ip: Record<string, string>): Promise<void> {
  for (const n of ['a', 'b']) {
    const o = await w.run('add', n, 'added');
    if (o.status !== 'applied') throw new Error(`add ${n}: ${JSON.stringify(o)}`);
    ip[n] = o.ip!;
  }
}

const exec = (w: World, ...argv: string[]) => {
  const r = w.gateway.sim(w.pod()).exec(argv);
  if (r.exitCode !== 0) throw new Error(r.stderr);
};
const onNet1 = (w: World, addr: string) => w.net1().some((a) => a.startsWith(`${addr}/`));

describe('audit and repair on the in-memory world', () => {
  it('clean after the handlers ran; a missing address and a lost filter are re-added by the core', async () => {
    const { w, deps, ip } = setup();
    await ready(w, ip);
    expect((await runAudit(deps)).drift).toEqual([]);
    exec(w, 'ip', 'addr', 'del', `${ip.b}/24`, 'dev', 'net1');
    exec(w, 'bash', '/kube-ovn/nat-gateway.sh', 'eip-ingress-qos-del', ip.a!);
    const report = await runAudit(deps);
    expect(report.drift.map((d) => [d.kind, d.eip]).sort()).toEqual([
      ['missing-address', 'b'],
      ['qos-drift', 'a'],
    ]);
    const actions = await repairDrift(deps, report);
    expect(actions.map((a) => [a.kind, a.target, a.result]).sort()).toEqual([
      ['missing-address', 'b', 'done'],
      ['qos-drift', 'a', 'done'],
    ]);
    expect(onNet1(w, ip.b!)).toBe(true);
    expect(w.tc().filter((f) => f.ip === ip.a)).toEqual([
      expect.objectContaining({ direction: 'ingress', rate: '10Mbit' }),
    ]);
    expect((await runAudit(deps)).drift).toEqual([]);
  });

  it('a gateway that refuses the re-add: the EIP stops saying Ready, with a condition and an event', async () => {
    const { w, deps, ip } = setup();
    await ready(w, ip);
    exec(w, 'ip', 'addr', 'del', `${ip.b}/24`, 'dev', 'net1');
    w.gateway.failNext(10, { op: 'eip-add', exitCode: 2, stderr: 'RTNETLINK answers: File exists' });
    const actions = await repairDrift(deps, await runAudit(deps));
    expect(actions).toEqual([
      expect.objectContaining({ kind: 'missing-address', action: 'mark not ready', result: 'done' }),
    ]);
    const b = w.get('b')!;
    expect(b.status?.ready).toBe(false);
    expect(b.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'AddressMissing',
    });
    expect(w.cluster.events.some((e) => e.object === 'b' && e.reason === 'AddressMissing')).toBe(true);
  });

  it('an orphan waits for its grace period on the clock, then is removed with eip-del and both QoS deletions', async () => {
    const { w, deps, ip } = setup();
    await ready(w, ip);
    exec(w, 'ip', 'addr', 'add', '172.18.0.99/24', 'dev', 'net1');
    const first = await repairDrift(deps, await runAudit(deps), { orphanGraceMs: 10 * MIN });
    expect(first).toEqual([expect.objectContaining({ kind: 'orphan-address', result: 'waiting' })]);
    w.clock.advance(9 * MIN);
    expect((await repairDrift(deps, await runAudit(deps), { orphanGraceMs: 10 * MIN }))[0]?.result).toBe(
      'waiting',
    );
    expect(onNet1(w, '172.18.0.99')).toBe(true);
    w.clock.advance(2 * MIN);
    const calls = w.gateway.calls.length;
    expect((await repairDrift(deps, await runAudit(deps), { orphanGraceMs: 10 * MIN }))[0]?.result).toBe(
      'done',
    );
    expect(w.gateway.calls.slice(calls).map((c) => [c.op, ...c.args])).toEqual([
      ['eip-del', '172.18.0.99/24'],
      ['eip-ingress-qos-del', '172.18.0.99'],
      ['eip-egress-qos-del', '172.18.0.99'],
    ]);
    expect(onNet1(w, '172.18.0.99')).toBe(false);
  });

  it('an orphan claimed by an allocation before its removal is left alone', async () => {
    const { w, deps, ip } = setup();
    await ready(w, ip);
    exec(w, 'ip', 'addr', 'add', '172.18.0.99/24', 'dev', 'net1');
    const report = await runAudit(deps);
    const pool = {
      subnet: 'ovn-vpc-external-network',
      family: 4 as const,
      cidr: '172.18.0.0/24',
      gateway: '172.18.0.1',
      exclude: [],
    };
    await w.ipam.claimAddress(pool, '172.18.0.99', { uid: 'new-owner', name: 'new' });
    const actions = await repairDrift(deps, report, { orphanGraceMs: 0 });
    expect(actions).toEqual([expect.objectContaining({ kind: 'orphan-address', result: 'skipped' })]);
    expect(onNet1(w, '172.18.0.99')).toBe(true);
  });

  it('a stale lease is deleted; one taken over meanwhile is not', async () => {
    const { w, deps, ip } = setup();
    await ready(w, ip);
    w.leases.held.set('eip#ghost', { key: 'eip#ghost', holder: 'dead', expiresAt: w.clock.now() - 10 * MIN });
    w.leases.held.set('eip#other', { key: 'eip#other', holder: 'dead', expiresAt: w.clock.now() - 10 * MIN });
    const report = await runAudit(deps);
    expect(report.drift.map((d) => d.kind)).toEqual(['stale-lease', 'stale-lease']);
    w.leases.held.set('eip#other', { key: 'eip#other', holder: 'alive', expiresAt: w.clock.now() + MIN });
    const actions = await repairDrift(deps, report);
    expect(actions.map((a) => [a.target, a.result])).toEqual([
      ['eip#ghost', 'done'],
      ['eip#other', 'skipped'],
    ]);
    expect([...w.leases.held.keys()]).toEqual(['eip#other']);
  });

  it('a dry run plans and changes nothing', async () => {
    const { w, deps, ip } = setup();
    await ready(w, ip);
    exec(w, 'ip', 'addr', 'del', `${ip.a}/24`, 'dev', 'net1');
    const before = w.snapshot();
    const actions = await repairDrift(deps, await runAudit(deps), { dryRun: true });
    expect(actions).toEqual([expect.objectContaining({ kind: 'missing-address', result: 'planned' })]);
    expect(w.snapshot()).toEqual(before);
  });

  it('with collectFirst, a collection that fails is logged and the drift check runs anyway', async () => {
    const { w, deps, ip } = setup();
    await ready(w, ip);
    exec(w, 'ip', 'addr', 'del', `${ip.a}/24`, 'dev', 'net1');
    const log = memoryLogger('warn');
    // A collection that throws (its table unreadable).
    const ipam = new Proxy(w.ipam, {
      get: (t, p) =>
        p === 'collectGarbage'
          ? async () => {
              throw new Error('cannot collect: the table is unreadable');
            }
          : Reflect.get(t, p),
    });
    const runner = startDriftRepair({ ...deps, ipam, log }, 0, { collectFirst: true });
    const summary = await runner.runNow();
    expect(summary?.drift.map((d) => d.kind)).toEqual(['missing-address']);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        message: 'garbage collection failed',
        error: expect.stringContaining('cannot collect'),
      }),
    );
    await runner.stop();
  });

  it('the periodic runner never runs two audits at once, and counts what it finds and repairs', async () => {
    const { w, deps, ip } = setup();
    await ready(w, ip);
    exec(w, 'ip', 'addr', 'del', `${ip.a}/24`, 'dev', 'net1');
    const runner = startDriftRepair(deps, 0);
    const [one, two] = [runner.runNow(), runner.runNow()];
    expect(one).toBe(two);
    const summary = await one;
    expect(summary?.drift.map((d) => d.kind)).toEqual(['missing-address']);
    expect(w.metrics.total('DriftFound')).toBe(1);
    expect(w.metrics.total('DriftRepaired')).toBe(1);
    await runner.stop();
    expect(await auditAndRepair(deps)).toMatchObject({
      drift: [],
      actions: [],
      gateways: [{ gateway: 'gw1', pod: `kube-system/${w.pod().name}` }],
    });
  });
});
