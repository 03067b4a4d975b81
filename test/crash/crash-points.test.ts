/**
 * Crash points (in-memory ports): for every handler scenario, a clean run counts the side-effecting port calls
 * (test/crash/seam.ts); then for k = 1..N the same scenario is run again and the process "dies" right after the k-th
 * call — the lease stays held, nothing is rolled back. The event is then redelivered (Lambda's retry), alone or
 * after a sibling event for the same EIP, once the abandoned lease has expired on the manual clock. The end state
 * must equal the uninterrupted run's, with no leaked allocation, orphan address or duplicate.
 * Steps are enumerated, not listed: a new write in a handler is a new crash point without editing this file.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Invocation } from '../../shared/core/invocation.js';
import { operations } from '../../shared/core/operations.js';
import type { Outcome } from '../../shared/core/outcome.js';
import { RetryableError } from '../../shared/domain/errors.js';
import type { EipEvent } from '../../shared/events.js';
import type { Deps } from '../../shared/ports.js';
import { GW, type World, world } from '../support/world.js';
import { Crash, seam } from './seam.js';
import { invariantViolations, normalized } from './world-state.js';

const LEASE_EXPIRY_MS = 121_000; // past any lease an invocation can take (the core caps leases at 2 minutes)

const rule = (name: string, direction: 'ingress' | 'egress', rate: string, priority = 1) => ({
  name,
  direction,
  priority,
  rateMax: rate,
  burstMax: rate,
});

interface Scenario {
  name: string;
  /** Run on kube-ovn master's Deployment of this many pods (docs/adr/0105-ha-gateways.md) instead of one pod. */
  replicas?: number;
  /** Brings a fresh world to the state before the event (with the real, unwrapped ports). */
  setup(w: World): Promise<void>;
  /** The event under test. */
  event(w: World): EipEvent;
  /** A sibling event for the same EIP, delivered between the crash and the redelivery. */
  sibling(w: World): EipEvent;
}

function invoke(w: World, deps: Deps, event: EipEvent): Promise<Outcome> {
  const inv: Invocation = {
    event,
    signal: new AbortController().signal,
    deadline: w.clock.now() + 60_000,
    log: w.log,
  };
  return operations[event.handler](inv, deps);
}

/** Delivers as Lambda does: a thrown error is retried later (the clock moves past any abandoned lease). */
async function deliver(w: World, event: EipEvent): Promise<Outcome> {
  let last: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await invoke(w, w.deps, event);
    } catch (e) {
      if (!(e instanceof RetryableError)) throw e;
      last = e;
      w.clock.advance(LEASE_EXPIRY_MS);
    }
  }
  throw new Error(`${event.handler} ${event.object.name} never resolved: ${String(last)}`);
}

/** An EIP as a user creates it, with a uid fixed by its name so that two worlds built alike are alike. */
function eip(w: World, name: string, spec: Record<string, string> = {}): void {
  w.cluster.putEip({ metadata: { name, uid: `uid-${name}` }, spec: { natGwDp: GW, ...spec } });
}

async function ready(w: World, name: string, spec: Record<string, string> = {}): Promise<void> {
  eip(w, name, spec);
  const out = await deliver(w, w.event('add', name, 'added'));
  if (out.status !== 'applied') throw new Error(`setup: ${name} not configured: ${JSON.stringify(out)}`);
}

async function neighbours(w: World): Promise<void> {
  // Another EIP on the same gateway: a crash must never disturb it.
  await ready(w, 'other', { qosPolicy: 'q-shared' });
}

function qosPolicies(w: World): void {
  w.qos('q-in', [rule('in', 'ingress', '10')]);
  w.qos('q-both', [rule('in', 'ingress', '20'), rule('out', 'egress', '30', 2)]);
  w.qos('q-shared', [rule('in', 'ingress', '5')], { shared: true });
}

