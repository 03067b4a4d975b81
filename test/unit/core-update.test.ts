import { describe, expect, it } from 'vitest';
import { FINALIZER, Label, LEGACY_FINALIZER } from '../../shared/domain/kube-ovn.js';
import { type World, world } from '../support/world.js';

const rule = (name: string, direction: 'ingress' | 'egress', rate: string, priority = 1) => ({
  name,
  direction,
  priority,
  rateMax: rate,
  burstMax: rate,
});

async function ready(w: World, name: string, spec: Record<string, string> = {}) {
  w.eip(name, spec);
  const outcome = await w.run('add', name, 'added');
  expect(outcome.status).toBe('applied');
  w.gateway.calls.length = 0;
  w.cluster.writes.length = 0;
  return w.get(name)!;
}

describe('update: deletion branch', () => {
  it('removes the address and QoS from the gateway, releases the allocation, then drops the finalizer', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '10'), rule('out', 'egress', '20')]);
    await ready(w, 'eip-a', { qosPolicy: 'q' });
    w.cluster.deleteEip('eip-a');
    const outcome = await w.run('update', 'eip-a', 'deletion-requested');
    expect(outcome).toMatchObject({ status: 'applied' });
    expect(w.gateway.calls.map((c) => [c.op, ...c.args])).toEqual([
      ['eip-del', '172.18.0.2/24'],
      ['eip-ingress-qos-del', '172.18.0.2'],
      ['eip-egress-qos-del', '172.18.0.2'],
    ]);
    expect(w.net1()).not.toContain('172.18.0.2/24');
    expect(w.tc()).toEqual([]);
    expect(w.ipam.allocations.size).toBe(0);
    expect(w.get('eip-a')).toBeUndefined(); // finalizer gone → the API removed it
    // The release happened before the finalizer write: the only write is the finalizer removal, after the release.
    expect(w.cluster.writes.map((x) => x.method)).toEqual(['updateEip']);
  });

  it('never sends eip-del when the EIP has no address', async () => {
    const w = world();
    // kube-ovn's update handler adds the finalizer to any EIP, so one can carry it without ever getting an address.
    w.cluster.putEip({ metadata: { name: 'eip-n', finalizers: [FINALIZER] }, spec: { natGwDp: 'gw1' } });
    w.cluster.deleteEip('eip-n');
    expect(await w.run('update', 'eip-n', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.gateway.calls).toEqual([]);
    expect(w.get('eip-n')).toBeUndefined();
  });

  it('takes an address IPAM holds off the gateway even when status.ip was never written (crash after eip-add)', async () => {
    const w = world();
    w.eip('eip-c');
    const real = w.cluster.patchEipStatus;
    w.cluster.patchEipStatus = async () => {
      throw new Error('API went away');
    };
    await expect(w.run('add', 'eip-c')).rejects.toThrow('API went away');
    expect(w.net1()).toContain('172.18.0.2/24');
    w.cluster.patchEipStatus = real;
    w.cluster.deleteEip('eip-c');
    await w.run('update', 'eip-c', 'deletion-requested');
    expect(w.net1()).not.toContain('172.18.0.2/24');
    expect(w.ipam.allocations.size).toBe(0);
  });

  it('waits with a condition while a NAT rule uses the EIP, and a reset after the rule goes completes it', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.putRule('IptablesFIPRule', 'fip-1', 'eip-a');
    w.cluster.deleteEip('eip-a');
    const outcome = await w.run('update', 'eip-a', 'deletion-requested');
    expect(outcome).toMatchObject({
      status: 'skipped',
      reason: expect.stringMatching(/still in use by fip\/fip-1/),
    });
    const eip = w.get('eip-a')!;
    expect(eip.status?.conditions?.find((c) => c.type === 'Deleting')).toMatchObject({
      status: 'True',
      reason: 'WaitingForNatRules',
    });
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(w.ipam.allocations.size).toBe(1);
    w.cluster.removeRule('IptablesFIPRule', 'fip-1');
    expect(await w.run('reset', 'eip-a', 'nat-rule-changed')).toMatchObject({ status: 'applied' });
    expect(w.get('eip-a')).toBeUndefined();
    expect(w.ipam.allocations.size).toBe(0);
  });

  it('skips in-pod cleanup when the VpcNatGateway itself is gone, and still releases and finalizes', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.gateways.delete('gw1');
    w.cluster.pods.clear();
    w.cluster.deleteEip('eip-a');
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.gateway.calls).toEqual([]);
    expect(w.ipam.allocations.size).toBe(0);
    expect(w.get('eip-a')).toBeUndefined();
  });

  it("cleans the pods still listed while the NAT gateway feature is off (master's pods outlive it), and releases", async () => {
    const w = world();
    await ready(w, 'eip-a');
    const ip = w.get('eip-a')!.status!.ip!;
    w.cluster.enableNatGw(false);
    w.cluster.deleteEip('eip-a');
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.gateway.calls.filter((c) => c.op === 'eip-del')).toHaveLength(1);
    expect(w.net1().some((a) => a.startsWith(`${ip}/`))).toBe(false);
    expect(w.ipam.allocations.size).toBe(0);
    expect(w.get('eip-a')).toBeUndefined();
  });

  it('with the feature off and the pods gone (kube-ovn removed the StatefulSet), nothing to clean: released', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.enableNatGw(false);
    w.cluster.pods.clear();
    w.cluster.deleteEip('eip-a');
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.gateway.calls.filter((c) => c.op === 'eip-del')).toEqual([]);
    expect(w.get('eip-a')).toBeUndefined();
  });

  it('does not wait for a missing pod (its state went with it): finalizer removed, address released (kubeovn/kube-ovn#7100)', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.pods.clear();
    w.cluster.deleteEip('eip-a');
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.get('eip-a')).toBeUndefined();
    expect(w.ipam.allocations.size).toBe(0);
  });

  it("removes our finalizer and the legacy one, and leaves other controllers' finalizers alone", async () => {
    const w = world();
    await ready(w, 'eip-a');
    const e = w.cluster.eips.get('eip-a')!;
    e.metadata.finalizers = ['example.com/keep', FINALIZER, LEGACY_FINALIZER];
    w.cluster.deleteEip('eip-a');
    await w.run('update', 'eip-a', 'deletion-requested');
    expect(w.get('eip-a')?.metadata.finalizers).toEqual(['example.com/keep']);
  });
});

