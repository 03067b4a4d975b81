/**
 * What an EIP shows is output (ADR 0086) and what it holds is found where it is recorded (ADR 0085), on the in-memory
 * ports: status.ip, status.qosPolicy and the labels edited by hand are put back from the allocation record with an
 * OutputRestored Event and never adopted while the uid holds an allocation; the unshared-policy guard decides from
 * the policy's hold, not labels (ADR 0087); and with an owner index that lags the table (the in-memory twin's
 * `indexLagMs`, a model of DynamoDB's global secondary index) or lost an entry (`hideFromIndex`), a deletion right
 * after a claim still takes the address off the gateway and releases it.
 */
import { describe, expect, it } from 'vitest';
import { Label } from '../../shared/domain/kube-ovn.js';
import { type World, world } from '../support/world.js';

const rule = (name: string, direction: 'ingress' | 'egress', rate: string) => ({
  name,
  direction,
  priority: 1,
  rateMax: rate,
  burstMax: rate,
});

async function ready(w: World, name: string, spec: Record<string, string> = {}) {
  w.eip(name, spec);
  expect(await w.run('add', name, 'added')).toMatchObject({ status: 'applied' });
  w.gateway.calls.length = 0;
  return w.get(name)!;
}

const held = (w: World, name: string) =>
  [...w.ipam.allocations.values()]
    .filter((a) => a.owner.uid === w.get(name)?.metadata.uid)
    .map((a) => a.address);
const restored = (w: World, name: string) =>
  w.cluster.events.filter((e) => e.object === name && e.reason === 'OutputRestored');

describe('status and labels are output: a hand edit is put back from the allocation record', () => {
  it('status.ip patched to another free address, then a spec change: one allocation, status back, no tc on the edit', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '10')], { shared: true });
    const eip = await ready(w, 'eip-a', { qosPolicy: 'q' });
    const ip = eip.status!.ip!;
    await w.cluster.patchEipStatus('eip-a', { ip: '172.18.0.77' }); // kubectl patch --subresource=status
    w.cluster.putEip({ ...w.get('eip-a')!, spec: { ...w.get('eip-a')!.spec, qosPolicy: '' } }); // a spec change
    expect(await w.run('update', 'eip-a', 'qos-changed')).toMatchObject({ status: 'applied', ip });
    expect(held(w, 'eip-a')).toEqual([ip]);
    expect(w.get('eip-a')!.status).toMatchObject({ ip, ready: true, qosPolicy: '' });
    expect(w.get('eip-a')!.metadata.labels?.[Label.eipV4Ip]).toBe(ip);
    expect(w.tc().filter((f) => f.ip === '172.18.0.77')).toEqual([]);
    expect(w.net1().some((c) => c.startsWith('172.18.0.77/'))).toBe(false);
    expect(restored(w, 'eip-a')).toEqual([
      expect.objectContaining({ type: 'Warning', message: expect.stringContaining('status.ip 172.18.0.77') }),
    ]);
  });

  it('without a spec change the next update (resync, the drift pass) puts it back and adopts nothing', async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    await w.cluster.patchEipStatus('eip-a', { ip: '172.18.0.77' });
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({ status: 'applied' });
    expect(held(w, 'eip-a')).toEqual([eip.status!.ip]);
    expect(w.get('eip-a')!.status?.ip).toBe(eip.status!.ip);
    // Put back once: the next update finds nothing to say.
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({ status: 'unchanged' });
    expect(restored(w, 'eip-a')).toHaveLength(1);
  });

  it('status.qosPolicy and the qos label edited: put back from what the allocation records as applied', async () => {
    const w = world();
    w.qos('q', [rule('in', 'ingress', '10')]);
    await ready(w, 'eip-a', { qosPolicy: 'q' });
    await w.cluster.patchEipStatus('eip-a', { qosPolicy: '' });
    const e = w.get('eip-a')!;
    const labels = { ...e.metadata.labels };
    delete labels[Label.qos];
    w.cluster.putEip({ ...e, metadata: { ...e.metadata, labels } });
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({ status: 'applied' });
    expect(w.get('eip-a')!.status?.qosPolicy).toBe('q');
    expect(w.get('eip-a')!.metadata.labels?.[Label.qos]).toBe('q');
    // Nothing was re-added on the gateway: the record said q was applied all along.
    expect(w.gateway.calls).toEqual([]);
    expect(restored(w, 'eip-a')[0]?.message).toMatch(
      /status\.qosPolicy "".*ovn\.kubernetes\.io\/qos=\(none\)/,
    );
  });

  it('an EIP whose uid holds nothing still has its status.ip adopted (configured before this table)', async () => {
    const w = world();
    const eip = await ready(w, 'eip-a');
    w.ipam.allocations.clear();
    expect(await w.run('update', 'eip-a', 'resync')).toMatchObject({ status: 'applied' });
    expect(held(w, 'eip-a')).toEqual([eip.status!.ip]);
    expect(restored(w, 'eip-a')).toEqual([]);
  });
});

