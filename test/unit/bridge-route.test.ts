/**
 * The routing table, driven by watch streams recorded from the local Kubernetes API (events/watch/*.jsonl, made by
 * local/record-watch.ts). Each stream is replayed through a Tracker — the bridge's last-seen cache plus
 * the pure route() — exactly as the bridge feeds live watch events; the table says what every line routes to.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type KubeObject, snapshotOf } from '../../shared/bridge/objects.js';
import { route } from '../../shared/bridge/route.js';
import { Tracker, type WatchLine } from '../../shared/bridge/tracker.js';
import { type EipEvent, eventId, parseEipEvent } from '../../shared/events.js';

function fixture(name: string): WatchLine[] {
  const text = readFileSync(new URL(`../../events/watch/${name}.jsonl`, import.meta.url), 'utf8');
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as WatchLine);
}

const describeLine = (l: WatchLine) => `${l.type} ${l.object.kind} ${l.object.metadata?.name}`;
const describeEvents = (events: EipEvent[]) =>
  events.length === 0 ? '-' : events.map((e) => `${e.handler}/${e.reason} ${e.object.name}`).join(', ');

/** Replays a recorded stream; returns one "line -> events" row per watch line, and every event. */
function replay(name: string) {
  const tracker = new Tracker();
  const rows: string[] = [];
  const all: { line: WatchLine; events: EipEvent[] }[] = [];
  for (const line of fixture(name)) {
    const events = tracker.observeLine(line);
    rows.push(`${describeLine(line)} -> ${describeEvents(events)}`);
    all.push({ line, events });
  }
  return { rows, all, tracker };
}

describe('routing recorded watch streams', () => {
  it('routes an EIP from creation to deletion, ignoring the echoes of the handlers’ own writes', () => {
    expect(replay('eip-lifecycle').rows).toEqual([
      'ADDED IptablesEIP eip-a -> add/added eip-a',
      'MODIFIED IptablesEIP eip-a -> -', // handler: finalizer + labels
      'MODIFIED IptablesEIP eip-a -> -', // handler: allocated v4ip + macAddress
      'MODIFIED IptablesEIP eip-a -> -', // handler: status ready
      'MODIFIED IptablesEIP eip-a -> update/qos-changed eip-a', // user binds qos-a
      'MODIFIED IptablesEIP eip-a -> -', // handler: qos label
      'MODIFIED IptablesEIP eip-a -> -', // handler: status.qosPolicy
      'MODIFIED IptablesEIP eip-a -> update/redo-changed eip-a', // kube-ovn redo request: ready=false, new token
      'MODIFIED IptablesEIP eip-a -> -', // our handler: new token with ready=true
      'MODIFIED IptablesEIP eip-a -> update/spec-changed eip-a', // v4ip
      'MODIFIED IptablesEIP eip-a -> update/spec-changed eip-a', // natGwDp
      'MODIFIED IptablesEIP eip-a -> update/spec-changed eip-a', // externalSubnet
      'MODIFIED IptablesEIP eip-a -> -', // label only
      'MODIFIED IptablesEIP eip-a -> update/qos-changed eip-a', // user unbinds
      'MODIFIED IptablesEIP eip-a -> update/deletion-requested eip-a', // kubectl delete, finalizer holds it
      'MODIFIED IptablesEIP eip-a -> update/deletion-requested eip-a', // any write while terminating
      'DELETED IptablesEIP eip-a -> delete/deleted eip-a', // finalizer removed
      'ADDED IptablesEIP eip-b -> add/added eip-b',
      'DELETED IptablesEIP eip-b -> delete/deleted eip-b',
    ]);
  });

  it('sends an EIP that is already terminating when a fresh watch lists it to update, not add', () => {
    expect(replay('eip-relist-terminating').rows).toEqual([
      'ADDED IptablesEIP eip-ready -> add/added eip-ready',
      'ADDED IptablesEIP eip-going -> update/deletion-requested eip-going',
      'DELETED IptablesEIP eip-going -> delete/deleted eip-going',
    ]);
  });

  it('resets every EIP a FIP/DNAT/SNAT rule joins, leaves or stops using', () => {
    expect(replay('nat-rules').rows).toEqual([
      'ADDED IptablesEIP eip-a -> add/added eip-a',
      'ADDED IptablesEIP eip-b -> add/added eip-b',
      'ADDED IptablesFIPRule fip-1 -> reset/nat-rule-changed eip-a',
      'MODIFIED IptablesFIPRule fip-1 -> -', // status only
      'MODIFIED IptablesFIPRule fip-1 -> -', // label only
      'MODIFIED IptablesFIPRule fip-1 -> reset/nat-rule-changed eip-a, reset/nat-rule-changed eip-b', // moved
      'ADDED IptablesDnatRule dnat-1 -> reset/nat-rule-changed eip-b',
      'MODIFIED IptablesDnatRule dnat-1 -> reset/nat-rule-changed eip-b', // newly terminating
      'MODIFIED IptablesDnatRule dnat-1 -> -', // still terminating
      'DELETED IptablesDnatRule dnat-1 -> reset/nat-rule-changed eip-b',
      'ADDED IptablesSnatRule snat-1 -> reset/nat-rule-changed eip-a',
      'DELETED IptablesSnatRule snat-1 -> reset/nat-rule-changed eip-a',
      'ADDED IptablesFIPRule fip-orphan -> -', // names no EIP
      'DELETED IptablesFIPRule fip-1 -> reset/nat-rule-changed eip-b',
    ]);
  });

  it('re-sends the EIPs of a gateway whose pod comes up, restarts its container, or is re-created', () => {
    const up = 'update/gateway-restarted eip-ready, add/gateway-ready eip-waiting';
    expect(replay('gateway-pod').rows).toEqual([
      'ADDED IptablesEIP eip-ready -> add/added eip-ready',
      'MODIFIED IptablesEIP eip-ready -> -',
      'ADDED IptablesEIP eip-waiting -> add/added eip-waiting',
      'ADDED IptablesEIP eip-other-gw -> add/added eip-other-gw',
      'MODIFIED IptablesEIP eip-other-gw -> -',
      'ADDED IptablesEIP eip-leaving -> add/added eip-leaving',
      'MODIFIED IptablesEIP eip-leaving -> update/deletion-requested eip-leaving',
      'ADDED Pod vpc-nat-gw-gw1-0 -> -', // Pending
      `MODIFIED Pod vpc-nat-gw-gw1-0 -> ${up}`, // Running, container ready
      'MODIFIED Pod vpc-nat-gw-gw1-0 -> -', // kill 1: container terminated, not ready
      `MODIFIED Pod vpc-nat-gw-gw1-0 -> ${up}`, // container running again, restartCount 1
      'DELETED Pod vpc-nat-gw-gw1-0 -> -',
      'ADDED Pod vpc-nat-gw-gw1-0 -> -', // the StatefulSet's new pod, Pending
      `MODIFIED Pod vpc-nat-gw-gw1-0 -> ${up}`,
    ]);
  });

  it('updates the EIPs bound to a QoS policy when the policy appears or its status rules change', () => {
    const bound = 'update/qos-policy-changed eip-a, update/qos-policy-changed eip-b';
    const rows = replay('qos-policy').rows;
    expect(rows.slice(0, 5)).toEqual([
      'ADDED IptablesEIP eip-a -> add/added eip-a',
      'ADDED IptablesEIP eip-b -> add/added eip-b',
      'ADDED IptablesEIP eip-c -> add/added eip-c',
      `ADDED QoSPolicy qos-1 -> ${bound}`,
      `MODIFIED QoSPolicy qos-1 -> ${bound}`, // stand-in copied spec to status
    ]);
    // Then: a spec edit (status unchanged: nothing), the stand-in's copy (status changed), a label, the deletion.
    expect(rows.slice(5)).toEqual([
      'MODIFIED QoSPolicy qos-1 -> -',
      `MODIFIED QoSPolicy qos-1 -> ${bound}`,
      'MODIFIED QoSPolicy qos-1 -> -',
      'DELETED QoSPolicy qos-1 -> -',
    ]);
  });
});

