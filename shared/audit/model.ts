/**
 * The drift model: what DynamoDB holds (allocations, leases), what the IptablesEIPs say (status, labels) and what
 * each NAT gateway has configured (the external interface's addresses, tc QoS, 1.16+'s hairpin SNAT rules), compared. Pure: a snapshot in, findings out.
 * Kinds and their meaning: docs/audit.md; decisions: docs/adr/0038-drift-model.md.
 */
import { desiredLabels, labelChanges } from '../core/view.js';
import { formatAddress, parseAddress } from '../domain/addressing.js';
import { externalNetworkOf, type GatewayPod, type IptablesEip, Label } from '../domain/kube-ovn.js';
import type { Allocation, Lease, Pool } from '../ports.js';
import { addressDrift, gatewayOfAllocation, type Place } from './address-drift.js';
import { type GatewayState, onPod } from './inspect.js';
import { scopeKey, scopeOf } from './pods.js';
import { directionsOf, qosDrift } from './qos-drift.js';

export { gatewayOfAllocation };

export const DRIFT_KINDS = [
  'leaked-allocation',
  'orphan-address',
  'missing-address',
  'duplicate-address',
  'misplaced-address',
  'status-mismatch',
  'label-mismatch',
  'stale-lease',
  'qos-drift',
  'missing-hairpin',
  'gateway-unreadable',
] as const;
export type DriftKind = (typeof DRIFT_KINDS)[number];

/** What each kind means, in one sentence (printed by `npm run audit`, expanded in docs/audit.md). */
export const MEANING: Record<DriftKind, string> = {
  'leaked-allocation':
    'an address is allocated in DynamoDB to an owner (EIP uid or gateway pod) that no longer exists',
  'orphan-address': 'an address is configured on a gateway net1 but no allocation claims it',
  'missing-address': 'an EIP says Ready and holds its allocation, but its address is not on its gateway net1',
  'duplicate-address': 'the same address is configured on the net1 of more than one gateway',
  'misplaced-address': 'an allocated address is configured on a gateway other than the one its EIP uses',
  'status-mismatch': "an EIP's status disagrees with its allocation (status.ip, status.qosPolicy, ready)",
  'label-mismatch': "an EIP's labels disagree with its allocation (subnet, gateway, address, QoS policy)",
  'stale-lease':
    'a per-EIP or gateway pod lease is still stored past its expiry (its holder never gave it back)',
  'qos-drift':
    "an address's tc QoS (police filters, or HTB classes on kube-ovn 1.16+) differs from its EIP's QoS policy",
  'missing-hairpin':
    "kube-ovn 1.16+: a Ready EIP's address is on its gateway, but the gateway's HAIRPIN_SNAT chain has no rule for it",
  'gateway-unreadable': 'a gateway could not be inspected, so its drift is unknown',
};

/**
 * What a repair does about a finding (docs/adr/0039-drift-repair.md):
 * - `redo`: the core's update runs for the EIP as after a gateway restart (eip-add, then its QoS, then status);
 * - `resync`: the core's update runs for the EIP (adopts an allocation, rewrites labels and status);
 * - `restore-status`: the core's update puts status.ip back to the one address the EIP holds (ADR 0086);
 * - `remove-orphan`: eip-del and the QoS deletions for the address, only after the grace period;
 * - `release`: the garbage collector (shared/core/gc.ts) judges and releases the allocation;
 * - `delete-lease`: the expired lease item is deleted, only if it is still the one that was read;
 * - `strip-qos`: tc filters put on by hand — for an address whose policy has none in that direction, or held by
 *   nobody — are deleted (eip-<direction>-qos-del), under the EIP's lease and only while it still has that policy;
 * - undefined: reported only.
 */
export type RepairKind =
  | 'redo'
  | 'resync'
  | 'restore-status'
  | 'remove-orphan'
  | 'release'
  | 'delete-lease'
  | 'strip-qos';

