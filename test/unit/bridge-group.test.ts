/**
 * One gateway's burst in one entry or invocation (docs/adr/0112-one-gateways-burst-in-one-invocation.md): the
 * grouping itself (window, cap, bytes, per handler and gateway, order per EIP), and the eventbridge and lambda
 * sinks through their public contract, with fakes only at the AWS client's `send` seam. What arrives parses back,
 * member by member, to the events sent.
 */
import type { PutEventsCommand, PutEventsCommandOutput } from '@aws-sdk/client-eventbridge';
import type { InvokeCommand, InvokeCommandOutput } from '@aws-sdk/client-lambda';
import { describe, expect, it } from 'vitest';
import { routeEip } from '../../shared/bridge/route.js';
import { eventBridgeSink, MAX_PUT_EVENTS_BYTES } from '../../shared/bridge/sinks/eventbridge.js';
import {
  bytesOf,
  DEFAULT_GROUP_BYTES,
  DEFAULT_GROUP_EVENTS,
  gatewayOfEvent,
  groupLimits,
  takeGroups,
} from '../../shared/bridge/sinks/group.js';
import { lambdaSink } from '../../shared/bridge/sinks/lambda.js';
import {
  detailOf,
  detailTypeOf,
  type EipEvent,
  EVENT_SOURCE,
  type HandlerName,
  MAX_EVENT_BYTES,
  parseEipEvents,
} from '../../shared/events.js';

const event = (n: number, handler: HandlerName = 'add', gateway: string | null = 'gw1'): EipEvent => ({
  version: 1,
  id: `uid-${n}:${n}:${handler}`,
  handler,
  reason: handler === 'delete' ? 'deleted' : handler === 'add' ? 'added' : 'resync',
  object: { kind: 'IptablesEIP', name: `eip-${n}`, uid: `uid-${n}`, resourceVersion: String(n) },
  ...(gateway && { new: { spec: { natGwDp: gateway } } }),
});

const names = (events: readonly EipEvent[]) => events.map((e) => e.object.name);
const limits = groupLimits();

function take(events: EipEvent[], o: Partial<Parameters<typeof takeGroups<EipEvent>>[1]> = {}) {
  const { groups, taken } = takeGroups(events, { limits, eventOf: (e) => e, maxGroups: 10, ...o });
  return { groups: groups.map((g) => g.events), taken };
}

