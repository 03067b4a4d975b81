/**
 * The gateway redo in one sweep (docs/adr/0111-gateway-redo-in-one-sweep.md). When a gateway pod's container starts
 * (a restart, a new pod), every address configured there is gone, and each EIP's update re-adds its own (ADR 0003).
 * Instead of one exec per EIP, the first update that finds the redo due re-adds every EIP placed on the gateway — in
 * a few batched execs, under the pod's gateway lease (./gateway-lease.ts) — and records in the RedoLedger which
 * calls succeeded in that container run. Each EIP's own update still runs (lease, reads, status, as before) and skips
 * the calls recorded there, as long as it has not sent another call for its address in the same invocation.
 *
 * What is swept is decided from the truth, under the pod's lease: the EIPs labelled with the gateway (the label is
 * only where to look), each kept only when IPAM says its uid holds its address placed on this gateway, not being
 * deleted; QoS only where the spec still names the policy the allocation records as applied. Anything else is left
 * to the EIP's own update, which sends its own calls.
 */
import { type Dialect, eipAdd, qosApply } from '../domain/dialect/index.js';
import { DeadlineError, LeaseHeldError } from '../domain/errors.js';
import { gatewayOfApp } from '../domain/gateway-pod.js';
import { type IptablesEip, Label } from '../domain/kube-ovn.js';
import type { NatGwCall } from '../domain/nat-gateway.js';
import { ruleAddress } from '../domain/nat-gateway-batch.js';
import type { Allocation, Deps, GatewayPod, Pool, RedoRecord } from '../ports.js';
import { batcherOf, callKey, type GatewayCall, type PodSession } from './batch.js';
import type { Outcome } from './batch-settle.js';
import { v4PoolOf } from './gateway.js';
import { type Run, validName } from './prelude.js';
import { type LoadedQos, loadQos } from './qos.js';
import { containerRun, coverByRedo, doneKey, podName } from './redo-coverage.js';
import { redoToken } from './view.js';

/** Time the sweeper keeps for its own EIP's work after the sweep. */
const OWN_WORK_MS = 5_000;
/** How long the sweeper asks the pod's lease for before its first exec (the execs extend it). */
const SWEEP_HOLD_MS = 60_000;

const records = new WeakMap<object, Map<string, RedoRecord>>();

/**
 * For an update that re-adds its address because the pod's container run changed (or the pod is new to it): makes
 * sure this run's redo of the pod happened — sweeping it when nobody has — and lets the invocation skip what it
 * re-applied. Each pod of a replicated gateway is swept on its own: a restarted pod alone, the others untouched
 * (docs/adr/0105-ha-gateways.md). `gateway`: the gateway's name (the pod's app label tells it only under the
 * default prefix). Without a RedoLedger or IPAM's heldAt, nothing (every EIP redoes its own).
 */
export async function redoGateway(
  run: Run,
  pod: GatewayPod,
  d: Dialect,
  ip: string,
  gatewayName?: string,
): Promise<void> {
  const { deps, inv } = run;
  const gateway = gatewayName ?? gatewayOfApp(pod.app);
  if (!deps.redoLedger || !deps.ipam.heldAt || !gateway) return;
  const runId = containerRun(pod);
  let record = knownRecord(deps, pod, runId) ?? (await deps.redoLedger.get(podName(pod)));
  let failed = new Map<string, unknown>();
  if (!record || !isDone(record, runId)) {
    const swept = await batcherOf(deps).withPod(pod, (s) => sweep(run, s, gateway, d, runId));
    record = swept.record;
    failed = failuresOf(swept.outcomes, ip);
  }
  if (record?.run !== runId) return;
  if (record.complete) remember(deps, record);
  coverByRedo(inv, pod, record, failed);
}

/** What the gateway answered the sweep's calls about `ip` with when they failed, by call key (not time running out). */
function failuresOf(outcomes: ReadonlyMap<string, { call: NatGwCall; outcome: Outcome }>, ip: string) {
  const out = new Map<string, unknown>();
  for (const { call, outcome } of outcomes.values())
    if (!outcome.ok && !outOfTime(outcome.error) && ruleAddress(call.args[0] ?? '') === ip)
      out.set(doneKey(call), outcome.error);
  return out;
}

