/**
 * The gateway redo in one sweep (ADR 0111): after a container restart the first update re-adds every EIP placed on
 * the gateway in a few batched execs and records what it did; each EIP's own update skips that and writes its
 * status. What is swept comes from the truth (IPAM's holder and placement), not from the label it is found by.
 */
import { describe, expect, it } from 'vitest';
import type { Invocation } from '../../shared/core/invocation.js';
import { operations } from '../../shared/core/operations.js';
import { Label } from '../../shared/domain/kube-ovn.js';
import type { Deps, Gateway } from '../../shared/ports.js';
import { type World, world } from '../support/world.js';

const rule = (name: string, direction: 'ingress' | 'egress', rate: string, priority = 1) => ({
  name,
  direction,
  priority,
  rateMax: rate,
  burstMax: rate,
});

/** `n` EIPs configured on the gateway, every other one with a QoS policy of both directions. */
async function configured(w: World, n: number): Promise<string[]> {
  w.qos('q', [rule('in', 'ingress', '10'), rule('out', 'egress', '20', 2)], { shared: true });
  const names = Array.from({ length: n }, (_, i) => `e${String(i).padStart(3, '0')}`);
  for (const [i, name] of names.entries()) {
    w.eip(name, i % 2 ? {} : { qosPolicy: 'q' });
    const out = await w.run('add', name, 'added');
    if (out.status !== 'applied') throw new Error(`setup: ${name}: ${JSON.stringify(out)}`);
  }
  return names;
}

function invocation(w: World, name: string, deadlineMs = 60_000): Invocation {
  return {
    event: w.event('update', name, 'gateway-restarted'),
    signal: new AbortController().signal,
    deadline: w.clock.now() + deadlineMs,
    log: w.log,
  };
}

const execsSince = (w: World, from: number) => w.gateway.calls.slice(from);

