/**
 * Re-routing of blocked EIPs (ADR 0020): when what may block an EIP changes — an address released, a QoS policy
 * unbound, a Subnet, VpcNatGateway or nat-gw ConfigMap created or changed — the EIPs that wait on it get an update.
 * Driven through a Tracker, as the bridge feeds live watch events.
 */
import { describe, expect, it } from 'vitest';
import type { KubeObject, WatchedKind } from '../../shared/bridge/objects.js';
import { BLOCKER_REASONS, isWaiting } from '../../shared/bridge/route.js';
import { Tracker } from '../../shared/bridge/tracker.js';
import { type EipEvent, parseEipEvent, REASONS } from '../../shared/events.js';

let rv = 100;
const meta = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  uid: `uid-${name}`,
  resourceVersion: String(++rv),
  ...extra,
});
const eip = (
  name: string,
  spec: Record<string, unknown>,
  status: Record<string, unknown> = {},
): KubeObject => ({
  kind: 'IptablesEIP',
  metadata: meta(name),
  spec,
  status,
});

/** A tracker holding: two Ready EIPs and four waiting ones on various subnets, gateways and policies. */
function cluster() {
  const t = new Tracker();
  const add = (kind: WatchedKind, o: KubeObject) => t.observe(kind, 'ADDED', o, { initial: true });
  add('IptablesEIP', eip('ready-a', { natGwDp: 'gw1' }, { ready: true, ip: '172.18.0.2' }));
  add('IptablesEIP', eip('ready-q', { natGwDp: 'gw1', qosPolicy: 'q1' }, { ready: true, ip: '172.18.0.3' }));
  add('IptablesEIP', eip('wait-default', { natGwDp: 'gw1' }, { ready: false }));
  add('IptablesEIP', eip('wait-ext2', { natGwDp: 'gw2', externalSubnet: 'ext2' }));
  add('IptablesEIP', eip('wait-q1', { natGwDp: 'gw2', externalSubnet: 'ext2', qosPolicy: 'q1' }));
  const terminating = eip('gone-soon', { natGwDp: 'gw1' });
  terminating.metadata!.deletionTimestamp = '2026-11-30T10:00:00Z';
  add('IptablesEIP', terminating);
  return t;
}

const names = (events: EipEvent[]) => events.map((e) => `${e.handler}/${e.reason} ${e.object.name}`);
const released = `update/${BLOCKER_REASONS.addressReleased}`;

