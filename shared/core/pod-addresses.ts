/**
 * The NAT gateway pods' own addresses. kube-ovn gives each gateway pod an address on every external network it is
 * attached to (annotation `<network>.<namespace>.kubernetes.io/ip_address`); this product's IPAM is separate from
 * kube-ovn's, so an EIP must never get one of them
 * (docs/adr/0042-gateway-pod-addresses-excluded-at-claim-reserved-by-gc.md):
 *
 * - the add keeps them out with the pod list it reads anyway: claimAny avoids them, and a static request for one is
 *   refused (`refuseGatewayPodAddress`), with no IPAM request;
 * - the garbage collector and `npm run adopt` record them in the table for the pods (owner `pod:<uid>`,
 *   `reservePodAddresses`), so that the table alone tells the truth to the audit, the dashboard and any allocator.
 */
import { parseAddress, staticAddressProblem } from '../domain/addressing.js';
import { AddressConflictError } from '../domain/errors.js';
import { isPodOwner, podOwner } from '../domain/gateway-pod.js';
import type { Deps, GatewayPod, Pool } from '../ports.js';

/** The gateway pods' own addresses on a network (either family): never handed to an EIP. */
export function podAddressesOn(pods: readonly GatewayPod[], network: string): string[] {
  return pods.flatMap((p) => (p.addresses?.[network] ?? '').split(',').filter((a) => a !== ''));
}

/**
 * Refuses `address` in `pool` when it is a listed gateway pod's own address there, with the conflict the pod's
 * reservation in IPAM gives (the same code, and the pod named as the holder). An address the pool could never hand
 * out (excluded, out of range) is left to the range check, which reports it as such.
 * @throws AddressConflictError
 */
export function refuseGatewayPodAddress(pods: readonly GatewayPod[], pool: Pool, address: string): void {
  if (staticAddressProblem(pool, address)) return;
  const want = parseAddress(address)!.value;
  for (const pod of pods) {
    const own = podAddressesOn([pod], pool.subnet).some((a) => {
      const p = parseAddress(a);
      return p?.family === pool.family && p.value === want;
    });
    if (own)
      throw new AddressConflictError(
        `address ${address} in subnet ${pool.subnet} is already allocated to ${pod.namespace}/${pod.name}`,
        podOwner(pod.uid),
      );
  }
}

export interface PodReservation {
  /** `<namespace>/<name>` of the gateway pod. */
  pod: string;
  subnet: string;
  address: string;
  /**
   * `reserved`: claimed for the pod now (in a dry run: would be); `already`: the pod holds it; `conflict`: someone
   * else (an EIP, or a pod that still exists) holds it — reported, never taken away.
   */
  status: 'reserved' | 'already' | 'conflict';
  /** The owner uid of the predecessor pod whose reservation this pod took over. */
  takenOverFrom?: string;
  reason?: string;
}

/**
 * Claims each gateway pod's own address in each of `pools` for that pod (owner `pod:<uid>`). Idempotent: one
 * Query per pod with an address in the pools, and a write only for what it does not hold yet. A re-created pod takes
 * the address over from its predecessor's reservation (released only if that pod is not among `pods`, and only if
 * it still holds it); an address held by an EIP is a collision made before this product managed the subnet, and is
 * logged and reported rather than taken away. A dry run reads only.
 */
export async function reservePodAddresses(
  deps: Pick<Deps, 'ipam' | 'log'>,
  pods: readonly GatewayPod[],
  pools: readonly Pool[],
  options: { dryRun?: boolean } = {},
): Promise<PodReservation[]> {
  const live = new Set(pods.map((p) => podOwner(p.uid)));
  const out: PodReservation[] = [];
  for (const pod of pods) {
    const wanted = pools.flatMap((pool) => {
      const address = pod.addresses?.[pool.subnet];
      // An address the pool never hands out needs no reservation.
      return address && !staticAddressProblem(pool, address) ? [{ pool, address }] : [];
    });
    if (wanted.length === 0) continue;
    const owner = { uid: podOwner(pod.uid), name: `${pod.namespace}/${pod.name}` };
    // Read where each reservation would be (ADR 0085), as well as through the owner index.
    const held = await deps.ipam.findByOwner(
      owner.uid,
      wanted.map(({ pool, address }) => ({ subnet: pool.subnet, addresses: [address] })),
    );
    for (const { pool, address } of wanted) {
      const base = { pod: owner.name, subnet: pool.subnet, address };
      const value = parseAddress(address)!.value;
      if (held.some((a) => a.subnet === pool.subnet && parseAddress(a.address)?.value === value))
        out.push({ ...base, status: 'already' });
      else if (options.dryRun) out.push({ ...base, status: 'reserved' });
      else out.push({ ...base, ...(await reserve(deps, live, pool, address, owner)) });
    }
  }
  return out;
}

/**
 * Claims `address` for the pod `owner`; an address a gone pod (not in `live`) still holds is taken over from it, one
 * held by anyone else is a conflict, logged and reported.
 */
async function reserve(
  { ipam, log }: Pick<Deps, 'ipam' | 'log'>,
  live: ReadonlySet<string>,
  pool: Pool,
  address: string,
  owner: { uid: string; name: string },
): Promise<Pick<PodReservation, 'status' | 'takenOverFrom' | 'reason'>> {
  try {
    await ipam.claimAddress(pool, address, owner);
    return { status: 'reserved' };
  } catch (e) {
    if (!(e instanceof AddressConflictError)) throw e;
    const predecessor =
      e.holderUid && isPodOwner(e.holderUid) && !live.has(e.holderUid) ? e.holderUid : undefined;
    if (predecessor && (await ipam.release(pool.subnet, address, predecessor))) {
      await ipam.claimAddress(pool, address, owner);
      return { status: 'reserved', takenOverFrom: predecessor };
    }
    log.error('a gateway pod address is allocated to someone else', {
      pod: owner.name,
      address,
      holder: e.holderUid,
    });
    return { status: 'conflict', reason: e.message };
  }
}