describe('update: QoS changes', () => {
  it('binding, changing and unbinding a policy makes the tc filters follow, then the label, then status', async () => {
    const w = world();
    w.qos('slow', [rule('in', 'ingress', '1')]);
    w.qos('fast', [rule('out', 'egress', '100', 3)]);
    await ready(w, 'eip-a');

    w.cluster.editEipSpec('eip-a', { qosPolicy: 'slow' });
    await w.run('update', 'eip-a', 'qos-changed');
    expect(w.tc()).toEqual([
      { direction: 'ingress', ip: '172.18.0.2', priority: 1, rate: '1Mbit', burst: '1Mb' },
    ]);
    expect(w.get('eip-a')?.metadata.labels?.[Label.qos]).toBe('slow');
    expect(w.get('eip-a')?.status?.qosPolicy).toBe('slow');

    w.gateway.calls.length = 0;
    w.cluster.editEipSpec('eip-a', { qosPolicy: 'fast' });
    await w.run('update', 'eip-a', 'qos-changed');
    expect(w.gateway.calls.map((c) => [c.op, ...c.args])).toEqual([
      ['eip-ingress-qos-del', '172.18.0.2'],
      ['eip-egress-qos-add', '172.18.0.2,3,100,100'],
    ]);
    expect(w.tc()).toEqual([
      { direction: 'egress', ip: '172.18.0.2', priority: 3, rate: '100Mbit', burst: '100Mb' },
    ]);

    w.cluster.editEipSpec('eip-a', { qosPolicy: '' });
    await w.run('update', 'eip-a', 'qos-changed');
    expect(w.tc()).toEqual([]);
    const eip = w.get('eip-a')!;
    expect(eip.status?.qosPolicy).toBe('');
    // No empty-valued qos label is left behind (docs/kube-ovn-differences.md#no-empty-qos-label).
    expect(eip.metadata.labels).not.toHaveProperty(Label.qos);
  });

  it('re-applies a bound policy whose rules changed', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '1'), rule('out', 'egress', '1')]);
    await ready(w, 'eip-a', { qosPolicy: 'q' });
    w.qos('q', [rule('in', 'ingress', '50')]);
    await w.run('update', 'eip-a', 'qos-policy-changed');
    expect(w.tc()).toEqual([
      { direction: 'ingress', ip: '172.18.0.2', priority: 1, rate: '50Mbit', burst: '50Mb' },
    ]);
  });
});

