/**
 * The drift model: what DynamoDB holds (allocations, leases), what the IptablesEIPs say (status, labels) and what
 * each NAT gateway has configured (net1 addresses, tc filters), compared. Pure: a snapshot in, findings out.
 * Kinds and their meaning: docs/audit.md; decisions: docs/adr/0038-drift-model.md.
 */
import { formatAddress, parseAddress, staticAddressProblem } from '../domain/addressing.js';
import { gatewayOfApp } from '../domain/gateway-pod.js';
import { externalNetworkOf, type GatewayPod, type IptablesEip, Label } from '../domain/kube-ovn.js';
import type { Allocation, Lease, Pool } from '../ports.js';
import type { GatewayState, QosFilter } from './inspect.js';

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
  'status-mismatch': "an EIP's status disagrees with its allocation (status.ip, ready)",
  'label-mismatch': "an EIP's eip_v4_ip label disagrees with its status.ip",
  'stale-lease': 'a per-EIP lease is still stored past its expiry (its holder never gave it back)',
  'qos-drift': "an address's tc police filters differ from its EIP's QoS policy",
  'gateway-unreadable': 'a gateway could not be inspected, so its drift is unknown',
};

/**
 * What a repair does about a finding (docs/adr/0039-drift-repair.md):
 * - `redo`: the core's update runs for the EIP as after a gateway restart (eip-add, then its QoS, then status);
 * - `resync`: the core's update runs for the EIP (adopts an allocation, rewrites labels and status);
 * - `restore-status`: status.ip is set back to the one address the EIP holds, then as `redo`;
 * - `remove-orphan`: eip-del and the QoS deletions for the address, only after the grace period;
 * - `release`: the garbage collector (shared/core/gc.ts) judges and releases the allocation;
 * - `delete-lease`: the expired lease item is deleted, only if it is still the one that was read;
 * - undefined: reported only.
 */
export type RepairKind = 'redo' | 'resync' | 'restore-status' | 'remove-orphan' | 'release' | 'delete-lease';

