/**
 * The four EIP operations, read top-down: an operation takes the EIP's lease (the prelude: lease, then one read),
 * then converges. Every operation is safe to run twice, concurrently with a sibling, or out of order.
 *
 * Order of effects when configuring: finalizer → allocation (durable) → address on the gateway → its placement
 * recorded in IPAM → QoS → spec and labels → status. On deletion: gateway clean-up where the address really is
 * (the recorded placement) → release → finalizer removal. Permanent errors are turned into a recorded `rejected`
 * outcome in one place, `settle` below (docs/architecture.md, docs/adr/0014-event-path-top-down.md).
 */
import {
  IPAM_HOME_ANNOTATION,
  parseAddress,
  poolsOf,
  prefixLength,
  staticAddressProblem,
} from '../domain/addressing.js';
import {
  AddressOutOfRangeError,
  ConflictError,
  DeadlineError,
  DependencyMissingError,
  GatewayNotReadyError,
  GatewayRefusedError,
  InvalidEventError,
  InvalidSpecError,
  NatGwDisabledError,
  PermanentError,
  RetryableError,
  UnsupportedChangeError,
} from '../domain/errors.js';
import { DEFAULT_EXTERNAL_SUBNET, externalNetworkOf, type IptablesEip, Label } from '../domain/kube-ovn.js';
import { blockedRetryDelay } from '../domain/retry.js';
import { assertName, macProblem, nameProblem } from '../domain/validation.js';
import type {
  Allocation,
  ClaimOptions,
  Deps,
  EipObjectChange,
  GatewayPod,
  NatGwOp,
  Placement,
  Pool,
} from '../ports.js';
import { runGateway, runningGatewayPod } from './gateway.js';
import { type Invocation, updateEipMeta, withLease } from './invocation.js';
import type { Outcome } from './outcome.js';
import { podAddressesOn, refuseGatewayPodAddress } from './pod-addresses.js';
import { addQos, assertBindable, type LoadedQos, loadQos, removeQos } from './qos.js';
import {
  ConditionType,
  desiredLabels,
  hasOurFinalizer,
  type LabelFacts,
  labelChanges,
  macFor,
  natOf,
  redoToken,
  removeCondition,
  setCondition,
  statusChanges,
  withFinalizer,
  withoutFinalizer,
} from './view.js';

export type Operation = (inv: Invocation, deps: Deps) => Promise<Outcome>;

/** Tracks what one invocation changed, for the outcome and the logs. */
class Run {
  readonly actions: string[] = [];
  constructor(
    readonly inv: Invocation,
    readonly deps: Deps,
  ) {}
  did(action: string): void {
    this.actions.push(action);
  }
  outcome(eip: string, ip?: string): Outcome {
    return this.actions.length
      ? { status: 'applied', eip, actions: this.actions, ...(ip && { ip }) }
      : { status: 'unchanged', eip };
  }
  async gw(pod: GatewayPod, op: NatGwOp, args: string[]): Promise<void> {
    await runGateway(this.inv, this.deps, pod, op, args);
    this.did(`${op} ${args.join(' ')}`);
  }
  now(): string {
    return new Date(this.deps.clock.now()).toISOString();
  }
}

// ------------------------------------------------------------------------------------------- the prelude

/** Reads the EIP the event names; an outcome (skipped) when it is gone or is another object with that name. */
async function readEip(inv: Invocation, deps: Deps): Promise<IptablesEip | Outcome> {
  const { name, uid } = inv.event.object;
  const eip = await deps.cluster.getEip(name);
  if (!eip) return { status: 'skipped', eip: name, reason: 'not found' };
  if (uid && eip.metadata.uid !== uid)
    return {
      status: 'skipped',
      eip: name,
      reason: `stale event: uid ${uid} was replaced by ${eip.metadata.uid}`,
    };
  return eip;
}

const isOutcome = (v: IptablesEip | Outcome): v is Outcome => 'status' in v && !('apiVersion' in v);

/**
 * The one lease prelude: take the EIP's lease, read the EIP once under it, then run `body` (ADR 0041). An event for
 * an EIP that is gone costs the two lease writes and nothing else; every add saves the read it would take to find
 * that out before the lease.
 */
async function underLease(
  inv: Invocation,
  deps: Deps,
  body: (run: Run, eip: IptablesEip) => Promise<Outcome>,
): Promise<Outcome> {
  return withLease(inv, deps, async () => {
    const eip = await readEip(inv, deps);
    if (isOutcome(eip)) return eip;
    try {
      return await body(new Run(inv, deps), eip);
    } catch (e) {
      if (e instanceof RetryableError && !(e instanceof DeadlineError)) await notReadyYet(inv, deps, e);
      throw e;
    }
  });
}

/**
 * A retryable failure of an EIP that has no address yet is written on it (Ready=False, the error's code and
 * message) before the error goes back to be retried, still under the lease: if every retry fails and the event
 * ends as a dead letter, the EIP says why it is not Ready. The next success replaces the condition. Best effort.
 */
