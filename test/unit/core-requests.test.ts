/**
 * Fewer requests per add (ADR 0041, ADR 0042): one read of the EIP under its lease, status.nat from the event's hint
 * only when it agrees with the EIP, the placement written with the claim, and no reservation of the gateway pods'
 * own addresses on the way. Requests are counted at the port seam.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { Tracker } from '../../shared/bridge/tracker.js';
import { FINALIZER } from '../../shared/domain/kube-ovn.js';
import { NAT_HINTS, parseEipEvent } from '../../shared/events.js';
import { type World, world } from '../support/world.js';

/** Counts the calls of every Cluster and Ipam method (the real in-memory adapters still answer them). */
function count(w: World): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const [port, obj] of [
    ['cluster', w.cluster],
    ['ipam', w.ipam],
    ['leases', w.leases],
  ] as const) {
    const proto = Object.getPrototypeOf(obj);
    for (const m of Object.getOwnPropertyNames(proto)) {
      const target = obj as unknown as Record<string, (...a: unknown[]) => unknown>;
      if (m === 'constructor' || typeof target[m] !== 'function') continue;
      const original = target[m].bind(obj);
      vi.spyOn(target, m).mockImplementation((...a: unknown[]) => {
        // The gateway pod's lease (ADR 0110) is counted apart from the EIP's.
        const leaseOf = (x: unknown) => (x as { key?: string })?.key ?? String(x);
        const gatewayLease = port === 'leases' && /^pod#/.test(leaseOf(a[0]));
        const name = `${gatewayLease ? 'gatewayLease' : port}.${m}`;
        calls[name] = (calls[name] ?? 0) + 1;
        return original(...a);
      });
    }
  }
  return calls;
}

describe('an add reads the EIP once, under its lease', () => {
  it('one getEip, taken after the lease', async () => {
    const w = world();
    w.eip('eip-a');
    const order: string[] = [];
    const acquire = w.leases.acquire.bind(w.leases);
    const getEip = w.cluster.getEip.bind(w.cluster);
    vi.spyOn(w.leases, 'acquire').mockImplementation((...a) => {
      order.push(a[0].startsWith('pod#') ? 'gateway lease' : 'lease');
      return acquire(...a);
    });
    vi.spyOn(w.cluster, 'getEip').mockImplementation((...a) => {
      order.push('getEip');
      return getEip(...a);
    });
    expect(await w.run('add', 'eip-a', 'added')).toMatchObject({ status: 'applied' });
    // The gateway pod's lease only for the exec, after everything the add decides on was read (ADR 0110).
    expect(order).toEqual(['lease', 'getEip', 'gateway lease']);
  });

  it('an event for an EIP that is gone is skipped under the lease, and the lease is given back', async () => {
    const w = world();
    const calls = count(w);
    expect(await w.run('add', 'nope', 'added')).toMatchObject({ status: 'skipped', reason: 'not found' });
    expect(calls).toMatchObject({ 'leases.acquire': 1, 'leases.release': 1, 'cluster.getEip': 1 });
    w.eip('nope');
    expect(await w.run('add', 'nope', 'added')).toMatchObject({ status: 'applied' }); // the lease is free again
  });

  it('a stale event (the name now belongs to another uid) changes nothing', async () => {
    const w = world();
    w.eip('eip-a');
    const outcome = await w.run('add', 'eip-a', 'added', { object: { name: 'eip-a', uid: 'old-uid' } });
    expect(outcome).toMatchObject({ status: 'skipped' });
    expect(w.get('eip-a')?.metadata.finalizers ?? []).toEqual([]);
    expect(w.ipam.allocations.size).toBe(0);
  });
});