const scenarios: Scenario[] = [
  {
    name: 'add: a fresh EIP with a QoS policy',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      eip(w, 'e', { qosPolicy: 'q-both' });
    },
    event: (w) => w.event('add', 'e', 'added'),
    sibling: (w) => w.event('update', 'e', 'resync'),
  },
  {
    name: "add: the first EIP next to a gateway pod's own address (avoided, not reserved)",
    async setup(w) {
      qosPolicies(w);
      w.cluster.putPod({ ...w.pod(), addresses: { 'ovn-vpc-external-network': '172.18.0.200' } });
      eip(w, 'e', { qosPolicy: 'q-in' });
    },
    event: (w) => w.event('add', 'e', 'added'),
    sibling: (w) => w.event('update', 'e', 'spec-changed'),
  },
  {
    name: 'add: refused (the QoS policy does not exist) and recorded on the EIP',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      eip(w, 'e', { qosPolicy: 'no-such-policy' });
    },
    event: (w) => w.event('add', 'e', 'added'),
    sibling: (w) => w.event('reset', 'e', 'nat-rule-changed'),
  },
  {
    name: 'add: a static address',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      eip(w, 'e', { v4ip: '172.18.0.77' });
    },
    event: (w) => w.event('add', 'e', 'added'),
    sibling: (w) => w.event('reset', 'e', 'nat-rule-changed'),
  },
  {
    name: 'update: QoS switched from one policy to another',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-in' });
      w.cluster.editEipSpec('e', { qosPolicy: 'q-both' });
    },
    event: (w) => w.event('update', 'e', 'qos-changed'),
    sibling: (w) => w.event('update', 'e', 'resync'),
  },
  {
    name: 'update: QoS unbound',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-both' });
      w.cluster.editEipSpec('e', { qosPolicy: undefined });
    },
    event: (w) => w.event('update', 'e', 'qos-changed'),
    sibling: (w) => w.event('reset', 'e', 'nat-rule-changed'),
  },
  {
    name: "update: the bound policy's rules were edited",
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-both' });
      w.qos('q-both', [rule('in', 'ingress', '40'), rule('out', 'egress', '50', 2)]);
    },
    event: (w) => w.event('update', 'e', 'qos-policy-changed'),
    sibling: (w) => w.event('update', 'e', 'resync'),
  },
  {
    name: 'update: a refused change of spec.v4ip, recorded on the EIP',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e');
      w.cluster.editEipSpec('e', { v4ip: '172.18.0.99' });
    },
    event: (w) => w.event('update', 'e', 'spec-changed'),
    sibling: (w) => w.event('reset', 'e', 'nat-rule-changed'),
  },
  {
    name: 'update: redo after a gateway container restart',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-both' });
      w.restartContainer();
      // The neighbour is redone by its own event; only e is under test.
      await deliver(w, w.event('update', 'other', 'gateway-restarted'));
    },
    event: (w) => w.event('update', 'e', 'gateway-restarted'),
    sibling: (w) => w.event('reset', 'e', 'nat-rule-changed'),
  },
  {
    name: 'update: status.ip and the qos label edited by hand (put back from the allocation)',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-in' });
      await w.cluster.patchEipStatus('e', { ip: '172.18.0.99', qosPolicy: '' });
      const e = w.get('e')!;
      const { 'ovn.kubernetes.io/qos': _gone, ...labels } = e.metadata.labels ?? {};
      w.cluster.putEip({ ...e, metadata: { ...e.metadata, labels } });
    },
    event: (w) => w.event('update', 'e', 'resync'),
    sibling: (w) => w.event('update', 'e', 'spec-changed'),
  },
  {
    name: 'update: the first redo after a container restart sweeps the whole gateway in batches (ADR 0111)',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'n2', { qosPolicy: 'q-in' });
      await ready(w, 'n3');
      await ready(w, 'e', { qosPolicy: 'q-both' });
      w.restartContainer();
    },
    // e's event comes first: it re-adds every EIP of the gateway, then writes its own status.
    event: (w) => w.event('update', 'e', 'gateway-restarted'),
    sibling: (w) => w.event('update', 'n2', 'gateway-restarted'),
  },
  {
    name: 'reset: a NAT rule now names the EIP',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e');
      w.cluster.putRule('IptablesFIPRule', 'fip-1', 'e');
    },
    event: (w) => w.event('reset', 'e', 'nat-rule-changed'),
    sibling: (w) => w.event('update', 'e', 'resync'),
  },
  {
    name: 'update: deletion requested (finalize)',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-both' });
      w.cluster.deleteEip('e', new Date(w.clock.now()).toISOString());
    },
    event: (w) => w.event('update', 'e', 'deletion-requested'),
    sibling: (w) => w.event('reset', 'e', 'nat-rule-changed'),
  },
  {
    name: 'reset: the last NAT rule of a terminating EIP went away (finalize)',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-in' });
      w.cluster.putRule('IptablesDnatRule', 'dnat-1', 'e');
      w.cluster.deleteEip('e', new Date(w.clock.now()).toISOString());
      await deliver(w, w.event('update', 'e', 'deletion-requested')); // waits for the rule
      w.cluster.removeRule('IptablesDnatRule', 'dnat-1');
    },
    event: (w) => w.event('reset', 'e', 'nat-rule-changed'),
    sibling: (w) => w.event('update', 'e', 'deletion-requested'),
  },
  {
    name: 'delete: the object was force-deleted while it still held its address',
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-both' });
    },
    event(w) {
      // Built before the object goes: the bridge's delete event carries the last snapshot it saw.
      const e = w.get('e')!;
      const event: EipEvent = {
        ...w.event('delete', 'e', 'deleted'),
        old: { metadata: { name: 'e', uid: e.metadata.uid }, spec: e.spec, status: e.status },
      };
      w.cluster.eips.delete('e'); // finalizer removed by hand, then deleted
      return event;
    },
    sibling: (w) => w.event('update', 'e', 'deletion-requested'),
  },
  // A replicated gateway of two pods (docs/adr/0105-ha-gateways.md): each pod's exec and the one record of both.
  {
    name: 'add on two pods: a fresh EIP with a QoS policy',
    replicas: 2,
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      eip(w, 'e', { qosPolicy: 'q-both' });
    },
    event: (w) => w.event('add', 'e', 'added'),
    sibling: (w) => w.event('update', 'e', 'resync'),
  },
  {
    name: 'update on two pods: QoS switched from one policy to another',
    replicas: 2,
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-in' });
      w.cluster.editEipSpec('e', { qosPolicy: 'q-both' });
    },
    event: (w) => w.event('update', 'e', 'qos-changed'),
    sibling: (w) => w.event('update', 'e', 'resync'),
  },
  {
    name: 'update on two pods: one pod restarted, its sweep alone',
    replicas: 2,
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-both' });
      w.restartContainer(w.pods()[1]);
    },
    event: (w) => w.event('update', 'e', 'gateway-restarted', { gateway: GW, pod: w.pods()[1]!.uid }),
    sibling: (w) => w.event('update', 'other', 'gateway-restarted', { gateway: GW, pod: w.pods()[1]!.uid }),
  },
  {
    name: 'update on two pods: scaled up, the new pod gets the address',
    replicas: 2,
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-in' });
      w.addReplica();
      await deliver(w, w.event('update', 'other', 'gateway-restarted', { gateway: GW }));
    },
    event: (w) => w.event('update', 'e', 'gateway-restarted', { gateway: GW, pod: w.pods()[2]!.uid }),
    sibling: (w) => w.event('reset', 'e', 'nat-rule-changed'),
  },
  {
    name: 'update on two pods: deletion requested with one pod gone (finalize)',
    replicas: 2,
    async setup(w) {
      qosPolicies(w);
      await neighbours(w);
      await ready(w, 'e', { qosPolicy: 'q-both' });
      w.deletePod(w.pods()[0]!);
      w.cluster.deleteEip('e', new Date(w.clock.now()).toISOString());
    },
    event: (w) => w.event('update', 'e', 'deletion-requested'),
    sibling: (w) => w.event('reset', 'e', 'nat-rule-changed'),
  },
];