/** The sweep's time ran out before the call (or the pod stayed busy): not the call's own answer. */
const outOfTime = (e: unknown): boolean => e instanceof DeadlineError || e instanceof LeaseHeldError;

const isDone = (r: RedoRecord | undefined, runId: string): boolean => r?.run === runId && r.complete;

function knownRecord(deps: Deps, pod: GatewayPod, runId: string): RedoRecord | undefined {
  const r = records.get(deps.gateway)?.get(podName(pod));
  return r && isDone(r, runId) ? r : undefined;
}

function remember(deps: Deps, record: RedoRecord): void {
  let m = records.get(deps.gateway);
  if (!m) {
    m = new Map();
    records.set(deps.gateway, m);
  }
  m.delete(record.pod);
  m.set(record.pod, record);
  while (m.size > 256) m.delete(m.keys().next().value!);
}

interface Swept {
  record: RedoRecord | undefined;
  /** What each call of this sweep gave, by callKey (empty when another container had swept already). */
  outcomes: Map<string, { call: NatGwCall; outcome: Outcome }>;
}

/**
 * The sweep, holding the pod's queue: the lease first (waiting while another container sweeps), then the ledger read
 * again, then what to re-add, read under the lease, then the execs: addresses first, then the QoS of the addresses
 * that are back. Records what succeeded, and whether the sweep got through (it stops when time runs out, and the
 * next update goes on from what was recorded).
 */
async function sweep(run: Run, s: PodSession, gateway: string, d: Dialect, runId: string): Promise<Swept> {
  const { deps, inv } = run;
  const deadline = inv.deadline - OWN_WORK_MS;
  const outcomes: Swept['outcomes'] = new Map();
  const ledger = deps.redoLedger!;
  const known = knownRecord(deps, s.pod, runId);
  if (known) return { record: known, outcomes };
  // While another container sweeps, its record is read between the waits: once complete, nothing is left to do.
  let prior: RedoRecord | undefined;
  const sweptMeanwhile = async () => {
    prior = await ledger.get(podName(s.pod));
    return !!prior && isDone(prior, runId);
  };
  if (!(await s.hold(SWEEP_HOLD_MS, deadline, sweptMeanwhile))) return { record: prior, outcomes };
  prior = await ledger.get(podName(s.pod));
  if (prior && isDone(prior, runId)) return { record: prior, outcomes };
  const done = new Set<string>(prior?.run === runId ? prior.done : []);
  const plan = await sweepPlan(run, s.pod, gateway, d);
  const pending = (calls: readonly GatewayCall[]) => calls.filter((c) => !done.has(doneKey(c.call)));
  const adds = pending([...plan.values()].map((p) => p.add));
  let complete = tally(done, outcomes, await s.run(adds, deadline), adds);
  const back = [...plan.values()].filter((p) => done.has(doneKey(p.add.call)));
  const qos = pending(back.flatMap((p) => p.qos));
  complete = tally(done, outcomes, await s.run(qos, deadline), qos) && complete;
  const record: RedoRecord = { pod: podName(s.pod), run: runId, done: [...done], complete };
  await ledger.put(record);
  inv.log.info('gateway redone', {
    pod: s.pod.name,
    eips: plan.size,
    calls: adds.length + qos.length,
    recorded: done.size,
    complete,
  });
  return { record, outcomes };
}

/** Adds the calls that succeeded to `done` and every outcome to `outcomes`; false when some did not run in time. */
function tally(
  done: Set<string>,
  outcomes: Swept['outcomes'],
  got: ReadonlyMap<string, Outcome>,
  calls: readonly GatewayCall[],
): boolean {
  let complete = true;
  for (const { call } of calls) {
    const key = callKey(call.op, call.args[0]!);
    const outcome = got.get(key);
    if (!outcome) continue;
    outcomes.set(key, { call, outcome });
    if (outcome.ok) done.add(doneKey(call));
    else if (outcome.error instanceof DeadlineError || outcome.error instanceof LeaseHeldError)
      complete = false;
  }
  return complete;
}

interface Planned {
  add: GatewayCall;
  qos: GatewayCall[];
}