export interface Drift {
  kind: DriftKind;
  /** One line a person can act on. */
  message: string;
  eip?: string;
  uid?: string;
  gateway?: string;
  address?: string;
  /** For an address on a gateway: the prefix length it carries there. */
  prefix?: number;
  subnet?: string;
  repair?: RepairKind;
  /** For restore-status: the address the EIP's allocation holds. */
  allocated?: string;
  /** For stale-lease: the lease as read. */
  lease?: Lease;
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
  /** Gateways read (read first: anything on net1 then was allocated before the table was read). */
  gateways: GatewayState[];
  /** Gateways that have a pod but could not be read, with why. */
  unreadable: { gateway: string; pod?: string; error: string }[];
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

export const gatewayOfPod = (pod: Pick<GatewayPod, 'app'>): string | undefined => gatewayOfApp(pod.app);

/** The gateway an EIP's address belongs on: where it was recorded as configured, else the EIP's spec. */
export function gatewayOfAllocation(a: Allocation, eip: IptablesEip | undefined): string | undefined {
  return a.placement?.gateway ?? eip?.spec.natGwDp;
}

const LEASE_PREFIX = 'eip#';

export function findDrift(s: AuditSnapshot, options: AuditOptions = {}): Drift[] {
  const allocationGrace = options.allocationGraceMs ?? 120_000;
  const leaseSlack = options.leaseSlackMs ?? 60_000;
  const out: Drift[] = [];
  const eipsByUid = new Map(s.eips.map((e) => [e.metadata.uid, e]));
  const podOwners = new Set(s.pods.map((p) => `pod:${p.uid}`));
  const stateOf = new Map(s.gateways.map((g) => [g.gateway, g]));
  const unreadable = new Set(s.unreadable.map((u) => u.gateway));

  // Leases: in-flight ones exempt their EIP from judgement; stale ones are drift.
  const busy = new Set<string>();
  for (const lease of s.leases) {
    const name = lease.key.startsWith(LEASE_PREFIX) ? lease.key.slice(LEASE_PREFIX.length) : undefined;
    if (lease.expiresAt > s.now) {
      if (name) busy.add(name);
      continue;
    }
    if (lease.expiresAt + leaseSlack <= s.now)
      out.push({
        kind: 'stale-lease',
        message: `lease ${lease.key} held by ${lease.holder} expired ${ago(s.now - lease.expiresAt)} ago and was never given back`,
        ...(name && { eip: name }),
        lease,
        repair: 'delete-lease',
      });
  }

  // Allocations whose owner is gone.
  for (const a of s.allocations) {
    const live = a.owner.uid.startsWith('pod:') ? podOwners.has(a.owner.uid) : eipsByUid.has(a.owner.uid);
    if (live) continue;
    if (a.claimedAt !== undefined && a.claimedAt > s.now - allocationGrace) continue; // possibly in flight
    out.push({
      kind: 'leaked-allocation',
      message: `${a.address} in ${a.subnet} is allocated to ${a.owner.name || '?'} (uid ${a.owner.uid}), which no longer exists`,
      address: a.address,
      subnet: a.subnet,
      uid: a.owner.uid,
      ...(a.owner.uid.startsWith('pod:') ? {} : { eip: a.owner.name }),
      repair: 'release',
    });
  }

  // Who claims each v4 address.
  const claims = new Map<string, AuditAllocation[]>();
  for (const a of s.allocations) {
    if (a.family !== 4) continue;
    claims.set(a.address, [...(claims.get(a.address) ?? []), a]);
  }
  const own = new Set<string>();
  for (const p of s.pods) for (const ip of Object.values(p.addresses ?? {})) own.add(canon(ip));

  // Where each address is configured.
  const where = new Map<string, { gateway: string; prefix: number }[]>();
  for (const g of s.gateways) {
    for (const a of g.addresses) {
      if (a.family !== 4 || a.scope !== 'global' || own.has(a.address)) continue;
      where.set(a.address, [...(where.get(a.address) ?? []), { gateway: g.gateway, prefix: a.prefix }]);
    }
  }

  for (const [address, places] of where) {
    const held = claims.get(address) ?? [];
    const podHeld = held.some((a) => a.owner.uid.startsWith('pod:'));
    if (podHeld) continue; // a gateway pod's own address (reserved for it in IPAM)
    if (places.length > 1) {
      const eipAlloc = held.find((a) => eipsByUid.has(a.owner.uid));
      out.push({
        kind: 'duplicate-address',
        message: `${address} is configured on gateways ${places.map((p) => p.gateway).join(', ')}${eipAlloc ? ` (allocated to ${eipAlloc.owner.name}, which uses ${gatewayOfAllocation(eipAlloc, eipsByUid.get(eipAlloc.owner.uid)) ?? '?'})` : ''}`,
        address,
        ...(eipAlloc && { eip: eipAlloc.owner.name, uid: eipAlloc.owner.uid }),
      });
      continue;
    }
    const place = places[0]!;
    if (held.length === 0) {
      const pool = (s.pools[place.gateway] ?? []).find(
        (p) => p.family === 4 && staticAddressProblem(p, address) === undefined,
      );
      out.push({
        kind: 'orphan-address',
        message: `${address}/${place.prefix} is on gateway ${place.gateway} but no allocation claims it${pool ? '' : ' (outside the range this product allocates from: reported only)'}`,
        gateway: place.gateway,
        address,
        prefix: place.prefix,
        ...(pool && { subnet: pool.subnet, repair: 'remove-orphan' as const }),
      });
      continue;
    }
    for (const a of held) {
      const eip = eipsByUid.get(a.owner.uid);
      if (!eip) continue; // leaked: reported above
      const want = gatewayOfAllocation(a, eip);
      if (want && want !== place.gateway)
        out.push({
          kind: 'misplaced-address',
          message: `${address} (allocated to EIP ${eip.metadata.name}, gateway ${want}) is configured on gateway ${place.gateway}`,
          eip: eip.metadata.name,
          uid: eip.metadata.uid,
          gateway: place.gateway,
          address,
          prefix: place.prefix,
        });
    }
  }

  // Each EIP against its allocation and its gateway.
  for (const eip of s.eips) {
    const name = eip.metadata.name;
    const uid = eip.metadata.uid;
    if (eip.metadata.deletionTimestamp || busy.has(name)) continue;
    const held = s.allocations.filter((a) => a.owner.uid === uid && a.family === 4);
    const ip = eip.status?.ip;
    const base = { eip: name, uid };
    if (!ip) {
      if (eip.status?.ready === true)
        out.push({
          kind: 'status-mismatch',
          message: `EIP ${name} says Ready but has no status.ip`,
          ...base,
          repair: 'resync',
        });
      continue;
    }
    const mine = held.find((a) => a.address === ip);
    if (!mine) {
      // The allocation is the source of truth: one address held in the EIP's subnet is what status.ip must say.
      const inSubnet = held.filter((a) => a.subnet === externalNetworkOf(eip));
      const allocated = inSubnet.length === 1 ? inSubnet[0]!.address : undefined;
      out.push({
        kind: 'status-mismatch',
        message: `EIP ${name} has status.ip ${ip}, but that address is not allocated to it${held.length ? ` (it holds ${held.map((a) => a.address).join(', ')})` : ''}`,
        ...base,
        address: ip,
        ...(allocated ? { allocated, repair: 'restore-status' as const } : { repair: 'resync' as const }),
      });
    } else {
      const extra = held.filter(
        (a) =>
          a.address !== ip &&
          a.subnet === mine.subnet &&
          a.claimedAt !== undefined &&
          a.claimedAt <= s.now - allocationGrace,
      );
      if (extra.length)
        out.push({
          kind: 'status-mismatch',
          message: `EIP ${name} uses ${ip} but also holds ${extra.map((a) => a.address).join(', ')} in ${mine.subnet}`,
          ...base,
          address: ip,
        });
    }
    const label = eip.metadata.labels?.[Label.eipV4Ip];
    if (label !== ip)
      out.push({
        kind: 'label-mismatch',
        message: `EIP ${name} has label ${Label.eipV4Ip}=${label === undefined ? '(none)' : label}, status.ip ${ip}`,
        ...base,
        address: ip,
        repair: 'resync',
      });

    // Not claimed to be configured (a redo is pending), or claimed for an address it does not hold (above).
    if (eip.status?.ready !== true || !mine) continue;
    const gw = gatewayOfAllocation(mine, eip);
    if (!gw || unreadable.has(gw)) continue;
    const state = stateOf.get(gw);
    if (!state) continue; // the gateway has no pod: nothing is configured anywhere; the core reports it
    const present = state.addresses.find((a) => a.family === 4 && a.address === ip);
    if (!present) {
      out.push({
        kind: 'missing-address',
        message: `EIP ${name} is Ready with ${ip}, but ${ip} is not on gateway ${gw} (pod ${state.pod})`,
        ...base,
        gateway: gw,
        address: ip,
        subnet: mine.subnet,
        repair: 'redo',
      });
      continue;
    }
    out.push(...qosDrift(eip, ip, gw, state.filters, s.qos));
  }

  // Filters for addresses nobody holds and no gateway carries (left behind by a removal that stopped halfway).
  for (const g of s.gateways) {
    const seen = new Set<string>();
    for (const f of g.filters) {
      if (seen.has(f.ip) || claims.has(f.ip) || where.has(f.ip) || own.has(f.ip)) continue;
      seen.add(f.ip);
      out.push({
        kind: 'qos-drift',
        message: `gateway ${g.gateway} has tc filters for ${f.ip}, which is neither allocated nor on net1`,
        gateway: g.gateway,
        address: f.ip,
      });
    }
  }

  for (const u of s.unreadable)
    out.push({
      kind: 'gateway-unreadable',
      message: `gateway ${u.gateway}${u.pod ? ` (pod ${u.pod})` : ''} could not be inspected: ${u.error}`,
      gateway: u.gateway,
    });
  return out;
}

function qosDrift(
  eip: IptablesEip,
  ip: string,
  gw: string,
  filters: readonly QosFilter[],
  policies: AuditSnapshot['qos'],
): Drift[] {
  const name = eip.metadata.name;
  const base = { eip: name, uid: eip.metadata.uid, gateway: gw, address: ip };
  const mineF = filters.filter((f) => f.ip === ip);
  const policyName = eip.status?.qosPolicy ?? '';
  if (!policyName) {
    return mineF.length
      ? [
          {
            kind: 'qos-drift',
            message: `EIP ${name} has no QoS policy, but gateway ${gw} polices ${ip} (${mineF.map((f) => f.direction).join(', ')})`,
            ...base,
          },
        ]
      : [];
  }
  if (!(policyName in policies)) return [];
  const policy = policies[policyName];
  if (!policy) return []; // missing or invalid: the core reports it on the EIP
  const out: Drift[] = [];
  for (const direction of ['ingress', 'egress'] as const) {
    const want = policy.rules.filter((r) => r.direction === direction);
    const have = mineF.filter((f) => f.direction === direction);
    // The script keeps one filter per address and direction; the last rule applied (name order) wins.
    const rule = want.at(-1);
    if (rule && have.length === 0) {
      out.push({
        kind: 'qos-drift',
        message: `EIP ${name}: the ${direction} limit of policy ${policyName} (${rule.rateMax} Mbit) is not on gateway ${gw}`,
        ...base,
        repair: 'redo',
      });
    } else if (!rule && have.length > 0) {
      out.push({
        kind: 'qos-drift',
        message: `EIP ${name}: gateway ${gw} polices ${direction} traffic of ${ip} but policy ${policyName} has no ${direction} rule`,
        ...base,
      });
    } else if (rule) {
      const wantBps = Number(rule.rateMax) * 1e6;
      const bad = have.find(
        (f) => f.rateBps === undefined || Math.abs(f.rateBps - wantBps) > Math.max(8, wantBps / 1000),
      );
      if (bad)
        out.push({
          kind: 'qos-drift',
          message: `EIP ${name}: ${direction} rate on gateway ${gw} is ${bad.rate ?? 'unknown'}, policy ${policyName} says ${rule.rateMax} Mbit`,
          ...base,
          repair: 'redo',
        });
    }
  }
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
