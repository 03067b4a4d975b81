/**
 * The hostile-input corpus as handler events, on the in-memory ports (test/corpus/corpus.ts reads the data).
 * Every case: refused with an error naming the field, no exec (the simulated gateway records every call), nothing
 * allocated, nothing polluted, and the other EIP — Ready on the same gateway — undisturbed.
 */
import type { Context } from 'aws-lambda';
import { afterAll, describe, expect, it } from 'vitest';
import { API_VERSION, DEFAULT_EXTERNAL_SUBNET } from '../../shared/domain/kube-ovn.js';
import { eipHandler } from '../../shared/lambda/eip-handler.js';
import { GW, type World, world } from '../support/world.js';
import { caseObjects, type EventCase, eventCases, eventInput, type ValueCase, valueCases } from './corpus.js';

const events = eventCases();
const values = valueCases();
const known: string[] = [];

afterAll(() => {
  console.log(
    `corpus: ${events.length} event cases and ${values.length} value cases as handler events` +
      (known.length ? `; known failures (${known.length}):\n${known.map((k) => `  ${k}`).join('\n')}` : ''),
  );
});

async function sentinelWorld(): Promise<World> {
  const w = world();
  w.qos('q', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '10' }], {
    shared: true,
  });
  w.eip('sentinel', { qosPolicy: 'q' });
  const out = await w.run('add', 'sentinel', 'added');
  if (out.status !== 'applied') throw new Error(`sentinel not configured: ${JSON.stringify(out)}`);
  w.gateway.calls.length = 0;
  return w;
}

/** Runs `check`; for a known failure, expects it to fail (and records it), so a fix turns the case red. */
async function expectCase(
  c: { id: string; knownFailure?: string },
  check: () => Promise<void>,
): Promise<void> {
  if (!c.knownFailure) return check();
  known.push(`${c.id}: ${c.knownFailure}`);
  await expect(
    check(),
    `${c.id} is marked as a known failure but passes now: remove the mark`,
  ).rejects.toThrow();
}

const ctx = {} as Context;

describe('corpus: malformed events', () => {
  it.each(events.map((c) => [c.id, c] as const))('%s', async (_id, c: EventCase) => {
    const w = await sentinelWorld();
    const before = w.snapshot();
    await expectCase(c, async () => {
      const handler = eipHandler('add', async () => w.deps);
      const out = await handler(eventInput(c) as never, ctx);
      expect(({} as Record<string, unknown>).polluted, 'Object.prototype polluted').toBeUndefined();
      if (c.expect === 'harmless') {
        expect(out.status).not.toBe('rejected');
      } else {
        expect(out).toMatchObject({ status: 'rejected', code: 'InvalidEvent' });
        const message = out.status === 'rejected' ? out.message : '';
        expect(message, c.why).toContain(c.field);
        expect(message.length, 'the error stays small').toBeLessThan(1_000);
        // A rejected outcome names a valid object or none: never the hostile value it refused.
        expect(out.eip.length).toBeLessThanOrEqual(253);
        expect(out.eip).toMatch(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$/);
      }
      expect(w.gateway.calls, 'no exec').toEqual([]);
      expect(w.snapshot(), 'nothing changed').toEqual(before);
    });
  });
});

/** Where a member's refusal names the field the case's single event names (the member is events[1] of a batch). */
function memberField(c: EventCase): string {
  if (c.field.startsWith('event.')) return `event.events[1].${c.field.slice('event.'.length)}`;
  if (c.field === 'handler') return 'event.events[1].handler';
  return 'event.events[1]'; // not an object, or an envelope where a detail is expected
}

// A batch (ADR 0112) validates each member as a single event: every hostile case as one member, beside the
// sentinel's own add, is refused on its own, naming its field under events[1]; the sentinel's add runs (unchanged:
// it is configured) and nothing changes. An oversized member makes the whole batch too large: refused as a whole.
describe('corpus: malformed events as a member of a batch', () => {
  const members = events.filter((c) => c.expect !== 'harmless');
  it.each(members.map((c) => [c.id, c] as const))('%s', async (_id, c: EventCase) => {
    const w = await sentinelWorld();
    const before = w.snapshot();
    await expectCase(c, async () => {
      const good = {
        version: 1,
        id: 'uid-sentinel:1:added',
        handler: 'add',
        reason: 'added',
        object: { name: 'sentinel' },
      };
      const batch = { version: 1, handler: 'add', events: [good, eventInput(c)] };
      const out = await eipHandler('add', async () => w.deps)(batch, ctx);
      expect(({} as Record<string, unknown>).polluted, 'Object.prototype polluted').toBeUndefined();
      if (c.id.startsWith('oversized')) {
        expect(out).toMatchObject({ status: 'rejected', code: 'InvalidEvent', eip: '' });
      } else {
        expect('batch' in out, JSON.stringify(out).slice(0, 300)).toBe(true);
        const [sentinel, refused] = 'batch' in out ? out.batch : [];
        expect(sentinel).toMatchObject({ status: 'unchanged', eip: 'sentinel' });
        expect(refused).toMatchObject({ status: 'rejected', code: 'InvalidEvent' });
        const message = refused?.status === 'rejected' ? refused.message : '';
        expect(message, c.why).toContain(memberField(c));
        expect(message.length, 'the error stays small').toBeLessThan(1_000);
        expect(refused!.eip).toMatch(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$/);
      }
      expect(w.gateway.calls, 'no exec').toEqual([]);
      expect(w.snapshot(), 'nothing changed').toEqual(before);
    });
  });
});

/** Puts the value case's objects into the world; returns the EIP's name. */
function seed(w: World, c: ValueCase, i: number): string {
  const o = caseObjects(c, i);
  if (o.subnet) {
    w.cluster.subnets.set(o.subnet.name, {
      apiVersion: API_VERSION,
      kind: 'Subnet',
      metadata: { name: o.subnet.name, uid: `uid-${o.subnet.name}`, resourceVersion: '1' },
      spec: o.subnet.spec as never,
    });
    w.cluster.gateways.get(GW)!.spec.externalSubnets = [DEFAULT_EXTERNAL_SUBNET, o.subnet.name];
  }
  if (o.qos) w.qos(o.qos.name, [o.qos.rule as never]);
  w.cluster.putEip({ metadata: { name: o.name }, spec: o.spec as never });
  return o.name;
}

describe('corpus: hostile values in what an EIP names', () => {
  it.each(values.map((c, i) => [c.id, c, i] as const))('%s', async (_id, c: ValueCase, i: number) => {
    const w = await sentinelWorld();
    const sentinel = w.snapshot().eips.find((e) => e.name === 'sentinel');
    const name = seed(w, c, i);
    await expectCase(c, async () => {
      const out = await w.run('add', name, 'added');
      expect(out, c.why).toMatchObject({ status: 'rejected' });
      const message = out.status === 'rejected' ? out.message : '';
      expect(message, `the error names ${c.expectField}`).toContain(c.expectField);
      const eip = w.get(name)!;
      const condition = eip.status?.conditions?.find((x) => x.status === 'False');
      expect(condition?.message, 'recorded on the EIP').toContain(c.expectField);
      expect(w.gateway.calls, 'no exec').toEqual([]);
      expect(await w.ipam.findByOwner(eip.metadata.uid), 'nothing allocated').toEqual([]);
      expect(
        w.snapshot().eips.find((e) => e.name === 'sentinel'),
        'the other EIP undisturbed',
      ).toEqual(sentinel);
    });
  });
});
