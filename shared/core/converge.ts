/**
 * add and update: one level-triggered reconcile (ADR 0002). A terminating EIP is finalized (./delete.ts), a fresh
 * one provisioned, a configured one maintained. Both read in the order the work happens: finalizer → allocation
 * (durable) → address on the gateway → its placement recorded in IPAM → QoS → spec and labels → status. Helpers
 * follow the two; the spec is checked by `validateSpec` (shared/domain/validation.ts), the gateway reached through
 * ./gateway.ts, the QoS step is `applyQos` (./qos.ts), and what is written is computed in ./view.ts (pure).
 */
import { IPAM_HOME_ANNOTATION, prefixLength, staticAddressProblem } from '../domain/addressing.js';
import { eipAdd } from '../domain/dialect/index.js';
import { AddressOutOfRangeError, InvalidSpecError, UnsupportedChangeError } from '../domain/errors.js';
import { gatewayNamespaceOf } from '../domain/gateway-pod.js';
import { externalNetworkOf, type IptablesEip, Label, type VpcNatGateway } from '../domain/kube-ovn.js';
import { validateSpec } from '../domain/validation.js';
import type { Allocation, ClaimOptions, GatewayPod, Owner, Placement, Pool } from '../ports.js';
import { finalize } from './delete.js';
import { addOnPods, lackingPods, type PodsState, podsProblem, qosOnPods, throwIfNone } from './fan-out.js';
import { podsWhereConfigured, requireAttachedGateway, requireFeature, v4PoolOf } from './gateway.js';
import { heldBy } from './held.js';
import { updateEipMeta } from './invocation.js';
import type { Outcome } from './outcome.js';
import { podAddressesOn, refuseGatewayPodAddress } from './pod-addresses.js';
import { type Run, validName } from './prelude.js';
import { assertBindable, type LoadedQos, loadQos } from './qos.js';
import { type PodsView, recordPlacement, writeConfiguredStatus } from './record.js';
import {
  addDue,
  carriedBy,
  gatewayPodsOf,
  isActive,
  newestToken,
  recordsPods,
  requireActive,
} from './replicas.js';
import { rejectedAfterConfiguring } from './settle.js';
import {
  addedMeta,
  desiredLabels,
  hasOurFinalizer,
  type LabelFacts,
  labelChanges,
  maintainedMeta,
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
  const placement: Placement = {
    gateway: need.gateway,
    prefix: prefixLength(need.v4),
    qos: '',
    ...(need.namespace && { namespace: need.namespace }),
  };
  const { v4: claimed, v6 } = await allocate(run, need, owner, placement, {
    firstAttempt,
    home: eip.metadata.annotations?.[IPAM_HOME_ANNOTATION],
  });

  // 3. The address on every active pod of the gateway (each in its own dialect); its placement was recorded with
  //    the claim (a retry's older allocation may still need it moved here).
  const active = requireActive(need.gateway, need.pods);
  const on = { address: claimed.address, prefix: placement.prefix, gateway: need.v4.gateway };
  const pods = await addOnPods(run, active, {
    gateway: need.gateway,
    vng: need.vpcNatGateway,
    ip: claimed.address,
    add: (d) => eipAdd(d, on),
    due: () => 'asked',
  });
  throwIfNone(pods);
  const v4 = await recordPlacement(run, claimed, { ...placement, qos: claimed.placement?.qos ?? '' });

  // 4. QoS: a problem from here on leaves the address configured and is reported in its own condition. What the
  //    gateway now polices is recorded with the allocation, and on a gateway of several pods which pods carry the
  //    address (one write, only when there is a policy or several pods; ADR 0086, ADR 0105).
  const want = need.qos?.name ?? '';
  const q = await qosOnPods(run, eip, pods, {
    ip: v4.address,
    want,
    have: '',
    ...(need.qos && { loaded: need.qos }),
  });
  throwIfNone(pods);
  await recordPlacement(run, v4, {
    ...placement,
    qos: q.applied,
    ...(recordsPods(undefined, active) && { pods: carriedBy(pods.carrying) }),
  });

  // 5. Spec and labels in one write, then status; then a pod's failure is reported (a retryable one thrown, so the
  //    retry adds the address where it is missing).
  const facts: LabelFacts = { subnet: v4.subnet, gateway: need.gateway, ip: v4.address, qos: q.applied };
  eip = await updateEipMeta(deps, name, eip, (e) => addedMeta(e, facts, v6?.address));
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being added' };
  await writeConfiguredStatus(run, eip, {
    ip: v4.address,
    redo: newestToken(pods.carrying)!,
    qos: q,
    pods: viewPods(need.pods, pods),
  });
  const problem = q.problem ?? podsProblem(pods);
  return problem ? rejectedAfterConfiguring(run, eip, problem) : run.outcome(name, v4.address);
}

