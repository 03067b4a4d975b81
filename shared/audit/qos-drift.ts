/**
 * The QoS part of the drift model (shared/audit/model.ts): an address's tc QoS on its gateway against the policy its
 * allocation records as applied, direction by direction; and which directions a set of filters covers. Pure.
 */
import type { IptablesEip } from '../domain/kube-ovn.js';
import { type GatewayState, onPod, type QosFilter } from './inspect.js';
import type { AuditSnapshot, Drift, QosRules } from './model.js';

/**
 * An EIP's filters on one pod of its gateway against `policyName` ('' none): missing, wrong-rate or unexplained
 * filters, each finding naming the pod.
 */
export function qosDrift(
  eip: IptablesEip,
  ip: string,
  state: Pick<GatewayState, 'gateway' | 'pod' | 'podUid' | 'filters'>,
  policies: AuditSnapshot['qos'],
  policyName: string,
): Drift[] {
  const name = eip.metadata.name;
  const filters = state.filters;
  const gw = `${state.gateway} (pod ${state.pod})`;
  const base = onPod(eip, ip, state);
  const mineF = filters.filter((f) => f.ip === ip);
  if (!policyName) {
    return mineF.length
      ? [
          {
            kind: 'qos-drift',
            message: `EIP ${name} has no QoS policy, but gateway ${gw} polices ${ip} (${mineF.map((f) => f.direction).join(', ')})`,
            ...base,
            repair: 'strip-qos',
            directions: directionsOf(mineF),
            policy: '',
          },
        ]
      : [];
  }
  if (!(policyName in policies)) return [];
  const policy = policies[policyName];
  if (!policy) return []; // missing or invalid: the core reports it on the EIP
  const judged = { name, policyName, gw, ip, base };
  return (['ingress', 'egress'] as const).flatMap((direction) =>
    directionDrift(
      judged,
      direction,
      // The script keeps one filter per address and direction; the last rule applied (name order) wins.
      policy.rules.filter((r) => r.direction === direction).at(-1),
      mineF.filter((f) => f.direction === direction),
    ),
  );
}

/** One direction of an EIP's QoS: the policy's rule (if any) against the filters the gateway has. */
function directionDrift(
  j: {
    name: string;
    policyName: string;
    gw: string;
    ip: string;
    base: { eip: string; uid: string; gateway: string; pod: string; podUid: string; address: string };
  },
  direction: 'ingress' | 'egress',
  rule: QosRules['rules'][number] | undefined,
  have: readonly QosFilter[],
): Drift[] {
  const { name, policyName, gw, ip, base } = j;
  if (rule && have.length === 0)
    return [
      {
        kind: 'qos-drift',
        message: `EIP ${name}: the ${direction} limit of policy ${policyName} (${rule.rateMax} Mbit) is not on gateway ${gw}`,
        ...base,
        repair: 'redo',
      },
    ];
  if (!rule)
    return have.length > 0
      ? [
          {
            kind: 'qos-drift',
            message: `EIP ${name}: gateway ${gw} polices ${direction} traffic of ${ip} but policy ${policyName} has no ${direction} rule`,
            ...base,
            repair: 'strip-qos',
            directions: [direction],
            policy: policyName,
          },
        ]
      : [];
  const wantBps = Number(rule.rateMax) * 1e6;
  const bad = have.find(
    (f) => f.rateBps === undefined || Math.abs(f.rateBps - wantBps) > Math.max(8, wantBps / 1000),
  );
  if (!bad) return [];
  return [
    {
      kind: 'qos-drift',
      message: `EIP ${name}: ${direction} rate on gateway ${gw} is ${bad.rate ?? 'unknown'}, policy ${policyName} says ${rule.rateMax} Mbit`,
      ...base,
      repair: 'redo',
    },
  ];
}

/** The directions `filters` police, in the usual order. */
export function directionsOf(filters: readonly QosFilter[]): ('ingress' | 'egress')[] {
  return (['ingress', 'egress'] as const).filter((d) => filters.some((f) => f.direction === d));
}
