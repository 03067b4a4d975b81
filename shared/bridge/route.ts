/**
 * The routing table (shared/bridge/README.md; how it differs from kube-ovn's: docs/kube-ovn-differences.md): from
 * one watched change to the handler events it causes. Pure — the same change and the same EIP cache always give
 * the same events, ids included — so it is table-tested from recorded watch streams (events/watch/). The bridge
 * supplies `old` from its own last-seen copy of each object, because the informer hands over only the new state.
 *
 * Handlers are level-triggered and re-read everything; an event only says "look at this EIP now". So the table
 * routes a change when a handler has something to do about it, and routes nothing for changes that only echo a
 * handler's own writes (status, labels, finalizers).
 */
import { DEFAULT_EXTERNAL_SUBNET } from '../domain/kube-ovn.js';
import { type EipEvent, eventId, type HandlerName, type Reason } from '../events.js';
import {
  fanOutId,
  field,
  gatewayContainer,
  gatewayOfPod,
  isGatewayUp,
  isTerminating,
  type KubeObject,
  nameOf,
  rvOf,
  sameJson,
  snapshotOf,
  timeOf,
  uidOf,
  type WatchedKind,
} from './objects.js';
import type { WatchType } from './watch.js';

export type { WatchType };

/** One change as the bridge sees it: the watch verb, the new object (for DELETED: the last state), the previous one. */
export interface Change {
  kind: WatchedKind;
  type: WatchType;
  object: KubeObject;
  /** The bridge's last-seen copy before this change (absent for a first sighting). */
  old?: KubeObject;
  /**
   * True while the informer delivers its very first list at bridge start. Rule and gateway-pod sightings from it
   * route nothing: every EIP gets an `add` from the same start-up list, and add converges status.nat and the redo
   * token itself (ADR 0008).
   */
  initial?: boolean;
}

/** Routes one change. `eips` is the bridge's cache of IptablesEIPs, used to fan a gateway or QoS change out. */
export function route(change: Change, eips: Iterable<KubeObject> = []): EipEvent[] {
  switch (change.kind) {
    case 'IptablesEIP':
      return [...routeEip(change), ...routeReleased(change, eips)];
    case 'IptablesFIPRule':
    case 'IptablesDnatRule':
    case 'IptablesSnatRule':
      return change.initial ? [] : routeNatRule(change);
    case 'Pod':
      return change.initial ? [] : routeGatewayPod(change, eips);
    case 'QoSPolicy':
      return routeQosPolicy(change, eips);
    case 'Subnet':
      return change.initial ? [] : routeSubnet(change, eips);
    case 'VpcNatGateway':
      return change.initial ? [] : routeNatGateway(change, eips);
    case 'ConfigMap':
      return change.initial ? [] : routeNatGwConfig(change, eips);
  }
}

function eipEvent(
  eip: KubeObject,
  handler: HandlerName,
  reason: Reason,
  extra: Partial<EipEvent> = {},
): EipEvent {
  const uid = uidOf(eip);
  const rv = rvOf(eip);
  return {
    version: 1,
    id: eventId(uid, rv, reason),
    handler,
    reason,
    object: {
      kind: 'IptablesEIP',
      name: nameOf(eip),
      ...(uid && { uid }),
      ...(rv && { resourceVersion: rv }),
    },
    ...extra,
  };
}

// ------------------------------------------------------------------------------------------- IptablesEIP

/**
 * ADDED → add (a terminating object → update: docs/kube-ovn-differences.md#terminating-eip-on-a-relist);
 * MODIFIED → update for the changes in the table; DELETED → delete.
 */
export function routeEip(change: Pick<Change, 'type' | 'object' | 'old'>): EipEvent[] {
  const { type, object: eip, old } = change;
  if (!nameOf(eip)) return [];
  if (type === 'DELETED') return [deleted(eip)];
  if (type === 'ADDED' || !old) return [added(eip)];
  // Same name, another object: it was deleted and re-created while the watch was away (a relist shows it as a
  // change). The old one is gone, the new one is new.
  if (uidOf(old) !== uidOf(eip)) return [deleted(old), added(eip)];
  const reason = modifiedReason(old, eip);
  return reason ? [eipEvent(eip, 'update', reason)] : [];
}

function added(eip: KubeObject): EipEvent {
  return isTerminating(eip) ? eipEvent(eip, 'update', 'deletion-requested') : eipEvent(eip, 'add', 'added');
}