describe('a gateway restart is redone in one sweep', () => {
  it('200 EIPs, half with QoS: three execs, every address and filter back, every EIP Ready again', async () => {
    const w = world({ cidrBlock: '172.18.0.0/16', excludeIps: ['172.18.255.250..172.18.255.254'] });
    const names = await configured(w, 200);
    const before = { net1: w.net1().sort(), tc: w.tc().length };
    w.restartContainer();
    expect(w.net1()).toEqual([]);
    const from = w.gateway.calls.length;
    for (const name of names) await w.run('update', name, 'gateway-restarted');
    const execs = execsSince(w, from);
    expect(execs.map((c) => [c.op, c.args.length])).toEqual([
      ['eip-add', 200],
      ['eip-ingress-qos-add', 100],
      ['eip-egress-qos-add', 100],
    ]);
    expect(w.net1().sort()).toEqual(before.net1);
    expect(w.tc()).toHaveLength(before.tc);
    const token = new Date(w.pod().container!.startedAt!).toISOString().slice(0, 19);
    for (const name of names) expect(w.get(name)?.status).toMatchObject({ ready: true, redo: token });
    // One ledger record for the run, complete.
    expect([...w.redoLedger.records.values()]).toEqual([
      expect.objectContaining({ pod: 'kube-system/vpc-nat-gw-gw1-0', complete: true }),
    ]);
  });

  it('the events delivered all at once, as the bridge fans them out: still one sweep', async () => {
    const w = world();
    const names = await configured(w, 40);
    w.restartContainer();
    const from = w.gateway.calls.length;
    const out = await Promise.all(names.map((n) => operations.update(invocation(w, n), w.deps)));
    expect(out.every((o) => o.status === 'applied')).toBe(true);
    expect(execsSince(w, from).map((c) => c.op)).toEqual([
      'eip-add',
      'eip-ingress-qos-add',
      'eip-egress-qos-add',
    ]);
    expect(w.net1()).toHaveLength(40);
  });

  it('two containers get the events: one sweeps, the other waits for its lease and finds it done', async () => {
    const w = world();
    const names = await configured(w, 30);
    w.restartContainer();
    const other = (): Deps => {
      const g = w.gateway;
      const gateway: Gateway = { run: (...a) => g.run(...a) };
      return { ...w.deps, gateway, newId: () => `other-${Math.random()}` };
    };
    const b = other();
    const from = w.gateway.calls.length;
    const out = await Promise.all(
      names.map((n, i) => operations.update(invocation(w, n), i % 2 ? b : w.deps)),
    );
    expect(out.every((o) => o.status === 'applied')).toBe(true);
    expect(execsSince(w, from)).toHaveLength(3);
    expect(w.net1()).toHaveLength(30);
  });

  it('an EIP the label puts on the gateway but IPAM places elsewhere is not re-added here', async () => {
    const w = world();
    const names = await configured(w, 3);
    const stray = w.get(names[1]!)!;
    const a = [...w.ipam.allocations.values()].find((x) => x.owner.uid === stray.metadata.uid)!;
    w.ipam.allocations.set(`${a.subnet}|${a.address}`, { ...a, placement: { gateway: 'gw2', prefix: 24 } });
    w.restartContainer();
    await w.run('update', names[0]!, 'gateway-restarted');
    expect(w.net1().map((c) => c.split('/')[0])).not.toContain(a.address);
    expect(w.net1()).toHaveLength(2);
  });

  it('an address the sweep re-added, then deleted and claimed by a new EIP in the same container run, is added for the new EIP', async () => {
    const w = world();
    const names = await configured(w, 3);
    w.restartContainer();
    for (const n of names) await w.run('update', n, 'gateway-restarted');
    const ip = w.get(names[0]!)!.status!.ip!;
    // Its EIP goes: eip-del in this same run, the address released.
    w.cluster.deleteEip(names[0]!, new Date(w.clock.now()).toISOString());
    await w.run('update', names[0]!, 'deletion-requested');
    expect(w.net1()).not.toContain(`${ip}/24`);
    // A new EIP asks for that very address: the sweep's record of it is no answer for the new one.
    w.eip('fresh', { v4ip: ip });
    expect(await w.run('add', 'fresh', 'added')).toMatchObject({ status: 'applied', ip });
    expect(w.net1()).toContain(`${ip}/24`);
  });

  it('a terminating EIP and one whose QoS policy is changing are left to their own updates', async () => {
    const w = world();
    const names = await configured(w, 4);
    w.qos('q2', [rule('in', 'ingress', '30')], { shared: true });
    w.cluster.editEipSpec(names[0]!, { qosPolicy: 'q2' });
    w.cluster.deleteEip(names[3]!, new Date(w.clock.now()).toISOString());
    w.restartContainer();
    const from = w.gateway.calls.length;
    await w.run('update', names[1]!, 'gateway-restarted');
    const swept = execsSince(w, from).flatMap((c) => c.args.map((x) => `${c.op} ${x}`));
    const ip = (n: string) => w.get(n)!.status!.ip!;
    expect(swept.filter((x) => x.startsWith('eip-add')).map((x) => x.split(' ')[1]!.split('/')[0])).toEqual(
      [names[1]!, names[0]!, names[2]!].map(ip),
    );
    // names[0]'s QoS is changing (spec q2, status q): only its address was re-added.
    expect(swept.some((x) => x.includes('qos') && x.includes(ip(names[0]!)))).toBe(false);
    // Its own update then applies q2.
    await w.run('update', names[0]!, 'gateway-restarted');
    expect(w.get(names[0]!)?.status?.qosPolicy).toBe('q2');
    expect(w.tc().filter((f) => f.ip === ip(names[0]!))).toEqual([
      expect.objectContaining({ direction: 'ingress', rate: '30Mbit' }),
    ]);
  });

  it("a sweep that runs out of time records how far it got; the next EIP's update goes on from there", async () => {
    const w = world({ cidrBlock: '172.18.0.0/16', excludeIps: ['172.18.255.250..172.18.255.254'] });
    const names = await configured(w, 20);
    w.restartContainer();
    // Every exec takes 6 s of the manual clock; eip-add's first guess is 6 s per rule on 1.12 (two arpings).
    const g = w.gateway;
    const slow: Gateway = {
      run: async (...a) => {
        w.clock.advance(6_000);
        return g.run(...a);
      },
    };
    // One exec at a time: the manual clock moves per exec, so the time budget is what this checks.
    const deps: Deps = { ...w.deps, gateway: slow, batching: { lanes: 1 } };
    // 5 s for the EIP's own work after the sweep, 2 s margin: 21 s leaves 14 s, two chunks of its first guess.
    const first = await operations.update(invocation(w, names[0]!, 21_000), deps);
    expect(first.status).toBe('applied');
    const record = [...w.redoLedger.records.values()][0]!;
    expect(record.complete).toBe(false);
    const partly = w.net1().length;
    expect(partly).toBeGreaterThan(0);
    expect(partly).toBeLessThan(20);
    await operations.update(invocation(w, names[1]!), deps);
    expect([...w.redoLedger.records.values()][0]!.complete).toBe(true);
    expect(w.net1()).toHaveLength(20);
    for (const name of names.slice(2)) await operations.update(invocation(w, name), deps);
    for (const name of names) expect(w.get(name)?.status?.ready).toBe(true);
  });

  it('an address lost after the sweep (removed by hand) is re-added when asked again: the ledger only serves EIPs not yet redone in the run', async () => {
    const w = world();
    const names = await configured(w, 3);
    w.restartContainer();
    for (const n of names) await w.run('update', n, 'gateway-restarted');
    const ip = w.get(names[0]!)!.status!.ip!;
    const sim = w.gateway.sim(w.pod());
    expect(sim.exec(['ip', 'addr', 'del', `${ip}/24`, 'dev', 'net1']).exitCode).toBe(0);
    // The audit's repair of a missing address (or the bridge's hint) sends the update with gateway-restarted.
    const from = w.gateway.calls.length;
    await w.run('update', names[0]!, 'gateway-restarted');
    expect(execsSince(w, from).map((c) => `${c.op} ${c.args.join(' ')}`)).toContain(
      `eip-add ${ip}/24,172.18.0.1`,
    );
    expect(w.net1()).toContain(`${ip}/24`);
  });

  it('without a ledger every EIP redoes its own, batched with whatever waits with it', async () => {
    const w = world();
    const names = await configured(w, 6);
    w.restartContainer();
    const deps: Deps = { ...w.deps };
    delete deps.redoLedger;
    const from = w.gateway.calls.length;
    for (const n of names) await operations.update(invocation(w, n), deps);
    expect(execsSince(w, from).length).toBe(6 + 2 * 3);
    expect(w.net1()).toHaveLength(6);
    expect(w.get(names[0]!)?.metadata.labels?.[Label.natGwName]).toBe('gw1');
  });
});
