/**
 * The nat-gateway.sh calls the product sends, per release dialect: eip-add and eip-del, and EIP QoS added, changed
 * and removed in both directions. Every call is checked by natGatewayCall (shared/domain/nat-gateway.ts).
 */
import type { QoSDirection } from '../kube-ovn.js';
import { type NatGwCall, natGatewayCall } from '../nat-gateway.js';
import type { Dialect } from './dialects.js';

export const DIRECTIONS: readonly QoSDirection[] = ['ingress', 'egress'];

/** An address as the gateway configures it: the EIP, its external subnet's prefix length and gateway. */
export interface EipOnGateway {
  address: string;
  prefix: number;
  /** The external subnet's gateway; only kube-ovn 1.12 takes it (it sets the default route on every add). */
  gateway?: string;
}

/** One rule of a QoS policy, as the core has validated it. */
export interface QosRuleValues {
  direction: QoSDirection;
  priority: number;
  rateMax: string;
  burstMax: string;
}

export function eipAdd(d: Dialect, eip: EipOnGateway): NatGwCall {
  const cidr = `${eip.address}/${eip.prefix}`;
  if (d.eipAdd === 'address') return natGatewayCall('eip-add', [cidr], { eipAdd: 'address' });
  // Without a gateway the check refuses the call, naming the form this release needs.
  const arg = eip.gateway ? `${cidr},${eip.gateway}` : cidr;
  return natGatewayCall('eip-add', [arg], { eipAdd: 'address-and-gateway' });
}

/** eip-del takes `<ip>/<len>` on every release (the script deletes what it finds on the external interface). */
export function eipDel(_d: Dialect, eip: Pick<EipOnGateway, 'address' | 'prefix'>): NatGwCall {
  return natGatewayCall('eip-del', [`${eip.address}/${eip.prefix}`]);
}

/** QoS arguments are the same on every release: `<ip>,<priority>,<rate Mbit/s>,<burst MiB>`, and `<ip>` to delete. */
export function qosAdd(_d: Dialect, ip: string, rule: QosRuleValues): NatGwCall {
  return natGatewayCall(`eip-${rule.direction}-qos-add`, [
    `${ip},${rule.priority},${rule.rateMax},${rule.burstMax}`,
  ]);
}

export function qosDel(_d: Dialect, ip: string, direction: QoSDirection): NatGwCall {
  return natGatewayCall(`eip-${direction}-qos-del`, [ip]);
}

/**
 * The rule that ends up on the gateway per direction: the script keeps one filter (or class) per address and
 * direction and each add replaces it, so of a policy's rules (in name order, as kube-ovn applies them) the last one
 * of each direction is what a full run would leave. Sending only those gives the same result with fewer execs.
 */
export function effectiveRules(rules: readonly QosRuleValues[]): QosRuleValues[] {
  const last = new Map<QoSDirection, QosRuleValues>();
  for (const r of rules) last.set(r.direction, r);
  return DIRECTIONS.flatMap((d) => (last.has(d) ? [last.get(d)!] : []));
}

/** Installs a policy's rules for `ip` where none were (a new address, or after the gateway lost its state). */
export function qosApply(d: Dialect, ip: string, rules: readonly QosRuleValues[]): NatGwCall[] {
  return effectiveRules(rules).map((r) => qosAdd(d, ip, r));
}

/** Removes `ip`'s QoS in the given directions (both by default: nothing is left for a reused address). */
export function qosRemove(
  d: Dialect,
  ip: string,
  directions: readonly QoSDirection[] = DIRECTIONS,
): NatGwCall[] {
  return DIRECTIONS.filter((x) => directions.includes(x)).map((x) => qosDel(d, ip, x));
}

/**
 * Moves `ip` from what it had to `rules` (a policy swapped, or the policy's rules edited). `before`: the directions
 * the old rules used, or 'unknown' (the old rules are gone, e.g. the policy was edited in place) — then both.
 * `delete-then-add` deletes every old direction, then adds; `re-add` deletes only the directions the new rules do
 * not use and lets the add replace the others (see Dialect.qosChange).
 */
export function qosChange(
  d: Dialect,
  ip: string,
  before: readonly QoSDirection[] | 'unknown',
  rules: readonly QosRuleValues[],
): NatGwCall[] {
  const old = before === 'unknown' ? DIRECTIONS : before;
  const adds = effectiveRules(rules);
  const kept = new Set(adds.map((r) => r.direction));
  const dels = d.qosChange === 're-add' ? old.filter((x) => !kept.has(x)) : old;
  return [...qosRemove(d, ip, dels), ...adds.map((r) => qosAdd(d, ip, r))];
}