export interface Drift {
  kind: DriftKind;
  /** One line a person can act on. */
  message: string;
  eip?: string;
  uid?: string;
  gateway?: string;
  /** The gateway pod the finding is about (`<namespace>/<name>`) and its uid: each replica is judged alone. */
  pod?: string;
  podUid?: string;
  address?: string;
  /** For an address on a gateway: the prefix length it carries there. */
  prefix?: number;
  subnet?: string;
  repair?: RepairKind;
  /** For restore-status: the address the EIP's allocation holds. */
  allocated?: string;
  /** For stale-lease: the lease as read. */
  lease?: Lease;
  /** For strip-qos: the directions to delete, and the policy the address had applied when judged ('' none). */
  directions?: ('ingress' | 'egress')[];
  policy?: string;
}

/** An allocation as the audit reads it: with the time it was claimed, when the table says. */
export interface AuditAllocation extends Allocation {
  claimedAt?: number;
}

/** A QoS policy's rules as the audit compares them (rates in Mbit, as written in the policy). */
export interface QosRules {
  rules: { direction: 'ingress' | 'egress'; rateMax: string; priority: number }[];
}

export interface AuditSnapshot {
  /** Epoch ms the snapshot is judged at. */
  now: number;
  pods: GatewayPod[];
  /** Gateway pods read, one state each (read first: anything on net1 then was allocated before the table was read). */
  gateways: GatewayState[];
  /** Gateway pods found (not terminating) that could not be read, with why. */
  unreadable: { gateway: string; pod?: string; podUid?: string; scope?: string; error: string }[];
  /** Each gateway's `spec.namespace` ('' none), for the namespace kube-ovn looks for an EIP's pods in. */
  gatewayNamespaces?: Record<string, string>;
  /** KUBE_OVN_RELEASE, when known (a release before master ignores spec.namespace). */
  release?: string;
  eips: IptablesEip[];
  allocations: AuditAllocation[];
  leases: Lease[];
  /** QoS policies by name (undefined: missing or invalid; its EIPs' filters are not judged). */
  qos: Record<string, QosRules | undefined>;
  /** Each gateway's external subnets' pools (to tell an address this product may hand out from a foreign one). */
  pools: Record<string, Pool[]>;
}

export interface AuditOptions {
  /** Allocations claimed less than this long ago are in flight and not judged as leaked. Default 120 000 ms. */
  allocationGraceMs?: number;
  /** A lease is stale once this long past its expiry. Default 60 000 ms. */
  leaseSlackMs?: number;
}

const LEASE_PREFIX = 'eip#';

/** What the judgement of one snapshot shares: the snapshot, its indexes, the in-flight EIPs. */
interface Judged {
  s: AuditSnapshot;
  allocationGrace: number;
  eipsByUid: Map<string, IptablesEip>;
  /** Who claims each v4 address. */
  claims: Map<string, AuditAllocation[]>;
  /** The gateway pods' own addresses. */
  own: Set<string>;
  /** Where each v4 global address (not a pod's own) is configured: one place per pod. */
  where: Map<string, Place[]>;
  /** EIPs with a lease in flight: exempt from judgement. */
  busy: Set<string>;
  /** The pods read, by gateway and namespace looked in (scopeKey). */
  statesOf: Map<string, GatewayState[]>;
}

