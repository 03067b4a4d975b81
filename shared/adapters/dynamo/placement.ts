/**
 * How a placement is stored on a held address item (README.md next to this file): `placedGateway` (S),
 * `placedPrefix` (N) and `placedQos` — the QoS policy the gateway polices the address with, S for a policy, NULL for
 * none (DynamoDB local and dynalite refuse an empty string), absent when not recorded (ADR 0086); `placedNamespace`
 * (S) and `placedPods` (M: pod uid → M `{ n: S name, t: S redo token }`), the pods that carry the address on a
 * replicated gateway (docs/adr/0105-ha-gateways.md), absent when not recorded. Shared by the IPAM adapter, which
 * writes them, and the audit's store, which reads them.
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { PlacedPod, Placement } from '../../ports.js';

type Item = Record<string, AttributeValue>;

/** Every attribute a placement may have: what a release or a hand-over removes, what a placement write names. */
export const PLACEMENT_ATTRIBUTES = [
  'placedGateway',
  'placedPrefix',
  'placedQos',
  'placedNamespace',
  'placedPods',
] as const;

/** `#placedGateway, …`: the placement's attributes in an update expression, as `names()` maps them. */
export const PLACEMENT_REFS = PLACEMENT_ATTRIBUTES.map((a) => `#${a}`).join(', ');

/** How `placedQos` stores a policy name ('' for none). */
export function qosValue(qos: string): AttributeValue {
  return qos ? { S: qos } : { NULL: true };
}

/** A placement's attributes (none for no placement; no `placedQos` when the policy is not recorded). */
export function placementAttributes(p: Placement | undefined): Item {
  if (!p) return {};
  return {
    placedGateway: { S: p.gateway },
    placedPrefix: { N: String(p.prefix) },
    ...(p.qos !== undefined && { placedQos: qosValue(p.qos) }),
    ...(p.namespace !== undefined && { placedNamespace: { S: p.namespace } }),
    ...(p.pods !== undefined && { placedPods: podsValue(p.pods) }),
  };
}

/** What a claim records of a placement: all but `pods` (a claim precedes every exec, ADR 0041). */
export function claimedPlacement(p: Placement | undefined): Placement | undefined {
  if (!p?.pods) return p;
  const { gateway, prefix, qos, namespace } = p;
  return {
    gateway,
    prefix,
    ...(qos !== undefined && { qos }),
    ...(namespace !== undefined && { namespace }),
  };
}

/** How `placedPods` stores the pods that carry an address. */
export function podsValue(pods: Record<string, PlacedPod>): AttributeValue {
  return {
    M: Object.fromEntries(
      Object.entries(pods).map(([uid, p]) => [uid, { M: { n: { S: p.name }, t: { S: p.token } } }]),
    ),
  };
}

function podsOf(v: AttributeValue | undefined): Record<string, PlacedPod> | undefined {
  if (!v?.M) return undefined;
  const out: Record<string, PlacedPod> = {};
  for (const [uid, e] of Object.entries(v.M)) {
    const name = e.M?.n?.S;
    const token = e.M?.t?.S;
    if (name !== undefined && token !== undefined) out[uid] = { name, token };
  }
  return out;
}

/** The placement an item records, if any. */
export function placementOfItem(it: Item): Placement | undefined {
  if (!it.placedGateway?.S || !it.placedPrefix?.N) return undefined;
  const q = it.placedQos;
  const qos = q?.S !== undefined ? q.S : q?.NULL ? '' : undefined;
  const namespace = it.placedNamespace?.S;
  const pods = podsOf(it.placedPods);
  return {
    gateway: it.placedGateway.S,
    prefix: Number(it.placedPrefix.N),
    ...(qos !== undefined && { qos }),
    ...(namespace !== undefined && { namespace }),
    ...(pods !== undefined && { pods }),
  };
}