/**
 * How far the owner index lags the table (the in-memory twin's model of DynamoDB's global secondary index,
 * ADR 0085): not at all, and longer than a crashed run's lease, so the redelivery finds nothing of this run's claims
 * through the index and must read where the EIP records them.
 */
const INDEX_LAGS = [0, 10 * LEASE_EXPIRY_MS] as const;

/** A world with the scenario set up, its event built, and net1 as it was before the event. */
async function prepared(s: Scenario, indexLagMs = 0) {
  const w = world({ indexLagMs });
  w.cluster.putPod({ ...w.pod(), uid: 'uid-gateway-pod' });
  if (s.replicas) w.replicas(s.replicas);
  await s.setup(w);
  const event = s.event(w);
  const sibling = s.sibling(w);
  // The sibling event for a deleted object names it by the old uid, as the bridge would.
  if (!w.get(event.object.name)) sibling.object = { ...event.object };
  return { w, event, sibling };
}

let covered = 0;
const perScenario: string[] = [];

afterAll(() => {
  console.log(
    `crash points covered: ${covered} (each alone and interleaved with a sibling event)\n${perScenario.join('\n')}`,
  );
});

describe.each(
  scenarios.flatMap((s) =>
    INDEX_LAGS.map((lag) => ({ ...s, lag, index: lag ? 'a lagging index' : 'its index' })),
  ),
)('crash points — $name, with $index', (s) => {
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
  it('every side-effecting step: crash right after it, redeliver → the uninterrupted end state', async () => {
    // The uninterrupted runs: the event alone, and the event followed by the sibling.
    const clean = await prepared(s, s.lag);
    const counted = seam(clean.w.deps);
    await invoke(clean.w, counted.deps, clean.event);
    const steps = [...counted.steps];
    expect(steps.length).toBeGreaterThan(0);
    expect(invariantViolations(clean.w)).toEqual([]);
    const expected = normalized(clean.w);
    await deliver(clean.w, clean.sibling);
    const expectedWithSibling = normalized(clean.w);

    for (let k = 1; k <= steps.length; k++) {
      for (const withSibling of [false, true]) {
        const { w, event, sibling } = await prepared(s, s.lag);
        const cut = seam(w.deps, k);
        // The process dies right after step k; whatever the handler would have answered never reaches Lambda
        // (a crash after the last step can even be swallowed by the lease release's own error handling).
        await invoke(w, cut.deps, event).catch((e: unknown) => {
          if (!(e instanceof Crash)) throw e;
        });
        expect(cut.crashed, `crash #${k} ${steps[k - 1]}`).toBeDefined();
        expect(cut.steps[k - 1], 'the run is deterministic: the same step comes k-th').toBe(steps[k - 1]);
        w.clock.advance(LEASE_EXPIRY_MS); // the dead invocation's lease runs out
        if (withSibling) await deliver(w, sibling);
        await deliver(w, event);
        if (withSibling) await deliver(w, sibling); // the in-order run ends with the sibling
        const label = `after a crash at #${k} (${steps[k - 1]})${withSibling ? ' and a sibling event' : ''}`;
        expect(invariantViolations(w), label).toEqual([]);
        expect(normalized(w), label).toEqual(withSibling ? expectedWithSibling : expected);
        covered += 1;
      }
    }
    perScenario.push(`  ${s.name} (${s.index}): ${steps.length} steps — ${steps.join(', ')}`);
  });
});

describe('the crash-point check can fail', () => {
  it('a redelivery that skips the release is caught as a leaked allocation and a different end state', async () => {
    const s = scenarios.find((x) => x.name.startsWith('update: deletion requested'))!;
    const clean = await prepared(s);
    await deliver(clean.w, clean.event);
    const { w, event } = await prepared(s);
    const cut = seam(w.deps, 2); // right after eip-del
    await invoke(w, cut.deps, event).catch(() => undefined);
    w.clock.advance(LEASE_EXPIRY_MS);
    const release = w.ipam.release.bind(w.ipam);
    w.ipam.release = async () => false; // a handler that forgot its release
    await deliver(w, event);
    w.ipam.release = release;
    expect(invariantViolations(w)).toEqual([
      expect.stringMatching(/^leaked allocation 172\.18\.0\.\d+ \(owner e is gone\)$/),
    ]);
    expect(normalized(w)).not.toEqual(normalized(clean.w));
  });
});
