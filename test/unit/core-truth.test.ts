/**
 * The core against the in-memory ports: where an address is recorded is what re-add, refusal and clean-up use;
 * the order address → QoS → labels/status; validation before anything is held; blocked EIPs asking to be tried
 * again; and three invariants that once had no test (a lost write race retried, the unshared-QoS check on update,
 * Allocations counted once per EIP).
 */
import { describe, expect, it } from 'vitest';
import {
  AddressConflictError,
  AddressOutOfRangeError,
  ConflictError,
  DependencyMissingError,
  GatewayRefusedError,
  InvalidEventError,
  InvalidSpecError,
  NatGwDisabledError,
  NoAvailableAddressError,
  type PermanentError,
  QoSPolicyError,
  QoSPolicyInUseError,
  UnsupportedChangeError,
  UnsupportedGatewayReleaseError,
} from '../../shared/domain/errors.js';
import { Label } from '../../shared/domain/kube-ovn.js';
import { BLOCKED_CODES, BLOCKED_RETRY_MAX_MS, blockedRetryAfter } from '../../shared/domain/retry.js';
import { QosLimits } from '../../shared/domain/validation.js';
import { type World, world } from '../support/world.js';

const rule = (name: string, direction: 'ingress' | 'egress', rate: string, burst = rate) => ({
  name,
  direction,
  priority: 1,
  rateMax: rate,
  burstMax: burst,
});

async function ready(w: World, name: string, spec: Record<string, string> = {}) {
  w.eip(name, spec);
  const outcome = await w.run('add', name, 'added');
  expect(outcome.status).toBe('applied');
  w.gateway.calls.length = 0;
  w.cluster.writes.length = 0;
  return w.get(name)!;
}

const ops = (w: World) => w.gateway.calls.map((c) => c.argv.slice(2).join(' '));
const condition = (w: World, name: string, type: string) =>
  w.get(name)?.status?.conditions?.find((c) => c.type === type);