async function notReadyYet(inv: Invocation, deps: Deps, error: RetryableError): Promise<void> {
  try {
    const eip = await deps.cluster.getEip(inv.event.object.name);
    if (!eip || eip.status?.ip || eip.metadata.deletionTimestamp) return;
    if (inv.event.object.uid && eip.metadata.uid !== inv.event.object.uid) return;
    const conditions = setCondition(
      eip.status?.conditions,
      {
        type: ConditionType.ready,
        status: 'False',
        reason: error.code,
        message: error.message.slice(0, 1024),
      },
      new Date(deps.clock.now()).toISOString(),
    );
    const change = statusChanges(eip, { conditions });
    if (change) await deps.cluster.patchEipStatus(eip.metadata.name, change);
  } catch (e) {
    inv.log.warn('could not record the failure on the EIP', { error: String(e) });
  }
}

// ------------------------------------------------------------------------------------------- rejections

/** Since when the EIP has been blocked for `code` (epoch ms), from its Validated condition. */
function blockedSince(eip: IptablesEip | undefined, code: string): number | undefined {
  const c = eip?.status?.conditions?.find((x) => x.type === ConditionType.validated);
  if (c?.status !== 'False' || c.reason !== code || !c.lastTransitionTime) return undefined;
  return Date.parse(c.lastTransitionTime);
}

/**
 * Records a permanent error on the EIP (status.conditions and a Warning Event) and turns it into a `rejected`
 * outcome, with a retry delay when its blocker may clear. An EIP whose address is not on a gateway (never
 * configured, or the NAT gateway feature is off, which removes the gateway pods) is also marked not Ready.
 * Best effort: failing to record must not turn a permanent error into a retry storm.
 */
async function rejected(inv: Invocation, deps: Deps, error: PermanentError): Promise<Outcome> {
  const name = inv.event.object.name;
  deps.metrics.count('Rejections', 1, { code: error.code });
  inv.log.warn('rejected', { code: error.code, message: error.message });
  let retryAfterMs: number | undefined;
  try {
    const eip = await deps.cluster.getEip(name);
    if (error.mayClear) retryAfterMs = blockedRetryDelay(blockedSince(eip, error.code), deps.clock.now());
    if (eip && (!inv.event.object.uid || eip.metadata.uid === inv.event.object.uid)) {
      const now = new Date(deps.clock.now()).toISOString();
      let conditions = setCondition(
        eip.status?.conditions,
        {
          type: ConditionType.validated,
          status: 'False',
          reason: error.code,
          message: error.message,
          observedGeneration: eip.metadata.generation,
        },
        now,
      );
      // The address is not on a gateway: never configured, the feature is off (kube-ovn removes the gateway pods),
      // its gateway is gone, or the gateway refused to re-add it.
      const lost =
        error instanceof NatGwDisabledError ||
        error instanceof GatewayRefusedError ||
        (error instanceof DependencyMissingError && error.dependency.kind === 'VpcNatGateway');
      const offGateway = !eip.status?.ip || lost;
      if (offGateway)
        conditions = setCondition(
          conditions,
          { type: ConditionType.ready, status: 'False', reason: error.code, message: error.message },
          now,
        );
      const change = statusChanges(eip, {
        conditions,
        // ready=false also asks for a redo once the feature is back (kube-ovn's own convention).
        ...(lost && eip.status?.ip && { ready: false }),
      });
      if (change) {
        await deps.cluster.patchEipStatus(name, change);
        await deps.cluster.emitEvent(eip, { type: 'Warning', reason: error.code, message: error.message });
      }
      // An EIP that was never configured carries no allocation labels (one labelled by an earlier release before
      // it was allocated loses them): they would count it as a used address and make its policy look bound.
      if (!eip.status?.ip) await updateEipMeta(deps, name, eip, withoutAllocationLabels);
    }
  } catch (e) {
    inv.log.error('could not record the rejection on the EIP', { error: String(e) });
  }
  return {
    status: 'rejected',
    eip: name,
    code: error.code,
    message: error.message,
    ...(retryAfterMs !== undefined && { retryAfterMs }),
  };
}

const ALLOCATION_LABELS = [Label.subnet, Label.natGwName, Label.eipV4Ip, Label.qos];

function withoutAllocationLabels(e: IptablesEip): EipObjectChange | undefined {
  const labels = labelChanges(e.metadata.labels, Object.fromEntries(ALLOCATION_LABELS.map((k) => [k, null])));
  return labels ? { labels } : undefined;
}

/** The outcome of an event that cannot be handled as sent (nothing is recorded: it may not name a real EIP). */
export function invalidEvent(name: string, error: InvalidEventError): Outcome {
  return { status: 'rejected', eip: name, code: error.code, message: error.message };
}