describe('grouping', () => {
  it('puts events of one handler on one gateway together, at most EVENT_BATCH_MAX (8) a group', () => {
    const burst = Array.from({ length: 20 }, (_, i) => event(i));
    const { groups, taken } = take(burst);
    expect(taken).toBe(20);
    expect(groups.map((g) => g.length)).toEqual([8, 8, 4]);
    expect(groups.flat()).toEqual(burst); // every event once, in its order
  });

  it('never mixes handlers or gateways; an event whose gateway is not known goes alone', () => {
    const mixed = [
      event(1, 'add', 'gw1'),
      event(2, 'update', 'gw1'),
      event(3, 'add', 'gw2'),
      event(4, 'add', 'gw1'),
      event(5, 'add', null),
      event(6, 'update', 'gw1'),
      event(7, 'add', null),
    ];
    const { groups } = take(mixed);
    expect(groups.map(names)).toEqual([
      ['eip-1', 'eip-4'],
      ['eip-2', 'eip-6'],
      ['eip-3'],
      ['eip-5'],
      ['eip-7'],
    ]);
    for (const g of groups) expect(new Set(g.map((e) => e.handler)).size).toBe(1);
  });

  it('keeps the order of each EIP: it stops at the first event that fits nowhere', () => {
    // Two groups allowed: gw1's adds, gw2's adds; a third key cannot open one, and nothing after it overtakes it.
    const events = [
      event(1, 'add', 'gw1'),
      event(2, 'add', 'gw2'),
      event(3, 'delete', 'gw1'),
      event(1, 'add', 'gw1'),
    ];
    const { groups, taken } = take(events, { maxGroups: 2 });
    expect(taken).toBe(2);
    expect(groups.map(names)).toEqual([['eip-1'], ['eip-2']]);
    // Two events of one EIP in one group stay in their order (the handler runs them one after the other).
    const again = take([event(1), event(2), { ...event(1), reason: 'resync' as const }]);
    expect(again.groups[0]!.map((e) => `${e.object.name}/${e.reason}`)).toEqual([
      'eip-1/added',
      'eip-2/added',
      'eip-1/resync',
    ]);
  });

  it('caps a group by its detail bytes and a call by the entries’ total', () => {
    const big = (n: number) => ({
      ...event(n),
      new: { spec: { natGwDp: 'gw1' }, metadata: { labels: { note: 'x'.repeat(5_000) } } },
    });
    const { groups } = take(Array.from({ length: 8 }, (_, i) => big(i)));
    expect(groups.map((g) => g.length)).toEqual([4, 4]);
    for (const g of groups) expect(bytesOf(detailOf(g))).toBeLessThanOrEqual(DEFAULT_GROUP_BYTES);
    const { groups: capped, taken } = take(
      Array.from({ length: 8 }, (_, i) => big(i)),
      { maxTotalBytes: 24_000 },
    );
    expect(capped.map((g) => g.length)).toEqual([4]);
    expect(taken).toBe(4);
  });

  it('takes the gateway from the event, then the bridge’s cache, then the snapshot it carries', () => {
    const e = { ...event(1, 'delete', null), old: { spec: { natGwDp: 'gw-old' } } };
    expect(gatewayOfEvent(e)).toBe('gw-old');
    expect(gatewayOfEvent(e, () => 'gw-cache')).toBe('gw-cache');
    expect(gatewayOfEvent({ ...e, gateway: 'gw-event' }, () => 'gw-cache')).toBe('gw-event');
    expect(gatewayOfEvent(event(2, 'add', null), () => undefined)).toBeUndefined();
  });

  it('refuses a cap out of range', () => {
    expect(() => groupLimits(0)).toThrow(RangeError);
    expect(() => groupLimits(33)).toThrow(RangeError);
    expect(groupLimits(1).maxEvents).toBe(1);
  });

  it('measured: the bridge’s events weigh 0.2 to 2 KB, so ten full groups fit one PutEvents call', () => {
    const eip = {
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: {
        name: 'eip-tenant-a-0001',
        uid: '5f0c8c6e-0d5b-4b3e-9f3a-7c1e2d3f4a5b',
        resourceVersion: '123456789',
        finalizers: ['kubeovn.io/kube-ovn-controller'],
        labels: {
          'ovn.kubernetes.io/subnet': 'ovn-vpc-external-network',
          'ovn.kubernetes.io/vpc_nat_gw': 'gw-tenant-a',
          'ovn.kubernetes.io/eip_v4_ip': '172.18.100.201',
          'ovn.kubernetes.io/qos': 'qos-tenant-a-gold',
        },
      },
      spec: {
        natGwDp: 'gw-tenant-a',
        externalSubnet: 'ovn-vpc-external-network',
        v4ip: '172.18.100.201',
        qosPolicy: 'qos-tenant-a-gold',
      },
      status: {
        ready: true,
        ip: '172.18.100.201',
        redo: '2026-12-01T10:00:00Z',
        nat: 'dnat,fip,snat',
        qosPolicy: 'qos-tenant-a-gold',
      },
    };
    const [add] = routeEip({ type: 'ADDED', object: eip as never });
    const [del] = routeEip({ type: 'DELETED', object: eip as never });
    const addBytes = bytesOf({ ...add!, nat: 'dnat,fip,snat' });
    const delBytes = bytesOf(del!);
    console.log(`event bytes: add ${addBytes}, delete with its snapshot ${delBytes}`);
    expect(addBytes).toBeGreaterThan(150);
    expect(delBytes).toBeLessThan(2_000);
    const group = bytesOf(detailOf(Array.from({ length: DEFAULT_GROUP_EVENTS }, () => del!)));
    // Ten entries of eight deletes: within a call's 256,000 bytes, each well within what the handler takes.
    expect(10 * (group + 50)).toBeLessThan(MAX_PUT_EVENTS_BYTES);
    expect(group).toBeLessThan(MAX_EVENT_BYTES / 8);
  });
});