function deleted(eip: KubeObject): EipEvent {
  return eipEvent(eip, 'delete', 'deleted', { old: snapshotOf(eip) });
}

/** Why a MODIFIED EIP needs the update handler, or undefined (status-, label- and finalizer-only changes). */
export function modifiedReason(old: KubeObject, eip: KubeObject): Reason | undefined {
  if (isTerminating(eip)) return 'deletion-requested';
  // A redo request the kube-ovn way sets ready=false with a new token. Our handlers write a new token together
  // with ready=true; routing that echo back would only cost an invocation.
  if (field(old, 'status', 'redo') !== field(eip, 'status', 'redo') && eip.status?.ready !== true)
    return 'redo-changed';
  if (field(old, 'spec', 'qosPolicy') !== field(eip, 'spec', 'qosPolicy')) return 'qos-changed';
  if (specChanged(old, eip)) return 'spec-changed';
  return undefined;
}

/**
 * A change of v4ip, natGwDp or externalSubnet: refused on an EIP with an address, and the refusal must be visible
 * (docs/kube-ovn-differences.md#address-changes-refused-visibly); before provisioning it can fix a rejected spec.
 * One change is excluded: the add handler's own write that records the allocated address, which sets v4ip and
 * macAddress from empty in the same write before status.ip exists — routing it would only echo the handler back
 * to itself.
 */
function specChanged(old: KubeObject, eip: KubeObject): boolean {
  const changed = (k: string) => field(old, 'spec', k) !== field(eip, 'spec', k);
  if (changed('natGwDp') || changed('externalSubnet')) return true;
  if (!changed('v4ip')) return false;
  const ownWrite =
    field(old, 'spec', 'v4ip') === '' &&
    field(old, 'spec', 'macAddress') === '' &&
    field(eip, 'spec', 'macAddress') !== '' &&
    field(eip, 'status', 'ip') === '';
  return !ownWrite;
}

// ------------------------------------------------------------------------------------------- NAT rules

/**
 * A FIP/DNAT/SNAT rule added, deleted, moved to another EIP, or newly terminating → reset every EIP involved (it
 * recomputes status.nat, and continues a deletion that waits for the rule). The rule knows only the EIP's name.
 */
export function routeNatRule(change: Pick<Change, 'type' | 'object' | 'old'>): EipEvent[] {
  const { type, object: rule, old } = change;
  const eipOf = (o: KubeObject) => field(o, 'spec', 'eip');
  let targets: string[] = [];
  if (type !== 'MODIFIED' || !old) targets = [eipOf(rule)];
  else if (uidOf(old) !== uidOf(rule))
    targets = [eipOf(old), eipOf(rule)]; // re-created while unwatched
  else if (eipOf(old) !== eipOf(rule)) targets = [eipOf(old), eipOf(rule)];
  else if (isTerminating(rule) && !isTerminating(old)) targets = [eipOf(rule)];
  const base = eventId(uidOf(rule), rvOf(rule), 'nat-rule-changed');
  return [...new Set(targets.filter((t) => t !== ''))].map((name) => ({
    version: 1 as const,
    id: fanOutId(base, name),
    handler: 'reset' as const,
    reason: 'nat-rule-changed' as const,
    object: { kind: 'IptablesEIP' as const, name },
  }));
}

// ------------------------------------------------------------------------------------------- gateway pods

/**
 * True when this change brings the gateway (back) into service: the pod is Running with its vpc-nat-gw container
 * ready, and it is a new pod, was not up before, or its container restarted (restartCount up, or a new start time).
 */
export function gatewayCameUp(change: Pick<Change, 'type' | 'object' | 'old'>): boolean {
  const { type, object: pod, old } = change;
  if (type === 'DELETED' || !isGatewayUp(pod)) return false;
  if (type === 'ADDED' || !old || uidOf(old) !== uidOf(pod) || !isGatewayUp(old)) return true;
  const now = gatewayContainer(pod);
  const before = gatewayContainer(old);
  if ((now?.restartCount ?? 0) > (before?.restartCount ?? 0)) return true;
  return timeOf(now?.state?.running?.startedAt) !== timeOf(before?.state?.running?.startedAt);
}

/**
 * A gateway pod that came up → for each EIP on that gateway: update (gateway-restarted: the handler compares the
 * pod's redo token and re-adds the address) if it has an address, else add (gateway-ready: an add that may have
 * given up while the gateway was away). Terminating EIPs without an address have nothing to wait for.
 */
