/**
 * EIP bandwidth QoS: every value that reaches the gateway is validated first (rates and bursts within what
 * `tc police` accepts, shared/domain/validation.ts), a missing or foreign policy is an explained rejection instead
 * of a silent no-op, and an unshared policy is held by one EIP through the product's own record of its holder
 * (PolicyHolds, ADR 0087), never through labels (docs/kube-ovn-differences.md). `applyQos`
 * at the end is the QoS step of add and update: it moves an address's filters from one policy to another.
 */
import { DIRECTIONS, type Dialect, qosApply, qosChange, qosRemove } from '../domain/dialect/index.js';
import {
  DependencyMissingError,
  DependencyNotReadyError,
  PermanentError,
  QoSPolicyError,
  QoSPolicyInUseError,
} from '../domain/errors.js';
import type {
  IptablesEip,
  QoSDirection,
  QoSPolicy,
  QoSPolicyBandwidthLimitRule,
} from '../domain/kube-ovn.js';
import type { NatGwCall } from '../domain/nat-gateway.js';
import { assertQosValue } from '../domain/validation.js';
import type { Deps, GatewayPod, Owner } from '../ports.js';
import { runGateway } from './gateway.js';
import { heldBy } from './held.js';
import type { Invocation } from './invocation.js';
import type { Run } from './prelude.js';

export interface QosRule {
  name: string;
  direction: QoSDirection;
  priority: number;
  rateMax: string;
  burstMax: string;
}

export interface LoadedQos {
  name: string;
  shared: boolean;
  /** Sorted by name, as kube-ovn's QoS controller stores them in status. */
  rules: QosRule[];
}

/**
 * Reads and validates a QoSPolicy for binding to an EIP. kube-ovn reads only the policy's status (its QoS
 * controller copies spec there); a policy whose status has not been written yet is "not ready" (retryable).
 * @throws DependencyMissingError for a missing policy (it may be created later)
 * @throws QoSPolicyError for a NATGW policy or an invalid rule
 */
export async function loadQos(deps: Deps, name: string): Promise<LoadedQos> {
  const policy = await deps.cluster.getQosPolicy(name);
  if (!policy)
    throw new DependencyMissingError(`qos policy ${name} not found (spec.qosPolicy)`, {
      kind: 'QoSPolicy',
      name,
    });
  return validateQos(policy);
}

export function validateQos(policy: QoSPolicy): LoadedQos {
  const name = policy.metadata.name;
  const status = policy.status;
  if (!status || status.bandwidthLimitRules === undefined) {
    // An empty spec has nothing to copy either; only a policy with rules in spec can be "not yet copied".
    if ((policy.spec.bandwidthLimitRules ?? []).length > 0)
      throw new DependencyNotReadyError(
        `qos policy ${name} has no status yet (its rules were not copied to status)`,
      );
  }
  const bindingType = status?.bindingType ?? policy.spec.bindingType;
  if (bindingType && bindingType !== 'EIP')
    throw new QoSPolicyError(
      `qos policy ${name} has bindingType ${bindingType}; an EIP needs bindingType EIP`,
    );
  const rules = [...(status?.bandwidthLimitRules ?? [])]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((r) => validRule(name, r));
  return { name, shared: status?.shared ?? policy.spec.shared ?? false, rules };
}

/** One bandwidth rule of policy `policy`, checked. @throws QoSPolicyError */
function validRule(policy: string, r: QoSPolicyBandwidthLimitRule): QosRule {
  const where = `qos policy ${policy} rule ${JSON.stringify(r.name)}`;
  if (r.direction !== 'ingress' && r.direction !== 'egress')
    throw new QoSPolicyError(
      `${where}: direction must be ingress or egress, got ${JSON.stringify(r.direction ?? '')}`,
    );
  for (const field of ['rateMax', 'burstMax'] as const) assertQosValue(where, field, r[field]);
  const priority = r.priority ?? 0;
  if (!Number.isInteger(priority) || priority < 0 || priority > 65535)
    throw new QoSPolicyError(
      `${where}: priority must be an integer 0-65535, got ${JSON.stringify(r.priority)}`,
    );
  return {
    name: r.name,
    direction: r.direction,
    priority,
    rateMax: r.rateMax!,
    burstMax: r.burstMax!,
  };
}