describe('routed events', () => {
  const streams = ['eip-lifecycle', 'eip-relist-terminating', 'nat-rules', 'gateway-pod', 'qos-policy'];

  it('are valid handler events by the contract the handlers parse', () => {
    for (const s of streams)
      for (const { events } of replay(s).all) for (const e of events) expect(parseEipEvent(e)).toEqual(e);
  });

  it('have ids built from the uid and resourceVersion of the object whose change caused them', () => {
    for (const s of streams) {
      for (const { line, events } of replay(s).all) {
        const m = line.object.metadata!;
        for (const e of events) {
          const base = eventId(m.uid, m.resourceVersion, e.reason);
          expect(e.id).toBe(line.object.kind === 'IptablesEIP' ? base : `${base}:${e.object.name}`);
        }
      }
    }
  });

  it('never repeat an id within a stream, so de-duplication only ever drops a true duplicate', () => {
    for (const s of streams) {
      const ids = replay(s).all.flatMap((x) => x.events.map((e) => e.id));
      expect(new Set(ids).size).toBe(ids.length);
    }
  });

  it('carry a trimmed snapshot of the deleted EIP on delete events only', () => {
    const { all } = replay('eip-lifecycle');
    const deleted = all.find((x) => x.line.type === 'DELETED')!;
    const [event] = deleted.events;
    expect(event!.old).toEqual(snapshotOf(deleted.line.object));
    expect(event!.old!.metadata).toMatchObject({
      name: 'eip-a',
      uid: deleted.line.object.metadata!.uid,
      finalizers: ['kubeovn.io/kube-ovn-controller'],
    });
    expect(event!.old!.metadata!.deletionTimestamp).toBeTruthy();
    expect(event!.old!.status).toMatchObject({ ip: '172.18.0.2', qosPolicy: 'qos-a' });
    expect(Object.keys(event!.old!.metadata!).sort()).toEqual(
      ['deletionTimestamp', 'finalizers', 'labels', 'name', 'resourceVersion', 'uid'].filter(
        (k) => k in event!.old!.metadata!,
      ),
    );
    for (const { events } of all)
      for (const e of events) if (e.handler !== 'delete') expect(e.old).toBeUndefined();
  });

  it('name the gateway on gateway-triggered events and carry the EIP uid known from the cache', () => {
    const { all, tracker } = replay('gateway-pod');
    const fanned = all.flatMap((x) => x.events).filter((e) => e.gateway);
    expect(fanned.length).toBe(6);
    for (const e of fanned) {
      expect(e.gateway).toBe('gw1');
      expect(e.object.uid).toBe(tracker.get('IptablesEIP', e.object.name)!.metadata!.uid);
    }
  });
});