describe('the recorded placement is the truth', () => {
  it('records the gateway and prefix with the allocation once the address is on net1', async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    expect(await w.ipam.findByOwner(eip.metadata.uid)).toMatchObject([
      { address: '172.18.0.2', placement: { gateway: 'gw1', prefix: 24 } },
    ]);
  });

  it('falls back to the label for an allocation recorded before placements existed, and records it at the next update', async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    for (const [k, a] of w.ipam.allocations) w.ipam.allocations.set(k, { ...a, placement: undefined });
    w.cluster.editEipSpec('eip-a', { natGwDp: 'gw2' }); // labels still say gw1
    expect(await w.run('update', 'eip-a', 'spec-changed')).toMatchObject({
      status: 'rejected',
      code: 'UnsupportedChange',
      message: "not support eip change natGwDp, old 'gw1', new 'gw2'",
    });
    expect(await w.ipam.findByOwner(eip.metadata.uid)).toMatchObject([
      { address: '172.18.0.2', placement: { gateway: 'gw1', prefix: 24 } },
    ]);
  });

  it('refuses a natGwDp change even when the vpc-nat-gw-name label was removed, and deletes on the old gateway', async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    w.cluster.editEipLabels('eip-a', { [Label.natGwName]: null, [Label.subnet]: null });
    w.cluster.editEipSpec('eip-a', { natGwDp: 'gw2' });
    expect(await w.run('update', 'eip-a', 'spec-changed')).toMatchObject({
      status: 'rejected',
      code: 'UnsupportedChange',
      message: "not support eip change natGwDp, old 'gw1', new 'gw2'",
    });
    expect(w.get('eip-a')?.metadata.labels?.[Label.natGwName]).toBe('gw1');
    expect(w.get('eip-a')?.status?.ready).toBe(true);
    w.gateway.calls.length = 0;
    w.cluster.deleteEip('eip-a');
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(ops(w)).toContain('eip-del 172.18.0.2/24');
    expect(w.net1()).not.toContain('172.18.0.2/24');
    expect(await w.ipam.findByOwner(eip.metadata.uid)).toEqual([]);
  });

  it("the delete handler cleans where the address is recorded, not where the last snapshot's spec points", async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    w.cluster.editEipSpec('eip-a', { natGwDp: 'gw2' }); // refused, never configured there
    const last = w.get('eip-a')!;
    w.cluster.eips.delete('eip-a'); // finalizer removed by hand, then deleted
    const outcome = await w.run('delete', 'eip-a', 'deleted', {
      object: { name: 'eip-a', uid: eip.metadata.uid },
      old: { metadata: { name: 'eip-a', uid: eip.metadata.uid }, spec: last.spec, status: last.status! },
    });
    expect(outcome).toMatchObject({ status: 'applied' });
    expect(ops(w)).toEqual(['eip-del 172.18.0.2/24']);
    expect(w.net1()).not.toContain('172.18.0.2/24');
    expect(w.ipam.allocations.size).toBe(0);
  });

  it('finalizes an allocation from before placements on the gateway its label names, with the subnet prefix', async () => {
    const w = world();
    await ready(w, 'eip-a');
    for (const [k, a] of w.ipam.allocations) w.ipam.allocations.set(k, { ...a, placement: undefined });
    w.cluster.editEipSpec('eip-a', { natGwDp: 'gw2' });
    w.cluster.deleteEip('eip-a');
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(ops(w)).toEqual(['eip-del 172.18.0.2/24']);
    expect(w.get('eip-a')).toBeUndefined();
  });

  it('never removes an address the deleted EIP shows but another EIP holds', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.eip('eip-b', { v4ip: '172.18.0.2' });
    expect(await w.run('add', 'eip-b')).toMatchObject({ status: 'rejected', code: 'AddressConflict' });
    w.cluster.putEipStatus('eip-b', { ip: '172.18.0.2' }); // status.ip copied from eip-a by hand
    w.cluster.deleteEip('eip-b');
    expect(w.get('eip-b')?.metadata.finalizers?.length).toBe(1);
    w.gateway.calls.length = 0;
    expect(await w.run('update', 'eip-b', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.get('eip-b')).toBeUndefined();
    expect(ops(w).filter((o) => o.startsWith('eip-del'))).toEqual([]);
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(w.get('eip-a')?.status?.ready).toBe(true);
  });

  it('re-adds the address after a gateway restart while a change is refused and while its QoS policy is missing', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '10')], { shared: true });
    await ready(w, 'eip-a', { qosPolicy: 'q' });
    w.cluster.editEipSpec('eip-a', { natGwDp: 'gw2' });
    w.cluster.qos.delete('q');
    w.createPod(w.clock.now() + 5_000); // a new pod: empty net1
    expect(w.net1()).toEqual([]);
    const outcome = await w.run('update', 'eip-a', 'gateway-restarted');
    expect(outcome).toMatchObject({ status: 'rejected', code: 'UnsupportedChange' });
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(w.get('eip-a')?.status?.ready).toBe(true);
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'True' });
    expect(condition(w, 'eip-a', 'QoSApplied')).toMatchObject({
      status: 'False',
      reason: 'DependencyMissing',
    });
    expect(condition(w, 'eip-a', 'Validated')).toMatchObject({
      status: 'False',
      reason: 'UnsupportedChange',
    });
  });
});

describe('an invalid value on a configured EIP', () => {
  it('is reported, while the address and its QoS are re-added after a gateway restart where they are recorded', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '10')], { shared: true });
    await ready(w, 'eip-a', { qosPolicy: 'q' });
    w.cluster.editEipSpec('eip-a', { natGwDp: '.', qosPolicy: '..' });
    w.createPod(w.clock.now() + 5_000);
    expect(await w.run('update', 'eip-a', 'gateway-restarted')).toMatchObject({
      status: 'rejected',
      code: 'InvalidSpec',
    });
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(w.tc().map((f) => `${f.ip} ${f.direction}`)).toEqual(['172.18.0.2 ingress']);
    expect(condition(w, 'eip-a', 'Validated')).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    expect(condition(w, 'eip-a', 'QoSApplied')).toMatchObject({ status: 'True' });
    expect(w.get('eip-a')?.status?.qosPolicy).toBe('q');
  });
});

describe('a gateway that refuses to re-add an address', () => {
  it('makes the EIP not Ready with the refusal as the reason', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.createPod(w.clock.now() + 5_000);
    w.gateway.failNext(1, {
      op: 'eip-add',
      stderr: 'Error: argument "172.18.0.2/24" is wrong: invalid prefix\n',
    });
    expect(await w.run('update', 'eip-a', 'gateway-restarted')).toMatchObject({
      status: 'rejected',
      code: 'GatewayRefused',
    });
    expect(w.get('eip-a')?.status?.ready).toBe(false);
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'False', reason: 'GatewayRefused' });
  });
});

