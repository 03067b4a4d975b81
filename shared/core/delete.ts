/**
 * Deletion, in the order the work happens: NAT rules still using the EIP make it wait; then one gateway clean-up
 * where the address really is (its recorded placement) → the unshared QoS policy given back → release → finalizer
 * removal (ADR 0014, ADR 0015). What the EIP holds is read where the EIP records it (./held.ts, ADR 0085), and
 * released address by address: an owner index that lags or lost an entry hides nothing.
 * `finalize` serves a terminating EIP (reached from add, update and reset); `remove` is the delete handler's
 * safety net for an object that is already gone.
 */
import { eipAdd } from '../domain/dialect/index.js';
import { InvalidEventError } from '../domain/errors.js';
import { API_VERSION, type IptablesEip, Label } from '../domain/kube-ovn.js';
import type { Allocation, Deps, GatewayPod, NatRuleRef } from '../ports.js';
import { cleanUpGateway } from './delete-pods.js';
import { addOnPods, lackingPods, podsProblem, throwIfNone } from './fan-out.js';
import { v4PoolOf } from './gateway.js';
import { heldBy } from './held.js';
import { type Invocation, updateEipMeta, withLease } from './invocation.js';
import type { Outcome } from './outcome.js';
import { Run, validName } from './prelude.js';
import { addQos, loadQos } from './qos.js';
import { type PodsView, recordPlacement } from './record.js';
import {
  addDue,
  carriedBy,
  containerDown,
  gatewayPodsOf,
  lackingOf,
  newestToken,
  notRunning,
  podConditions,
  recordsPods,
  requireActive,
} from './replicas.js';
import {
  ConditionType,
  hasOurFinalizer,
  natOf,
  setCondition,
  statusChanges,
  withoutFinalizer,
} from './view.js';

/**
 * A terminating EIP: wait while NAT rules use it; clean the gateway where its addresses are; release the
 * allocations; only then drop the finalizer.
 */
export async function finalize(run: Run, eip: IptablesEip): Promise<Outcome> {
  const { deps } = run;
  const name = eip.metadata.name;
  const uid = eip.metadata.uid;
  const held = await heldBy(deps, eip);
  if (!hasOurFinalizer(eip) && held.length === 0)
    return { status: 'skipped', eip: name, reason: 'terminating, nothing of ours left' };

  const rules = await deps.cluster.listNatRulesForEip(name);
  if (rules.length > 0) return waitForNatRules(run, eip, held, rules);

  const policies = policiesOf(held, eip);
  await cleanUpGateway(run, held, {
    fallbackGateway: validName(eip.metadata.labels?.[Label.natGwName]) ?? validName(eip.spec.natGwDp),
    policies,
    eip,
    ...(eip.metadata.deletionTimestamp && { deletedAt: eip.metadata.deletionTimestamp }),
  });
  await releaseAll(run, uid, held, policies);
  const after = await updateEipMeta(deps, name, eip, (e) => {
    const finalizers = withoutFinalizer(e.metadata.finalizers);
    return finalizers ? { finalizers } : undefined;
  });
  if (hasOurFinalizer(eip)) run.did('remove finalizer');
  if (after) run.inv.log.debug('finalized', { remainingFinalizers: after.metadata.finalizers ?? [] });
  return run.outcome(name);
}

/**
 * The object is gone. A safety net: whatever IPAM still holds for the deleted uid (finalizer removed by hand,
 * force delete) is taken off the gateway where it is configured, and released. There is no object left to read,
 * so its lease is taken directly.
 */
export async function remove(inv: Invocation, deps: Deps): Promise<Outcome> {
  const name = inv.event.object.name;
  const uid = inv.event.object.uid ?? inv.event.old?.metadata?.uid;
  if (!uid) throw new InvalidEventError('invalid event: object.uid is required for the delete handler');
  const current = await deps.cluster.getEip(name);
  if (current?.metadata.uid === uid)
    return { status: 'skipped', eip: name, reason: 'the object still exists' };
  const last = inv.event.old;
  const held = await heldBy(deps, { ...last, metadata: { ...last?.metadata, uid } });
  if (held.length === 0) return { status: 'unchanged', eip: name };
  return withLease(inv, deps, async () => {
    const run = new Run(inv, deps);
    const policies = policiesOf(held, last);
    // The patience runs from the deletion the last snapshot shows, else from when the bridge saw the object go.
    const deletedAt = last?.metadata?.deletionTimestamp ?? inv.event.emittedAt;
    // The object is gone: an Event about an address left on a pod names it by its name and uid.
    const gone: IptablesEip = {
      apiVersion: API_VERSION,
      kind: 'IptablesEIP',
      metadata: { name, uid, resourceVersion: '' },
      spec: {},
    };
    await cleanUpGateway(run, held, {
      fallbackGateway: validName(last?.metadata?.labels?.[Label.natGwName]) ?? validName(last?.spec?.natGwDp),
      policies,
      eip: gone,
      ...(deletedAt && { deletedAt }),
    });
    await releaseAll(run, uid, held, policies);
    return run.outcome(name);
  });
}

