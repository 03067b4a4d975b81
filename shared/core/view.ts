/**
 * Pure functions from what was read to what should be written: labels, status fields, conditions, the redo
 * token and the MAC. Kept apart from the operations so each rule is tested on its own.
 */
import { createHash } from 'node:crypto';
import { IPAM_HOME_ANNOTATION } from '../domain/addressing.js';
import {
  type Condition,
  FINALIZER,
  type GatewayPod,
  type IptablesEip,
  Label,
  LEGACY_FINALIZER,
  type NatRuleKind,
} from '../domain/kube-ovn.js';
import type { EipObjectChange, EipStatusChange, NatRuleRef } from '../ports.js';

/** Where a configured EIP's address is, as its labels show it. */
export interface LabelFacts {
  /** The external subnet the address was allocated from. */
  subnet: string;
  /** The gateway whose net1 carries it. */
  gateway: string;
  ip: string;
  /** The QoS policy bound to it, if any. */
  qos?: string;
}

/**
 * The labels kube-ovn puts on an EIP once it is configured, with its values: the external subnet, the gateway,
 * the address and the QoS policy. They are written only after the address is on the gateway (a rejected EIP
 * carries none, so it neither counts as a used address nor makes a policy look in use), from where the address
 * really is rather than from the spec; an EIP without a policy has no `qos` label at all rather than an empty one.
 */
export function desiredLabels(f: LabelFacts): Record<string, string | null> {
  return {
    [Label.subnet]: f.subnet,
    [Label.natGwName]: f.gateway,
    [Label.eipV4Ip]: f.ip,
    [Label.qos]: f.qos ? f.qos : null,
  };
}

