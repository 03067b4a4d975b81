/**
 * How a placement is stored on a held address item (README.md next to this file): `placedGateway` (S),
 * `placedPrefix` (N) and `placedQos` — the QoS policy the gateway polices the address with, S for a policy, NULL for
 * none (DynamoDB local and dynalite refuse an empty string), absent when not recorded (ADR 0086). Shared by the IPAM
 * adapter, which writes them, and the audit's store, which reads them.
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { Placement } from '../../ports.js';

type Item = Record<string, AttributeValue>;

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
  };
}

/** The placement an item records, if any. */
export function placementOfItem(it: Item): Placement | undefined {
  if (!it.placedGateway?.S || !it.placedPrefix?.N) return undefined;
  const q = it.placedQos;
  const qos = q?.S !== undefined ? q.S : q?.NULL ? '' : undefined;
  return {
    gateway: it.placedGateway.S,
    prefix: Number(it.placedPrefix.N),
    ...(qos !== undefined && { qos }),
  };
}