export function routeGatewayPod(
  change: Pick<Change, 'type' | 'object' | 'old'>,
  eips: Iterable<KubeObject>,
): EipEvent[] {
  const gateway = gatewayOfPod(change.object);
  if (!gateway || !gatewayCameUp(change)) return [];
  const pod = change.object;
  const out: EipEvent[] = [];
  for (const eip of eips) {
    // A configured EIP's address is on the gateway its label names (the core keeps the label equal to where the
    // address is recorded, even while a natGwDp change is refused); the spec matters only before that.
    const on = eip.metadata?.labels?.['ovn.kubernetes.io/vpc-nat-gw-name'];
    if (field(eip, 'spec', 'natGwDp') !== gateway && on !== gateway) continue;
    const restarted = field(eip, 'status', 'ip') !== '';
    if (!restarted && isTerminating(eip)) continue;
    const reason: Reason = restarted ? 'gateway-restarted' : 'gateway-ready';
    const e = eipEvent(eip, restarted ? 'update' : 'add', reason, {
      gateway,
      ...(uidOf(pod) && { pod: uidOf(pod) }),
    });
    e.id = fanOutId(eventId(uidOf(pod), rvOf(pod), reason), nameOf(eip));
    out.push(e);
  }
  return out.sort((a, b) => (a.object.name < b.object.name ? -1 : 1));
}

// ------------------------------------------------------------------------------------------- QoS policies

/** What the EIP path reads of a QoS policy: its status (the QoS controller copies spec there). */
export function qosPolicyChanged(change: Pick<Change, 'type' | 'object' | 'old'>): boolean {
  const { type, object: qos, old } = change;
  if (type === 'DELETED') return false;
  if (type === 'ADDED' || !old || uidOf(old) !== uidOf(qos)) return true;
  return ['bandwidthLimitRules', 'shared', 'bindingType'].some(
    (k) => !sameJson(old.status?.[k], qos.status?.[k]),
  );
}

/** A QoS policy added, or its rules/shared/bindingType status changed → update every EIP whose spec names it. */
export function routeQosPolicy(
  change: Pick<Change, 'type' | 'object' | 'old'>,
  eips: Iterable<KubeObject>,
): EipEvent[] {
  const policy = nameOf(change.object);
  if (!policy || !qosPolicyChanged(change)) return [];
  const base = eventId(uidOf(change.object), rvOf(change.object), 'qos-policy-changed');
  const out: EipEvent[] = [];
  for (const eip of eips) {
    if (field(eip, 'spec', 'qosPolicy') !== policy) continue;
    const e = eipEvent(eip, 'update', 'qos-policy-changed');
    e.id = fanOutId(base, nameOf(eip));
    out.push(e);
  }
  return out.sort((a, b) => (a.object.name < b.object.name ? -1 : 1));
}

// ------------------------------------------------------------------------------------------- blockers

/**
 * The reasons of the re-routing below (events/schema.json): `dependency-changed` for what one EIP or a few wait
 * on, `feature-changed` for the nat-gw ConfigMaps (every EIP). See ADR 0020.
 */
export const BLOCKER_REASONS = {
  addressReleased: 'dependency-changed',
  qosPolicyUnbound: 'dependency-changed',
  subnetChanged: 'dependency-changed',
  gatewayChanged: 'dependency-changed',
  natGwConfigChanged: 'feature-changed',
} as const satisfies Record<string, Reason>;

/** An EIP that may be blocked: not terminating and not Ready (rejected, or never provisioned). */
export function isWaiting(eip: KubeObject): boolean {
  return !isTerminating(eip) && eip.status?.ready !== true;
}

const externalSubnetOf = (eip: KubeObject): string =>
  field(eip, 'spec', 'externalSubnet') || DEFAULT_EXTERNAL_SUBNET;

/** `update` for each target EIP, with ids fanned out from the triggering object's change. */
function fanOut(trigger: KubeObject, reason: Reason, targets: Iterable<KubeObject>): EipEvent[] {
  const base = eventId(uidOf(trigger), rvOf(trigger), reason);
  const out: EipEvent[] = [];
  for (const eip of targets) {
    const e = eipEvent(eip, 'update', reason);
    e.id = fanOutId(base, nameOf(eip));
    out.push(e);
  }
  return out.sort((a, b) => (a.object.name < b.object.name ? -1 : 1));
}