/** What the status tells of the pods (GatewayPods on a gateway of several; Ready while a pod lacks the address). */
function viewPods(found: readonly GatewayPod[], pods: PodsState): PodsView {
  return { found, carrying: pods.carrying, failed: lackingPods(pods) };
}

/** What an add found it may go on with: nothing is held yet. */
interface AddNeeds {
  gateway: string;
  /** The external subnet's pools. */
  v4: Pool;
  v6?: Pool;
  /** spec.v4ip, when the user asked for an address. */
  requested?: string;
  /** The gateway pods, listed once: their own addresses are avoided. */
  listed: readonly GatewayPod[];
  /** The gateway's own pods (the exec needs them). */
  pods: readonly GatewayPod[];
  /** Where they are, when the EIP or gateway names it (else kube-ovn's namespace). */
  namespace?: string;
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
  const feature = await requireFeature(deps);
  const network = externalNetworkOf(eip);
  const target = await v4PoolOf(deps, network);
  const gateway = eip.spec.natGwDp!;
  const vpcNatGateway = await requireAttachedGateway(deps, gateway, network);
  const requested = eip.spec.v4ip;
  const unusable = requested ? staticAddressProblem(target.v4, requested) : undefined;
  if (unusable) throw new AddressOutOfRangeError(`spec.v4ip: ${unusable}`);
  // The gateway pods' own addresses: never an EIP's (ADR 0042). The add needs the pod list for the exec anyway; the
  // gateway's pods are among them unless they live in a namespace of their own (ADR 0105).
  const namespace = gatewayNamespaceOf(eip, vpcNatGateway, deps.kubeOvnRelease);
  const listed = await deps.cluster.listGatewayPods();
  const pods = await gatewayPodsOf(deps, gateway, namespace, { pods: listed, feature });
  const own = namespace ? [...listed, ...pods] : listed;
  if (requested) refuseGatewayPodAddress(own, target.v4, requested);
  // A release the product cannot speak is refused before anything is held, when the pods are there to tell.
  for (const p of pods.filter(isActive)) await run.dialect(p, vpcNatGateway, gateway);
  const qos = eip.spec.qosPolicy ? await loadQos(deps, eip.spec.qosPolicy) : undefined;
  if (qos) await assertBindable(deps, eip, qos);
  return {
    gateway,
    vpcNatGateway,
    ...target,
    ...(requested && { requested }),
    listed: own,
    pods,
    ...(namespace && { namespace }),
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
    avoid: podAddressesOn(need.listed, need.v4.subnet),
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
  const feature = await requireFeature(deps);

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

  // The address first, in each active pod of the gateway that may have lost it (./replicas.ts addDue): its
  // container run is not the one the address was configured in (the token moved, or a new pod), someone asked for a
  // redo the kube-ovn way (ready=false), or the bridge saw the pod come back. The token has one-second resolution
  // (as Kubernetes' startedAt), so a restart within the same second is only visible through that last hint;
  // re-adding is idempotent, so trusting it costs one exec per EIP. Other pods get no exec.
  const { found, active } = await podsWhereConfigured(deps, placement, ip, feature);
  const pods = await addOnPods(run, active, {
    gateway: placement.gateway,
    ip,
    add: (d) => eipAdd(d, { address: ip, prefix: placement.prefix, gateway: pool.gateway }),
    due: (p) => addDue(p, eip0, placement.pods, inv.event),
  });
  throwIfNone(pods);

  // Then QoS, from what the allocation records as applied (status.qosPolicy only for an allocation recorded before
  // that was kept); the placement with what is now applied and which pods carry the address, in one write when
  // either changed; then metadata (finalizer, labels as configured), then status; then a pod's failure.
  const have = held.placement?.qos ?? eip0.status?.qosPolicy ?? '';
  const want = invalid ? have : (eip0.spec.qosPolicy ?? ''); // an invalid spec changes nothing on the gateway
  await noteHandEdits(run, eip0, held, { subnet: held.subnet, gateway: placement.gateway, ip, qos: have });
  const q = await qosOnPods(run, eip0, pods, { ip, want, have });
  throwIfNone(pods);
  await recordPlacement(run, held, {
    ...placement,
    qos: q.applied,
    ...(recordsPods(placement.pods, active) && { pods: carriedBy(pods.carrying) }),
  });
  const facts: LabelFacts = { subnet: held.subnet, gateway: placement.gateway, ip, qos: q.applied };
  const eip = await updateEipMeta(deps, name, eip0, (e) => maintainedMeta(e, facts));
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being updated' };
  if (eip.metadata.resourceVersion !== eip0.metadata.resourceVersion) run.did('metadata');
  await writeConfiguredStatus(run, eip, {
    ip,
    redo: newestToken(pods.carrying)!,
    qos: q,
    ...(refused && { refusal: refused }),
    pods: viewPods(found, pods),
  });
  const problem = refused ?? q.problem ?? podsProblem(pods);
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