describe('status.nat from the event hint', () => {
  it('a hint equal to the EIP status.nat is trusted: no rule listing', async () => {
    const w = world();
    w.eip('eip-a');
    const calls = count(w);
    expect(await w.run('add', 'eip-a', 'added', { nat: '' })).toMatchObject({ status: 'applied' });
    expect(calls['cluster.listNatRulesForEip'] ?? 0).toBe(0);
    expect(w.get('eip-a')?.status?.nat ?? '').toBe('');
  });

  it('without a hint the rules are listed, as before', async () => {
    const w = world();
    w.eip('eip-a');
    w.cluster.putRule('IptablesFIPRule', 'f1', 'eip-a');
    const calls = count(w);
    await w.run('add', 'eip-a', 'added');
    expect(calls['cluster.listNatRulesForEip']).toBe(1);
    expect(w.get('eip-a')?.status?.nat).toBe('fip');
  });

  it('a hint that differs from status.nat is not written: the rules are listed and decide', async () => {
    const w = world();
    w.eip('eip-a');
    w.cluster.putRule('IptablesDnatRule', 'd1', 'eip-a');
    const calls = count(w);
    // A stale hint ("fip", from before the rules changed) must not be written.
    await w.run('add', 'eip-a', 'added', { nat: 'fip' });
    expect(calls['cluster.listNatRulesForEip']).toBe(1);
    expect(w.get('eip-a')?.status?.nat).toBe('dnat');
  });

  it('an older event processed after a newer one leaves the truth in place', async () => {
    const w = world();
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added', { nat: '' });
    // A rule is created; its reset carries the new hint and lists (the hint differs from status).
    w.cluster.putRule('IptablesFIPRule', 'f1', 'eip-a');
    await w.run('reset', 'eip-a', 'nat-rule-changed', { nat: 'fip' });
    expect(w.get('eip-a')?.status?.nat).toBe('fip');
    // The add's event, redelivered late with its old hint: it differs from status, so the rules are listed.
    await w.run('update', 'eip-a', 'resync', { nat: '' });
    expect(w.get('eip-a')?.status?.nat).toBe('fip');
  });

  it('deletion never trusts the hint: rules still naming the EIP hold its finalizer', async () => {
    const w = world();
    w.eip('eip-a');
    await w.run('add', 'eip-a', 'added', { nat: '' });
    w.cluster.putRule('IptablesFIPRule', 'f1', 'eip-a');
    w.cluster.eips.get('eip-a')!.metadata.deletionTimestamp = new Date(w.clock.now()).toISOString();
    const outcome = await w.run('update', 'eip-a', 'deletion-requested', { nat: '' });
    expect(outcome).toMatchObject({ status: 'skipped' });
    expect(w.get('eip-a')?.metadata.finalizers).toEqual([FINALIZER]);
    expect(w.net1().some((a) => a.startsWith(w.get('eip-a')!.status!.ip!))).toBe(true);
  });
});

describe("the bridge's hint: status.nat from its NAT rule cache", () => {
  const rule = (kind: string, name: string, eip: string, extra: Record<string, unknown> = {}) => ({
    kind,
    metadata: { name, namespace: '', uid: `uid-${name}`, resourceVersion: '1', ...extra },
    spec: { eip },
  });

  it('follows rules added, moved, terminating and deleted, in kube-ovn order', () => {
    const t = new Tracker();
    expect(t.natOf('eip-a')).toBe('');
    t.observe('IptablesSnatRule', 'ADDED', rule('IptablesSnatRule', 's1', 'eip-a'));
    t.observe('IptablesFIPRule', 'ADDED', rule('IptablesFIPRule', 'f1', 'eip-a'));
    t.observe('IptablesDnatRule', 'ADDED', rule('IptablesDnatRule', 'd1', 'eip-b'));
    expect(t.natOf('eip-a')).toBe('fip,snat');
    expect(t.natOf('eip-b')).toBe('dnat');
    t.observe('IptablesDnatRule', 'MODIFIED', rule('IptablesDnatRule', 'd1', 'eip-a')); // moved
    expect(t.natOf('eip-a')).toBe('dnat,fip,snat');
    expect(t.natOf('eip-b')).toBe('');
    t.observe(
      'IptablesFIPRule',
      'MODIFIED',
      rule('IptablesFIPRule', 'f1', 'eip-a', { deletionTimestamp: '2026-11-30T00:00:00Z' }),
    );
    expect(t.natOf('eip-a')).toBe('dnat,snat');
    t.observe('IptablesSnatRule', 'DELETED', rule('IptablesSnatRule', 's1', 'eip-a'));
    expect(t.natOf('eip-a')).toBe('dnat');
  });

  it('agrees with what the handlers compute from a listing', async () => {
    const w = world();
    const t = new Tracker();
    w.eip('eip-a');
    for (const [kind, name] of [
      ['IptablesDnatRule', 'd1'],
      ['IptablesSnatRule', 's1'],
    ] as const) {
      w.cluster.putRule(kind, name, 'eip-a');
      t.observe(kind, 'ADDED', rule(kind, name, 'eip-a'));
    }
    await w.run('add', 'eip-a', 'added');
    expect(t.natOf('eip-a')).toBe(w.get('eip-a')?.status?.nat);
  });
});

