/**
 * A batch event at the handler (docs/adr/0112-one-gateways-burst-in-one-invocation.md), on the in-memory world: its
 * members run side by side in one container, so their gateway calls share execs; each has its own outcome, logs and
 * metrics; a bad member is refused on its own; a retryable failure is thrown after every member ran, naming it, and
 * the batch's retry costs the members that succeeded no exec and no write.
 */
import type { Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import type { Outcome } from '../../shared/core/outcome.js';
import { leaseKey } from '../../shared/domain/lease.js';
import { detailOf, type EipEvent } from '../../shared/events.js';
import { BatchMembersFailedError, type BatchOutcome, eipHandler } from '../../shared/lambda/eip-handler.js';
import { world } from '../support/world.js';

const ctx = { awsRequestId: 'req-batch' } as Context;
const statuses = (o: Outcome | BatchOutcome) =>
  ('batch' in o ? o.batch : [o]).map((x) => `${x.eip}:${x.status}`);

function burst(n: number) {
  const w = world();
  const names = Array.from({ length: n }, (_, i) => `eip-${i}`);
  for (const name of names) w.eip(name);
  const events = names.map((name) => w.event('add', name, 'added'));
  return { w, names, events };
}

describe('a batch event', () => {
  it('on a replicated gateway with QoS: no listener-leak warning from the calls waiting on the one signal', async () => {
    // Each member's calls wait on the invocation's signal, on every pod and for every rule, and take their
    // listeners off when they settle; Node warned (MaxListenersExceededWarning) once more than 10 waited at once.
    const w = world();
    const pods = w.replicas(4);
    w.qos(
      'two-rules',
      [
        { name: 'in', direction: 'ingress', priority: 1, rateMax: '30', burstMax: '3' },
        { name: 'out', direction: 'egress', priority: 2, rateMax: '20', burstMax: '2' },
      ],
      { shared: true },
    );
    const names = ['eip-q0', 'eip-q1', 'eip-q2'];
    for (const name of names) w.eip(name, { qosPolicy: 'two-rules' });
    const warnings: string[] = [];
    const onWarning = (e: Error) => warnings.push(`${e.name}: ${e.message}`);
    process.on('warning', onWarning);
    try {
      const out = await eipHandler('add', async () => w.deps)(
        detailOf(names.map((name) => w.event('add', name, 'added'))),
        ctx,
      );
      expect(statuses(out)).toEqual(names.map((n) => `${n}:applied`));
      // Warnings are emitted on the next tick.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    for (const p of pods) expect(w.tc(p)).toHaveLength(names.length * 2);
    expect(warnings.filter((x) => x.startsWith('MaxListenersExceededWarning'))).toEqual([]);
  });

  it('configures every member with fewer execs than members, each with its own outcome, logs and metrics', async () => {
    const { w, names, events } = burst(16);
    const out = await eipHandler('add', async () => w.deps)(detailOf(events), ctx);
    expect(statuses(out)).toEqual(names.map((n) => `${n}:applied`));
    for (const n of names) expect(w.get(n)?.status?.ready).toBe(true);
    // Alone, each add sends its own eip-add exec. Together their eip-adds share execs: arping's 3 s an address
    // spreads them over at most the pod's 8 lanes (ADR 0125), each exec carrying several.
    const adds = w.gateway.calls.filter((c) => c.op === 'eip-add');
    expect(adds.length).toBeLessThanOrEqual(8);
    expect(adds.flatMap((c) => c.args)).toHaveLength(names.length);
    expect(w.metrics.counts.get('Outcomes{handler=add,status=applied}')).toBe(16);
    const outcomes = w.log.lines.filter((l) => l.message === 'outcome');
    expect(outcomes.map((l) => l.eip).sort()).toEqual([...names].sort());
    for (const l of outcomes) expect(l).toMatchObject({ handler: 'add', batch: 16, requestId: 'req-batch' });
    expect(w.log.lines.find((l) => l.message === 'batch received')).toMatchObject({ events: 16 });
    expect(w.leases.held.size).toBe(0);
  });

  it('refuses an invalid member on its own; the others run', async () => {
    const { w, events } = burst(2);
    const bad = { ...events[0]!, object: { name: 'Not_A_Name' } } as EipEvent;
    const out = await eipHandler('add', async () => w.deps)(
      { version: 1, handler: 'add', events: [events[0], bad, events[1]] },
      ctx,
    );
    expect('batch' in out && out.batch.map((o) => o.status)).toEqual(['applied', 'rejected', 'applied']);
    const refused = 'batch' in out ? out.batch[1]! : undefined;
    expect(refused).toMatchObject({ eip: '', code: 'InvalidEvent' });
    expect(refused?.status === 'rejected' && refused.message).toMatch(/event\.events\[1\]\.object\.name/);
    expect(w.metrics.counts.get('Outcomes{handler=add,status=rejected}')).toBe(1);
  });

  it('throws a member’s retryable failure after the others ran, naming it; the retry is a no-op for them', async () => {
    const { w, names, events } = burst(4);
    // Another invocation holds eip-2's lease: that member fails with LeaseHeld, the three others are configured.
    const held = await w.leases.acquire(leaseKey('eip-2'), 'someone-else', w.clock.now() + 60_000);
    const handler = eipHandler('add', async () => w.deps);
    const error = await handler(detailOf(events), ctx).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BatchMembersFailedError);
    expect((error as BatchMembersFailedError).failed).toEqual([
      { eip: 'eip-2', eventId: events[2]!.id, code: 'LeaseHeld' },
    ]);
    expect((error as Error).message).toBe('1 of 4 events will be retried: eip-2 (LeaseHeld)');
    expect(names.map((n) => w.get(n)?.status?.ready ?? false)).toEqual([true, true, false, true]);
    expect(w.metrics.counts.get('Outcomes{handler=add,status=retry}')).toBe(1);
    expect(w.metrics.counts.get('Outcomes{handler=add,status=applied}')).toBe(3);

    // Lambda retries the same batch. The members that succeeded cost no exec and no write.
    await w.leases.release(held);
    const execsBefore = w.gateway.calls.length;
    const writesBefore = w.cluster.writes.length;
    const retried = await handler(detailOf(events), ctx);
    expect(statuses(retried)).toEqual([
      'eip-0:unchanged',
      'eip-1:unchanged',
      'eip-2:applied',
      'eip-3:unchanged',
    ]);
    const ip = w.get('eip-2')?.status?.ip;
    const execs = w.gateway.calls.slice(execsBefore);
    expect(execs.length).toBeGreaterThan(0);
    for (const c of execs) for (const arg of c.args) expect(arg.startsWith(`${ip}/`), arg).toBe(true);
    const writes = w.cluster.writes.slice(writesBefore);
    expect(writes.length).toBeGreaterThan(0);
    for (const write of writes) expect(JSON.stringify(write)).toContain('eip-2');
  });

  it('runs two events of one EIP one after the other, in their order', async () => {
    const { w, events } = burst(2);
    const again = { ...events[0]!, reason: 'resync' as const };
    const out = await eipHandler('add', async () => w.deps)(detailOf([events[0]!, events[1]!, again]), ctx);
    expect(statuses(out)).toEqual(['eip-0:applied', 'eip-1:applied', 'eip-0:unchanged']);
    expect(w.metrics.counts.get('LeaseContention')).toBeUndefined();
  });

  it('an envelope carrying a batch reaches the handler its detail-type names', async () => {
    const { w, events } = burst(2);
    const envelope = {
      source: 'eip-lambdas.bridge',
      'detail-type': 'IptablesEIP add',
      detail: detailOf(events),
    };
    expect(statuses(await eipHandler('add', async () => w.deps)(envelope, ctx))).toEqual([
      'eip-0:applied',
      'eip-1:applied',
    ]);
    const other = await eipHandler('delete', async () => w.deps)(envelope, ctx);
    expect(other).toMatchObject({ status: 'rejected', code: 'InvalidEvent' });
  });
});
