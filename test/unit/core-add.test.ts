import { describe, expect, it, vi } from 'vitest';
import { GatewayCommandError, GatewayNotReadyError, LeaseHeldError } from '../../shared/domain/errors.js';
import { FINALIZER, Label, LEGACY_FINALIZER } from '../../shared/domain/kube-ovn.js';
import { world } from '../support/world.js';

const SUBNET = 'ovn-vpc-external-network';

describe('add', () => {
  it('allocates the lowest free address, puts it on net1 and reports the EIP Ready with kube-ovn labels', async () => {
    const w = world();
    w.eip('eip-a');
    const outcome = await w.run('add', 'eip-a', 'added');
    expect(outcome).toMatchObject({ status: 'applied', eip: 'eip-a', ip: '172.18.0.2' });
    const eip = w.get('eip-a')!;
    expect(eip.spec.v4ip).toBe('172.18.0.2');
    expect(eip.spec.macAddress).toMatch(/^00:00:00(:[0-9A-F]{2}){3}$/);
    expect(eip.status).toMatchObject({
      ready: true,
      ip: '172.18.0.2',
      redo: w.pod().creationTimestamp.slice(0, 19),
    });
    expect(eip.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'Configured',
    });
    expect(eip.metadata.labels).toEqual({
      [Label.subnet]: SUBNET,
      [Label.natGwName]: 'gw1',
      [Label.eipV4Ip]: '172.18.0.2',
    });
    expect(eip.metadata.finalizers).toEqual([FINALIZER]);
    expect(w.gateway.calls.map((c) => c.argv)).toEqual([
      ['bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.2/24,172.18.0.1'],
    ]);
    expect(w.net1()).toContain('172.18.0.2/24');
  });

  it("never hands out a gateway pod's own address on the external network, and writes no reservation for it", async () => {
    const w = world();
    w.createPod(undefined, { [SUBNET]: '172.18.0.2', 'vpc1-subnet1': '10.0.1.254' });
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied', ip: '172.18.0.3' });
    // The add avoids the pod's address; recording it in IPAM is the garbage collector's work (ADR 0042).
    expect([...w.ipam.allocations.values()].map((a) => [a.owner.name, a.address])).toEqual([
      ['eip-a', '172.18.0.3'],
    ]);
  });

  it("refuses a gateway pod's own address as spec.v4ip, naming the pod, before anything is written", async () => {
    const w = world();
    const pod = w.createPod(undefined, { [SUBNET]: '172.18.0.2' });
    w.eip('eip-b', { v4ip: '172.18.0.2' });
    const ipamWrites = ['claimAddress', 'claimAny', 'release', 'place'] as const;
    const spies = ipamWrites.map((m) => vi.spyOn(w.ipam, m));
    expect(await w.run('add', 'eip-b')).toMatchObject({
      status: 'rejected',
      code: 'AddressConflict',
      message: `address 172.18.0.2 in subnet ${SUBNET} is already allocated to ${pod.namespace}/${pod.name}`,
    });
    for (const spy of spies) expect(spy).not.toHaveBeenCalled();
    expect(w.ipam.allocations.size).toBe(0);
    expect(w.gateway.calls).toEqual([]);
    const conditions = w.get('eip-b')?.status?.conditions ?? [];
    expect(conditions.find((c) => c.type === 'Validated')).toMatchObject({
      status: 'False',
      reason: 'AddressConflict',
    });
    expect(conditions.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'AddressConflict',
    });
    // Another network's address of the pod is not this subnet's: a static request for it here is fine.
    w.createPod(undefined, { [SUBNET]: '172.18.0.2', other: '172.18.0.9' });
    w.eip('eip-c', { v4ip: '172.18.0.9' });
    expect(await w.run('add', 'eip-c')).toMatchObject({ status: 'applied', ip: '172.18.0.9' });
  });

  it("does not adopt a configured EIP's unknown address when it is a gateway pod's own (the pods listed only then)", async () => {
    const w = world();
    w.eip('eip-a');
    await w.run('add', 'eip-a');
    const listed = vi.spyOn(w.cluster, 'listGatewayPods');
    await w.run('update', 'eip-a', 'resync');
    expect(listed).not.toHaveBeenCalled(); // a configured EIP that IPAM knows: no pod list
    w.ipam.allocations.clear(); // the table lost it, and meanwhile kube-ovn gave the address to a gateway pod
    const pod = w.createPod(undefined, { [SUBNET]: '172.18.0.2' });
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({
      status: 'rejected',
      code: 'AddressConflict',
      message: `address 172.18.0.2 in subnet ${SUBNET} is already allocated to ${pod.namespace}/${pod.name}`,
    });
    expect(listed).toHaveBeenCalledTimes(1);
    expect(w.ipam.allocations.size).toBe(0);
  });

  it('claims exactly the static spec.v4ip', async () => {
    const w = world();
    w.eip('eip-s', { v4ip: '172.18.0.77' });
    expect(await w.run('add', 'eip-s')).toMatchObject({ status: 'applied', ip: '172.18.0.77' });
    expect(w.net1()).toContain('172.18.0.77/24');
    expect([...w.ipam.allocations.values()].map((a) => a.address)).toEqual(['172.18.0.77']);
  });

  it('writes the finalizer before anything is allocated or configured', async () => {
    const w = world();
    w.eip('eip-a');
    await w.run('add', 'eip-a');
    const first = w.cluster.writes[0];
    expect(first).toMatchObject({ method: 'updateEip', body: { finalizers: [FINALIZER] } });
  });

  it('replaces the legacy finalizer with the domain-qualified one and keeps other finalizers', async () => {
    const w = world();
    w.cluster.putEip({
      metadata: { name: 'eip-l', finalizers: ['example.com/other', LEGACY_FINALIZER] },
      spec: { natGwDp: 'gw1' },
    });
    await w.run('add', 'eip-l');
    expect(w.get('eip-l')?.metadata.finalizers).toEqual(['example.com/other', FINALIZER]);
  });

  it("leaves kube-ovn 1.12's finalizer beside its own once its own is there (no flapping with kube-ovn)", async () => {
    const w = world();
    w.cluster.putEip({
      metadata: { name: 'eip-k', finalizers: [FINALIZER, LEGACY_FINALIZER] },
      spec: { natGwDp: 'gw1' },
    });
    await w.run('add', 'eip-k');
    expect(w.get('eip-k')?.metadata.finalizers).toEqual([FINALIZER, LEGACY_FINALIZER]);
  });

  it('keeps the allocation when the gateway fails, and the retry reuses it instead of allocating again', async () => {
    const w = world();
    w.eip('eip-a');
    w.gateway.failNext(1, { op: 'eip-add', stderr: 'arping: DAD failed' });
    await expect(w.run('add', 'eip-a')).rejects.toBeInstanceOf(GatewayCommandError);
    expect(w.get('eip-a')?.status?.ready).toBeUndefined();
    expect([...w.ipam.allocations.values()].map((a) => a.address)).toEqual(['172.18.0.2']);
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
    expect(w.ipam.allocations.size).toBe(1);
    expect(w.metrics.total('Allocations')).toBe(1);
  });

  it('treats output on stderr with exit status 0 as success', async () => {
    const w = world();
    w.eip('eip-a');
    w.gateway.failNext(1, {
      op: 'eip-add',
      exitCode: 0,
      stderr: 'iptables-legacy tables present, use iptables-legacy to see them',
    });
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied' });
    expect(w.get('eip-a')?.status?.ready).toBe(true);
  });

  it('gives a dual-stack EIP a v4 and a v6 address, and configures only the v4 on the gateway', async () => {
    const w = world({ cidrBlock: '172.18.0.0/24,fd00:18::/120', gateway: '172.18.0.1,fd00:18::1' });
    w.eip('eip-d');
    await w.run('add', 'eip-d');
    expect(w.get('eip-d')?.spec).toMatchObject({ v4ip: '172.18.0.2', v6ip: 'fd00:18::2' });
    expect(w.gateway.calls.map((c) => c.op)).toEqual(['eip-add']);
  });

  it('installs one tc filter per QoS rule with "<ip>,<priority>,<rateMax>,<burstMax>", in rule-name order', async () => {
    const w = world();
    w.qos('qos-a', [
      { name: 'b-egress', direction: 'egress', priority: 2, rateMax: '5', burstMax: '5' },
      { name: 'a-ingress', direction: 'ingress', priority: 1, rateMax: '10.5', burstMax: '2' },
    ]);
    w.eip('eip-q', { qosPolicy: 'qos-a' });
    await w.run('add', 'eip-q');
    expect(w.gateway.calls.map((c) => [c.op, ...c.args])).toEqual([
      ['eip-add', '172.18.0.2/24,172.18.0.1'],
      ['eip-ingress-qos-add', '172.18.0.2,1,10.5,2'],
      ['eip-egress-qos-add', '172.18.0.2,2,5,5'],
    ]);
    expect(w.get('eip-q')?.status?.qosPolicy).toBe('qos-a');
    expect(w.get('eip-q')?.metadata.labels?.[Label.qos]).toBe('qos-a');
    expect(w.tc()).toHaveLength(2);
  });

  it('is unchanged and sends nothing to the gateway when the EIP is already configured', async () => {
    const w = world();
    w.eip('eip-a');
    await w.run('add', 'eip-a');
    const calls = w.gateway.calls.length;
    const writes = w.cluster.writes.length;
    expect(await w.run('add', 'eip-a')).toEqual({ status: 'unchanged', eip: 'eip-a' });
    expect(w.gateway.calls.length).toBe(calls);
    expect(w.cluster.writes.length).toBe(writes);
  });

  it('skips an event for an EIP that is gone, and a stale event whose uid was replaced', async () => {
    const w = world();
    expect(await w.run('add', 'nobody')).toMatchObject({ status: 'skipped', reason: 'not found' });
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a', 'added', { object: { name: 'eip-a', uid: 'old-uid' } })).toMatchObject(
      {
        status: 'skipped',
        reason: expect.stringMatching(/stale event/),
      },
    );
  });

  it('routes a terminating EIP to the deletion branch instead of configuring it', async () => {
    const w = world();
    w.eip('eip-a');
    await w.run('add', 'eip-a');
    w.cluster.deleteEip('eip-a');
    const outcome = await w.run('add', 'eip-a', 'added');
    expect(outcome).toMatchObject({ status: 'applied' });
    expect(w.get('eip-a')).toBeUndefined();
    expect(w.net1()).not.toContain('172.18.0.2/24');
  });

  it('waits, not Ready and with nothing allocated or labelled, while the NAT gateway feature is off, and asks to be retried', async () => {
    const w = world();
    w.cluster.enableNatGw(false);
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a')).toMatchObject({
      status: 'rejected',
      code: 'NatGwDisabled',
      retryAfterMs: 1_000,
    });
    expect(w.ipam.allocations.size).toBe(0);
    const eip = w.get('eip-a')!;
    expect(eip.metadata.labels ?? {}).toEqual({});
    expect(eip.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'NatGwDisabled',
    });
    w.cluster.enableNatGw(true);
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
  });

  it('throws a retryable error when the gateway pod is not Running, keeping the finalizer and the allocation', async () => {
    const w = world();
    w.pod().phase = 'Pending';
    w.eip('eip-a');
    await expect(w.run('add', 'eip-a')).rejects.toBeInstanceOf(GatewayNotReadyError);
    expect(w.get('eip-a')?.metadata.finalizers).toEqual([FINALIZER]);
    expect(w.ipam.allocations.size).toBe(1);
  });

  it("configures every pod that carries the gateway's labels (a leftover workload's pod is a replica too)", async () => {
    const w = world();
    const copy = { ...w.pod(), name: 'vpc-nat-gw-gw1-0-copy', uid: 'other' };
    w.cluster.putPod(copy);
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
    expect(w.gateway.calls.map((c) => `${c.pod} ${c.op}`)).toEqual([
      'vpc-nat-gw-gw1-0 eip-add',
      'vpc-nat-gw-gw1-0-copy eip-add',
    ]);
    expect(w.net1(copy)).toContain('172.18.0.2/24');
    expect(w.net1()).toContain('172.18.0.2/24');
  });

  it('gives a deleted-and-recreated EIP with the same name its own allocation', async () => {
    const w = world();
    const first = w.eip('eip-a');
    await w.run('add', 'eip-a');
    w.cluster.deleteEip('eip-a');
    await w.run('update', 'eip-a', 'deletion-requested');
    const second = w.eip('eip-a');
    expect(second.metadata.uid).not.toBe(first.metadata.uid);
    await w.run('add', 'eip-a');
    const owners = [...w.ipam.allocations.values()].map((a) => a.owner.uid);
    expect(owners).toEqual([second.metadata.uid]);
    expect(await w.ipam.findByOwner(first.metadata.uid)).toEqual([]);
  });

  it('never allocates twice when add and update run interleaved on one EIP', async () => {
    const w = world();
    w.eip('eip-a');
    const results = await Promise.allSettled([w.run('add', 'eip-a'), w.run('update', 'eip-a')]);
    // One of them holds the lease; the other gives up at once with a retryable error (no spinning).
    const held = results.filter((r) => r.status === 'rejected');
    for (const r of held) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(LeaseHeldError);
    // The retry of whichever lost converges without allocating again.
    await w.run('update', 'eip-a');
    await w.run('add', 'eip-a');
    expect(w.ipam.allocations.size).toBe(1);
    expect(w.get('eip-a')?.status?.ready).toBe(true);
  });
});