export function findDrift(s: AuditSnapshot, options: AuditOptions = {}): Drift[] {
  const leases = leaseDrift(s, options.leaseSlackMs ?? 60_000);
  const j: Judged = {
    s,
    allocationGrace: options.allocationGraceMs ?? 120_000,
    eipsByUid: new Map(s.eips.map((e) => [e.metadata.uid, e])),
    claims: new Map(),
    own: new Set(s.pods.flatMap((p) => Object.values(p.addresses ?? {}).map(canon))),
    where: new Map(),
    busy: leases.busy,
    statesOf: statesByScope(s.gateways),
  };
  for (const a of s.allocations)
    if (a.family === 4) j.claims.set(a.address, [...(j.claims.get(a.address) ?? []), a]);
  for (const g of s.gateways)
    for (const a of g.addresses) {
      if (a.family !== 4 || a.scope !== 'global' || j.own.has(a.address)) continue;
      const place = { gateway: g.gateway, pod: g.pod, podUid: g.podUid, prefix: a.prefix };
      j.where.set(a.address, [...(j.where.get(a.address) ?? []), place]);
    }
  return [
    ...leases.drift,
    ...leakedAllocations(j),
    ...[...j.where].flatMap(([address, places]) => addressDrift(j, address, places)),
    ...s.eips.flatMap((eip) => eipDrift(j, eip)),
    ...strayFilters(j),
    ...s.unreadable.map(
      (u): Drift => ({
        kind: 'gateway-unreadable',
        message: `gateway ${u.gateway}${u.pod ? ` (pod ${u.pod})` : ''} could not be inspected: ${u.error}`,
        gateway: u.gateway,
        ...(u.pod && { pod: u.pod }),
        ...(u.podUid && { podUid: u.podUid }),
      }),
    ),
  ];
}

/** The pods read, by gateway and the namespace they were looked for in. */
function statesByScope(states: readonly GatewayState[]): Map<string, GatewayState[]> {
  const out = new Map<string, GatewayState[]>();
  for (const g of states) {
    const key = scopeKey(g.gateway, g.scope);
    out.set(key, [...(out.get(key) ?? []), g]);
  }
  return out;
}

/** Leases: in-flight ones exempt their EIP from judgement (`busy`); stale ones are drift. */
function leaseDrift(s: AuditSnapshot, leaseSlack: number): { drift: Drift[]; busy: Set<string> } {
  const busy = new Set<string>();
  const drift: Drift[] = [];
  for (const lease of s.leases) {
    const name = lease.key.startsWith(LEASE_PREFIX) ? lease.key.slice(LEASE_PREFIX.length) : undefined;
    if (lease.expiresAt > s.now) {
      if (name) busy.add(name);
    } else if (lease.expiresAt + leaseSlack <= s.now)
      drift.push({
        kind: 'stale-lease',
        message: `lease ${lease.key} held by ${lease.holder} expired ${ago(s.now - lease.expiresAt)} ago and was never given back`,
        ...(name && { eip: name }),
        lease,
        repair: 'delete-lease',
      });
  }
  return { drift, busy };
}

/** Allocations whose owner (an EIP, or a gateway pod's reservation) is gone, and not possibly in flight. */
function leakedAllocations({ s, eipsByUid, allocationGrace }: Judged): Drift[] {
  const podOwners = new Set(s.pods.map((p) => `pod:${p.uid}`));
  return s.allocations.flatMap((a): Drift[] => {
    const isPod = a.owner.uid.startsWith('pod:');
    const live = isPod ? podOwners.has(a.owner.uid) : eipsByUid.has(a.owner.uid);
    if (live || (a.claimedAt !== undefined && a.claimedAt > s.now - allocationGrace)) return [];
    return [
      {
        kind: 'leaked-allocation',
        message: `${a.address} in ${a.subnet} is allocated to ${a.owner.name || '?'} (uid ${a.owner.uid}), which no longer exists`,
        address: a.address,
        subnet: a.subnet,
        uid: a.owner.uid,
        ...(isPod ? {} : { eip: a.owner.name }),
        repair: 'release',
      },
    ];
  });
}

