/**
 * What an EIP's uid holds in IPAM, read from where the EIP records it rather than from an index alone (ADR 0085).
 * An allocation is made durable at a place the EIP already names before the claim: spec.v4ip for a requested
 * address (the user's own write), else the home its claims go to — the `eip-lambdas.io/ipam-home` annotation
 * written with the finalizer, or the adapter's default for the uid (ADR 0026, ADR 0043). After the add, spec.v4ip,
 * status.ip and the labels name the address and its subnet. Every lookup of an owner's allocations — finalize, the
 * delete safety net, maintain, reset, adoption, the gateway pods' reservations — goes through here, so a lagging or
 * damaged owner index (DynamoDB's global secondary index) can hide nothing an EIP records.
 */
import { IPAM_HOME_ANNOTATION, poolsOf } from '../domain/addressing.js';
import { PermanentError } from '../domain/errors.js';
import { externalNetworkOf, type IptablesEip, Label } from '../domain/kube-ovn.js';
import type { Allocation, Deps, OwnerRecord, Pool } from '../ports.js';
import { validName } from './prelude.js';

/** What the lookup reads of an EIP: the object, or the delete event's last snapshot of it. */
export interface RecordedEip {
  metadata?: {
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: Partial<IptablesEip['spec']>;
  status?: IptablesEip['status'];
}

/** The subnets an EIP names (its label, where the address was allocated, first; then its spec's). */
export function subnetsOf(eip: RecordedEip): string[] {
  const names = [
    validName(eip.metadata?.labels?.[Label.subnet]),
    validName(externalNetworkOf({ spec: eip.spec ?? {} })),
  ];
  return [...new Set(names.filter((n): n is string => !!n))];
}

/** The addresses an EIP names: status.ip, spec.v4ip and v6ip, the eip_v4_ip label. */
export function addressesOf(eip: RecordedEip): string[] {
  const all = [eip.status?.ip, eip.spec?.v4ip, eip.spec?.v6ip, eip.metadata?.labels?.[Label.eipV4Ip]];
  return [...new Set(all.filter((a): a is string => !!a))];
}

/**
 * The places an EIP's allocations can be, for Ipam.findByOwner: each subnet it names with the addresses it names,
 * and that subnet's pools (read here; a subnet that is gone or unusable is looked up by address only).
 */
export async function ownerRecords(deps: Pick<Deps, 'cluster'>, eip: RecordedEip): Promise<OwnerRecord[]> {
  const addresses = addressesOf(eip);
  const home = eip.metadata?.annotations?.[IPAM_HOME_ANNOTATION];
  const out: OwnerRecord[] = [];
  for (const subnet of subnetsOf(eip)) {
    const pools = await poolsNamed(deps, subnet);
    out.push({ subnet, addresses, ...(pools.length && { pools }), ...(home && { home }) });
  }
  return out;
}

/** Every allocation the EIP's uid holds, found through what the EIP records as well as through the index. */
export async function heldBy(deps: Pick<Deps, 'cluster' | 'ipam'>, eip: RecordedEip): Promise<Allocation[]> {
  const uid = eip.metadata?.uid;
  if (!uid) return [];
  return deps.ipam.findByOwner(uid, await ownerRecords(deps, eip));
}

async function poolsNamed(deps: Pick<Deps, 'cluster'>, name: string): Promise<Pool[]> {
  const subnet = await deps.cluster.getSubnet(name);
  if (!subnet) return [];
  try {
    return poolsOf(subnet);
  } catch (e) {
    if (e instanceof PermanentError) return [];
    throw e;
  }
}