/**
 * The one place permanent errors are handled: an operation's permanent error becomes a `rejected` outcome,
 * recorded on the EIP unless the event itself was at fault; everything else propagates (the edge lets Lambda
 * retry it).
 */
function settle(op: Operation): Operation {
  return async (inv, deps) => {
    try {
      return await op(inv, deps);
    } catch (e) {
      if (e instanceof InvalidEventError) return invalidEvent(inv.event.object.name, e);
      if (e instanceof PermanentError) return rejected(inv, deps, e);
      throw e;
    }
  };
}

/** `name` when it is a valid object name, else undefined (labels and event snapshots are not validated input). */
const validName = (name: string | undefined): string | undefined =>
  name && !nameProblem(name) ? name : undefined;

// ------------------------------------------------------------------------------------------- validation

/**
 * Checks the spec alone, before any API call: names that become URL path segments or label values, the MAC, the
 * requested address. @throws InvalidSpecError
 */
function validateSpec(eip: IptablesEip): void {
  const { natGwDp, externalSubnet, qosPolicy, macAddress, v4ip } = eip.spec;
  if (!natGwDp) throw new InvalidSpecError('parameter "natGwDp" cannot be empty');
  assertName('natGwDp', natGwDp);
  if (externalSubnet) assertName('externalSubnet', externalSubnet);
  if (qosPolicy) assertName('qosPolicy', qosPolicy);
  if (macAddress) {
    const problem = macProblem(macAddress);
    if (problem)
      throw new InvalidSpecError(`macAddress ${JSON.stringify(macAddress.slice(0, 32))} ${problem}`);
  }
  // kube-ovn's words ("failed to parse eip ip"), with the field named. Surrounding spaces are refused, not trimmed:
  // the value a user wrote is the value checked.
  if (v4ip && parseAddress(v4ip)?.family !== 4)
    throw new InvalidSpecError(`spec.v4ip: failed to parse eip ip ${JSON.stringify(v4ip.slice(0, 64))}`);
  if (eip.spec.v6ip && parseAddress(eip.spec.v6ip)?.family !== 6)
    throw new InvalidSpecError(
      `spec.v6ip: ${JSON.stringify(eip.spec.v6ip.slice(0, 64))} is not an IPv6 address`,
    );
}

async function requireFeature(deps: Deps): Promise<void> {
  const f = await deps.cluster.natGwFeature();
  if (!f.enabled) throw new NatGwDisabledError(`iptables nat gw not enable: ${f.reason ?? 'disabled'}`);
}

/** The IPv4 pool of a subnet. @throws DependencyMissingError when it is missing, InvalidSpecError without IPv4 */
async function v4PoolOf(deps: Deps, name: string): Promise<{ v4: Pool; v6?: Pool }> {
  const subnet = await deps.cluster.getSubnet(name);
  if (!subnet)
    throw new DependencyMissingError(`subnet ${name} not found (spec.externalSubnet)`, {
      kind: 'Subnet',
      name,
    });
  const pools = poolsOf(subnet);
  const v4 = pools.find((p) => p.family === 4);
  if (!v4) throw new InvalidSpecError(`subnet ${name} does not support ipv4`);
  const v6 = pools.find((p) => p.family === 6);
  return { v4, ...(v6 && { v6 }) };
}

// ------------------------------------------------------------------------------------------- add / update

/**
 * add and update converge the same way; the handler name only says why they were called. A terminating EIP is
 * finalized, a fresh one provisioned, a configured one maintained.
 */