/**
 * An unshared policy may be bound to one EIP only: the one its hold names (ADR 0087). A hold whose holder is gone, or
 * no longer uses the policy, does not count (./holds' `holdIsStale`). Read only: the add asks before anything is
 * held; the binding itself takes the hold (`claimPolicy`).
 * @throws QoSPolicyInUseError
 */
export async function assertBindable(deps: Deps, eip: IptablesEip, qos: LoadedQos): Promise<void> {
  if (qos.shared) return;
  const holder = await deps.holds.findHolder(qos.name);
  if (!holder || holder.uid === eip.metadata.uid || (await holdIsStale(deps, qos.name, holder))) return;
  throw inUse(qos.name, holder);
}

const inUse = (policy: string, holder: Owner): QoSPolicyInUseError =>
  new QoSPolicyInUseError(
    `not support unshared qos policy ${policy} to related to multiple eip (already bound to ${holder.name || holder.uid})`,
  );

/**
 * Whether a hold no longer stands for a binding: its holder EIP is gone (deleted, or its name now belongs to another
 * uid), or it neither asks for the policy (spec) nor has it recorded as applied on its address (a crash between
 * taking the hold and a spec change, or between the filters coming off and the hold going).
 */
export async function holdIsStale(
  deps: Pick<Deps, 'cluster' | 'ipam'>,
  policy: string,
  holder: Owner,
): Promise<boolean> {
  const eip = holder.name ? await deps.cluster.getEip(holder.name) : undefined;
  if (!eip || eip.metadata.uid !== holder.uid) return true;
  if (eip.spec.qosPolicy === policy) return false;
  const held = await heldBy(deps, eip);
  return !held.some(
    (a) =>
      a.placement?.qos === policy || (a.placement?.qos === undefined && eip.status?.qosPolicy === policy),
  );
}

/**
 * Installs the policy's rules for `ip` where none were (a new address, or after the gateway may have lost them): of
 * each direction the last rule in name order, which is what the script would keep (shared/domain/dialect/calls.ts).
 */
export async function addQos(
  inv: Invocation,
  deps: Deps,
  pod: GatewayPod,
  d: Dialect,
  ip: string,
  qos: LoadedQos,
): Promise<void> {
  for (const call of qosApply(d, ip, qos.rules)) await runGateway(inv, deps, pod, call, d);
}

/** Removes `ip`'s QoS in `directions` (both by default). */
export async function removeQos(
  inv: Invocation,
  deps: Deps,
  pod: GatewayPod,
  d: Dialect,
  ip: string,
  directions?: readonly QoSDirection[],
): Promise<void> {
  for (const call of qosRemove(d, ip, directions)) await runGateway(inv, deps, pod, call, d);
}

/**
 * The directions policy `name` uses; both when it is gone or has no rules (so nothing is left behind for an address
 * that may be reused).
 */
export async function policyDirections(deps: Deps, name: string): Promise<QoSDirection[]> {
  const policy = await deps.cluster.getQosPolicy(name);
  const rules = policy?.status?.bandwidthLimitRules ?? policy?.spec.bandwidthLimitRules;
  const used = (rules ?? [])
    .map((r) => r.direction)
    .filter((x): x is QoSDirection => x === 'ingress' || x === 'egress');
  return used.length > 0 ? DIRECTIONS.filter((x) => used.includes(x)) : [...DIRECTIONS];
}

// ------------------------------------------------------------------------------------------- the QoS step

export interface QosResult {
  /** The policy that should be applied ('' for none). */
  wanted: string;
  /** The policy now applied on the gateway ('' for none). */
  applied: string;
  /** Why the wanted policy is not applied. */
  problem?: PermanentError;
}

/** What the QoS step is asked: move `ip` from policy `have` to `want`; `redo` when the gateway may have lost all. */
export interface QosChange {
  want: string;
  have: string;
  redo: boolean;
}

/**
 * Moves the gateway's tc filters for `ip` from policy `have` to `want` (re-adding `want` on a redo or when the
 * policy's rules were edited). A permanent problem (policy missing, invalid, bound elsewhere, refused by tc) is
 * returned, not thrown: the address stays configured whatever happens here.
 */
export async function applyQos(
  run: Run,
  eip: IptablesEip,
  pod: GatewayPod,
  ip: string,
  s: QosChange,
  loaded?: LoadedQos,
): Promise<QosResult> {
  // After a redo the gateway may have lost every filter: nothing counts as applied until it is added again.
  const result: QosResult = { wanted: s.want, applied: s.redo ? '' : s.have };
  try {
    await moveQos(run, eip, result, pod, ip, s, loaded);
    return result;
  } catch (e) {
    if (!(e instanceof PermanentError)) throw e;
    run.inv.log.warn('qos not applied', { code: e.code, message: e.message });
    return { ...result, problem: e };
  }
}