describe('update: refused changes', () => {
  it.each([
    [
      'spec.v4ip',
      { v4ip: '172.18.0.99' },
      "not support eip change ip, old ip '172.18.0.2', new ip '172.18.0.99'",
    ],
    ['spec.natGwDp', { natGwDp: 'gw2' }, "not support eip change natGwDp, old 'gw1', new 'gw2'"],
    [
      'spec.externalSubnet',
      { externalSubnet: 'other' },
      "not support eip change externalSubnet, old 'ovn-vpc-external-network', new 'other'",
    ],
  ])(
    'a change of %s on a configured EIP is refused with a condition, and the address stays',
    async (_f, spec, message) => {
      const w = world();
      await ready(w, 'eip-a');
      w.cluster.editEipSpec('eip-a', spec);
      expect(await w.run('update', 'eip-a', 'spec-changed')).toMatchObject({
        status: 'rejected',
        code: 'UnsupportedChange',
        message,
      });
      const eip = w.get('eip-a')!;
      expect(eip.status).toMatchObject({ ready: true, ip: '172.18.0.2' });
      expect(eip.status?.conditions?.find((c) => c.type === 'Validated')).toMatchObject({
        status: 'False',
        message,
      });
      expect(w.net1()).toContain('172.18.0.2/24');
      expect(w.gateway.calls).toEqual([]);
    },
  );

  it('clears the refusal once the spec is changed back', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.editEipSpec('eip-a', { v4ip: '172.18.0.99' });
    await w.run('update', 'eip-a', 'spec-changed');
    w.cluster.editEipSpec('eip-a', { v4ip: '172.18.0.2' });
    await w.run('update', 'eip-a', 'spec-changed');
    expect(w.get('eip-a')?.status?.conditions?.map((c) => c.type)).toEqual(['Ready']);
  });
});