describe('route() on changes a recording cannot easily show', () => {
  const eip = (uid: string, rv: string, extra: Partial<KubeObject> = {}): KubeObject => ({
    kind: 'IptablesEIP',
    metadata: { name: 'eip-x', uid, resourceVersion: rv },
    spec: { natGwDp: 'gw1' },
    ...extra,
  });

  it('treats a name whose uid changed between sightings as a deletion plus an addition', () => {
    const events = route({
      kind: 'IptablesEIP',
      type: 'MODIFIED',
      old: eip('u1', '5'),
      object: eip('u2', '9'),
    });
    expect(events.map((e) => `${e.handler}/${e.reason} ${e.object.uid}`)).toEqual([
      'delete/deleted u1',
      'add/added u2',
    ]);
    expect(events[0]!.old?.metadata?.uid).toBe('u1');
  });

  it('routes a v4ip set by a user on an EIP that never got an address (it may fix a rejected spec)', () => {
    const events = route({
      kind: 'IptablesEIP',
      type: 'MODIFIED',
      old: eip('u1', '5'),
      object: eip('u1', '6', { spec: { natGwDp: 'gw1', v4ip: '172.18.0.7' } }),
    });
    expect(events.map((e) => e.reason)).toEqual(['spec-changed']);
  });

  it('routes nothing for rule and gateway-pod sightings from the bridge’s first list', () => {
    const pod: KubeObject = {
      kind: 'Pod',
      metadata: {
        name: 'vpc-nat-gw-gw1-0',
        namespace: 'kube-system',
        uid: 'p1',
        resourceVersion: '3',
        labels: { app: 'vpc-nat-gw-gw1' }, // no annotation: the gateway comes from the app label
      },
      status: { phase: 'Running', containerStatuses: [{ name: 'vpc-nat-gw', ready: true, restartCount: 0 }] },
    };
    const rule: KubeObject = {
      kind: 'IptablesFIPRule',
      metadata: { name: 'f', uid: 'r1' },
      spec: { eip: 'eip-x' },
    };
    const eips = [eip('u1', '5')];
    expect(route({ kind: 'Pod', type: 'ADDED', object: pod, initial: true }, eips)).toEqual([]);
    expect(route({ kind: 'IptablesFIPRule', type: 'ADDED', object: rule, initial: true }, eips)).toEqual([]);
    expect(route({ kind: 'Pod', type: 'ADDED', object: pod }, eips).map((e) => e.reason)).toEqual([
      'gateway-ready',
    ]);
    expect(
      route({ kind: 'IptablesFIPRule', type: 'ADDED', object: rule }, eips).map((e) => e.reason),
    ).toEqual(['nat-rule-changed']);
  });

  it('still routes an EIP and a QoS policy from the first list (add converges; a policy edit needs the update)', () => {
    const qos: KubeObject = { kind: 'QoSPolicy', metadata: { name: 'q', uid: 'q1', resourceVersion: '2' } };
    const bound = [eip('u1', '5', { spec: { natGwDp: 'gw1', qosPolicy: 'q' } })];
    expect(route({ kind: 'IptablesEIP', type: 'ADDED', object: bound[0]!, initial: true }).length).toBe(1);
    expect(route({ kind: 'QoSPolicy', type: 'ADDED', object: qos, initial: true }, bound).length).toBe(1);
  });

  it('keeps a fanned-out id within the contract’s 256 characters for the longest EIP names', () => {
    const long = `${'a'.repeat(250)}-x`;
    const events = route({
      kind: 'IptablesFIPRule',
      type: 'ADDED',
      object: {
        metadata: { name: 'f', uid: '0'.repeat(36), resourceVersion: '123456789' },
        spec: { eip: long },
      },
    });
    expect(events[0]!.id.length).toBeLessThanOrEqual(256);
    expect(parseEipEvent(events[0]).object.name).toBe(long);
  });
});