type Put = { Entries: { Source?: string; DetailType?: string; Detail?: string }[] };

function fakeEventBridge() {
  const calls: Put[] = [];
  const client = {
    async send(command: PutEventsCommand): Promise<PutEventsCommandOutput> {
      const input = command.input as Put;
      calls.push(input);
      return {
        $metadata: {},
        FailedEntryCount: 0,
        Entries: input.Entries.map((_, i) => ({ EventId: `e${i}` })),
      };
    },
  };
  /** Each entry as the handler receives it (an envelope), parsed: its members' names. */
  const received = () =>
    calls.flatMap((c) =>
      c.Entries.map((e) => {
        const parsed = parseEipEvents({
          source: e.Source,
          'detail-type': e.DetailType,
          detail: JSON.parse(e.Detail!),
        });
        return parsed.members.map((m) => ('event' in m ? m.event : undefined)!);
      }),
    );
  return { client, calls, received };
}

describe('EventBridge sink', () => {
  it('sends a burst of one gateway’s adds as a few entries, each a batch of its handler’s detail-type', async () => {
    const eb = fakeEventBridge();
    const sink = eventBridgeSink({ client: eb.client, lingerMs: 20 });
    const burst = [
      ...Array.from({ length: 40 }, (_, i) => event(i)),
      event(100, 'update'),
      event(101, 'add', 'gw2'),
    ];
    for (const e of burst) await sink.send(e);
    await sink.flush();
    expect(eb.calls).toHaveLength(1);
    const entries = eb.received();
    expect(entries.map((g) => g.length)).toEqual([8, 8, 8, 8, 8, 1, 1]);
    expect(entries.flat().sort((a, b) => a.id.localeCompare(b.id))).toEqual(
      [...burst].sort((a, b) => a.id.localeCompare(b.id)),
    );
    eb.calls[0]!.Entries.forEach((entry, i) => {
      expect(entry.Source).toBe(EVENT_SOURCE);
      expect(entry.DetailType).toBe(detailTypeOf(entries[i]![0]!.handler));
    });
    // A single event keeps the single-event shape.
    expect(JSON.parse(eb.calls[0]!.Entries[5]!.Detail!)).toEqual(burst[40]);
    expect(sink.stats!()).toMatchObject({ delivered: 42, failures: 0 });
  });

  it('groups only what waits together: events further apart than the window go in their own entries', async () => {
    const eb = fakeEventBridge();
    const sink = eventBridgeSink({ client: eb.client, lingerMs: 10 });
    await sink.send(event(1));
    await new Promise((r) => setTimeout(r, 60));
    await sink.send(event(2));
    await sink.send(event(3));
    await sink.flush();
    expect(eb.received().map(names)).toEqual([['eip-1'], ['eip-2', 'eip-3']]);
  });

  it('with EVENT_BATCH_MAX=1 sends one event an entry, as before', async () => {
    const eb = fakeEventBridge();
    const sink = eventBridgeSink({ client: eb.client, lingerMs: 5, groupEvents: 1 });
    for (let i = 0; i < 12; i++) await sink.send(event(i));
    await sink.flush();
    expect(eb.calls.map((c) => c.Entries.length)).toEqual([10, 2]);
    for (const c of eb.calls)
      for (const e of c.Entries) expect(JSON.parse(e.Detail!)).not.toHaveProperty('events');
  });

  it('asks the bridge where an EIP is when the event does not say', async () => {
    const eb = fakeEventBridge();
    const sink = eventBridgeSink({ client: eb.client, lingerMs: 5 });
    sink.knowGateways((e) => (e.object.name === 'eip-9' ? 'gw2' : 'gw1'));
    for (let i = 5; i < 10; i++) await sink.send(event(i, 'delete', null));
    await sink.flush();
    expect(eb.received().map(names)).toEqual([['eip-5', 'eip-6', 'eip-7', 'eip-8'], ['eip-9']]);
  });

  it('retries every member of an entry that failed, and each is delivered once', async () => {
    const calls: Put[] = [];
    let first = true;
    const client = {
      async send(command: PutEventsCommand): Promise<PutEventsCommandOutput> {
        const input = command.input as Put;
        calls.push(input);
        const fail = first;
        first = false;
        return {
          $metadata: {},
          FailedEntryCount: fail ? 1 : 0,
          Entries: input.Entries.map((_, i) =>
            fail && i === 0
              ? { ErrorCode: 'ThrottlingException', ErrorMessage: 'slow down' }
              : { EventId: `e${i}` },
          ),
        };
      },
    };
    const sink = eventBridgeSink({ client, lingerMs: 5, backoffMs: 1 });
    for (let i = 0; i < 4; i++) await sink.send(event(i));
    await sink.send(event(9, 'update'));
    await sink.flush();
    expect(calls.map((c) => c.Entries.length)).toEqual([2, 1]);
    const retried = JSON.parse(calls[1]!.Entries[0]!.Detail!);
    expect(names(retried.events)).toEqual(['eip-0', 'eip-1', 'eip-2', 'eip-3']);
    expect(sink.stats!()).toMatchObject({ delivered: 5, retries: 4, failures: 0 });
  });
});