describe('update: redo after a gateway restart', () => {
  it("a re-created gateway pod gets the address and QoS back, and status.redo takes the new pod's token", async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '7')]);
    await ready(w, 'eip-a', { qosPolicy: 'q' });
    w.clock.advance(60_000);
    const pod = w.createPod();
    expect(w.net1()).not.toContain('172.18.0.2/24');
    expect(await w.run('update', 'eip-a', 'gateway-restarted', { gateway: 'gw1' })).toMatchObject({
      status: 'applied',
    });
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(w.tc()).toHaveLength(1);
    expect(w.get('eip-a')?.status).toMatchObject({ ready: true, redo: pod.creationTimestamp.slice(0, 19) });
  });

  it('a container restart in the same pod (kill 1, node reboot) also triggers the redo', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.restartContainer();
    expect(w.net1()).not.toContain('172.18.0.2/24');
    await w.run('update', 'eip-a', 'gateway-restarted', { gateway: 'gw1' });
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(w.get('eip-a')?.status?.redo).toBe(w.pod().container?.startedAt?.slice(0, 19));
  });

  it('a gateway-restarted event re-applies the address even when the restart fell in the same second', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.gateway.restart(w.pod()); // state lost, start time unchanged at one-second resolution
    await w.run('update', 'eip-a', 'gateway-restarted', { gateway: 'gw1' });
    expect(w.net1()).toContain('172.18.0.2/24');
  });

  it('a redo requested the kube-ovn way (status.ready=false) re-applies the address', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.gateway.restart(w.pod()); // state lost without the token moving
    await w.cluster.patchEipStatus('eip-a', { ready: false, redo: '2026-01-01T00:00:00' });
    await w.run('update', 'eip-a', 'redo-changed');
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(w.get('eip-a')?.status?.ready).toBe(true);
  });

  it('a reset between "redo requested" and the update neither sets ready nor cancels the redo', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.clock.advance(60_000);
    w.createPod();
    await w.cluster.patchEipStatus('eip-a', { ready: false });
    await w.run('reset', 'eip-a', 'nat-rule-changed');
    expect(w.get('eip-a')?.status?.ready).toBe(false);
    await w.run('update', 'eip-a', 'redo-changed');
    expect(w.net1()).toContain('172.18.0.2/24');
  });
});

describe('update: metadata and status writes', () => {
  it('adds a missing finalizer, and never adds one to a terminating object', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.eips.get('eip-a')!.metadata.finalizers = [];
    await w.run('update', 'eip-a');
    expect(w.get('eip-a')?.metadata.finalizers).toEqual([FINALIZER]);

    const e = w.cluster.eips.get('eip-a')!;
    e.metadata.finalizers = ['example.com/keep'];
    w.cluster.deleteEip('eip-a');
    await w.run('update', 'eip-a', 'deletion-requested');
    expect(w.get('eip-a')?.metadata.finalizers).toEqual(['example.com/keep']);
  });

  it('sends status patches with only the fields that change, and no write when nothing changes', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '1')]);
    await ready(w, 'eip-a');
    w.cluster.editEipSpec('eip-a', { qosPolicy: 'q' });
    await w.run('update', 'eip-a', 'qos-changed');
    const statusWrites = w.cluster.writes
      .filter((x) => x.method === 'patchEipStatus')
      .map((x) => Object.keys(x.body as object));
    expect(statusWrites).toEqual([['qosPolicy', 'conditions']]);
    const labelWrites = w.cluster.writes.filter((x) => x.method === 'updateEip').map((x) => x.body);
    expect(labelWrites).toEqual([{ labels: { [Label.qos]: 'q' } }]);
    w.cluster.writes.length = 0;
    await w.run('update', 'eip-a', 'resync');
    expect(w.cluster.writes).toEqual([]);
  });

  it('adopts an address configured before the allocation table existed, and refuses one held by another EIP', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.ipam.allocations.clear(); // e.g. migrating from kube-ovn's in-memory IPAM
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({
      status: 'applied',
      actions: ['adopt 172.18.0.2', 'place 172.18.0.2 on gw1'],
    });
    expect((await w.ipam.findByOwner(w.get('eip-a')!.metadata.uid)).map((a) => a.address)).toEqual([
      '172.18.0.2',
    ]);
  });
});