/** Each EIP against its allocation (status.ip, the label) and its gateway (the address, the QoS filters). */
function eipDrift(j: Judged, eip: IptablesEip): Drift[] {
  const name = eip.metadata.name;
  if (eip.metadata.deletionTimestamp || j.busy.has(name)) return [];
  const held = j.s.allocations.filter((a) => a.owner.uid === eip.metadata.uid && a.family === 4);
  const ip = eip.status?.ip;
  const base = { eip: name, uid: eip.metadata.uid };
  if (!ip)
    return eip.status?.ready === true
      ? [
          {
            kind: 'status-mismatch',
            message: `EIP ${name} says Ready but has no status.ip`,
            ...base,
            repair: 'resync',
          },
        ]
      : [];
  const mine = held.find((a) => a.address === ip);
  const out = [...statusDrift(j, eip, ip, held, mine), ...outputDrift(eip, ip, mine)];
  // Not claimed to be configured (a redo is pending), or claimed for an address it does not hold (above).
  if (eip.status?.ready === true && mine) out.push(...gatewayDrift(j, eip, ip, mine));
  return out;
}

/** status.ip against the EIP's allocations: an address it does not hold, or more than it uses. */
function statusDrift(
  j: Judged,
  eip: IptablesEip,
  ip: string,
  held: readonly AuditAllocation[],
  mine: AuditAllocation | undefined,
): Drift[] {
  const name = eip.metadata.name;
  const base = { eip: name, uid: eip.metadata.uid, address: ip };
  if (!mine) {
    // The allocation is the source of truth: one address held in the EIP's subnet is what status.ip must say.
    const inSubnet = held.filter((a) => a.subnet === externalNetworkOf(eip));
    const allocated = inSubnet.length === 1 ? inSubnet[0]!.address : undefined;
    return [
      {
        kind: 'status-mismatch',
        message: `EIP ${name} has status.ip ${ip}, but that address is not allocated to it${held.length ? ` (it holds ${held.map((a) => a.address).join(', ')})` : ''}`,
        ...base,
        ...(allocated ? { allocated, repair: 'restore-status' as const } : { repair: 'resync' as const }),
      },
    ];
  }
  const settled = j.s.now - j.allocationGrace;
  const extra = held.filter(
    (a) =>
      a.address !== ip && a.subnet === mine.subnet && a.claimedAt !== undefined && a.claimedAt <= settled,
  );
  if (!extra.length) return [];
  return [
    {
      kind: 'status-mismatch',
      message: `EIP ${name} uses ${ip} but also holds ${extra.map((a) => a.address).join(', ')} in ${mine.subnet}`,
      ...base,
    },
  ];
}

/**
 * A Ready EIP against every pod of its gateway that was read, in the namespace kube-ovn looks in for it: its address
 * on each one's external interface (a replica without it is drift even when the others have it), then hairpin and
 * QoS there. A pod that could not be read is not judged (it is reported as unreadable).
 */
function gatewayDrift(j: Judged, eip: IptablesEip, ip: string, mine: AuditAllocation): Drift[] {
  const gw = gatewayOfAllocation(mine, eip);
  if (!gw) return [];
  const scope = scopeOf(eip, { spec: { namespace: j.s.gatewayNamespaces?.[gw] ?? '' } }, j.s.release);
  const states = j.statesOf.get(scopeKey(gw, scope)) ?? [];
  // No pod read: the gateway has none (nothing is configured anywhere; the core reports it) or none is readable.
  return states.flatMap((state): Drift[] => {
    if (state.addresses.some((a) => a.family === 4 && a.address === ip))
      return [
        ...hairpinDrift(eip, ip, gw, state),
        ...qosDrift(eip, ip, state, j.s.qos, appliedQos(eip, mine)),
      ];
    return [
      {
        kind: 'missing-address',
        message: `EIP ${eip.metadata.name} is Ready with ${ip}, but ${ip} is not on gateway ${gw} (pod ${state.pod})`,
        ...onPod(eip, ip, { ...state, gateway: gw }),
        subnet: mine.subnet,
        repair: 'redo',
      },
    ];
  });
}