describe('a gateway that is deleted', () => {
  it('makes its EIPs not Ready until it is back, then re-adds their addresses', async () => {
    const w = world();
    await ready(w, 'eip-a');
    const gw = w.cluster.gateways.get('gw1')!;
    w.cluster.gateways.delete('gw1');
    w.cluster.pods.clear();
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({
      status: 'rejected',
      code: 'DependencyMissing',
      retryAfterMs: 1_000,
    });
    expect(w.get('eip-a')?.status?.ready).toBe(false);
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'False', reason: 'DependencyMissing' });
    w.cluster.gateways.set('gw1', gw);
    w.createPod(w.clock.now() + 5_000);
    expect(await w.run('update', 'eip-a', 'dependency-changed')).toMatchObject({ status: 'applied' });
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'True' });
  });
});

describe('validation before anything is held', () => {
  it.each([
    ['natGwDp', '.'],
    ['natGwDp', '..'],
    ['externalSubnet', '..'],
    ['qosPolicy', '.'],
    ['macAddress', `00:00:00:00:00:01; rm -rf /${'x'.repeat(280)}`],
    ['macAddress', '01:00:5E:00:00:01'],
  ])('refuses %s %j with a condition, before any API read, allocation or exec', async (field, value) => {
    const w = world();
    w.eip('eip-a', { [field]: value });
    const outcome = await w.run('add', 'eip-a');
    expect(outcome).toMatchObject({ status: 'rejected', code: 'InvalidSpec' });
    expect(outcome).not.toHaveProperty('retryAfterMs');
    expect(w.ipam.allocations.size).toBe(0);
    expect(w.gateway.calls).toEqual([]);
    expect(condition(w, 'eip-a', 'Validated')).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    expect(w.get('eip-a')?.metadata.labels ?? {}).toEqual({});
  });

  it.each([
    ['rateMax', '0', '1'],
    ['burstMax', '1', '0'],
    ['rateMax', '999999999.999999', '1'],
    ['burstMax', '1', '999999999.999999'],
  ])(
    'refuses a QoS %s the gateway would refuse (rate %s, burst %s) before allocating',
    async (_f, rate, burst) => {
      const w = world();
      w.qos('bad', [rule('in', 'ingress', rate, burst)]);
      w.eip('eip-a', { qosPolicy: 'bad' });
      expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'rejected', code: 'QoSPolicyInvalid' });
      expect(w.ipam.allocations.size).toBe(0);
      expect(w.gateway.calls).toEqual([]);
    },
  );

  it('accepts the QoS limits at both ends, and the simulated gateway installs them', async () => {
    const w = world();
    const { rateMaxMbit, burstMaxMb } = QosLimits;
    w.qos('edges', [
      rule('a-in', 'ingress', String(rateMaxMbit.min), String(burstMaxMb.max)),
      rule('b-out', 'egress', String(rateMaxMbit.max), String(burstMaxMb.min)),
    ]);
    w.eip('eip-a', { qosPolicy: 'edges' });
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied' });
    expect(
      w
        .tc()
        .map((f) => f.direction)
        .sort(),
    ).toEqual(['egress', 'ingress']);
    expect(condition(w, 'eip-a', 'QoSApplied')).toMatchObject({ status: 'True' });
  });

  it('a value the gateway still refuses leaves the address configured and explains it in QoSApplied', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '10')]);
    const eip = await ready(w, 'eip-a');
    w.gateway.failNext(1, { op: 'eip-ingress-qos-add', stderr: 'Illegal "burst"\nIllegal "police"\n' });
    w.cluster.editEipSpec('eip-a', { qosPolicy: 'q' });
    expect(await w.run('update', 'eip-a', 'qos-changed')).toMatchObject({
      status: 'rejected',
      code: 'GatewayRefused',
    });
    expect(condition(w, 'eip-a', 'QoSApplied')).toMatchObject({ status: 'False', reason: 'GatewayRefused' });
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'True' });
    expect(w.get('eip-a')?.metadata.labels?.[Label.qos]).toBeUndefined();
    expect((await w.ipam.findByOwner(eip.metadata.uid)).map((a) => a.address)).toEqual(['172.18.0.2']);
  });
});