describe('add rejects, before any exec, what it cannot serve', () => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['the network address', { v4ip: '172.18.0.0' }, /network address/],
    ['the broadcast address', { v4ip: '172.18.0.255' }, /broadcast address/],
    ['the subnet gateway', { v4ip: '172.18.0.1' }, /gateway of subnet/],
    ['an excluded address', { v4ip: '172.18.0.251' }, /excluded/],
    ['an address outside the subnet', { v4ip: '10.9.9.9' }, /out of the range/],
    ['an unparsable address', { v4ip: '172.18.0.300' }, /failed to parse eip ip/],
    ['an empty natGwDp', { natGwDp: '' }, /natGwDp" cannot be empty/],
    ['a missing VpcNatGateway', { natGwDp: 'nope' }, /vpc nat gateway nope not found/],
    ['a missing external subnet', { externalSubnet: 'nope' }, /subnet nope not found/],
    [
      'a subnet the gateway is not attached to',
      { externalSubnet: 'other-ext' },
      /not attached to subnet other-ext/,
    ],
  ];
  it.each(cases)('a static request for %s', async (_what, spec, message) => {
    const w = world();
    w.cluster.subnets.set('other-ext', {
      ...w.cluster.subnets.get('ovn-vpc-external-network')!,
      metadata: { name: 'other-ext', uid: 'u2', resourceVersion: '1' },
    });
    w.eip('eip-x', spec);
    const outcome = await w.run('add', 'eip-x');
    expect(outcome).toMatchObject({ status: 'rejected', message: expect.stringMatching(message) });
    expect(w.gateway.calls).toEqual([]);
    expect(w.ipam.allocations.size).toBe(0);
    const eip = w.get('eip-x')!;
    expect(eip.status?.conditions?.find((c) => c.type === 'Validated')).toMatchObject({
      status: 'False',
      message: expect.stringMatching(message),
    });
    expect(w.cluster.events.at(-1)).toMatchObject({
      type: 'Warning',
      object: 'eip-x',
      message: expect.stringMatching(message),
    });
  });

  it('an IPv6-only external subnet for an IPv4 EIP', async () => {
    const w = world({ cidrBlock: 'fd00:18::/120', gateway: 'fd00:18::1', excludeIps: [] });
    w.eip('eip-6');
    expect(await w.run('add', 'eip-6')).toMatchObject({
      status: 'rejected',
      message: 'subnet ovn-vpc-external-network does not support ipv4',
    });
    expect(w.gateway.calls).toEqual([]);
  });

  it('a static address another EIP holds (AddressConflict)', async () => {
    const w = world();
    w.eip('eip-a', { v4ip: '172.18.0.9' });
    await w.run('add', 'eip-a');
    w.eip('eip-b', { v4ip: '172.18.0.9' });
    const calls = w.gateway.calls.length;
    expect(await w.run('add', 'eip-b')).toMatchObject({ status: 'rejected', code: 'AddressConflict' });
    expect(w.gateway.calls.length).toBe(calls);
  });

  it.each([
    [
      'a rateMax that is a shell fragment',
      { rateMax: '1;touch /tmp/x', burstMax: '1' },
      /rateMax must be a decimal number/,
    ],
    ['a burstMax with a unit', { rateMax: '1', burstMax: '10Mb' }, /burstMax must be a decimal number/],
    [
      'an unknown direction',
      { rateMax: '1', burstMax: '1', direction: 'both' },
      /direction must be ingress or egress/,
    ],
  ])('a QoS policy with %s', async (_what, rule, message) => {
    const w = world();
    w.qos('bad', [{ name: 'r', direction: 'ingress', priority: 1, ...rule }]);
    w.eip('eip-q', { qosPolicy: 'bad' });
    expect(await w.run('add', 'eip-q')).toMatchObject({
      status: 'rejected',
      code: 'QoSPolicyInvalid',
      message: expect.stringMatching(message),
    });
    expect(w.gateway.calls).toEqual([]);
    expect(w.ipam.allocations.size).toBe(0);
  });

  it('a missing QoS policy (not silently reported as applied)', async () => {
    const w = world();
    w.eip('eip-q', { qosPolicy: 'ghost' });
    expect(await w.run('add', 'eip-q')).toMatchObject({
      status: 'rejected',
      message: 'qos policy ghost not found (spec.qosPolicy)',
    });
    expect(w.gateway.calls).toEqual([]);
  });

  it('an unshared QoS policy already bound to another EIP', async () => {
    const w = world();
    w.qos('solo', [{ name: 'r', direction: 'ingress', priority: 1, rateMax: '1', burstMax: '1' }]);
    w.eip('eip-a', { qosPolicy: 'solo' });
    await w.run('add', 'eip-a');
    w.eip('eip-b', { qosPolicy: 'solo' });
    expect(await w.run('add', 'eip-b')).toMatchObject({
      status: 'rejected',
      message: expect.stringMatching(/not support unshared qos policy solo to related to multiple eip/),
    });
  });
});