/** 1.16+ (the nat table was read): a configured address without its hairpin SNAT rule; eip-add adds it again. */
function hairpinDrift(eip: IptablesEip, ip: string, gw: string, state: GatewayState): Drift[] {
  if (!state.hairpin || state.hairpin.some((h) => h.address === ip && h.toSource === ip)) return [];
  return [
    {
      kind: 'missing-hairpin',
      message: `EIP ${eip.metadata.name}: ${ip} is on gateway ${gw} (pod ${state.pod}), but its nat chain HAIRPIN_SNAT has no rule for it (traffic from the VPC to ${ip} comes back asymmetric)`,
      ...onPod(eip, ip, { ...state, gateway: gw }),
      repair: 'redo',
    },
  ];
}

/** Filters for addresses nobody holds and no pod carries (left behind by a removal that stopped halfway), per pod. */
function strayFilters({ s, claims, where, own }: Judged): Drift[] {
  const out: Drift[] = [];
  for (const g of s.gateways) {
    const seen = new Set<string>();
    for (const f of g.filters) {
      if (seen.has(f.ip) || claims.has(f.ip) || where.has(f.ip) || own.has(f.ip)) continue;
      seen.add(f.ip);
      out.push({
        kind: 'qos-drift',
        message: `gateway ${g.gateway} (pod ${g.pod}) has tc filters for ${f.ip}, which is neither allocated nor on net1`,
        gateway: g.gateway,
        pod: g.pod,
        podUid: g.podUid,
        address: f.ip,
        repair: 'strip-qos',
        directions: directionsOf(g.filters.filter((x) => x.ip === f.ip)),
        policy: '',
      });
    }
  }
  return out;
}

/** The QoS policy the gateway should police an address with: as recorded with its allocation, else status's. */
export function appliedQos(eip: IptablesEip, a: Allocation | undefined): string {
  return a?.placement?.qos ?? eip.status?.qosPolicy ?? '';
}

/**
 * An EIP's output against its allocation record (ADR 0086): the four labels, and status.qosPolicy when the record
 * says what is applied. Without an allocation for status.ip, only the address label is judged (against status.ip).
 */
function outputDrift(eip: IptablesEip, ip: string, mine: Allocation | undefined): Drift[] {
  const name = eip.metadata.name;
  const base = { eip: name, uid: eip.metadata.uid, address: ip, repair: 'resync' as const };
  const labels = eip.metadata.labels ?? {};
  const show = (k: string) => `${k}=${labels[k] ?? '(none)'}`;
  if (!mine) {
    const label = labels[Label.eipV4Ip];
    if (label === ip) return [];
    return [
      {
        kind: 'label-mismatch',
        message: `EIP ${name} has label ${show(Label.eipV4Ip)}, status.ip ${ip}`,
        ...base,
      },
    ];
  }
  const out: Drift[] = [];
  const want = desiredLabels({
    subnet: mine.subnet,
    gateway: gatewayOfAllocation(mine, eip) ?? labels[Label.natGwName] ?? '',
    ip,
    qos: appliedQos(eip, mine),
  });
  const differ = Object.keys(labelChanges(labels, want) ?? {});
  if (differ.length)
    out.push({
      kind: 'label-mismatch',
      message: `EIP ${name} has label${differ.length > 1 ? 's' : ''} ${differ.map(show).join(', ')}; its allocation says ${differ.map((k) => `${k}=${want[k] ?? '(none)'}`).join(', ')}`,
      ...base,
    });
  const recorded = mine.placement?.qos;
  if (recorded !== undefined && (eip.status?.qosPolicy ?? '') !== recorded)
    out.push({
      kind: 'status-mismatch',
      message: `EIP ${name} has status.qosPolicy "${eip.status?.qosPolicy ?? ''}", but its allocation records "${recorded}" as applied`,
      ...base,
    });
  return out;
}

function canon(ip: string): string {
  const p = parseAddress(ip.split('/')[0]!.trim());
  return p ? formatAddress(p.family, p.value) : ip;
}

export function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  return `${Math.round(s / 3600)}h`;
}