describe('blocked EIPs', () => {
  it('carry no labels and ask to be retried with a backoff that doubles and is capped at 20 s', async () => {
    const w = world();
    await ready(w, 'eip-a', { v4ip: '172.18.0.9' });
    w.eip('eip-b', { v4ip: '172.18.0.9' });
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      const o = await w.run('update', 'eip-b', i === 0 ? 'added' : 'blocked-retry');
      expect(o).toMatchObject({ status: 'rejected', code: 'AddressConflict' });
      const d = (o as { retryAfterMs: number }).retryAfterMs;
      delays.push(d);
      w.clock.advance(d);
    }
    expect(delays.slice(0, 5)).toEqual([1_000, 1_000, 2_000, 4_000, 8_000]);
    expect(Math.max(...delays)).toBe(BLOCKED_RETRY_MAX_MS);
    expect(w.get('eip-b')?.metadata.labels ?? {}).toEqual({});
    w.cluster.deleteEip('eip-a');
    await w.run('update', 'eip-a', 'deletion-requested');
    expect(await w.run('update', 'eip-b', 'blocked-retry')).toMatchObject({
      status: 'applied',
      ip: '172.18.0.9',
    });
    expect(condition(w, 'eip-b', 'Validated')).toBeUndefined();
  });

  it('lose allocation labels an earlier release wrote before allocating', async () => {
    const w = world();
    await ready(w, 'eip-a', { v4ip: '172.18.0.9' });
    w.eip('eip-b', { v4ip: '172.18.0.9' });
    w.cluster.editEipLabels('eip-b', {
      [Label.subnet]: 'ovn-vpc-external-network',
      [Label.natGwName]: 'gw1',
      keep: 'me',
    });
    expect(await w.run('add', 'eip-b')).toMatchObject({ status: 'rejected', code: 'AddressConflict' });
    expect(w.get('eip-b')?.metadata.labels).toEqual({ keep: 'me' });
  });

  it('go not Ready when the NAT gateway feature is switched off, and are redone when it is back', async () => {
    const w = world();
    await ready(w, 'eip-a');
    w.cluster.enableNatGw(false);
    expect(await w.run('update', 'eip-a', 'feature-changed')).toMatchObject({
      status: 'rejected',
      code: 'NatGwDisabled',
    });
    expect(w.get('eip-a')?.status?.ready).toBe(false);
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'False', reason: 'NatGwDisabled' });
    w.cluster.enableNatGw(true);
    w.createPod(w.clock.now() + 5_000); // kube-ovn re-creates the gateway
    expect(await w.run('update', 'eip-a', 'feature-changed')).toMatchObject({ status: 'applied' });
    expect(w.net1()).toContain('172.18.0.2/24');
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'True' });
  });
});

describe('the retry contract for deliverers', () => {
  it('lists exactly the codes of the permanent errors whose blocker may clear', () => {
    const all: PermanentError[] = [
      new InvalidEventError('x'),
      new InvalidSpecError('x'),
      new AddressConflictError('x'),
      new AddressOutOfRangeError('x'),
      new NoAvailableAddressError('x'),
      new UnsupportedChangeError('x'),
      new QoSPolicyError('x'),
      new QoSPolicyInUseError('x'),
      new DependencyMissingError('x', { kind: 'Subnet', name: 's' }),
      new NatGwDisabledError('x'),
      new GatewayRefusedError('x', 1, ''),
      new GatewayRefusedError('x', 1, '', { reason: 'kernel-lacks-feature', mayClear: true }),
      new UnsupportedGatewayReleaseError('x', []),
    ];
    // ReplicatedGateway is no longer given (docs/adr/0105-ha-gateways.md) and stays so that old conditions clear.
    expect([...all.filter((e) => e.mayClear).map((e) => e.code), 'ReplicatedGateway'].sort()).toEqual(
      [...BLOCKED_CODES].sort(),
    );
  });

  it('gives a watcher of EIPs the same delay the handler returns, from the conditions alone', async () => {
    const w = world();
    await ready(w, 'eip-a', { v4ip: '172.18.0.9' });
    w.eip('eip-b', { v4ip: '172.18.0.9' });
    await w.run('add', 'eip-b');
    w.clock.advance(3_000);
    const o = await w.run('update', 'eip-b', 'blocked-retry');
    expect(blockedRetryAfter(w.get('eip-b'), w.clock.now())).toBe(
      (o as { retryAfterMs: number }).retryAfterMs,
    );
    expect(blockedRetryAfter(w.get('eip-a'), w.clock.now())).toBeUndefined();
  });
});