function converge(run: Run, eip: IptablesEip): Promise<Outcome> {
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

async function provision(run: Run, eip0: IptablesEip): Promise<Outcome> {
  const { deps } = run;
  const name = eip0.metadata.name;
  const owner = { uid: eip0.metadata.uid, name };
  const gwName = eip0.spec.natGwDp!;

  // Everything that can refuse is checked before anything is held: the feature, the subnet, the gateway and its
  // attachment to the subnet, the QoS policy (missing, invalid or bound elsewhere: the EIP waits for it).
  await requireFeature(deps);
  const network = externalNetworkOf(eip0);
  const target = await v4PoolOf(deps, network);
  const gateway = await deps.cluster.getVpcNatGateway(gwName);
  if (!gateway)
    throw new DependencyMissingError(`vpc nat gateway ${gwName} not found (spec.natGwDp)`, {
      kind: 'VpcNatGateway',
      name: gwName,
    });
  // An address from a subnet the gateway is not attached to would land on net1 and re-point its default route.
  const attached = gateway.spec.externalSubnets?.length
    ? gateway.spec.externalSubnets
    : [DEFAULT_EXTERNAL_SUBNET];
  if (!attached.includes(network))
    throw new InvalidSpecError(
      `vpc nat gateway ${gwName} is not attached to subnet ${network} (its external subnets: ${attached.join(', ')})`,
    );
  const requested = eip0.spec.v4ip;
  const unusable = requested ? staticAddressProblem(target.v4, requested) : undefined;
  if (unusable) throw new AddressOutOfRangeError(`spec.v4ip: ${unusable}`);
  // The gateway pods' own addresses: never an EIP's (ADR 0042). The add needs the pod list for the exec anyway.
  const pods = await deps.cluster.listGatewayPods();
  if (requested) refuseGatewayPodAddress(pods, target.v4, requested);
  const qos = eip0.spec.qosPolicy ? await loadQos(deps, eip0.spec.qosPolicy) : undefined;
  if (qos) await assertBindable(deps, eip0, qos);

  // 1. The finalizer before anything is allocated. Without it, no earlier attempt got as far as claiming (every
  //    claim comes after it, under the lease): this is a first attempt, and the allocator need not look for an
  //    earlier claim. Where its claims will go is recorded in the same write, so a retry looks there (ADR 0043).
  const firstAttempt = !hasOurFinalizer(eip0);
  const suggested = firstAttempt && !requested ? deps.ipam.suggestHome?.(target.v4) : undefined;
  let eip = await updateEipMeta(deps, name, eip0, (e) => {
    const finalizers = withFinalizer(e.metadata.finalizers);
    if (!finalizers) return undefined;
    return { finalizers, ...(suggested && { annotations: { [IPAM_HOME_ANNOTATION]: suggested } }) };
  });
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being added' };
  if (eip.metadata.resourceVersion !== eip0.metadata.resourceVersion) run.did('finalizer');
  const home = eip.metadata.annotations?.[IPAM_HOME_ANNOTATION];

  // 2. Allocation, durable before the gateway is touched, with where the address is about to be configured in the
  //    same write (ADR 0041: clean-up may then run eip-del where the add never happened, which changes nothing).
  //    The gateway pods' own addresses are avoided here; the garbage collector records them in IPAM (ADR 0042).
  const claim: ClaimOptions = {
    firstAttempt,
    avoid: podAddressesOn(pods, target.v4.subnet),
    ...(home && { home }),
  };
  const placement: Placement = { gateway: gwName, prefix: prefixLength(target.v4) };
  let v4: Allocation;
  if (requested) {
    const held = await deps.ipam.findByOwner(owner.uid);
    v4 = await deps.ipam.claimAddress(target.v4, requested, owner, placement);
    // The user changed spec.v4ip before the EIP was ever configured: give back what the old request claimed.
    for (const a of held)
      if (a.family === 4 && a.address !== v4.address) await deps.ipam.release(a.subnet, a.address, owner.uid);
  } else {
    v4 = await deps.ipam.claimAny(target.v4, owner, placement, claim); // the owner's existing one, if a retry
  }
  const v6 = target.v6 ? await deps.ipam.claimAny(target.v6, owner, undefined, claim) : undefined;
  run.did(`allocate ${v4.address}${v6 ? ` ${v6.address}` : ''}`);

  // 3. The address on the gateway; its placement was recorded with the claim (a retry's older allocation may
  //    still need it moved here).
  const pod = await runningGatewayPod(deps, gwName, pods);
  await run.gw(pod, 'eip-add', [`${v4.address}/${placement.prefix},${target.v4.gateway}`]);
  await recordPlacement(run, v4, placement);

  // 4. QoS: a problem from here on leaves the address configured and is reported in its own condition.
  const q = await applyQos(run, eip, pod, v4.address, { want: qos?.name ?? '', have: '', redo: true }, qos);

  // 5. Spec and labels in one write, then status.
  const facts: LabelFacts = { subnet: v4.subnet, gateway: gwName, ip: v4.address, qos: q.applied };
  eip = await updateEipMeta(deps, name, eip, (e) => {
    const spec: Record<string, string> = {};
    if (e.spec.v4ip !== v4.address) spec.v4ip = v4.address;
    if (v6 && e.spec.v6ip !== v6.address) spec.v6ip = v6.address;
    if (!e.spec.macAddress) spec.macAddress = macFor(e.metadata.uid);
    const labels = labelChanges(e.metadata.labels, desiredLabels(facts));
    // The claim is made and spec.v4ip now names it (what a retry claims from here on): the home has served.
    const annotations =
      e.metadata.annotations?.[IPAM_HOME_ANNOTATION] !== undefined
        ? { [IPAM_HOME_ANNOTATION]: null }
        : undefined;
    return Object.keys(spec).length || labels || annotations
      ? {
          ...(Object.keys(spec).length && { spec }),
          ...(labels && { labels }),
          ...(annotations && { annotations }),
        }
      : undefined;
  });
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being added' };
  await writeConfiguredStatus(run, eip, { ip: v4.address, redo: redoToken(pod), qos: q });
  return q.problem ? rejectedAfterConfiguring(run, eip, q.problem) : run.outcome(name, v4.address);
}

/** Records where the address is configured; the owner must still hold it (a lease holder always does). */
async function recordPlacement(run: Run, a: Allocation, placement: Placement): Promise<void> {
  if (a.placement?.gateway === placement.gateway && a.placement.prefix === placement.prefix) return;
  if (!(await run.deps.ipam.place(a.subnet, a.address, a.owner.uid, placement)))
    throw new ConflictError(
      `${a.address} is no longer held by ${a.owner.uid}; its placement was not recorded`,
    );
  run.did(`place ${a.address} on ${placement.gateway}`);
}

/**
 * A configured EIP: the address is re-added where it is configured whenever the gateway may have lost it, before
 * anything else can fail; a change of gateway, subnet or address is refused and reported without stopping that;
 * QoS follows and reports its own problems.
 */
async function maintain(run: Run, eip0: IptablesEip, invalid?: InvalidSpecError): Promise<Outcome> {
  const { deps, inv } = run;
  const name = eip0.metadata.name;
  const ip = eip0.status!.ip!;
  const owner = { uid: eip0.metadata.uid, name };
  await requireFeature(deps);

  // Where the address really is: the allocation this EIP holds for it and its recorded placement. An EIP configured
  // before placements were recorded falls back to its labels (then its spec), and gets its placement recorded now.
  const held = await deps.ipam.findByOwner(owner.uid);
  let alloc = held.find((a) => a.family === 4 && a.address === ip);
  const labels0 = eip0.metadata.labels ?? {};
  if (!alloc) {
    // Adopt an address configured before this table existed (or lost from it); another EIP's address is refused.
    const network = validName(labels0[Label.subnet]) ?? validName(externalNetworkOf(eip0));
    if (!network)
      throw invalid ?? new InvalidSpecError(`${ip} is not held by this EIP and has no valid subnet`);
    const adoptFrom = (await v4PoolOf(deps, network)).v4;
    // A gateway pod's own address is never an EIP's: the pods are listed only on this rare path (ADR 0042).
    refuseGatewayPodAddress(await deps.cluster.listGatewayPods(), adoptFrom, ip);
    alloc = await deps.ipam.claimAddress(adoptFrom, ip, owner);
    run.did(`adopt ${ip}`);
  }
  const pool = (await v4PoolOf(deps, alloc.subnet)).v4;
  const fallbackGateway = validName(labels0[Label.natGwName]) ?? validName(eip0.spec.natGwDp);
  if (!alloc.placement && !fallbackGateway)
    throw invalid ?? new InvalidSpecError(`no gateway is known for ${ip}`);
  const placement: Placement = alloc.placement ?? { gateway: fallbackGateway!, prefix: prefixLength(pool) };

  // Refused changes: the address stays where it is, and the refusal is reported after the address is seen to.
  const refusal = invalid
    ? invalid.message
    : eip0.spec.v4ip && eip0.spec.v4ip !== ip
      ? `not support eip change ip, old ip '${ip}', new ip '${eip0.spec.v4ip}'`
      : eip0.spec.natGwDp !== placement.gateway
        ? `not support eip change natGwDp, old '${placement.gateway}', new '${eip0.spec.natGwDp}'`
        : externalNetworkOf(eip0) !== alloc.subnet
          ? `not support eip change externalSubnet, old '${alloc.subnet}', new '${externalNetworkOf(eip0)}'`
          : undefined;

  // The address first. Redo when the gateway restarted since we configured it (the token moved), someone asked
  // for one the kube-ovn way (ready=false), or the bridge saw the gateway come back. The token has one-second
  // resolution (as Kubernetes' startedAt), so a restart within the same second is only visible through that last
  // hint; re-adding is idempotent, so trusting it costs one exec per EIP.
  const pod = await runningGatewayPod(deps, placement.gateway).catch(async (e: unknown) => {
    // No pod because the gateway itself is gone: the address is on no gateway until it is back.
    if (e instanceof GatewayNotReadyError && !(await deps.cluster.getVpcNatGateway(placement.gateway)))
      throw new DependencyMissingError(
        `vpc nat gateway ${placement.gateway} not found; ${ip} is configured on it`,
        {
          kind: 'VpcNatGateway',
          name: placement.gateway,
        },
      );
    throw e;
  });
  const token = redoToken(pod);
  const redo =
    eip0.status?.redo !== token || eip0.status?.ready !== true || inv.event.reason === 'gateway-restarted';
  if (redo) await run.gw(pod, 'eip-add', [`${ip}/${placement.prefix},${pool.gateway}`]);
  await recordPlacement(run, alloc, placement);

  // Then QoS, then metadata (finalizer, labels as configured), then status.
  const have = eip0.status?.qosPolicy ?? '';
  const want = invalid ? have : (eip0.spec.qosPolicy ?? ''); // an invalid spec changes nothing on the gateway
  const q = await applyQos(run, eip0, pod, ip, { want, have, redo });
  const facts: LabelFacts = { subnet: alloc.subnet, gateway: placement.gateway, ip, qos: q.applied };
  const eip = await updateEipMeta(deps, name, q.eip, (e) => {
    const finalizers = withFinalizer(e.metadata.finalizers);
    const labels = labelChanges(e.metadata.labels, desiredLabels(facts));
    return finalizers || labels
      ? { ...(finalizers && { finalizers }), ...(labels && { labels }) }
      : undefined;
  });
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being updated' };
  if (eip.metadata.resourceVersion !== q.eip.metadata.resourceVersion) run.did('metadata');
  const refused = invalid ?? (refusal ? new UnsupportedChangeError(refusal) : undefined);
  await writeConfiguredStatus(run, eip, { ip, redo: token, qos: q, ...(refused && { refusal: refused }) });
  const problem = refused ?? q.problem;
  return problem ? rejectedAfterConfiguring(run, eip, problem) : run.outcome(name, ip);
}

interface QosResult {
  /** The policy that should be applied ('' for none). */
  wanted: string;
  /** The policy now applied on the gateway ('' for none). */
  applied: string;
  /** Why the wanted policy is not applied. */
  problem?: PermanentError;
  /** The EIP after any label write the binding made. */
  eip: IptablesEip;
}

/**
 * Moves the gateway's tc filters for `ip` from policy `have` to `want` (re-adding `want` on a redo or when the
 * policy's rules were edited). A permanent problem (policy missing, invalid, bound elsewhere, refused by tc) is
 * returned, not thrown: the address stays configured whatever happens here.
 */
async function applyQos(
  run: Run,
  eip: IptablesEip,
  pod: GatewayPod,
  ip: string,
  s: { want: string; have: string; redo: boolean },
  loaded?: LoadedQos,
): Promise<QosResult> {
  const { deps, inv } = run;
  const edited = inv.event.reason === 'qos-policy-changed' && s.want === s.have && s.want !== '';
  // After a redo the gateway may have lost every filter: nothing counts as applied until it is added again.
  let applied = s.redo ? '' : s.have;
  let current = eip;
  try {
    // The new policy is loaded and taken before the old one's filters go, so a policy that cannot be used leaves
    // the old limits in place.
    const adding = s.want !== '' && (s.redo || s.want !== s.have || edited);
    const qos = adding ? (loaded ?? (await loadQos(deps, s.want))) : undefined;
    if (qos && s.want !== s.have && !qos.shared) current = await claimPolicy(run, current, qos);
    if (s.have && (s.have !== s.want || edited)) {
      await removeQos(inv, deps, pod, ip, s.have, { allDirections: edited });
      applied = '';
    }
    if (qos) {
      applied = '';
      await addQos(inv, deps, pod, ip, qos);
      applied = qos.name;
      if (qos.rules.length) run.did(`qos ${qos.name}`);
    }
    return { wanted: s.want, applied, eip: current };
  } catch (e) {
    if (!(e instanceof PermanentError)) throw e;
    inv.log.warn('qos not applied', { code: e.code, message: e.message });
    return { wanted: s.want, applied, problem: e, eip: current };
  }
}

/**
 * Takes an unshared policy for this EIP: its label goes on before any tc change and the check comes after, so of
 * two EIPs racing for one policy neither gets it silently; a loser takes its label off again.
 */
async function claimPolicy(run: Run, eip: IptablesEip, qos: LoadedQos): Promise<IptablesEip> {
  const { deps } = run;
  const name = eip.metadata.name;
  const label =
    (value: string | null) =>
    (e: IptablesEip): EipObjectChange | undefined => {
      const labels = labelChanges(e.metadata.labels, { [Label.qos]: value });
      return labels ? { labels } : undefined;
    };
  const labelled = (await updateEipMeta(deps, name, eip, label(qos.name))) ?? eip;
  try {
    await assertBindable(deps, labelled, qos);
  } catch (e) {
    await updateEipMeta(deps, name, labelled, label(eip.status?.qosPolicy || null));
    throw e;
  }
  return labelled;
}

/** Status of an EIP whose address is on the gateway: Ready, and the QoS and refusal conditions. */
async function writeConfiguredStatus(
  run: Run,
  eip: IptablesEip,
  s: { ip: string; redo: string; qos: QosResult; refusal?: PermanentError },
): Promise<void> {
  const { deps } = run;
  const now = run.now();
  let conditions = setCondition(
    eip.status?.conditions,
    {
      type: ConditionType.ready,
      status: 'True',
      reason: 'Configured',
      message: `${s.ip} is configured on the gateway`,
    },
    now,
  );
  const want = s.qos.wanted;
  const qosProblem = s.qos.problem;
  if (qosProblem)
    conditions = setCondition(
      conditions,
      {
        type: ConditionType.qosApplied,
        status: 'False',
        reason: qosProblem.code,
        message: qosProblem.message,
      },
      now,
    );
  else if (want)
    conditions = setCondition(
      conditions,
      {
        type: ConditionType.qosApplied,
        status: 'True',
        reason: 'Applied',
        message: `qos policy ${want} is applied`,
      },
      now,
    );
  else conditions = removeCondition(conditions, ConditionType.qosApplied);
  const refusal = s.refusal;
  conditions = refusal
    ? setCondition(
        conditions,
        {
          type: ConditionType.validated,
          status: 'False',
          reason: refusal.code,
          message: refusal.message,
          observedGeneration: eip.metadata.generation,
        },
        now,
      )
    : removeCondition(conditions, ConditionType.validated);
  const change = statusChanges(eip, {
    ready: true,
    ip: s.ip,
    redo: s.redo,
    nat: await natStatus(run, eip),
    qosPolicy: s.qos.applied,
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
  const problem = refusal ?? qosProblem;
  const before = eip.status?.conditions?.find((c) => c.reason === problem?.code && c.status === 'False');
  if (problem && !before)
    await deps.cluster.emitEvent(eip, { type: 'Warning', reason: problem.code, message: problem.message });
}

/**
 * status.nat for a status write (display only: nothing is decided on it). The event's hint — what the bridge's NAT
 * rule informers saw when it sent the event — is used only when it equals what the EIP already shows, so the
 * answer is "no change" and nothing is listed; a hint that differs, or none, costs the three rule listings (ADR
 * 0041). A stale hint cannot leave a wrong value for long: every rule change that makes status.nat wrong routes a
 * later reset whose hint differs from it, and that one lists. Deletion never uses the hint: whether rules still
 * name the EIP decides whether it may go.
 */
async function natStatus(run: Run, eip: IptablesEip): Promise<string> {
  const hint = run.inv.event.nat;
  if (hint !== undefined && hint === (eip.status?.nat ?? '')) return hint;
  return natOf(await run.deps.cluster.listNatRulesForEip(eip.metadata.name));
}

/** The outcome of a configured EIP that still has a problem (already recorded in its conditions). */
function rejectedAfterConfiguring(run: Run, eip: IptablesEip, problem: PermanentError): Outcome {
  run.deps.metrics.count('Rejections', 1, { code: problem.code });
  run.inv.log.warn('rejected', { code: problem.code, message: problem.message, actions: run.actions });
  const since = eip.status?.conditions?.find((c) => c.reason === problem.code && c.status === 'False');
  return {
    status: 'rejected',
    eip: eip.metadata.name,
    code: problem.code,
    message: problem.message,
    ...(problem.mayClear && {
      retryAfterMs: blockedRetryDelay(
        since?.lastTransitionTime ? Date.parse(since.lastTransitionTime) : undefined,
        run.deps.clock.now(),
      ),
    }),
  };
}

// ------------------------------------------------------------------------------------------- deletion

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
  o: { fallbackGateway: string | undefined; policies: readonly (string | undefined)[] },
): Promise<void> {
  const { deps, inv } = run;
  const policies = [...new Set(o.policies.filter((p): p is string => !!p))];
  const byGateway = new Map<string, Allocation[]>();
  for (const a of held) {
    if (a.family !== 4) continue;
    const gw = a.placement?.gateway ?? o.fallbackGateway;
    if (!gw) {
      inv.log.warn('no gateway known for an address; nothing to clean on a gateway', { address: a.address });
      continue;
    }
    byGateway.set(gw, [...(byGateway.get(gw) ?? []), a]);
  }
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
    for (const a of addresses) {
      let prefix = a.placement?.prefix;
      if (prefix === undefined) {
        const subnet = await deps.cluster.getSubnet(a.subnet);
        const v4 = subnet ? poolsOf(subnet).find((p) => p.family === 4) : undefined;
        prefix = v4 ? prefixLength(v4) : undefined;
      }
      if (prefix === undefined)
        inv.log.warn('external subnet is gone; cannot build eip-del argument', { address: a.address });
      else await run.gw(pod, 'eip-del', [`${a.address}/${prefix}`]);
      for (const p of policies) await removeQos(inv, deps, pod, a.address, p);
    }
  }
}

/**
 * A terminating EIP: wait while NAT rules use it; clean the gateway where its addresses are; release the
 * allocations; only then drop the finalizer.
 */
async function finalize(run: Run, eip: IptablesEip): Promise<Outcome> {
  const { deps } = run;
  const name = eip.metadata.name;
  const uid = eip.metadata.uid;
  const held = await deps.ipam.findByOwner(uid);
  if (!hasOurFinalizer(eip) && held.length === 0)
    return { status: 'skipped', eip: name, reason: 'terminating, nothing of ours left' };

  const rules = await deps.cluster.listNatRulesForEip(name);
  if (rules.length > 0) {
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

  await cleanUpGateway(run, held, {
    fallbackGateway: validName(eip.metadata.labels?.[Label.natGwName]) ?? validName(eip.spec.natGwDp),
    policies: [eip.status?.qosPolicy, eip.spec.qosPolicy].map(validName),
  });
  const released = await deps.ipam.releaseByOwner(uid);
  if (released.length) {
    deps.metrics.count('Releases', released.length);
    run.did(`release ${released.map((a) => a.address).join(' ')}`);
  }
  const after = await updateEipMeta(deps, name, eip, (e) => {
    const finalizers = withoutFinalizer(e.metadata.finalizers);
    return finalizers ? { finalizers } : undefined;
  });
  if (hasOurFinalizer(eip)) run.did('remove finalizer');
  if (after) run.inv.log.debug('finalized', { remainingFinalizers: after.metadata.finalizers ?? [] });
  return run.outcome(name);
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
  await run.gw(pod, 'eip-add', [`${ip}/${alloc.placement.prefix},${pool.gateway}`]);
  const policy = validName(eip.status?.qosPolicy);
  if (policy) await addQos(inv, deps, pod, ip, await loadQos(deps, policy));
  return token;
}

// ------------------------------------------------------------------------------------------- reset

/**
 * Recomputes status.nat from the NAT rules naming the EIP and re-asserts the labels of a configured EIP (from
 * where its address is recorded). It takes the lease and never touches status.ready, so it cannot cancel a pending
 * redo. A terminating EIP waiting for its NAT rules continues its deletion here (a rule going away is what it was
 * waiting for).
 */
async function reset(run: Run, eip0: IptablesEip): Promise<Outcome> {
  if (eip0.metadata.deletionTimestamp) return finalize(run, eip0);
  const name = eip0.metadata.name;
  const ip = eip0.status?.ip;
  let eip: IptablesEip | undefined = eip0;
  const l = eip0.metadata.labels ?? {};
  const labelled =
    l[Label.eipV4Ip] === ip &&
    !!l[Label.subnet] &&
    !!l[Label.natGwName] &&
    (l[Label.qos] ?? '') === (eip0.status?.qosPolicy ?? '');
  // Labels all present and consistent: nothing to look up (an edited value is put right by the next update).
  if (ip && hasOurFinalizer(eip0) && !labelled) {
    const alloc = (await run.deps.ipam.findByOwner(eip0.metadata.uid)).find(
      (a) => a.family === 4 && a.address === ip,
    );
    const placement = alloc?.placement;
    if (alloc && placement) {
      const facts: LabelFacts = {
        subnet: alloc.subnet,
        gateway: placement.gateway,
        ip,
        qos: eip0.status?.qosPolicy,
      };
      eip = await updateEipMeta(run.deps, name, eip0, (e) => {
        const labels = labelChanges(e.metadata.labels, desiredLabels(facts));
        return labels ? { labels } : undefined;
      });
      if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being reset' };
      if (eip.metadata.resourceVersion !== eip0.metadata.resourceVersion) run.did('labels');
    }
  }
  const change = statusChanges(eip, { nat: await natStatus(run, eip) });
  if (change) {
    await run.deps.cluster.patchEipStatus(name, change);
    run.did(`status nat=${change.nat}`);
  }
  return run.outcome(name);
}

// ------------------------------------------------------------------------------------------- delete

/**
 * The object is gone. A safety net: whatever IPAM still holds for the deleted uid (finalizer removed by hand,
 * force delete) is taken off the gateway where it is configured, and released. There is no object left to read,
 * so its lease is taken directly.
 */
async function remove(inv: Invocation, deps: Deps): Promise<Outcome> {
  const name = inv.event.object.name;
  const uid = inv.event.object.uid ?? inv.event.old?.metadata?.uid;
  if (!uid) throw new InvalidEventError('invalid event: object.uid is required for the delete handler');
  const current = await deps.cluster.getEip(name);
  if (current?.metadata.uid === uid)
    return { status: 'skipped', eip: name, reason: 'the object still exists' };
  const held = await deps.ipam.findByOwner(uid);
  if (held.length === 0) return { status: 'unchanged', eip: name };
  return withLease(inv, deps, async () => {
    const run = new Run(inv, deps);
    const last = inv.event.old;
    await cleanUpGateway(run, held, {
      fallbackGateway: validName(last?.metadata?.labels?.[Label.natGwName]) ?? validName(last?.spec?.natGwDp),
      policies: [last?.status?.qosPolicy, last?.spec?.qosPolicy].map(validName),
    });
    for (const a of held) {
      if (await deps.ipam.release(a.subnet, a.address, uid)) {
        deps.metrics.count('Releases');
        run.did(`release ${a.address}`);
      }
    }
    return run.outcome(name);
  });
}

export const addEip: Operation = settle((inv, deps) => underLease(inv, deps, converge));
export const updateEip: Operation = settle((inv, deps) => underLease(inv, deps, converge));
export const resetEip: Operation = settle((inv, deps) => underLease(inv, deps, reset));
export const deleteEip: Operation = settle(remove);

export const operations = { add: addEip, update: updateEip, reset: resetEip, delete: deleteEip } as const;
