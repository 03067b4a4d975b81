/**
 * add and update: one level-triggered reconcile (ADR 0002). A terminating EIP is finalized (./delete.ts), a fresh
 * one provisioned, a configured one maintained. Both read in the order the work happens: finalizer → allocation
 * (durable) → address on the gateway → its placement recorded in IPAM → QoS → spec and labels → status. Helpers
 * follow the two; the spec is checked by `validateSpec` (shared/domain/validation.ts), the gateway reached through
 * ./gateway.ts, the QoS step is `applyQos` (./qos.ts), and what is written is computed in ./view.ts (pure).
 */
import { IPAM_HOME_ANNOTATION, prefixLength, staticAddressProblem } from '../domain/addressing.js';
import { eipAdd } from '../domain/dialect/index.js';
import {
  AddressOutOfRangeError,
  ConflictError,
  InvalidSpecError,
  type PermanentError,
  UnsupportedChangeError,
} from '../domain/errors.js';
import { gatewayApp } from '../domain/gateway-pod.js';
import { externalNetworkOf, type IptablesEip, Label, type VpcNatGateway } from '../domain/kube-ovn.js';
import { validateSpec } from '../domain/validation.js';
import type { Allocation, ClaimOptions, GatewayPod, Owner, Placement, Pool } from '../ports.js';
import { finalize } from './delete.js';
import {
  podWhereConfigured,
  requireAttachedGateway,
  requireFeature,
  runningGatewayPod,
  v4PoolOf,
} from './gateway.js';
import { heldBy } from './held.js';
import { updateEipMeta } from './invocation.js';
import type { Outcome } from './outcome.js';
import { podAddressesOn, refuseGatewayPodAddress } from './pod-addresses.js';
import { natStatus, type Run, validName } from './prelude.js';
import { applyQos, assertBindable, type LoadedQos, loadQos, type QosResult } from './qos.js';
import { redoGateway } from './redo.js';
import { rejectedAfterConfiguring } from './settle.js';
import {
  addedMeta,
  configuredConditions,
  desiredLabels,
  hasOurFinalizer,
  type LabelFacts,
  labelChanges,
  maintainedMeta,
  redoToken,
  statusChanges,
  withFinalizer,
} from './view.js';

/**
 * add and update converge the same way; the handler name only says why they were called. A terminating EIP is
 * finalized, a fresh one provisioned, a configured one maintained.
 */
export function converge(run: Run, eip: IptablesEip): Promise<Outcome> {
  if (eip.metadata.deletionTimestamp) return finalize(run, eip); // also an EIP first seen while terminating
  if (!eip.status?.ip) {
    validateSpec(eip);
    return provision(run, eip);
  }
  // A configured EIP keeps its address whatever its spec now says: an invalid value is reported like a refused
  // change, after the address is seen to.
  let invalid: InvalidSpecError | undefined;
  try {
    validateSpec(eip);
  } catch (e) {
    if (!(e instanceof InvalidSpecError)) throw e;
    invalid = e;
  }
  return maintain(run, eip, invalid);
}

// ------------------------------------------------------------------------------------------- a fresh EIP