describe('reset', () => {
  it('recomputes status.nat from the rules naming the EIP, in dnat,fip,snat order, ignoring terminating rules', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.putRule('IptablesSnatRule', 's1', 'eip-a');
    w.cluster.putRule('IptablesDnatRule', 'd1', 'eip-a');
    w.cluster.putRule('IptablesFIPRule', 'f1', 'eip-a', { terminating: true });
    w.cluster.putRule('IptablesFIPRule', 'f2', 'eip-other');
    await w.run('reset', 'eip-a', 'nat-rule-changed');
    expect(w.get('eip-a')?.status?.nat).toBe('dnat,snat');
    w.cluster.removeRule('IptablesSnatRule', 's1');
    await w.run('reset', 'eip-a', 'nat-rule-changed');
    expect(w.get('eip-a')?.status?.nat).toBe('dnat');
  });

  it('re-asserts labels someone removed, without touching ready', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.eips.get('eip-a')!.metadata.labels = {};
    await w.run('reset', 'eip-a', 'nat-rule-changed');
    expect(w.get('eip-a')?.metadata.labels?.[Label.eipV4Ip]).toBe('172.18.0.2');
    expect(w.cluster.writes.filter((x) => x.method === 'patchEipStatus')).toEqual([]);
  });
});

describe('delete (the object is gone)', () => {
  it('is a real safety net: releases what the deleted uid still holds and takes its address off net1', async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    // Finalizer removed by hand, then deleted: the update handler never ran the cleanup.
    w.cluster.eips.delete('eip-a');
    const old = { metadata: { name: 'eip-a', uid: eip.metadata.uid }, spec: eip.spec, status: eip.status! };
    const outcome = await w.run('delete', 'eip-a', 'deleted', {
      object: { name: 'eip-a', uid: eip.metadata.uid },
      old,
    });
    expect(outcome).toMatchObject({ status: 'applied' });
    expect(w.gateway.calls.map((c) => [c.op, ...c.args])).toEqual([['eip-del', '172.18.0.2/24']]);
    expect(w.net1()).not.toContain('172.18.0.2/24');
    expect(w.ipam.allocations.size).toBe(0);
  });

  it('is unchanged when nothing is held, and skips when the object still exists', async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    expect(await w.run('delete', 'eip-a', 'deleted')).toMatchObject({
      status: 'skipped',
      reason: 'the object still exists',
    });
    expect(await w.run('delete', 'gone', 'deleted', { object: { name: 'gone', uid: 'u-gone' } })).toEqual({
      status: 'unchanged',
      eip: 'gone',
    });
    expect(w.ipam.allocations.size).toBe(1);
    expect(eip.metadata.uid).toBeTruthy();
  });

  it('never frees an address that was re-claimed by the re-created object with the same name', async () => {
    const w = world();
    const old = await ready(w, 'eip-a', { v4ip: '172.18.0.9' });
    w.cluster.deleteEip('eip-a');
    await w.run('update', 'eip-a', 'deletion-requested');
    await ready(w, 'eip-a', { v4ip: '172.18.0.9' });
    await w.run('delete', 'eip-a', 'deleted', { object: { name: 'eip-a', uid: old.metadata.uid } });
    expect(w.ipam.allocations.size).toBe(1);
    expect(w.net1()).toContain('172.18.0.9/24');
  });
});

describe('idempotency', () => {
  it.each(['add', 'update', 'reset'] as const)(
    '%s run twice in a row leaves the same world',
    async (handler) => {
      const w = world();
      w.qos('q', [rule('in', 'ingress', '3')]);
      w.eip('eip-a', { qosPolicy: 'q' });
      w.cluster.putRule('IptablesDnatRule', 'd1', 'eip-a');
      await w.run('add', 'eip-a');
      await w.run(handler, 'eip-a');
      const once = w.snapshot();
      await w.run(handler, 'eip-a');
      expect(w.snapshot()).toEqual(once);
    },
  );

  it('update (deletion) and delete run twice in a row leave the same world', async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    w.cluster.deleteEip('eip-a');
    await w.run('update', 'eip-a', 'deletion-requested');
    const once = w.snapshot();
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({
      status: 'skipped',
      reason: 'not found',
    });
    const del = { object: { name: 'eip-a', uid: eip.metadata.uid } };
    await w.run('delete', 'eip-a', 'deleted', del);
    await w.run('delete', 'eip-a', 'deleted', del);
    expect(w.snapshot()).toEqual(once);
  });
});