/** Only the label keys whose value differs; undefined when nothing changes (never a write with no content). */
export function labelChanges(
  current: Record<string, string> | undefined,
  desired: Record<string, string | null>,
): Record<string, string | null> | undefined {
  const out: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(desired)) {
    const has = current !== undefined && Object.hasOwn(current, k);
    if (v === null ? has : current?.[k] !== v) out[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

/**
 * Our finalizer present; the legacy one replaced when ours is not there yet, and otherwise left alone — beside
 * kube-ovn 1.12 it is kube-ovn's own, which it adds back after every update (ADR 0095); both are ours on deletion.
 * Other controllers' finalizers kept in place.
 */
export function withFinalizer(finalizers: readonly string[] | undefined): string[] | undefined {
  if ((finalizers ?? []).includes(FINALIZER)) return undefined;
  const list = (finalizers ?? []).filter((f) => f !== LEGACY_FINALIZER);
  if (!list.includes(FINALIZER)) list.push(FINALIZER);
  const same = list.length === (finalizers ?? []).length && list.every((f, i) => f === finalizers?.[i]);
  return same ? undefined : list;
}

export function withoutFinalizer(finalizers: readonly string[] | undefined): string[] | undefined {
  const list = (finalizers ?? []).filter((f) => f !== FINALIZER && f !== LEGACY_FINALIZER);
  return list.length === (finalizers ?? []).length ? undefined : list;
}

export function hasOurFinalizer(eip: IptablesEip): boolean {
  return (eip.metadata.finalizers ?? []).some((f) => f === FINALIZER || f === LEGACY_FINALIZER);
}

/** `status.nat`: the kinds of NAT rule naming the EIP, in kube-ovn's order dnat, fip, snat, comma-joined. */
export function natOf(rules: readonly NatRuleRef[]): string {
  const kinds = new Set(rules.map((r) => r.kind));
  return (['dnat', 'fip', 'snat'] as NatRuleKind[]).filter((k) => kinds.has(k)).join(',');
}

/**
 * The gateway's redo token: when its vpc-nat-gw container last started (falling back to the pod's creation),
 * in kube-ovn's `YYYY-MM-DDTHH:MM:SS` layout (UTC, no zone). It changes when the pod is re-created *and* when
 * the container restarts, so both trigger a redo.
 */
export function redoToken(pod: GatewayPod): string {
  const t = pod.container?.startedAt ?? pod.creationTimestamp;
  return new Date(t).toISOString().slice(0, 19);
}

/**
 * kube-ovn's MAC format (`00:00:00:XX:XX:XX`, upper case). Derived from the uid instead of random bytes, so a
 * retried add writes the same value. The gateway never uses it (net1 has its own MAC).
 */
export function macFor(uid: string): string {
  const h = createHash('sha256').update(uid).digest();
  return ['00', '00', '00', ...[0, 1, 2].map((i) => h[i]!.toString(16).padStart(2, '0').toUpperCase())].join(
    ':',
  );
}

/** Status fields of `want` that differ from the current status: only what changes is sent. */
export function statusChanges(eip: IptablesEip, want: EipStatusChange): EipStatusChange | undefined {
  const cur = eip.status ?? {};
  const out: EipStatusChange = {};
  for (const [k, v] of Object.entries(want) as [keyof EipStatusChange, unknown][]) {
    if (v === undefined) continue;
    const before = (cur as Record<string, unknown>)[k];
    const differs =
      k === 'conditions'
        ? JSON.stringify(before ?? []) !== JSON.stringify(v)
        : typeof v === 'boolean'
          ? before !== v
          : (before ?? '') !== v; // an absent string field and '' mean the same
    if (differs) (out as Record<string, unknown>)[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

/**
 * The conditions list with `next` set: an existing condition of the same type keeps its lastTransitionTime
 * unless its status changes. Returns the same array contents when nothing changes.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  next: Omit<Condition, 'lastTransitionTime' | 'lastUpdateTime'>,
  now: string,
): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const prev = i >= 0 ? list[i] : undefined;
  if (prev && prev.status === next.status && prev.reason === next.reason && prev.message === next.message)
    return list;
  const cond: Condition = {
    ...next,
    lastUpdateTime: now,
    lastTransitionTime: prev && prev.status === next.status ? (prev.lastTransitionTime ?? now) : now,
  };
  if (i >= 0) list[i] = cond;
  else list.push(cond);
  return list;
}

export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}

/** Condition types this product writes on an EIP. kube-ovn's EIP controller writes none. */
export const ConditionType = {
  /** True while the address is on the gateway (QoS has its own condition). */
  ready: 'Ready',
  /** Whether the QoS policy named in the spec is applied on the gateway; absent when there is none. */
  qosApplied: 'QoSApplied',
  /** False while the spec cannot be served as written (a rejection or a refused change); the message says why. */
  validated: 'Validated',
  /** True while a requested deletion waits (for NAT rules still using the EIP). */
  deleting: 'Deleting',
} as const;

/** A problem as the conditions record it (a PermanentError's code and message). */
export interface Problem {
  code: string;
  message: string;
}

/**
 * The conditions of an EIP whose address is on the gateway: Ready=True; QoSApplied True for the wanted policy,
 * False with its problem, absent when none is wanted; Validated=False while a change is refused, absent otherwise.
 */
export function configuredConditions(
  eip: IptablesEip,
  s: { ip: string; qosWanted: string; qosProblem?: Problem; refusal?: Problem },
  now: string,
): Condition[] {
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
  if (s.qosProblem)
    conditions = setCondition(
      conditions,
      {
        type: ConditionType.qosApplied,
        status: 'False',
        reason: s.qosProblem.code,
        message: s.qosProblem.message,
      },
      now,
    );
  else if (s.qosWanted)
    conditions = setCondition(
      conditions,
      {
        type: ConditionType.qosApplied,
        status: 'True',
        reason: 'Applied',
        message: `qos policy ${s.qosWanted} is applied`,
      },
      now,
    );
  else conditions = removeCondition(conditions, ConditionType.qosApplied);
  return s.refusal
    ? setCondition(
        conditions,
        {
          type: ConditionType.validated,
          status: 'False',
          reason: s.refusal.code,
          message: s.refusal.message,
          observedGeneration: eip.metadata.generation,
        },
        now,
      )
    : removeCondition(conditions, ConditionType.validated);
}

/**
 * An add's one metadata write once the address is configured: spec.v4ip (and v6ip) name the claim (what a retry
 * claims from here on), the MAC, the labels; the IPAM home annotation has served and goes.
 */
export function addedMeta(
  e: IptablesEip,
  facts: LabelFacts,
  v6ip: string | undefined,
): EipObjectChange | undefined {
  const spec: Record<string, string> = {};
  if (e.spec.v4ip !== facts.ip) spec.v4ip = facts.ip;
  if (v6ip && e.spec.v6ip !== v6ip) spec.v6ip = v6ip;
  if (!e.spec.macAddress) spec.macAddress = macFor(e.metadata.uid);
  const labels = labelChanges(e.metadata.labels, desiredLabels(facts));
  const annotations =
    e.metadata.annotations?.[IPAM_HOME_ANNOTATION] !== undefined
      ? { [IPAM_HOME_ANNOTATION]: null }
      : undefined;
  const change: EipObjectChange = {
    ...(Object.keys(spec).length && { spec }),
    ...(labels && { labels }),
    ...(annotations && { annotations }),
  };
  return Object.keys(change).length ? change : undefined;
}

/** A configured EIP's metadata write: the finalizer, and the labels as configured. */
export function maintainedMeta(e: IptablesEip, facts: LabelFacts): EipObjectChange | undefined {
  const finalizers = withFinalizer(e.metadata.finalizers);
  const labels = labelChanges(e.metadata.labels, desiredLabels(facts));
  return finalizers || labels ? { ...(finalizers && { finalizers }), ...(labels && { labels }) } : undefined;
}