/**
 * What the sweep re-adds, by address, the invocation's own EIP first: for every EIP labelled with the gateway that
 * has an address, is not being deleted and was not configured in this container run already (Ready with the pod's
 * current token as status.redo, which the EIP's own update writes only after configuring it: ADR 0003), its eip-add where IPAM says its uid holds that address placed on this
 * gateway, and its policy's QoS when the spec still wants what the allocation records as applied (keptPolicy).
 */
async function sweepPlan(
  run: Run,
  pod: GatewayPod,
  gateway: string,
  d: Dialect,
): Promise<Map<string, Planned>> {
  const { deps, inv } = run;
  const own = inv.event.object.name;
  const token = redoToken(pod);
  const inThisRun = (e: IptablesEip) => e.status?.ready === true && e.status.redo === token;
  const eips = (await deps.cluster.listEipsByLabel(Label.natGwName, gateway))
    .filter((e) => e.status?.ip && !e.metadata.deletionTimestamp)
    .filter((e) => e.metadata.name === own || !inThisRun(e))
    .sort((a, b) => Number(b.metadata.name === own) - Number(a.metadata.name === own));
  const found: { eip: IptablesEip; held: Allocation; pool: Pool }[] = [];
  for (const [subnet, group] of bySubnet(eips)) {
    const pool = await poolOf(deps, subnet);
    if (!pool) continue;
    const held = await deps.ipam.heldAt!(
      subnet,
      group.map((e) => e.status!.ip!),
    );
    for (const eip of group) {
      const a = held.get(eip.status!.ip!);
      // On a replicated gateway the record says which pods carry the address, in which run (ADR 0105).
      const recorded = eip.metadata.name !== own && a?.placement?.pods?.[pod.uid]?.token === token;
      if (a && a.owner.uid === eip.metadata.uid && a.placement?.gateway === gateway && !recorded)
        found.push({ eip, held: a, pool });
    }
  }
  const policies = await policiesOf(
    deps,
    found.map((f) => keptPolicy(f.eip, f.held)),
  );
  const plan = new Map<string, Planned>();
  for (const { eip, held, pool } of found) {
    const add = eipAdd(d, { address: held.address, prefix: held.placement!.prefix, gateway: pool.gateway });
    const policy = policies.get(keptPolicy(eip, held) ?? '');
    const qos = policy ? qosApply(d, held.address, policy.rules) : [];
    plan.set(held.address, {
      add: { call: add, dialect: d },
      qos: qos.map((call) => ({ call, dialect: d })),
    });
  }
  return plan;
}

/**
 * The policy an EIP's own update would re-apply after a restart when nothing changes: the one its allocation records
 * as applied (status.qosPolicy for an allocation from before that was kept), as long as its spec still names it.
 */
function keptPolicy(eip: IptablesEip, held: Allocation): string | undefined {
  const have = held.placement?.qos ?? eip.status?.qosPolicy ?? '';
  return have !== '' && eip.spec.qosPolicy === have ? have : undefined;
}

/** The EIPs by the subnet their label names (validated; an EIP without one is left to its own update). */
function bySubnet(eips: readonly IptablesEip[]): Map<string, IptablesEip[]> {
  const out = new Map<string, IptablesEip[]>();
  for (const e of eips) {
    const subnet = validName(e.metadata.labels?.[Label.subnet]);
    if (!subnet) continue;
    out.set(subnet, [...(out.get(subnet) ?? []), e]);
  }
  return out;
}

async function poolOf(deps: Deps, subnet: string): Promise<Pool | undefined> {
  try {
    return (await v4PoolOf(deps, subnet)).v4;
  } catch {
    return undefined;
  }
}

/** The policies named, loaded once each; one that does not load is left out. */
async function policiesOf(
  deps: Deps,
  names: readonly (string | undefined)[],
): Promise<Map<string, LoadedQos>> {
  const out = new Map<string, LoadedQos>();
  for (const name of new Set(names)) {
    if (!name) continue;
    try {
      out.set(name, await loadQos(deps, name));
    } catch {
      // Its EIPs' own updates meet the problem and report it.
    }
  }
  return out;
}