function* waitingWhere(eips: Iterable<KubeObject>, self: string, match: (eip: KubeObject) => boolean) {
  for (const eip of eips) if (nameOf(eip) !== self && isWaiting(eip) && match(eip)) yield eip;
}

/**
 * What an EIP's change frees for others. Deleted: its address goes back to the pool (waiting EIPs on the same
 * external subnet may now get one, or the static address they asked for) and its QoS policy is unbound. A
 * `spec.qosPolicy` switched away also unbinds the old policy (an unshared policy may be bound to one EIP only).
 */
export function routeReleased(
  change: Pick<Change, 'type' | 'object' | 'old'>,
  eips: Iterable<KubeObject>,
): EipEvent[] {
  const { type, object: eip, old } = change;
  const self = nameOf(eip);
  if (!self) return [];
  // Gone: deleted, or replaced by a new object under the same name while the watch was away.
  const gone =
    type === 'DELETED' ? eip : type === 'MODIFIED' && old && uidOf(old) !== uidOf(eip) ? old : undefined;
  if (gone) {
    const subnet = externalSubnetOf(gone);
    const policy = field(gone, 'spec', 'qosPolicy');
    return fanOut(
      gone,
      BLOCKER_REASONS.addressReleased,
      waitingWhere(
        eips,
        self,
        (e) => externalSubnetOf(e) === subnet || (policy !== '' && field(e, 'spec', 'qosPolicy') === policy),
      ),
    );
  }
  if (type !== 'MODIFIED' || !old) return [];
  const before = field(old, 'spec', 'qosPolicy');
  if (before === '' || before === field(eip, 'spec', 'qosPolicy')) return [];
  return fanOut(
    eip,
    BLOCKER_REASONS.qosPolicyUnbound,
    waitingWhere(eips, self, (e) => field(e, 'spec', 'qosPolicy') === before),
  );
}

/** Created, re-created or its spec changed (status changes — usage counters — route nothing). */
function specAppeared(change: Pick<Change, 'type' | 'object' | 'old'>): boolean {
  const { type, object, old } = change;
  if (type === 'DELETED') return false;
  if (type === 'ADDED' || !old || uidOf(old) !== uidOf(object)) return true;
  return !sameJson(old.spec, object.spec);
}

/** A Subnet created or its spec changed → update each waiting EIP on that external subnet. */
export function routeSubnet(
  change: Pick<Change, 'type' | 'object' | 'old'>,
  eips: Iterable<KubeObject>,
): EipEvent[] {
  const subnet = nameOf(change.object);
  if (!subnet || !specAppeared(change)) return [];
  return fanOut(
    change.object,
    BLOCKER_REASONS.subnetChanged,
    waitingWhere(eips, '', (e) => externalSubnetOf(e) === subnet),
  );
}

/** A VpcNatGateway created or its spec changed → update each waiting EIP on that gateway. */
export function routeNatGateway(
  change: Pick<Change, 'type' | 'object' | 'old'>,
  eips: Iterable<KubeObject>,
): EipEvent[] {
  const gateway = nameOf(change.object);
  if (!gateway || !specAppeared(change)) return [];
  return fanOut(
    change.object,
    BLOCKER_REASONS.gatewayChanged,
    waitingWhere(eips, '', (e) => field(e, 'spec', 'natGwDp') === gateway),
  );
}

/**
 * One of the ConfigMaps that switch the VPC NAT gateway feature on (the source passes only those two) created,
 * deleted, or its data changed → update every EIP that is not terminating: switching the feature off makes them
 * not Ready with a condition, switching it on brings them back.
 */
export function routeNatGwConfig(
  change: Pick<Change, 'type' | 'object' | 'old'>,
  eips: Iterable<KubeObject>,
): EipEvent[] {
  const { type, object, old } = change;
  if (!nameOf(object)) return [];
  if (type === 'MODIFIED' && old && uidOf(old) === uidOf(object) && sameJson(old.data, object.data))
    return [];
  const targets = [...eips].filter((e) => !isTerminating(e));
  // A deleted ConfigMap's last state carries the resourceVersion it had; the deletion is a change of its own.
  const trigger =
    type === 'DELETED'
      ? { ...object, metadata: { ...object.metadata, resourceVersion: `${rvOf(object) ?? ''}-deleted` } }
      : object;
  return fanOut(trigger, BLOCKER_REASONS.natGwConfigChanged, targets);
}
