/**
 * The drift model on hand-built snapshots: a consistent world is clean, and each kind of drift is found, with the
 * repair it calls for — and in-flight work (fresh claims, held leases, terminating EIPs) is not judged.
 */
import { describe, expect, it } from 'vitest';
import type { GatewayState } from '../../shared/audit/inspect.js';
import { type AuditSnapshot, type Drift, findDrift } from '../../shared/audit/model.js';
import type { GatewayPod, IptablesEip } from '../../shared/domain/kube-ovn.js';
import type { Pool } from '../../shared/ports.js';

const NOW = Date.parse('2026-11-30T12:00:00Z');
const HOUR = 3_600_000;
const pool: Pool = { subnet: 'ext', family: 4, cidr: '172.18.0.0/24', gateway: '172.18.0.1', exclude: [] };

const pod = (gw: string, uid: string, own: string): GatewayPod => ({
  namespace: 'kube-system',
  name: `vpc-nat-gw-${gw}-0`,
  uid,
  phase: 'Running',
  creationTimestamp: '2026-11-30T10:00:00Z',
  app: `vpc-nat-gw-${gw}`,
  addresses: { ext: own },
});

const eip = (
  name: string,
  ip: string,
  extra: Partial<IptablesEip['status']> = {},
  gw = 'gw1',
): IptablesEip => ({
  apiVersion: 'kubeovn.io/v1',
  kind: 'IptablesEIP',
  metadata: {
    name,
    uid: `uid-${name}`,
    resourceVersion: '1',
    // The labels the product writes on a configured EIP (shared/core/view.ts desiredLabels).
    labels: {
      'ovn.kubernetes.io/subnet': 'ext',
      'ovn.kubernetes.io/vpc-nat-gw-name': gw,
      'ovn.kubernetes.io/eip_v4_ip': ip,
      ...(extra.qosPolicy && { 'ovn.kubernetes.io/qos': extra.qosPolicy }),
    },
  },
  spec: { natGwDp: gw, externalSubnet: 'ext', v4ip: ip },
  status: { ready: true, ip, redo: 'x', nat: '', qosPolicy: '', ...extra },
});

const addr = (address: string, prefix = 24) => ({
  family: 4 as const,
  address,
  prefix,
  scope: 'global',
  flags: ['secondary'],
});

function world(): AuditSnapshot {
  const gw1: GatewayState = {
    gateway: 'gw1',
    pod: 'kube-system/vpc-nat-gw-gw1-0',
    podUid: 'p1',
    scope: '',
    addresses: [addr('172.18.0.254'), addr('172.18.0.11'), addr('172.18.0.12')],
    filters: [
      { direction: 'ingress', ip: '172.18.0.12', prio: 1, rate: '10Mbit', rateBps: 10e6 },
      { direction: 'egress', ip: '172.18.0.12', prio: 1, rate: '20Mbit', rateBps: 20e6 },
    ],
    readAt: NOW,
  };
  const gw2: GatewayState = {
    gateway: 'gw2',
    pod: 'kube-system/vpc-nat-gw-gw2-0',
    podUid: 'p2',
    scope: '',
    addresses: [addr('172.18.0.253')],
    filters: [],
    readAt: NOW,
  };
  return {
    now: NOW,
    pods: [pod('gw1', 'p1', '172.18.0.254'), pod('gw2', 'p2', '172.18.0.253')],
    gateways: [gw1, gw2],
    unreadable: [],
    eips: [eip('a', '172.18.0.11'), eip('b', '172.18.0.12', { qosPolicy: 'q' })],
    allocations: [
      {
        subnet: 'ext',
        family: 4,
        address: '172.18.0.11',
        owner: { uid: 'uid-a', name: 'a' },
        claimedAt: NOW - HOUR,
      },
      {
        subnet: 'ext',
        family: 4,
        address: '172.18.0.12',
        owner: { uid: 'uid-b', name: 'b' },
        claimedAt: NOW - HOUR,
        placement: { gateway: 'gw1', prefix: 24 },
      },
      {
        subnet: 'ext',
        family: 4,
        address: '172.18.0.254',
        owner: { uid: 'pod:p1', name: 'gw1 pod' },
        claimedAt: NOW - HOUR,
      },
      {
        subnet: 'ext',
        family: 4,
        address: '172.18.0.253',
        owner: { uid: 'pod:p2', name: 'gw2 pod' },
        claimedAt: NOW - HOUR,
      },
    ],
    leases: [],
    qos: {
      q: {
        rules: [
          { direction: 'ingress', rateMax: '10', priority: 1 },
          { direction: 'egress', rateMax: '20', priority: 1 },
        ],
      },
    },
    pools: { gw1: [pool], gw2: [pool] },
  };
}

