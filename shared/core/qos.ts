/**
 * EIP bandwidth QoS: every value that reaches the gateway is validated first (rates and bursts within what
 * `tc police` accepts, shared/domain/validation.ts), a missing or foreign policy is an explained rejection instead
 * of a silent no-op, and the unshared check looks at every other EIP (docs/kube-ovn-differences.md). `applyQos`
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
import {
  type IptablesEip,
  Label,
  type QoSDirection,
  type QoSPolicy,
  type QoSPolicyBandwidthLimitRule,
} from '../domain/kube-ovn.js';
import type { NatGwCall } from '../domain/nat-gateway.js';
import { assertQosValue } from '../domain/validation.js';
import type { Deps, EipObjectChange, GatewayPod } from '../ports.js';
import { runGateway } from './gateway.js';
import { type Invocation, updateEipMeta } from './invocation.js';
import type { Run } from './prelude.js';
import { labelChanges } from './view.js';

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
 * An unshared policy may be bound to one EIP only: another EIP carrying the policy's label holds it. The binder
 * writes its own label before any tc change and checks after, so two EIPs racing for one policy see each other and
 * neither gets it silently (both are refused, let go of the label and retry with a backoff).
 * @throws QoSPolicyInUseError
 */
export async function assertBindable(deps: Deps, eip: IptablesEip, qos: LoadedQos): Promise<void> {
  if (qos.shared) return;
  const others = (await deps.cluster.listEipsByLabel(Label.qos, qos.name)).filter(
    (e) => e.metadata.uid !== eip.metadata.uid,
  );
  if (others.length > 0)
    throw new QoSPolicyInUseError(
      `not support unshared qos policy ${qos.name} to related to multiple eip (already bound to ${others.map((e) => e.metadata.name).join(', ')})`,
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
  /** The EIP after any label write the binding made. */
  eip: IptablesEip;
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
  const result: QosResult = { wanted: s.want, applied: s.redo ? '' : s.have, eip };
  try {
    await moveQos(run, result, pod, ip, s, loaded);
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
  const adding = s.want !== '' && (s.redo || s.want !== s.have || edited);
  const qos = adding ? (loaded ?? (await loadQos(deps, s.want))) : undefined;
  if (qos && s.want !== s.have && !qos.shared) result.eip = await claimPolicy(run, result.eip, qos);
  const moving = s.have !== '' && (s.have !== s.want || edited);
  if (!moving && !qos) return;
  const d = await run.dialect(pod);
  const before = moving ? await oldDirections(deps, s.have, edited) : undefined;
  result.applied = '';
  for (const call of qosCalls(d, ip, before, qos)) await runGateway(inv, deps, pod, call, d);
  if (!qos) return;
  result.applied = qos.name;
  if (qos.rules.length) run.did(`qos ${qos.name}`);
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