describe('the unshared-policy guard decides from the hold, not labels', () => {
  it('the holder label removed by hand, a second EIP asks for the policy: refused, one set of filters', async () => {
    const w = world();
    w.qos('own', [rule('in', 'ingress', '10')]);
    const first = await ready(w, 'eip-a', { qosPolicy: 'own' });
    const labels = { ...first.metadata.labels };
    delete labels[Label.qos];
    w.cluster.putEip({ ...first, metadata: { ...first.metadata, labels } });
    w.eip('eip-b', { qosPolicy: 'own' });
    expect(await w.run('add', 'eip-b', 'added')).toMatchObject({
      status: 'rejected',
      code: 'QoSPolicyInUse',
    });
    expect(await w.holds.findHolder('own')).toMatchObject({ uid: first.metadata.uid });
    expect(w.tc().map((f) => f.ip)).toEqual([first.status!.ip]);
    // The holder's label comes back with its next update.
    await w.run('update', 'eip-a', 'resync');
    expect(w.get('eip-a')!.metadata.labels?.[Label.qos]).toBe('own');
  });

  it('the policy is free once its holder lets go of it, and a hold left by a holder that is gone is taken over', async () => {
    const w = world();
    w.qos('own', [rule('in', 'ingress', '10')]);
    const a = await ready(w, 'eip-a', { qosPolicy: 'own' });
    w.cluster.putEip({ ...w.get('eip-a')!, spec: { ...a.spec, qosPolicy: '' } });
    await w.run('update', 'eip-a', 'qos-changed');
    expect(await w.holds.findHolder('own')).toBeUndefined();
    await ready(w, 'eip-b', { qosPolicy: 'own' });
    expect(await w.holds.findHolder('own')).toMatchObject({ name: 'eip-b' });
    // eip-b force-deleted (finalizer removed by hand): its hold stays behind until someone needs the policy.
    w.cluster.eips.delete('eip-b');
    await ready(w, 'eip-c', { qosPolicy: 'own' });
    expect(await w.holds.findHolder('own')).toMatchObject({ name: 'eip-c' });
  });

  it('two EIPs racing for one unshared policy: exactly one gets it', async () => {
    const w = world();
    w.qos('own', [rule('in', 'ingress', '10')]);
    w.eip('eip-a', { qosPolicy: 'own' });
    w.eip('eip-b', { qosPolicy: 'own' });
    const outcomes = await Promise.all([w.run('add', 'eip-a', 'added'), w.run('add', 'eip-b', 'added')]);
    const got = outcomes.filter((o) => o.status === 'applied');
    expect(got).toHaveLength(1);
    expect(new Set(w.tc().map((f) => f.ip)).size).toBe(1);
  });
});

describe('an owner index that lags the table or lost an entry hides nothing from a deletion', () => {
  it('the model can fail: right after a claim the index shows nothing', async () => {
    const w = world({ indexLagMs: 60_000 });
    const eip = await ready(w, 'eip-a');
    expect(await w.ipam.findByOwner(eip.metadata.uid)).toEqual([]);
    expect(held(w, 'eip-a')).toHaveLength(1);
  });

  it('deleted right after the claim: eip-del where it is configured, released, finalizer gone', async () => {
    const w = world({ indexLagMs: 60_000 });
    const eip = await ready(w, 'eip-a');
    w.cluster.deleteEip('eip-a');
    expect(await w.run('update', 'eip-a', 'deletion-requested')).toMatchObject({ status: 'applied' });
    expect(w.get('eip-a')).toBeUndefined();
    expect(w.ipam.allocations.size).toBe(0);
    expect(w.gateway.calls.map((c) => c.argv[2])).toContain('eip-del');
    expect(w.net1().some((c) => c.startsWith(`${eip.status!.ip}/`))).toBe(false);
  });

  it('the index lost the entry (a crash between index and item write): finalize and the delete safety net release', async () => {
    for (const path of ['finalize', 'safety net'] as const) {
      const w = world();
      const eip = await ready(w, 'eip-a', { v4ip: '172.18.0.40' });
      w.ipam.hideFromIndex('ovn-vpc-external-network', eip.status!.ip!);
      expect(await w.ipam.findByOwner(eip.metadata.uid)).toEqual([]);
      if (path === 'finalize') {
        w.cluster.deleteEip('eip-a');
        await w.run('update', 'eip-a', 'deletion-requested');
      } else {
        const last = w.get('eip-a')!;
        w.cluster.eips.delete('eip-a'); // finalizer removed by hand, then deleted
        await w.run('delete', 'eip-a', 'deleted', {
          object: { name: 'eip-a', uid: last.metadata.uid },
          old: { metadata: { ...last.metadata }, spec: last.spec, status: last.status },
        });
      }
      expect(w.ipam.allocations.size, path).toBe(0);
      expect(
        w.net1().some((c) => c.startsWith('172.18.0.40/')),
        path,
      ).toBe(false);
    }
  });
});
