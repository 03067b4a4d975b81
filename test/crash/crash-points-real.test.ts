/**
 * A sample of the crash points on the real adapters (dynalite + the local Kubernetes API with its simulated
 * gateway): the same enumeration as crash-points.test.ts — a clean run counts the side-effecting calls, then for
 * each k a new EIP is driven until the process "dies" right after call k, its lease is left to expire, and the event
 * is redelivered. Each EIP must end exactly like the uninterrupted one (metadata, status, allocation, net1, tc).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { type Lab, startLab } from '../fault/lab.js';
import { Crash, seam } from './seam.js';

let lab: Lab;
let covered = 0;
const lines: string[] = [];

beforeAll(async () => {
  lab = await startLab('crash-real');
}, 60_000);

afterAll(async () => {
  console.log(`crash points covered on the real adapters: ${covered}\n${lines.join('\n')}`);
  await lab?.close();
});

/** One EIP's observable state with its name, uid and address taken out (comparable across EIPs). */
async function view(name: string, uid: string, ip: string | undefined) {
  const eip = await lab.getEip(name);
  const held = await lab.deps.ipam.findByOwner(uid);
  const sim = lab.sim();
  const strip = (v: unknown) =>
    JSON.parse(
      JSON.stringify(v ?? null)
        .replaceAll(name, '<name>')
        .replaceAll(uid, '<uid>')
        .replaceAll(ip ?? '<no address>', '<ip>'),
      (k, x) => (k === 'lastTransitionTime' || k === 'lastUpdateTime' || k === 'macAddress' ? undefined : x),
    );
  // Converged and no lease left behind: one more event finds nothing to do (a held lease would throw).
  const again = await lab
    .invoke(await lab.event('update', name, 'resync', uid))
    .then((o) => o.status)
    .catch((e: Error) => e.name);
  return {
    exists: !!eip,
    spec: strip(eip?.spec),
    status: strip(eip?.status),
    labels: strip(eip?.metadata.labels),
    finalizers: eip?.metadata.finalizers ?? [],
    allocations: strip(held.map((a) => ({ subnet: a.subnet, address: a.address, placement: a.placement }))),
    net1: sim.net1Addresses().filter((c) => c.startsWith(`${ip}/`)).length,
    tc: strip(
      sim
        .tcFilters()
        .filter((f) => f.ip === ip)
        .map((f) => `${f.direction} ${f.rate} ${f.burst}`)
        .sort(),
    ),
    again,
  };
}

interface RealScenario {
  name: string;
  /** Creates the EIP `name` and brings it to the state before the event; returns the event's handler and reason. */
  setup(name: string): Promise<void>;
  handler: 'add' | 'update';
  reason: 'added' | 'deletion-requested';
}

const scenarios: RealScenario[] = [
  {
    name: 'add with the shared QoS policy',
    async setup(name) {
      await lab.createEip(name, { natGwDp: 'gw1', qosPolicy: 'qos-demo' });
    },
    handler: 'add',
    reason: 'added',
  },
  {
    name: 'finalize a deleted EIP',
    async setup(name) {
      await lab.createEip(name, { natGwDp: 'gw1', qosPolicy: 'qos-demo' });
      expect(await lab.deliver(await lab.event('add', name, 'added'))).toMatchObject({ status: 'applied' });
      await lab.deleteEip(name);
    },
    handler: 'update',
    reason: 'deletion-requested',
  },
];

describe.each(scenarios)('crash points on the real adapters — $name', (s) => {
  it('each side-effecting step: crash after it, redeliver → like the uninterrupted EIP', async () => {
    const slug = s.handler === 'add' ? 'ca' : 'cf';
    const run = async (name: string, crashAfter?: number) => {
      await s.setup(name);
      const eip0 = (await lab.getEip(name)) as IptablesEip;
      const event = await lab.event(s.handler, name, s.reason);
      const cut = seam(lab.deps, crashAfter);
      if (crashAfter === undefined) await lab.invoke(event, cut.deps);
      else {
        await lab.invoke(event, cut.deps).catch((e: unknown) => {
          if (!(e instanceof Crash)) throw e;
        });
        expect(cut.crashed, `crash #${crashAfter}`).toBeDefined();
        lab.clock.advance(121_000);
        await lab.deliver(event);
      }
      const ip = (await lab.deps.ipam.findByOwner(eip0.metadata.uid))[0]?.address ?? eip0.status?.ip;
      const after = await lab.getEip(name);
      return { steps: cut.steps, view: await view(name, eip0.metadata.uid, after?.status?.ip ?? ip) };
    };
    const clean = await run(`${slug}-clean`);
    expect(clean.steps.length).toBeGreaterThan(2);
    expect(['unchanged', 'skipped']).toContain(clean.view.again);
    for (let k = 1; k <= clean.steps.length; k++) {
      const crashed = await run(`${slug}-${k}`, k);
      expect(crashed.view, `crash after #${k} ${clean.steps[k - 1]}`).toEqual(clean.view);
      covered += 1;
    }
    lines.push(`  ${s.name}: ${clean.steps.length} steps — ${clean.steps.join(', ')}`);
    // Nothing on net1 that no EIP owns: every address the gateway carries belongs to a live, Ready EIP.
    const eips = (
      (await lab.custom.listClusterCustomObject({
        group: 'kubeovn.io',
        version: 'v1',
        plural: 'iptables-eips',
      })) as {
        items: IptablesEip[];
      }
    ).items;
    const owned = new Set(eips.map((e) => e.status?.ip).filter(Boolean));
    const pods = await lab.deps.cluster.listGatewayPods();
    const own = new Set(pods.map((p) => p.addresses?.['ovn-vpc-external-network']));
    const orphans = lab
      .sim()
      .net1Addresses()
      .map((c) => c.split('/')[0]!)
      .filter((a) => !owned.has(a) && !own.has(a));
    expect(orphans).toEqual([]);
  }, 120_000);
});