describe('QoS policies an EIP waits for or cannot use', () => {
  it('a fresh EIP naming a missing QoS policy waits for it, holding nothing, and is configured with its limits once it exists', async () => {
    const w = world();
    w.eip('eip-q', { qosPolicy: 'later' });
    expect(await w.run('add', 'eip-q')).toMatchObject({
      status: 'rejected',
      code: 'DependencyMissing',
      retryAfterMs: 1_000,
    });
    expect(w.ipam.allocations.size).toBe(0);
    expect(w.gateway.calls).toEqual([]);
    w.qos('later', [rule('in', 'ingress', '7')]);
    expect(await w.run('update', 'eip-q', 'dependency-changed')).toMatchObject({ status: 'applied' });
    expect(w.tc().map((f) => `${f.ip} ${f.direction}`)).toEqual(['172.18.0.2 ingress']);
    expect(condition(w, 'eip-q', 'QoSApplied')).toMatchObject({ status: 'True' });
  });

  it('keeps the old limits when the EIP is switched to a policy that cannot be used', async () => {
    const w = world();
    w.qos('old', [rule('in', 'ingress', '10')], { shared: true });
    await ready(w, 'eip-a', { qosPolicy: 'old' });
    w.cluster.editEipSpec('eip-a', { qosPolicy: 'missing' });
    expect(await w.run('update', 'eip-a', 'qos-changed')).toMatchObject({
      status: 'rejected',
      code: 'DependencyMissing',
    });
    expect(w.tc().map((f) => `${f.ip} ${f.direction}`)).toEqual(['172.18.0.2 ingress']);
    expect(w.get('eip-a')?.status?.qosPolicy).toBe('old');
    expect(w.get('eip-a')?.metadata.labels?.[Label.qos]).toBe('old');
    expect(condition(w, 'eip-a', 'QoSApplied')).toMatchObject({
      status: 'False',
      reason: 'DependencyMissing',
    });
  });

  it('refuses a NATGW-type policy on an EIP, before anything is allocated', async () => {
    const w = world();
    w.qos('gw-policy', [rule('in', 'ingress', '7')], { bindingType: 'NATGW' });
    w.eip('eip-q', { qosPolicy: 'gw-policy' });
    expect(await w.run('add', 'eip-q')).toMatchObject({
      status: 'rejected',
      code: 'QoSPolicyInvalid',
      message: 'qos policy gw-policy has bindingType NATGW; an EIP needs bindingType EIP',
    });
    expect(w.ipam.allocations.size).toBe(0);
  });
});

describe('invariants', () => {
  it('retries a metadata write that lost a race three times, and gives up (retryably) on the fourth', async () => {
    const w = world();
    w.eip('eip-a');
    w.cluster.raceNextUpdates(3);
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
    expect(w.metrics.counts.get('WriteConflicts')).toBe(3);
    w.eip('eip-b');
    w.cluster.raceNextUpdates(4);
    await expect(w.run('add', 'eip-b')).rejects.toBeInstanceOf(ConflictError);
  });

  it('refuses, on update, an unshared policy already bound to another EIP', async () => {
    const w = world();
    w.qos('solo', [rule('in', 'ingress', '5')]);
    await ready(w, 'eip-a', { qosPolicy: 'solo' });
    const b = await ready(w, 'eip-b');
    w.cluster.editEipSpec('eip-b', { qosPolicy: 'solo' });
    expect(await w.run('update', 'eip-b', 'qos-changed')).toMatchObject({
      status: 'rejected',
      code: 'QoSPolicyInUse',
    });
    expect(w.tc().filter((f) => f.ip === b.status?.ip)).toEqual([]);
    expect(w.get('eip-b')?.metadata.labels?.[Label.qos]).toBeUndefined();
    expect(condition(w, 'eip-b', 'QoSApplied')).toMatchObject({ status: 'False', reason: 'QoSPolicyInUse' });
  });

  it('counts Allocations once per EIP, however many status writes follow', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '5')], { shared: true });
    await ready(w, 'eip-a');
    w.cluster.putRule('IptablesFIPRule', 'f1', 'eip-a');
    await w.run('reset', 'eip-a', 'nat-rule-changed');
    w.cluster.editEipSpec('eip-a', { qosPolicy: 'q' });
    await w.run('update', 'eip-a', 'qos-changed');
    w.createPod(w.clock.now() + 5_000);
    await w.run('update', 'eip-a', 'gateway-restarted');
    const statusWrites = w.cluster.writes.filter((x) => x.method === 'patchEipStatus').length;
    expect(statusWrites).toBeGreaterThanOrEqual(3);
    expect(w.metrics.counts.get('Allocations{subnet=ovn-vpc-external-network}')).toBe(1);
  });
});
