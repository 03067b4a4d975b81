/**
 * The drift of one configured address (shared/audit/model.ts): against who claims it and which gateways' pods carry
 * it. Pure. Kinds: docs/audit.md; decisions: docs/adr/0038-drift-model.md, docs/adr/0120-audit-reads-every-replica.md.
 */
import { staticAddressProblem } from '../domain/addressing.js';
import type { IptablesEip } from '../domain/kube-ovn.js';
import type { Allocation, Pool } from '../ports.js';
import type { AuditAllocation, Drift } from './model.js';

/** One pod that carries an address. */
export interface Place {
  gateway: string;
  pod: string;
  podUid: string;
  prefix: number;
}

/** The gateway an EIP's address belongs on: where it was recorded as configured, else the EIP's spec. */
export function gatewayOfAllocation(a: Allocation, eip: IptablesEip | undefined): string | undefined {
  return a.placement?.gateway ?? eip?.spec.natGwDp;
}

/** What judging an address needs of the snapshot: who claims each address, the EIPs, each gateway's pools. */
interface Claims {
  claims: Map<string, AuditAllocation[]>;
  eipsByUid: Map<string, IptablesEip>;
  s: { pools: Record<string, Pool[]> };
}

/**
 * One configured address against who claims it: on two gateways (its replicas all carry it: not a duplicate),
 * claimed by nobody (an orphan on each pod that has it), or on the wrong gateway.
 */
export function addressDrift(j: Claims, address: string, places: Place[]): Drift[] {
  const held = j.claims.get(address) ?? [];
  if (held.some((a) => a.owner.uid.startsWith('pod:'))) return []; // a gateway pod's own address (reserved in IPAM)
  const gateways = [...new Set(places.map((p) => p.gateway))];
  if (gateways.length > 1) {
    const eipAlloc = held.find((a) => j.eipsByUid.has(a.owner.uid));
    return [
      {
        kind: 'duplicate-address',
        message: `${address} is configured on gateways ${gateways.join(', ')} (pods ${places.map((p) => p.pod).join(', ')})${eipAlloc ? ` (allocated to ${eipAlloc.owner.name}, which uses ${gatewayOfAllocation(eipAlloc, j.eipsByUid.get(eipAlloc.owner.uid)) ?? '?'})` : ''}`,
        address,
        ...(eipAlloc && { eip: eipAlloc.owner.name, uid: eipAlloc.owner.uid }),
      },
    ];
  }
  if (held.length === 0) return places.map((place) => orphan(j, address, place));
  const gateway = gateways[0]!;
  return held.flatMap((a): Drift[] => {
    const eip = j.eipsByUid.get(a.owner.uid);
    const want = eip && gatewayOfAllocation(a, eip); // no EIP: leaked, reported by leakedAllocations
    if (!eip || !want || want === gateway) return [];
    return [
      {
        kind: 'misplaced-address',
        message: `${address} (allocated to EIP ${eip.metadata.name}, gateway ${want}) is configured on gateway ${gateway} (pods ${places.map((p) => p.pod).join(', ')})`,
        eip: eip.metadata.name,
        uid: eip.metadata.uid,
        gateway,
        address,
        prefix: places[0]!.prefix,
      },
    ];
  });
}

/** An address nobody claims, on one pod: removable there when it is in a range this product allocates from. */
function orphan(j: Claims, address: string, place: Place): Drift {
  const pool = (j.s.pools[place.gateway] ?? []).find(
    (p) => p.family === 4 && staticAddressProblem(p, address) === undefined,
  );
  return {
    kind: 'orphan-address',
    message: `${address}/${place.prefix} is on gateway ${place.gateway} (pod ${place.pod}) but no allocation claims it${pool ? '' : ' (outside the range this product allocates from: reported only)'}`,
    gateway: place.gateway,
    pod: place.pod,
    podUid: place.podUid,
    address,
    prefix: place.prefix,
    ...(pool && { subnet: pool.subnet, repair: 'remove-orphan' as const }),
  };
}