/** The QoS policies whose filters may be on the gateway for the EIP: recorded with its allocations, or shown on it. */
function policiesOf(
  held: readonly Allocation[],
  eip: { status?: { qosPolicy?: string }; spec?: { qosPolicy?: string } } | undefined,
): string[] {
  const names = [...held.map((a) => a.placement?.qos), eip?.status?.qosPolicy, eip?.spec?.qosPolicy];
  return [...new Set(names.map(validName).filter((p): p is string => !!p))];
}

/**
 * After the gateway clean-up: the unshared policies this uid holds are given back (ADR 0087), then each allocation
 * found, one conditional release each (a stale release changes nothing).
 */
async function releaseAll(
  run: Run,
  uid: string,
  held: readonly Allocation[],
  policies: readonly string[],
): Promise<void> {
  const { deps } = run;
  for (const p of policies) if (await deps.holds.release(p, uid)) run.did(`let go of qos ${p}`);
  const released: string[] = [];
  for (const a of held) if (await deps.ipam.release(a.subnet, a.address, uid)) released.push(a.address);
  if (released.length) {
    deps.metrics.count('Releases', released.length);
    run.did(`release ${released.join(' ')}`);
  }
}

// ------------------------------------------------------------------------------------------- waiting

/** Deletion waits while NAT rules name the EIP: say so on it (Deleting=True, status.nat) and skip. */
async function waitForNatRules(
  run: Run,
  eip: IptablesEip,
  held: Allocation[],
  rules: readonly NatRuleRef[],
): Promise<Outcome> {
  const { deps } = run;
  const name = eip.metadata.name;
  const message = `eip "${name}" is still in use by ${rules.map((r) => `${r.kind}/${r.name}`).join(', ')}; deletion waits until they are deleted`;
  // The rules still send traffic to the address: while deletion waits, a gateway restart is redone as for any
  // configured EIP (address, then its QoS), so the EIP never says Ready without its address on net1.
  const { redo, pods } = await redoWhileWaiting(run, eip, held);
  const deleting = setCondition(
    eip.status?.conditions,
    { type: ConditionType.deleting, status: 'True', reason: 'WaitingForNatRules', message },
    run.now(),
  );
  const change = statusChanges(eip, {
    ...(redo && { redo }),
    nat: natOf(rules),
    // Which pods carry the address, as for a configured EIP: the rules still send traffic to it.
    conditions:
      pods && eip.status?.ip ? podConditions(deleting, { ip: eip.status.ip, ...pods }, run.now()) : deleting,
  });
  if (change) {
    await deps.cluster.patchEipStatus(name, change);
    await deps.cluster.emitEvent(eip, { type: 'Warning', reason: 'WaitingForNatRules', message });
  }
  return { status: 'skipped', eip: name, reason: message };
}

/**
 * For a terminating EIP that waits for its NAT rules: re-adds its address (and QoS) in each pod of the gateway it is
 * recorded on that restarted (or is new) since it was configured there, as a configured EIP's update does
 * (./replicas.ts addDue, ready=false aside: the deletion under way is what it shows). Returns the new redo token
 * when something was redone, and the pods as the status tells them; nothing when there is nothing to look at (not
 * configured, no recorded placement, the feature off).
 */
async function redoWhileWaiting(
  run: Run,
  eip: IptablesEip,
  held: Allocation[],
): Promise<{ redo?: string; pods?: PodsView }> {
  const { deps, inv } = run;
  const ip = eip.status?.ip;
  const alloc = ip ? held.find((a) => a.family === 4 && a.address === ip) : undefined;
  const placement = alloc?.placement;
  if (!ip || !alloc || !placement) return {};
  const feature = await deps.cluster.natGwFeature();
  if (!feature.enabled) return {};
  const { gateway } = placement;
  const found = await gatewayPodsOf(deps, gateway, placement.namespace, { feature });
  const active = requireActive(gateway, found);
  const asConfigured = { ...eip, status: { ...eip.status, ready: true } };
  const due = (p: GatewayPod) => addDue(p, asConfigured, placement.pods, inv.event);
  if (!active.some((p) => !containerDown(p) && due(p))) {
    const down = active.filter(containerDown);
    const failed = down.map((p) => lackingOf(p, notRunning(p)));
    return { pods: { found, carrying: active.filter((p) => !containerDown(p)), failed } };
  }
  const pool = (await v4PoolOf(deps, alloc.subnet)).v4;
  const pods = await addOnPods(run, active, {
    gateway,
    ip,
    add: (d) => eipAdd(d, { address: ip, prefix: placement.prefix, gateway: pool.gateway }),
    due,
  });
  throwIfNone(pods);
  const view = { found, carrying: pods.carrying, failed: lackingPods(pods) };
  if (pods.added.size === 0) return { pods: view };
  const policy = validName(eip.status?.qosPolicy);
  if (policy) {
    const qos = await loadQos(deps, policy);
    for (const pod of pods.carrying.filter((p) => pods.added.has(p.uid)))
      await addQos(inv, deps, pod, await run.dialect(pod, undefined, gateway), ip, qos);
  }
  if (recordsPods(placement.pods, active))
    await recordPlacement(run, alloc, { ...placement, pods: carriedBy(pods.carrying) });
  podsProblem(pods);
  const redo = newestToken(pods.carrying);
  return { ...(redo && { redo }), pods: view };
}