describe('the placement is written with the claim', () => {
  it('a fresh add claims with its placement: no separate place write', async () => {
    const w = world();
    w.eip('eip-a');
    const calls = count(w);
    await w.run('add', 'eip-a', 'added', { nat: '' });
    expect(calls['ipam.place'] ?? 0).toBe(0);
    const [a] = await w.ipam.findByOwner(w.get('eip-a')!.metadata.uid);
    // With no QoS policy nothing is policed: the claim records that too (ADR 0086).
    expect(a?.placement).toEqual({ gateway: 'gw1', prefix: 24, qos: '' });
  });

  it('an add with a QoS policy records what is policed in one more write; an unshared one takes its hold', async () => {
    const w = world();
    w.qos('q-shared', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '10' }], {
      shared: true,
    });
    w.qos('q-own', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '10' }]);
    w.eip('eip-s', { qosPolicy: 'q-shared' });
    w.eip('eip-o', { qosPolicy: 'q-own' });
    const calls = count(w);
    const holds = vi.spyOn(w.holds, 'hold');
    expect(await w.run('add', 'eip-s', 'added', { nat: '' })).toMatchObject({ status: 'applied' });
    expect([calls['ipam.claimAny'], calls['ipam.place'], holds.mock.calls.length]).toEqual([1, 1, 0]);
    expect(await w.run('add', 'eip-o', 'added', { nat: '' })).toMatchObject({ status: 'applied' });
    expect([calls['ipam.claimAny'], calls['ipam.place'], holds.mock.calls.length]).toEqual([2, 2, 1]);
    const [a] = await w.ipam.findByOwner(w.get('eip-o')!.metadata.uid);
    expect(a?.placement).toEqual({ gateway: 'gw1', prefix: 24, qos: 'q-own' });
    expect(await w.holds.findHolder('q-own')).toEqual({ uid: w.get('eip-o')!.metadata.uid, name: 'eip-o' });
  });

  it('an add sends three DynamoDB requests: the lease, the claim with its placement, the lease back (ADR 0042), and, alone in its container, the gateway lease taken and given back (ADR 0110)', async () => {
    const w = world();
    // A gateway pod with its own address on the EIP's network: avoided at the claim, never reserved by the add.
    w.createPod(undefined, { 'ovn-vpc-external-network': '172.18.0.2' });
    for (const name of ['eip-a', 'eip-b']) {
      w.eip(name);
      vi.restoreAllMocks();
      const calls = count(w);
      expect(await w.run('add', name, 'added', { nat: '' })).toMatchObject({ status: 'applied' });
      // The methods of the Ipam and Leases ports (each one DynamoDB request or more on the real adapters).
      const ports = ['claimAddress', 'claimAny', 'findByOwner', 'release', 'place', 'acquire'];
      const dynamo = Object.entries(calls).filter(
        ([k]) => /^(ipam|leases|gatewayLease)\./.test(k) && ports.includes(k.split('.')[1]!),
      );
      expect(Object.fromEntries(dynamo)).toEqual({
        'leases.acquire': 1,
        'ipam.claimAny': 1,
        'leases.release': 1,
        'gatewayLease.acquire': 1,
        'gatewayLease.release': 1,
      });
    }
    expect([...w.ipam.allocations.values()].map((a) => a.address).sort()).toEqual([
      '172.18.0.3',
      '172.18.0.4',
    ]);
  });

  it('a static address too', async () => {
    const w = world();
    w.eip('eip-s', { v4ip: '172.18.0.77' });
    const calls = count(w);
    await w.run('add', 'eip-s', 'added');
    expect(calls['ipam.place'] ?? 0).toBe(0);
    const [a] = await w.ipam.findByOwner(w.get('eip-s')!.metadata.uid);
    expect(a).toMatchObject({ address: '172.18.0.77', placement: { gateway: 'gw1', prefix: 24, qos: '' } });
  });

  it('a retry whose earlier claim was recorded without a placement moves it with place', async () => {
    const w = world();
    w.eip('eip-a');
    const uid = w.get('eip-a')!.metadata.uid;
    const pool = {
      subnet: 'ovn-vpc-external-network',
      family: 4 as const,
      cidr: '172.18.0.0/24',
      gateway: '172.18.0.1',
      exclude: [],
    };
    const earlier = await w.ipam.claimAny(pool, { uid, name: 'eip-a' }); // a claim recorded without placement
    expect(earlier.placement).toBeUndefined();
    const calls = count(w);
    expect(await w.run('add', 'eip-a', 'added')).toMatchObject({ status: 'applied', ip: earlier.address });
    expect(calls['ipam.place']).toBe(1);
    expect((await w.ipam.findByOwner(uid))[0]?.placement).toEqual({ gateway: 'gw1', prefix: 24, qos: '' });
  });
});