async function provision(run: Run, eip0: IptablesEip): Promise<Outcome> {
  const { deps } = run;
  const name = eip0.metadata.name;
  const owner = { uid: eip0.metadata.uid, name };

  // Everything that can refuse is checked before anything is held: the feature, the subnet, the gateway and its
  // attachment to the subnet, the QoS policy (missing, invalid or bound elsewhere: the EIP waits for it).
  const need = await whatTheAddNeeds(run, eip0);

  // 1. The finalizer before anything is allocated. Without it, no earlier attempt got as far as claiming (every
  //    claim comes after it, under the lease): this is a first attempt, and the allocator need not look for an
  //    earlier claim. Where its claims will go is recorded in the same write, so a retry looks there (ADR 0043).
  const firstAttempt = !hasOurFinalizer(eip0);
  const suggested = firstAttempt && !need.requested ? deps.ipam.suggestHome?.(need.v4) : undefined;
  let eip = await updateEipMeta(deps, name, eip0, (e) => {
    const finalizers = withFinalizer(e.metadata.finalizers);
    if (!finalizers) return undefined;
    return { finalizers, ...(suggested && { annotations: { [IPAM_HOME_ANNOTATION]: suggested } }) };
  });
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being added' };
  if (eip.metadata.resourceVersion !== eip0.metadata.resourceVersion) run.did('finalizer');

  // 2. Allocation, durable before the gateway is touched, with where the address is about to be configured in the
  //    same write (ADR 0041: clean-up may then run eip-del where the add never happened, which changes nothing).
  // No filters yet ('' recorded), so a clean-up after a crash here removes none; the QoS step records what it adds.
  const placement: Placement = { gateway: need.gateway, prefix: prefixLength(need.v4), qos: '' };
  const { v4: claimed, v6 } = await allocate(run, need, owner, placement, {
    firstAttempt,
    home: eip.metadata.annotations?.[IPAM_HOME_ANNOTATION],
  });

  // 3. The address on the gateway; its placement was recorded with the claim (a retry's older allocation may
  //    still need it moved here).
  const pod = await runningGatewayPod(deps, need.gateway, need.pods);
  const d = await run.dialect(pod, need.vpcNatGateway);
  const on = { address: claimed.address, prefix: placement.prefix, gateway: need.v4.gateway };
  await run.gw(pod, eipAdd(d, on), d);
  const v4 = await recordPlacement(run, claimed, { ...placement, qos: claimed.placement?.qos ?? '' });

  // 4. QoS: a problem from here on leaves the address configured and is reported in its own condition. What the
  //    gateway now polices is recorded with the allocation (one write, only when there is a policy; ADR 0086).
  const q = await applyQos(
    run,
    eip,
    pod,
    v4.address,
    { want: need.qos?.name ?? '', have: '', redo: true },
    need.qos,
  );
  await recordPlacement(run, v4, { ...placement, qos: q.applied });

  // 5. Spec and labels in one write, then status.
  const facts: LabelFacts = { subnet: v4.subnet, gateway: need.gateway, ip: v4.address, qos: q.applied };
  eip = await updateEipMeta(deps, name, eip, (e) => addedMeta(e, facts, v6?.address));
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being added' };
  await writeConfiguredStatus(run, eip, { ip: v4.address, redo: redoToken(pod), qos: q });
  return q.problem ? rejectedAfterConfiguring(run, eip, q.problem) : run.outcome(name, v4.address);
}

/** What an add found it may go on with: nothing is held yet. */
interface AddNeeds {
  gateway: string;
  /** The external subnet's pools. */
  v4: Pool;
  v6?: Pool;
  /** spec.v4ip, when the user asked for an address. */
  requested?: string;
  /** The gateway pods, listed once: their own addresses are avoided, and the exec needs the pod. */
  pods: readonly GatewayPod[];
  /** The gateway as read: its annotations may name its kube-ovn release. */
  vpcNatGateway: VpcNatGateway;
  qos?: LoadedQos;
}

/**
 * The checks before anything is held, each a refusal: the feature, the subnet, the gateway and its attachment, a
 * requested address, the QoS policy. @throws PermanentError (or a retryable one, such as a policy not ready yet)
 */
async function whatTheAddNeeds(run: Run, eip: IptablesEip): Promise<AddNeeds> {
  const { deps } = run;
  await requireFeature(deps);
  const network = externalNetworkOf(eip);
  const target = await v4PoolOf(deps, network);
  const gateway = eip.spec.natGwDp!;
  const vpcNatGateway = await requireAttachedGateway(deps, gateway, network);
  const requested = eip.spec.v4ip;
  const unusable = requested ? staticAddressProblem(target.v4, requested) : undefined;
  if (unusable) throw new AddressOutOfRangeError(`spec.v4ip: ${unusable}`);
  // The gateway pods' own addresses: never an EIP's (ADR 0042). The add needs the pod list for the exec anyway.
  const pods = await deps.cluster.listGatewayPods();
  if (requested) refuseGatewayPodAddress(pods, target.v4, requested);
  // A release the product cannot speak is refused before anything is held, when the pod is there to tell.
  const listed = pods.find((p) => p.app === gatewayApp(gateway) && p.phase === 'Running');
  if (listed) await run.dialect(listed, vpcNatGateway);
  const qos = eip.spec.qosPolicy ? await loadQos(deps, eip.spec.qosPolicy) : undefined;
  if (qos) await assertBindable(deps, eip, qos);
  return {
    gateway,
    vpcNatGateway,
    ...target,
    ...(requested && { requested }),
    pods,
    ...(qos && { qos }),
  };
}