const kinds = (d: Drift[]) => d.map((x) => x.kind).sort();

describe('drift model', () => {
  it('a consistent world has no drift', () => {
    expect(findDrift(world())).toEqual([]);
  });

  it('leaked allocation: owner uid gone (a fresh claim is in flight and not judged)', () => {
    const s = world();
    s.allocations.push(
      {
        subnet: 'ext',
        family: 4,
        address: '172.18.0.40',
        owner: { uid: 'gone', name: 'old' },
        claimedAt: NOW - HOUR,
      },
      {
        subnet: 'ext',
        family: 4,
        address: '172.18.0.41',
        owner: { uid: 'new', name: 'fresh' },
        claimedAt: NOW - 1000,
      },
      {
        subnet: 'ext',
        family: 4,
        address: '172.18.0.42',
        owner: { uid: 'pod:gone', name: 'old pod' },
        claimedAt: NOW - HOUR,
      },
    );
    const d = findDrift(s);
    expect(d.map((x) => [x.kind, x.address, x.repair])).toEqual([
      ['leaked-allocation', '172.18.0.40', 'release'],
      ['leaked-allocation', '172.18.0.42', 'release'],
    ]);
  });

  it('orphan address: on net1, claimed by nobody; outside the allocatable range it is reported only', () => {
    const s = world();
    s.gateways[0]!.addresses.push(addr('172.18.0.50'), addr('172.18.0.255'), addr('10.9.9.9', 8));
    const d = findDrift(s);
    expect(d.map((x) => [x.kind, x.address, x.repair, x.subnet])).toEqual([
      ['orphan-address', '172.18.0.50', 'remove-orphan', 'ext'],
      ['orphan-address', '172.18.0.255', undefined, undefined],
      ['orphan-address', '10.9.9.9', undefined, undefined],
    ]);
    expect(d[0]).toMatchObject({ gateway: 'gw1', prefix: 24 });
  });

  it("the pod's own address and link-local or v6 addresses are never orphans", () => {
    const s = world();
    s.gateways[0]!.addresses.push({ family: 6, address: 'fe80::1', prefix: 64, scope: 'link', flags: [] });
    s.allocations = s.allocations.filter((a) => !a.owner.uid.startsWith('pod:'));
    expect(findDrift(s)).toEqual([]);
  });

  it('missing address: Ready, allocated, not on net1 → redo', () => {
    const s = world();
    s.gateways[0]!.addresses = s.gateways[0]!.addresses.filter((a) => a.address !== '172.18.0.11');
    expect(findDrift(s)).toEqual([
      expect.objectContaining({
        kind: 'missing-address',
        eip: 'a',
        gateway: 'gw1',
        address: '172.18.0.11',
        repair: 'redo',
      }),
    ]);
  });

  it('not judged: an EIP whose lease is held, a terminating one, one not Ready, or on an unreadable gateway', () => {
    const base = () => {
      const s = world();
      s.gateways[0]!.addresses = s.gateways[0]!.addresses.filter((a) => a.address !== '172.18.0.11');
      return s;
    };
    const leased = base();
    leased.leases.push({ key: 'eip#a', holder: 'h', expiresAt: NOW + 10_000 });
    expect(findDrift(leased)).toEqual([]);
    const terminating = base();
    terminating.eips[0]!.metadata.deletionTimestamp = '2026-11-30T11:59:00Z';
    expect(findDrift(terminating)).toEqual([]);
    const redoPending = base();
    redoPending.eips[0]!.status!.ready = false;
    expect(findDrift(redoPending)).toEqual([]);
    const unreadable = base();
    unreadable.gateways = unreadable.gateways.filter((g) => g.gateway !== 'gw1');
    unreadable.unreadable.push({ gateway: 'gw1', error: 'exec failed' });
    expect(kinds(findDrift(unreadable))).toEqual(['gateway-unreadable']);
  });

  it('placement wins over spec.natGwDp: the address is judged on the gateway it was configured on', () => {
    const s = world();
    s.eips[1]!.spec.natGwDp = 'gw2'; // edited after configuration; the allocation says gw1
    expect(findDrift(s)).toEqual([]);
  });

  it('duplicate address on two gateways; misplaced address on the wrong one', () => {
    const dup = world();
    dup.gateways[1]!.addresses.push(addr('172.18.0.11'));
    expect(findDrift(dup)).toEqual([
      expect.objectContaining({ kind: 'duplicate-address', address: '172.18.0.11', eip: 'a' }),
    ]);
    const moved = world();
    moved.gateways[0]!.addresses = moved.gateways[0]!.addresses.filter((a) => a.address !== '172.18.0.11');
    moved.gateways[1]!.addresses.push(addr('172.18.0.11'));
    expect(kinds(findDrift(moved))).toEqual(['misplaced-address', 'missing-address']);
  });

  it('status mismatch: status.ip not allocated to the EIP, Ready without status.ip, a surplus allocation', () => {
    const s = world();
    s.allocations = s.allocations.filter((a) => a.address !== '172.18.0.11');
    s.gateways[0]!.addresses = s.gateways[0]!.addresses.filter((a) => a.address !== '172.18.0.11');
    s.eips.push({ ...eip('c', ''), status: { ready: true } });
    s.allocations.push({
      subnet: 'ext',
      family: 4,
      address: '172.18.0.60',
      owner: { uid: 'uid-b', name: 'b' },
      claimedAt: NOW - HOUR,
    });
    const d = findDrift(s).filter((x) => x.kind === 'status-mismatch');
    expect(d.map((x) => [x.eip, x.repair])).toEqual([
      ['a', 'resync'],
      ['b', undefined],
      ['c', 'resync'],
    ]);
  });

  it('status mismatch: status.ip written by hand while the allocation holds another address → restore-status', () => {
    const s = world();
    s.eips[0]!.status!.ip = '172.18.0.99';
    s.eips[0]!.metadata.labels = { 'ovn.kubernetes.io/eip_v4_ip': '172.18.0.99' };
    expect(findDrift(s)).toEqual([
      expect.objectContaining({
        kind: 'status-mismatch',
        eip: 'a',
        address: '172.18.0.99',
        allocated: '172.18.0.11',
        repair: 'restore-status',
      }),
    ]);
  });

  it('label mismatch: eip_v4_ip differs from status.ip, or is missing', () => {
    const s = world();
    s.eips[0]!.metadata.labels = { 'ovn.kubernetes.io/eip_v4_ip': '172.18.0.99' };
    delete s.eips[1]!.metadata.labels;
    expect(findDrift(s).map((x) => [x.kind, x.eip, x.repair])).toEqual([
      ['label-mismatch', 'a', 'resync'],
      ['label-mismatch', 'b', 'resync'],
    ]);
  });

  it('labels and status.qosPolicy are judged against the allocation record (ADR 0086)', () => {
    const s = world();
    // b's allocation records policy q as applied; a hand edit removes its qos label and rewrites status.qosPolicy.
    s.allocations[1]!.placement = { gateway: 'gw1', prefix: 24, qos: 'q' };
    delete s.eips[1]!.metadata.labels!['ovn.kubernetes.io/qos'];
    s.eips[1]!.status!.qosPolicy = '';
    // a: its subnet label edited.
    s.eips[0]!.metadata.labels!['ovn.kubernetes.io/subnet'] = 'elsewhere';
    const found = findDrift(s);
    expect(found.map((x) => [x.kind, x.eip, x.repair])).toEqual([
      ['label-mismatch', 'a', 'resync'],
      ['label-mismatch', 'b', 'resync'],
      ['status-mismatch', 'b', 'resync'],
    ]);
    expect(found[1]!.message).toContain('ovn.kubernetes.io/qos=(none)');
    expect(found[1]!.message).toContain('ovn.kubernetes.io/qos=q');
    // The filters are judged against the recorded policy, not the edited status (judged against '', they would be
    // "polices an address with no policy"): they match q, no qos-drift.
    expect(found.some((x) => x.kind === 'qos-drift')).toBe(false);
  });

  it('stale lease: past its expiry by more than the slack; a recently expired one is left alone', () => {
    const s = world();
    s.leases.push(
      { key: 'eip#x', holder: 'h1', expiresAt: NOW - 10 * 60_000 },
      { key: 'eip#y', holder: 'h2', expiresAt: NOW - 5_000 },
    );
    expect(findDrift(s)).toEqual([
      expect.objectContaining({ kind: 'stale-lease', eip: 'x', repair: 'delete-lease', lease: s.leases[0] }),
    ]);
  });

  it('QoS drift: a missing direction, a wrong rate, a filter without a policy, a filter for nobody', () => {
    const missing = world();
    missing.gateways[0]!.filters = missing.gateways[0]!.filters.filter((f) => f.direction !== 'egress');
    expect(findDrift(missing)).toEqual([
      expect.objectContaining({ kind: 'qos-drift', eip: 'b', repair: 'redo' }),
    ]);
    const rate = world();
    rate.gateways[0]!.filters[0] = { ...rate.gateways[0]!.filters[0]!, rate: '5Mbit', rateBps: 5e6 };
    expect(findDrift(rate)).toEqual([
      expect.objectContaining({ kind: 'qos-drift', eip: 'b', repair: 'redo' }),
    ]);
    const unbound = world();
    unbound.gateways[0]!.filters.push({ direction: 'ingress', ip: '172.18.0.11', prio: 3, rateBps: 1e6 });
    // A filter put on by hand: stripped (only while the EIP still has no policy).
    expect(findDrift(unbound).map((x) => [x.kind, x.eip, x.repair, x.directions, x.policy])).toEqual([
      ['qos-drift', 'a', 'strip-qos', ['ingress'], ''],
    ]);
    const nobody = world();
    nobody.gateways[0]!.filters.push({ direction: 'egress', ip: '172.18.0.77', prio: 3 });
    expect(findDrift(nobody)).toEqual([
      expect.objectContaining({
        kind: 'qos-drift',
        gateway: 'gw1',
        address: '172.18.0.77',
        repair: 'strip-qos',
        directions: ['egress'],
      }),
    ]);
  });

  it('hairpin SNAT (1.16+): a Ready address without its rule is drift, repaired by a redo; older releases read none', () => {
    const hairpin = (address: string) => ({ address, toSource: address, outInterface: 'eth0' });
    const complete = world();
    complete.gateways[0]!.hairpin = [hairpin('172.18.0.11'), hairpin('172.18.0.12')];
    expect(findDrift(complete)).toEqual([]);
    const missing = world();
    missing.gateways[0]!.hairpin = [
      hairpin('172.18.0.12'),
      { ...hairpin('172.18.0.11'), toSource: '172.18.0.99' },
    ];
    expect(findDrift(missing)).toEqual([
      expect.objectContaining({ kind: 'missing-hairpin', eip: 'a', address: '172.18.0.11', repair: 'redo' }),
    ]);
    // Not read (1.12-1.15, or the nat table unreadable): nothing is judged.
    expect(findDrift(world())).toEqual([]);
  });
});
