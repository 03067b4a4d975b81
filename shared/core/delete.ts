/**
 * Deletion, in the order the work happens: NAT rules still using the EIP make it wait; then one gateway clean-up
 * where the address really is (its recorded placement) → the unshared QoS policy given back → release → finalizer
 * removal (ADR 0014, ADR 0015). What the EIP holds is read where the EIP records it (./held.ts, ADR 0085), and
 * released address by address: an owner index that lags or lost an entry hides nothing.
 * `finalize` serves a terminating EIP (reached from add, update and reset); `remove` is the delete handler's
 * safety net for an object that is already gone.
 */
import { poolsOf, prefixLength } from '../domain/addressing.js';
import { type Dialect, eipAdd, eipDel } from '../domain/dialect/index.js';
import { InvalidEventError } from '../domain/errors.js';
import { type IptablesEip, Label, type QoSDirection } from '../domain/kube-ovn.js';
import type { Allocation, Deps, GatewayPod, NatRuleRef } from '../ports.js';
import { runningGatewayPod, v4PoolOf } from './gateway.js';
import { heldBy } from './held.js';
import { type Invocation, updateEipMeta, withLease } from './invocation.js';
import type { Outcome } from './outcome.js';
import { Run, validName } from './prelude.js';
import { addQos, loadQos, policyDirections, removeQos } from './qos.js';
import { redoGateway } from './redo.js';
import {
  ConditionType,
  hasOurFinalizer,
  natOf,
  redoToken,
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
    await cleanUpGateway(run, held, {
      fallbackGateway: validName(last?.metadata?.labels?.[Label.natGwName]) ?? validName(last?.spec?.natGwDp),
      policies,
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
  const redo = await redoWhileWaiting(run, eip, held);
  const change = statusChanges(eip, {
    ...(redo && { redo }),
    nat: natOf(rules),
    conditions: setCondition(
      eip.status?.conditions,
      { type: ConditionType.deleting, status: 'True', reason: 'WaitingForNatRules', message },
      run.now(),
    ),
  });
  if (change) {
    await deps.cluster.patchEipStatus(name, change);
    await deps.cluster.emitEvent(eip, { type: 'Warning', reason: 'WaitingForNatRules', message });
  }
  return { status: 'skipped', eip: name, reason: message };
}

/**
 * For a terminating EIP that waits for its NAT rules: re-adds its address (and QoS) on the gateway it is recorded
 * on when that gateway restarted since it was configured. Returns the new redo token, or undefined when nothing was
 * needed (not configured, no recorded placement, the feature off).
 */
async function redoWhileWaiting(run: Run, eip: IptablesEip, held: Allocation[]): Promise<string | undefined> {
  const { deps, inv } = run;
  const ip = eip.status?.ip;
  const alloc = ip ? held.find((a) => a.family === 4 && a.address === ip) : undefined;
  if (!ip || !alloc?.placement || !(await deps.cluster.natGwFeature()).enabled) return undefined;
  const pod = await runningGatewayPod(deps, alloc.placement.gateway);
  const token = redoToken(pod);
  if (eip.status?.redo === token && inv.event.reason !== 'gateway-restarted') return undefined;
  const pool = (await v4PoolOf(deps, alloc.subnet)).v4;
  const d = await run.dialect(pod);
  if (eip.status?.redo !== token) await redoGateway(run, pod, d, ip);
  await run.gw(pod, eipAdd(d, { address: ip, prefix: alloc.placement.prefix, gateway: pool.gateway }), d);
  const policy = validName(eip.status?.qosPolicy);
  if (policy) await addQos(inv, deps, pod, d, ip, await loadQos(deps, policy));
  return token;
}

// ------------------------------------------------------------------------------------------- the gateway clean-up

/**
 * The one gateway clean-up, shared by finalize and delete: takes each address this EIP's uid holds in IPAM off
 * the gateway where it is configured (its recorded placement; `fallbackGateway` only for an allocation recorded
 * before placements existed), with its QoS filters. An address the EIP shows but does not hold is never touched:
 * it belongs to someone else. Skipped for a gateway that no longer exists or while the feature is off (kube-ovn
 * removes the gateway pods then); retried when only the pod is missing.
 */
async function cleanUpGateway(
  run: Run,
  held: readonly Allocation[],
  o: { fallbackGateway: string | undefined; policies: readonly string[] },
): Promise<void> {
  const { deps, inv } = run;
  const { policies } = o;
  const byGateway = byPlacedGateway(run.inv, held, o.fallbackGateway);
  if (byGateway.size === 0) return;
  const feature = await deps.cluster.natGwFeature();
  if (!feature.enabled) {
    inv.log.info('vpc nat gateway feature is off; skipping in-pod cleanup', { reason: feature.reason });
    return;
  }
  for (const [gw, addresses] of byGateway) {
    if (!(await deps.cluster.getVpcNatGateway(gw))) {
      inv.log.info('vpc nat gateway is gone; skipping in-pod cleanup', { gateway: gw });
      continue;
    }
    const pod = await runningGatewayPod(deps, gw);
    const d = await run.dialect(pod);
    for (const a of addresses) await takeOffGateway(run, pod, d, a, policies);
  }
}

/** The IPv4 allocations by the gateway they are configured on (recorded placement, else `fallbackGateway`). */
function byPlacedGateway(
  inv: Invocation,
  held: readonly Allocation[],
  fallbackGateway: string | undefined,
): Map<string, Allocation[]> {
  const byGateway = new Map<string, Allocation[]>();
  for (const a of held) {
    if (a.family !== 4) continue;
    const gw = a.placement?.gateway ?? fallbackGateway;
    if (!gw) {
      inv.log.warn('no gateway known for an address; nothing to clean on a gateway', { address: a.address });
      continue;
    }
    byGateway.set(gw, [...(byGateway.get(gw) ?? []), a]);
  }
  return byGateway;
}

/**
 * eip-del for one address (its prefix from the placement, else from its subnet), then its QoS in the directions its
 * policies use.
 */
async function takeOffGateway(
  run: Run,
  pod: GatewayPod,
  d: Dialect,
  a: Allocation,
  policies: readonly string[],
): Promise<void> {
  const { deps, inv } = run;
  const prefix = a.placement?.prefix ?? (await subnetPrefix(deps, a.subnet));
  if (prefix === undefined)
    inv.log.warn('external subnet is gone; cannot build eip-del argument', { address: a.address });
  else await run.gw(pod, eipDel(d, { address: a.address, prefix }), d);
  if (policies.length === 0) return;
  const directions = new Set<QoSDirection>();
  for (const p of policies) for (const x of await policyDirections(deps, p)) directions.add(x);
  await removeQos(inv, deps, pod, d, a.address, [...directions]);
}

/** The IPv4 prefix length of a subnet; undefined when it is gone or has no IPv4. */
async function subnetPrefix(deps: Deps, name: string): Promise<number | undefined> {
  const subnet = await deps.cluster.getSubnet(name);
  const v4 = subnet ? poolsOf(subnet).find((p) => p.family === 4) : undefined;
  return v4 ? prefixLength(v4) : undefined;
}