/**
 * Claims the add's addresses: the requested one, or any (the owner's existing one, if a retry), at its recorded
 * home; an IPv6 one too on a dual-stack subnet. The gateway pods' own addresses are avoided here; the garbage
 * collector records them in IPAM (ADR 0042).
 */
async function allocate(
  run: Run,
  need: AddNeeds,
  owner: Owner,
  placement: Placement,
  o: { firstAttempt: boolean; home: string | undefined },
): Promise<{ v4: Allocation; v6?: Allocation }> {
  const { ipam } = run.deps;
  const claim: ClaimOptions = {
    firstAttempt: o.firstAttempt,
    avoid: podAddressesOn(need.pods, need.v4.subnet),
    ...(o.home && { home: o.home }),
  };
  let v4: Allocation;
  if (need.requested) {
    const held = await ipam.findByOwner(owner.uid, [
      { subnet: need.v4.subnet, addresses: [need.requested], pools: [need.v4] },
    ]);
    v4 = await ipam.claimAddress(need.v4, need.requested, owner, placement);
    // The user changed spec.v4ip before the EIP was ever configured: give back what the old request claimed.
    for (const a of held)
      if (a.family === 4 && a.address !== v4.address) await ipam.release(a.subnet, a.address, owner.uid);
  } else {
    v4 = await ipam.claimAny(need.v4, owner, placement, claim);
  }
  const v6 = need.v6 ? await ipam.claimAny(need.v6, owner, undefined, claim) : undefined;
  run.did(`allocate ${v4.address}${v6 ? ` ${v6.address}` : ''}`);
  return { v4, ...(v6 && { v6 }) };
}

// ------------------------------------------------------------------------------------------- a configured EIP

/**
 * A configured EIP: the address is re-added where it is configured whenever the gateway may have lost it, before
 * anything else can fail; a change of gateway, subnet or address is refused and reported without stopping that;
 * QoS follows and reports its own problems.
 */
async function maintain(run: Run, eip0: IptablesEip, invalid?: InvalidSpecError): Promise<Outcome> {
  const { deps, inv } = run;
  const name = eip0.metadata.name;
  await requireFeature(deps);

  // Where the address really is: the allocation this EIP holds and its recorded placement (ADR 0015). status.ip is
  // output: one edited by hand is put back from the allocation, never adopted while the uid holds one (ADR 0086).
  // An EIP configured before placements were recorded falls back to its labels (then its spec), and gets its
  // placement recorded now.
  const held = await heldOrAdopted(run, eip0, invalid);
  const ip = held.address;
  const pool = (await v4PoolOf(deps, held.subnet)).v4;
  const placement = placementOf(eip0, ip, held, pool, invalid);

  // Refused changes: the address stays where it is, and the refusal is reported after the address is seen to.
  const refused = invalid ?? refusedChange(eip0, ip, held, placement);

  // The address first. Redo when the gateway restarted since we configured it (the token moved), someone asked
  // for one the kube-ovn way (ready=false), or the bridge saw the gateway come back. The token has one-second
  // resolution (as Kubernetes' startedAt), so a restart within the same second is only visible through that last
  // hint; re-adding is idempotent, so trusting it costs one exec per EIP.
  const pod = await podWhereConfigured(deps, placement.gateway, ip);
  const token = redoToken(pod);
  const redo =
    eip0.status?.redo !== token || eip0.status?.ready !== true || inv.event.reason === 'gateway-restarted';
  if (redo) {
    const d = await run.dialect(pod);
    // The container run changed since this EIP was configured: the whole gateway is redone at once, and what that
    // re-added is not sent again (ADR 0111). A redo asked for otherwise (ready=false, the audit's repair of a missing
    // address, the bridge's hint in the same second) sends its own calls.
    if (eip0.status?.redo !== token) await redoGateway(run, pod, d, ip);
    await run.gw(pod, eipAdd(d, { address: ip, prefix: placement.prefix, gateway: pool.gateway }), d);
  }

  // Then QoS, from what the allocation records as applied (status.qosPolicy only for an allocation recorded before
  // that was kept); the placement with what is now applied, in one write when either changed; then metadata
  // (finalizer, labels as configured), then status.
  const have = held.placement?.qos ?? eip0.status?.qosPolicy ?? '';
  const want = invalid ? have : (eip0.spec.qosPolicy ?? ''); // an invalid spec changes nothing on the gateway
  await noteHandEdits(run, eip0, held, { subnet: held.subnet, gateway: placement.gateway, ip, qos: have });
  const q = await applyQos(run, eip0, pod, ip, { want, have, redo });
  await recordPlacement(run, held, { ...placement, qos: q.applied });
  const facts: LabelFacts = { subnet: held.subnet, gateway: placement.gateway, ip, qos: q.applied };
  const eip = await updateEipMeta(deps, name, eip0, (e) => maintainedMeta(e, facts));
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being updated' };
  if (eip.metadata.resourceVersion !== eip0.metadata.resourceVersion) run.did('metadata');
  await writeConfiguredStatus(run, eip, { ip, redo: token, qos: q, ...(refused && { refusal: refused }) });
  const problem = refused ?? q.problem;
  return problem ? rejectedAfterConfiguring(run, eip, problem) : run.outcome(name, ip);
}