describe('Lambda sink', () => {
  const functions = { add: 'eip-add', update: 'eip-update', reset: 'eip-reset', delete: 'eip-delete' };
  function fakeLambda() {
    const calls: { at: number; input: InvokeCommand['input'] }[] = [];
    const client = {
      async send(command: InvokeCommand): Promise<InvokeCommandOutput> {
        calls.push({ at: Date.now(), input: command.input });
        return { $metadata: {}, StatusCode: 202 };
      },
    };
    const payloads = () =>
      calls.map((c) => {
        const parsed = parseEipEvents(JSON.parse(new TextDecoder().decode(c.input.Payload as Uint8Array)));
        return {
          fn: c.input.FunctionName,
          names: parsed.members.map((m) => ('event' in m ? m.event.object.name : '')),
        };
      });
    return { client, calls, payloads };
  }

  it('invokes once for the events of one handler and gateway sent within the window; each send resolves', async () => {
    const fake = fakeLambda();
    const sink = lambdaSink({ client: fake.client, functions, windowMs: 20 });
    const sent = [event(1), event(2), event(3, 'add', 'gw2'), event(4), event(5, 'reset')].map((e) =>
      sink.send(e),
    );
    await Promise.all(sent);
    expect(fake.payloads()).toEqual(
      expect.arrayContaining([
        { fn: 'eip-add', names: ['eip-1', 'eip-2', 'eip-4'] },
        { fn: 'eip-add', names: ['eip-3'] },
        { fn: 'eip-reset', names: ['eip-5'] },
      ]),
    );
    expect(fake.calls).toHaveLength(3);
    expect(sink.stats!()).toMatchObject({ delivered: 5 });
  });

  it('sends a full group at once, without waiting for the window', async () => {
    const fake = fakeLambda();
    const sink = lambdaSink({ client: fake.client, functions, windowMs: 60_000 });
    const start = Date.now();
    await Promise.all(Array.from({ length: 8 }, (_, i) => sink.send(event(i))));
    expect(Date.now() - start).toBeLessThan(5_000);
    expect(fake.payloads()).toEqual([
      { fn: 'eip-add', names: names(Array.from({ length: 8 }, (_, i) => event(i))) },
    ]);
  });

  it('fails every member of an invocation that is not accepted', async () => {
    const client = {
      async send(): Promise<InvokeCommandOutput> {
        throw Object.assign(new Error('no such function'), { name: 'ResourceNotFoundException' });
      },
    };
    const sink = lambdaSink({ client, functions, windowMs: 5 });
    const results = await Promise.allSettled([sink.send(event(1)), sink.send(event(2))]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(sink.stats!()).toMatchObject({ failures: 2, permanentFailures: 2 });
  });
});