describe('re-routing blocked EIPs', () => {
  it('knows which EIPs wait: not terminating and not Ready', () => {
    const t = cluster();
    expect([...t.eips()].filter(isWaiting).map((e) => e.metadata?.name)).toEqual([
      'wait-default',
      'wait-ext2',
      'wait-q1',
    ]);
  });

  it('an EIP deleted releases its address: waiting EIPs on its external subnet, and on its policy, get an update', () => {
    const t = cluster();
    const gone = t.get('IptablesEIP', 'ready-q')!;
    const events = t.observe('IptablesEIP', 'DELETED', gone);
    expect(names(events)).toEqual([
      'delete/deleted ready-q',
      `${released} wait-default`, // same (default) external subnet
      `${released} wait-q1`, // its policy q1 is free now
    ]);
    // the ids are fanned out from the deleted EIP's change, one per target, and are valid handler events
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    for (const e of events) expect(parseEipEvent(JSON.parse(JSON.stringify(e)))).toEqual(e);
  });

  it('an EIP re-created under the same name while the watch was away released the old one’s address', () => {
    const t = cluster();
    const again = eip('ready-a', { natGwDp: 'gw1' });
    again.metadata!.uid = 'uid-ready-a-2';
    expect(names(t.observe('IptablesEIP', 'MODIFIED', again))).toEqual([
      'delete/deleted ready-a',
      'add/added ready-a',
      `update/dependency-changed wait-default`,
    ]);
  });

  it('a policy switched away from is unbound: waiting EIPs naming it get an update', () => {
    const t = cluster();
    const before = t.get('IptablesEIP', 'ready-q')!;
    const after = {
      ...before,
      metadata: { ...before.metadata, resourceVersion: '999' },
      spec: { natGwDp: 'gw1' },
    };
    expect(names(t.observe('IptablesEIP', 'MODIFIED', after))).toEqual([
      'update/qos-changed ready-q',
      `update/${BLOCKER_REASONS.qosPolicyUnbound} wait-q1`,
    ]);
  });

  it('a Subnet created or its spec changed updates the waiting EIPs on it; a status-only change nothing', () => {
    const t = cluster();
    const subnet: KubeObject = { kind: 'Subnet', metadata: meta('ext2'), spec: { cidrBlock: '10.9.0.0/24' } };
    const reason = `update/${BLOCKER_REASONS.subnetChanged}`;
    expect(names(t.observe('Subnet', 'ADDED', subnet))).toEqual([`${reason} wait-ext2`, `${reason} wait-q1`]);
    const usage = { ...subnet, metadata: meta('ext2'), status: { v4availableIPs: 250 } };
    expect(t.observe('Subnet', 'MODIFIED', usage)).toEqual([]);
    const widened = { ...usage, metadata: meta('ext2'), spec: { cidrBlock: '10.9.0.0/23' } };
    expect(names(t.observe('Subnet', 'MODIFIED', widened))).toHaveLength(2);
    expect(t.observe('Subnet', 'DELETED', widened)).toEqual([]);
  });

  it('a VpcNatGateway created or changed updates the waiting EIPs on that gateway', () => {
    const t = cluster();
    const gw: KubeObject = { kind: 'VpcNatGateway', metadata: meta('gw1'), spec: { lanIp: '10.0.1.254' } };
    expect(names(t.observe('VpcNatGateway', 'ADDED', gw))).toEqual([
      `update/${BLOCKER_REASONS.gatewayChanged} wait-default`,
    ]);
  });

  it('a nat-gw ConfigMap created, changed or deleted updates every EIP that is not terminating', () => {
    const t = cluster();
    const cm: KubeObject = {
      kind: 'ConfigMap',
      metadata: meta('ovn-vpc-nat-gw-config', { namespace: 'kube-system' }),
      data: { 'enable-vpc-nat-gw': 'true' },
    };
    const reason = `update/${BLOCKER_REASONS.natGwConfigChanged}`;
    const all = ['ready-a', 'ready-q', 'wait-default', 'wait-ext2', 'wait-q1'].map((n) => `${reason} ${n}`);
    expect(names(t.observe('ConfigMap', 'ADDED', cm))).toEqual(all);
    const same = { ...cm, metadata: { ...cm.metadata, resourceVersion: '1000' } };
    expect(t.observe('ConfigMap', 'MODIFIED', same)).toEqual([]); // metadata only
    const off = {
      ...same,
      metadata: { ...same.metadata, resourceVersion: '1001' },
      data: { 'enable-vpc-nat-gw': 'false' },
    };
    const offEvents = t.observe('ConfigMap', 'MODIFIED', off);
    expect(names(offEvents)).toEqual(all);
    const deleted = t.observe('ConfigMap', 'DELETED', off);
    expect(names(deleted)).toEqual(all);
    expect(deleted.map((e) => e.id)).not.toEqual(offEvents.map((e) => e.id)); // the deletion is a change of its own
  });

  it('routes nothing for blocker objects seen in the bridge’s first list (the start-up add covers every EIP)', () => {
    const t = cluster();
    const first = { initial: true };
    expect(t.observe('Subnet', 'ADDED', { kind: 'Subnet', metadata: meta('ext2'), spec: {} }, first)).toEqual(
      [],
    );
    expect(
      t.observe('VpcNatGateway', 'ADDED', { kind: 'VpcNatGateway', metadata: meta('gw2'), spec: {} }, first),
    ).toEqual([]);
    expect(
      t.observe(
        'ConfigMap',
        'ADDED',
        { kind: 'ConfigMap', metadata: meta('ovn-vpc-nat-config'), data: {} },
        first,
      ),
    ).toEqual([]);
  });

  it('sends reasons from the event contract', () => {
    for (const r of Object.values(BLOCKER_REASONS)) expect(REASONS).toContain(r);
  });
});