/**
 * The allocation this EIP holds for its address — the one status.ip names, else (status.ip edited by hand) the one
 * its spec, label or placement names. Only an EIP whose uid holds no IPv4 allocation has its status.ip adopted
 * (configured before this table existed, or lost from it), from its labelled subnet, else its spec's; another EIP's
 * address is refused.
 */
async function heldOrAdopted(
  run: Run,
  eip: IptablesEip,
  invalid: InvalidSpecError | undefined,
): Promise<Allocation> {
  const { deps } = run;
  const ip = eip.status!.ip!;
  const owner = { uid: eip.metadata.uid, name: eip.metadata.name };
  const held = (await heldBy(deps, eip)).filter((a) => a.family === 4);
  const recorded = held.find((a) => a.address === ip) ?? recordedOf(held, eip);
  if (recorded) return recorded;
  const network = validName(eip.metadata.labels?.[Label.subnet]) ?? validName(externalNetworkOf(eip));
  if (!network)
    throw invalid ?? new InvalidSpecError(`${ip} is not held by this EIP and has no valid subnet`);
  const adoptFrom = (await v4PoolOf(deps, network)).v4;
  // A gateway pod's own address is never an EIP's: the pods are listed only on this rare path (ADR 0042).
  refuseGatewayPodAddress(await deps.cluster.listGatewayPods(), adoptFrom, ip);
  const adopted = await deps.ipam.claimAddress(adoptFrom, ip, owner);
  run.did(`adopt ${ip}`);
  return adopted;
}

/** Of several IPv4 allocations (none for status.ip): the one spec.v4ip names, then the label, then a placed one. */
function recordedOf(held: readonly Allocation[], eip: IptablesEip): Allocation | undefined {
  return (
    held.find((a) => a.address === eip.spec.v4ip) ??
    held.find((a) => a.address === eip.metadata.labels?.[Label.eipV4Ip]) ??
    held.find((a) => a.placement) ??
    held[0]
  );
}

/**
 * status.ip, status.qosPolicy and the labels are output, written from the allocation record: a value that differs
 * from what the record said before this run was edited by someone else. Each is put back by this run's writes; this
 * says so with an Event on the EIP (ADR 0086).
 */
async function noteHandEdits(
  run: Run,
  eip: IptablesEip,
  alloc: Allocation,
  before: LabelFacts,
): Promise<void> {
  const edits: string[] = [];
  const shown = eip.status?.ip;
  if (shown && shown !== alloc.address)
    edits.push(`status.ip ${shown} (the allocation holds ${alloc.address})`);
  const qos = alloc.placement?.qos;
  if (qos !== undefined && (eip.status?.qosPolicy ?? '') !== qos)
    edits.push(`status.qosPolicy "${eip.status?.qosPolicy ?? ''}" (applied: "${qos}")`);
  const labels = labelChanges(eip.metadata.labels, desiredLabels(before));
  if (labels)
    edits.push(
      `label${Object.keys(labels).length > 1 ? 's' : ''} ${Object.keys(labels)
        .map((k) => `${k}=${eip.metadata.labels?.[k] ?? '(none)'}`)
        .join(', ')}`,
    );
  if (edits.length === 0) return;
  const message = `put back from the allocation record: ${edits.join('; ')}`;
  run.inv.log.warn('output edited by hand, put back', { edits });
  run.did('put back edited output');
  await run.deps.cluster.emitEvent(eip, { type: 'Warning', reason: 'OutputRestored', message });
}