describe('the nat hint in the event contract', () => {
  const schema = JSON.parse(readFileSync(join(import.meta.dirname, '../../events/schema.json'), 'utf8'));
  const good = { version: 1, id: 'x', handler: 'add', reason: 'added', object: { name: 'eip-1' } };

  it('the schema and the parser accept the same values', () => {
    expect(schema.definitions.detail.properties.nat.enum).toEqual([...NAT_HINTS]);
    for (const nat of NAT_HINTS) expect(parseEipEvent({ ...good, nat }).nat).toBe(nat);
    expect(parseEipEvent(good).nat).toBeUndefined();
  });

  it.each([['fip,dnat'], ['FIP'], ['dnat,'], [' fip'], [3]])('refuses %j, naming the field', (nat) => {
    expect(() => parseEipEvent({ ...good, nat })).toThrow(/event\.nat must be one of/);
  });
});

/**
 * What a single-pod gateway costs per operation, request by request and exec by exec: pinned before replicated
 * gateways were served (docs/adr/0105-ha-gateways.md: "a single-pod gateway costs what it does today"), so that the
 * per-pod core changes none of it. One difference, on purpose: deletion no longer reads the feature switch (the pods
 * listed are the targets whatever it says, ADR 0105), one request fewer.
 */
describe('a single-pod gateway costs what it did before replicas were served', () => {
  const execs = (w: World) => w.gateway.calls.length;
  const policy = () => [
    { name: 'in', direction: 'ingress' as const, priority: 1, rateMax: '10', burstMax: '10' },
  ];

  it('add, resync, QoS change, a restart redone and deletion: the same requests and execs', async () => {
    const w = world();
    w.qos('q1', policy(), { shared: true });
    w.eip('eip-a');
    w.eip('eip-b', { qosPolicy: 'q1' });
    const costs: Record<string, { calls: Record<string, number>; execs: number }> = {};
    const measure = async (step: string, f: () => Promise<unknown>) => {
      vi.restoreAllMocks();
      const calls = count(w);
      const before = execs(w);
      await f();
      costs[step] = { calls: requests(calls), execs: execs(w) - before };
    };
    await measure('add', () => w.run('add', 'eip-a', 'added', { nat: '' }));
    await measure('add with qos', () => w.run('add', 'eip-b', 'added', { nat: '' }));
    await measure('resync', () => w.run('update', 'eip-a', 'resync', { nat: '' }));
    w.cluster.editEipSpec('eip-a', { qosPolicy: 'q1' });
    await measure('qos change', () => w.run('update', 'eip-a', 'spec-changed', { nat: '' }));
    w.restartContainer();
    await measure('restart redone', () => w.run('update', 'eip-a', 'gateway-restarted', { nat: '' }));
    await measure('restart, second eip', () => w.run('update', 'eip-b', 'gateway-restarted', { nat: '' }));
    w.cluster.deleteEip('eip-a', new Date(w.clock.now()).toISOString());
    await measure('delete', () => w.run('update', 'eip-a', 'deletion-requested'));
    expect(costs).toEqual(SINGLE_POD_COSTS);
  });
});

/**
 * The port requests among the counted calls (the in-memory adapters' own helpers left out). Finding the gateway's one
 * pod and finding all of its pods are the same request (one pod listing; the name prefix comes from a ConfigMap the
 * feature check has read, which the Kubernetes adapter keeps).
 */