/** The steps of `applyQos`, keeping `result` up to date as each one is done (a failure leaves what is true). */
async function moveQos(
  run: Run,
  eip: IptablesEip,
  result: QosResult,
  pod: GatewayPod,
  ip: string,
  s: QosChange,
  loaded: LoadedQos | undefined,
): Promise<void> {
  const { deps, inv } = run;
  const edited = inv.event.reason === 'qos-policy-changed' && s.want === s.have && s.want !== '';
  // The new policy is loaded and taken before the old one's filters go, so a policy that cannot be used leaves the
  // old limits in place.
  const qos = await policyToAdd(run, eip, s, edited, loaded);
  const moving = s.have !== '' && (s.have !== s.want || edited);
  if (!moving && !qos) return;
  const d = await run.dialect(pod);
  const before = moving ? await oldDirections(deps, s.have, edited) : undefined;
  result.applied = '';
  for (const call of qosCalls(d, ip, before, qos)) await runGateway(inv, deps, pod, call, d);
  // The old filters are off: an unshared policy this EIP held is free for another (a no-op for any other policy).
  if (moving && s.have !== s.want) await letGo(run, s.have, eip.metadata.uid);
  if (!qos) return;
  result.applied = qos.name;
  if (qos.rules.length) run.did(`qos ${qos.name}`);
}

/** The policy to put on (on a redo, a change, or an edit of its rules), loaded and, when unshared, held by this EIP. */
async function policyToAdd(
  run: Run,
  eip: IptablesEip,
  s: QosChange,
  edited: boolean,
  loaded: LoadedQos | undefined,
): Promise<LoadedQos | undefined> {
  const adding = s.want !== '' && (s.redo || s.want !== s.have || edited);
  if (!adding) return undefined;
  const qos = loaded ?? (await loadQos(run.deps, s.want));
  if (!qos.shared) await claimPolicy(run, eip, qos);
  return qos;
}

/** Gives back this EIP's hold of `policy` (when it has one). */
async function letGo(run: Run, policy: string, uid: string): Promise<void> {
  if (await run.deps.holds.release(policy, uid)) run.did(`let go of qos ${policy}`);
}

/** The old rules' directions; unknown when the policy was edited in place (its old rules are gone). */
async function oldDirections(
  deps: Deps,
  have: string,
  edited: boolean,
): Promise<readonly QoSDirection[] | 'unknown'> {
  return edited ? 'unknown' : policyDirections(deps, have);
}

/**
 * What moves `ip` from the old rules (their directions, 'unknown', or undefined: none) to `qos` (undefined: none), in
 * the gateway's dialect: a change as that release needs it sent (shared/domain/dialect/calls.ts).
 */
function qosCalls(
  d: Dialect,
  ip: string,
  before: readonly QoSDirection[] | 'unknown' | undefined,
  qos: LoadedQos | undefined,
): NatGwCall[] {
  if (!qos) return before === undefined ? [] : qosRemove(d, ip, before === 'unknown' ? undefined : before);
  return before === undefined ? qosApply(d, ip, qos.rules) : qosChange(d, ip, before, qos.rules);
}

/**
 * Takes an unshared policy for this EIP before any tc change (ADR 0087): one conditional write of its hold, so of
 * two EIPs racing for one policy exactly one gets it; a hold that no longer stands for a binding is taken over, only
 * if it is still the one judged stale. Taking a hold this EIP already has changes nothing.
 * @throws QoSPolicyInUseError
 */
async function claimPolicy(run: Run, eip: IptablesEip, qos: LoadedQos): Promise<void> {
  const { deps } = run;
  const me: Owner = { uid: eip.metadata.uid, name: eip.metadata.name };
  let holder = await deps.holds.hold(qos.name, me);
  if (holder.uid !== me.uid && (await holdIsStale(deps, qos.name, holder))) {
    run.inv.log.info('qos policy hold taken over', { policy: qos.name, from: holder.name, uid: holder.uid });
    holder = await deps.holds.hold(qos.name, me, holder.uid);
  }
  if (holder.uid !== me.uid) throw inUse(qos.name, holder);
}