/** Where the address is configured: its recorded placement, else the gateway its labels (then spec) name. */
function placementOf(
  eip: IptablesEip,
  ip: string,
  alloc: Allocation,
  pool: Pool,
  invalid: InvalidSpecError | undefined,
): Placement {
  if (alloc.placement) return alloc.placement;
  const fallbackGateway = validName(eip.metadata.labels?.[Label.natGwName]) ?? validName(eip.spec.natGwDp);
  if (!fallbackGateway) throw invalid ?? new InvalidSpecError(`no gateway is known for ${ip}`);
  return { gateway: fallbackGateway, prefix: prefixLength(pool) };
}

/** A change of address, gateway or subnet a configured EIP asks for: refused (kube-ovn's words). */
function refusedChange(
  eip: IptablesEip,
  ip: string,
  alloc: Allocation,
  placement: Placement,
): UnsupportedChangeError | undefined {
  const { v4ip, natGwDp } = eip.spec;
  const network = externalNetworkOf(eip);
  if (v4ip && v4ip !== ip)
    return new UnsupportedChangeError(`not support eip change ip, old ip '${ip}', new ip '${v4ip}'`);
  if (natGwDp !== placement.gateway)
    return new UnsupportedChangeError(
      `not support eip change natGwDp, old '${placement.gateway}', new '${natGwDp}'`,
    );
  if (network !== alloc.subnet)
    return new UnsupportedChangeError(
      `not support eip change externalSubnet, old '${alloc.subnet}', new '${network}'`,
    );
  return undefined;
}

// ------------------------------------------------------------------------------------------- shared by both

/**
 * Records where the address is configured, and — when `placement.qos` is given — which policy the gateway polices it
 * with; a policy recorded earlier is kept when it is not. The owner must still hold it (a lease holder always does).
 * Returns the allocation as now recorded; no write when nothing changes.
 */
async function recordPlacement(run: Run, a: Allocation, placement: Placement): Promise<Allocation> {
  const qos = placement.qos ?? a.placement?.qos;
  const next: Placement = {
    gateway: placement.gateway,
    prefix: placement.prefix,
    ...(qos !== undefined && { qos }),
  };
  const p = a.placement;
  if (p?.gateway === next.gateway && p.prefix === next.prefix && p.qos === next.qos) return a;
  if (!(await run.deps.ipam.place(a.subnet, a.address, a.owner.uid, next)))
    throw new ConflictError(
      `${a.address} is no longer held by ${a.owner.uid}; its placement was not recorded`,
    );
  if (p?.gateway !== next.gateway || p?.prefix !== next.prefix)
    run.did(`place ${a.address} on ${next.gateway}`);
  else run.did(`record qos "${next.qos}" for ${a.address}`);
  return { ...a, placement: next };
}

/** Status of an EIP whose address is on the gateway: Ready, and the QoS and refusal conditions. */
async function writeConfiguredStatus(
  run: Run,
  eip: IptablesEip,
  s: { ip: string; redo: string; qos: QosResult; refusal?: PermanentError },
): Promise<void> {
  const { deps } = run;
  const { qos, refusal } = s;
  const conditions = configuredConditions(
    eip,
    {
      ip: s.ip,
      qosWanted: qos.wanted,
      ...(qos.problem && { qosProblem: qos.problem }),
      ...(refusal && { refusal }),
    },
    run.now(),
  );
  const change = statusChanges(eip, {
    ready: true,
    ip: s.ip,
    redo: s.redo,
    nat: await natStatus(run, eip),
    qosPolicy: qos.applied,
    conditions,
  });
  if (!change) return;
  await deps.cluster.patchEipStatus(eip.metadata.name, change);
  run.did(`status ${Object.keys(change).join(',')}`);
  // status.ip is written once per EIP: that is when an EIP has got its address.
  if (change.ip !== undefined && !eip.status?.ip)
    deps.metrics.count('Allocations', 1, {
      subnet: eip.metadata.labels?.[Label.subnet] ?? externalNetworkOf(eip),
    });
  const problem = refusal ?? qos.problem;
  const before = eip.status?.conditions?.find((c) => c.reason === problem?.code && c.status === 'False');
  if (problem && !before)
    await deps.cluster.emitEvent(eip, { type: 'Warning', reason: problem.code, message: problem.message });
}