function requests(calls: Record<string, number>): Record<string, number> {
  const port = new Set([
    ...['getEip', 'listEips', 'listEipsByLabel', 'getQosPolicy', 'getSubnet', 'getVpcNatGateway'],
    ...['listNatRulesForEip', 'findGatewayPods', 'listGatewayPods', 'natGwFeature', 'updateEip'],
    ...['patchEipStatus', 'emitEvent', 'claimAddress', 'claimAny', 'findByOwner', 'release', 'place'],
    ...['transfer', 'heldAt', 'acquire'],
  ]);
  const out: Record<string, number> = {};
  for (const [k, n] of Object.entries(calls)) {
    const [p, m0] = k.split('.') as [string, string];
    const m = m0 === 'findGatewayPod' ? 'findGatewayPods' : m0;
    if (port.has(m)) out[`${p}.${m}`] = (out[`${p}.${m}`] ?? 0) + n;
  }
  return out;
}

const SINGLE_POD_COSTS = {
  add: {
    calls: {
      'leases.acquire': 1,
      'cluster.getEip': 1,
      'cluster.natGwFeature': 1,
      'cluster.getSubnet': 1,
      'cluster.getVpcNatGateway': 1,
      'cluster.listGatewayPods': 1,
      'cluster.updateEip': 2,
      'ipam.claimAny': 1,
      'gatewayLease.acquire': 1,
      'cluster.patchEipStatus': 1,
      'leases.release': 1,
      'gatewayLease.release': 1,
    },
    execs: 1,
  },
  'add with qos': {
    calls: {
      'leases.acquire': 1,
      'cluster.getEip': 1,
      'cluster.natGwFeature': 1,
      'cluster.getSubnet': 1,
      'cluster.getVpcNatGateway': 1,
      'cluster.listGatewayPods': 1,
      'cluster.getQosPolicy': 1,
      'cluster.updateEip': 2,
      'ipam.claimAny': 1,
      'gatewayLease.acquire': 1,
      'ipam.place': 1,
      'cluster.patchEipStatus': 1,
      'leases.release': 1,
      'gatewayLease.release': 1,
    },
    execs: 2,
  },
  resync: {
    calls: {
      'leases.acquire': 1,
      'cluster.getEip': 1,
      'cluster.natGwFeature': 1,
      'cluster.getSubnet': 2,
      'ipam.findByOwner': 1,
      'cluster.findGatewayPods': 1,
      'leases.release': 1,
    },
    execs: 0,
  },
  'qos change': {
    calls: {
      'leases.acquire': 1,
      'cluster.getEip': 1,
      'cluster.natGwFeature': 1,
      'cluster.getSubnet': 2,
      'ipam.findByOwner': 1,
      'cluster.findGatewayPods': 1,
      'cluster.getQosPolicy': 1,
      'cluster.getVpcNatGateway': 1,
      'gatewayLease.acquire': 1,
      'ipam.place': 1,
      'cluster.updateEip': 1,
      'cluster.patchEipStatus': 1,
      'leases.release': 1,
      'gatewayLease.release': 1,
    },
    execs: 1,
  },
  'restart redone': {
    calls: {
      'leases.acquire': 1,
      'cluster.getEip': 1,
      'cluster.natGwFeature': 1,
      'cluster.getSubnet': 3,
      'ipam.findByOwner': 1,
      'cluster.findGatewayPods': 1,
      'cluster.getVpcNatGateway': 1,
      'gatewayLease.acquire': 1,
      'cluster.listEipsByLabel': 1,
      'ipam.heldAt': 1,
      'cluster.getQosPolicy': 2,
      'cluster.patchEipStatus': 1,
      'leases.release': 1,
      'gatewayLease.release': 1,
    },
    execs: 2,
  },
  'restart, second eip': {
    calls: {
      'leases.acquire': 1,
      'cluster.getEip': 1,
      'cluster.natGwFeature': 1,
      'cluster.getSubnet': 2,
      'ipam.findByOwner': 1,
      'cluster.findGatewayPods': 1,
      'cluster.getVpcNatGateway': 1,
      'cluster.getQosPolicy': 1,
      'cluster.patchEipStatus': 1,
      'leases.release': 1,
    },
    execs: 0,
  },
  delete: {
    calls: {
      'leases.acquire': 1,
      'cluster.getEip': 1,
      'cluster.getSubnet': 1,
      'ipam.findByOwner': 1,
      'cluster.listNatRulesForEip': 1,
      'cluster.getVpcNatGateway': 2,
      'cluster.findGatewayPods': 1,
      'gatewayLease.acquire': 1,
      'cluster.getQosPolicy': 1,
      'ipam.release': 1,
      'cluster.updateEip': 1,
      'leases.release': 1,
      'gatewayLease.release': 1,
    },
    execs: 2,
  },
};
