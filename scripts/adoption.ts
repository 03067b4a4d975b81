/**
 * Adoption: on a cluster where kube-ovn's own controller already configured IptablesEIPs, import them into this
 * product's IPAM so that the handlers take them over without touching any gateway (docs/adr/0031).
 *
 * For every EIP kube-ovn made Ready (status.ready and status.ip, not terminating):
 *   1. claim its address for its uid, in its external subnet, exactly as it is — also outside a dedicated EIP range
 *      (kube-ovn allocated it from its own pool before the range existed); an address another owner holds is a
 *      conflict, reported and never taken over;
 *   2. record the placement (gateway = spec.natGwDp, prefix = the subnet's), which is what the handlers trust for
 *      re-add, refusal and clean-up;
 *   3. stamp status.redo with this product's token for the gateway pod, so that the first update does not read a
 *      foreign token as "the gateway restarted" and re-run eip-add. Only when the pod is Running and its container
 *      never restarted: kube-ovn does not redo after a container restart, so then the address may really be gone,
 *      and the first update re-adding it is a repair, not noise.
 * Gateway pods' own addresses on those subnets are reserved for the pods, as the garbage collector does.
 * Nothing here runs nat-gateway.sh. Every step is idempotent: adopting twice changes nothing the second time.
 */

import { addressesOf } from '../shared/core/held.js';
import { type PodReservation, reservePodAddresses } from '../shared/core/pod-addresses.js';
import { redoToken } from '../shared/core/view.js';
import { parseAddress, poolsOf, prefixLength, staticAddressProblem } from '../shared/domain/addressing.js';
import { AddressConflictError, LeaseHeldError, PermanentError } from '../shared/domain/errors.js';
import { gatewayApp } from '../shared/domain/gateway-pod.js';
import { externalNetworkOf, type IptablesEip } from '../shared/domain/kube-ovn.js';
import { LEASE_MAX_MS, leaseKey } from '../shared/domain/lease.js';
import type { Deps, GatewayPod, Pool } from '../shared/ports.js';

/**
 * Whether adoption may stamp this product's redo token on the EIP, i.e. whether kube-ovn configured the address on
 * the gateway's current container. kube-ovn writes status.redo only when it re-initialises a re-created gateway pod,
 * and then writes that pod's creation time (second resolution, no zone, the controller's local time — UTC on the
 * usual images). So an empty token, or the current pod's creation time, means the address was put on this pod; any
 * other token means the pod may have been re-created since, and a container restart is never redone by kube-ovn.
 * In those cases the token is left alone and the first update re-adds the address: a repair, not noise.
 */
export function redoDecision(
  eip: IptablesEip,
  pod: GatewayPod | undefined,
  gateway: string,
): { redo?: string; reason?: string } {
  if (pod?.phase !== 'Running' || pod.container?.ready === false)
    return {
      reason: `gateway pod of ${gateway} is not running: the first update after it runs re-adds the address`,
    };
  const token = redoToken(pod);
  const current = eip.status?.redo ?? '';
  if (current === token) return { redo: token };
  if ((pod.container?.restartCount ?? 0) > 0)
    return {
      reason: `the gateway container restarted ${pod.container!.restartCount} time(s), which kube-ovn does not redo: the first update re-adds the address`,
    };
  const created = new Date(pod.creationTimestamp).toISOString().slice(0, 19);
  if (current !== '' && current !== created)
    return {
      reason: `status.redo "${current}" is not the gateway pod's creation time ${created}: the pod may have been re-created since the address was configured; the first update re-adds it`,
    };
  return { redo: token };
}

export type AdoptStatus =
  /** Imported (or, in a dry run, would be). */
  | 'adopted'
  /** IPAM already holds this address for this uid (adopted before, or configured by this product). */
  | 'already'
  /** Not something to adopt: not Ready, terminating, no address; the handlers deal with it as usual. */
  | 'skipped'
  /** The address is held by someone else in IPAM: left alone, needs a person. */
  | 'conflict'
  /** Could not be adopted now (subnet missing, address unusable, lease held): re-run after fixing. */
  | 'failed';

export interface EipAdoption {
  eip: string;
  status: AdoptStatus;
  address?: string;
  subnet?: string;
  gateway?: string;
  prefix?: number;
  /** The redo token written (or that would be), when one is. */
  redo?: string;
  /** Why skipped, failed, in conflict, or why the redo token was left alone. */
  reason?: string;
}

export interface AdoptReport {
  dryRun: boolean;
  eips: EipAdoption[];
  gatewayPods: PodReservation[];
  counts: Record<AdoptStatus, number>;
}

export type AdoptDeps = Pick<Deps, 'cluster' | 'ipam' | 'leases' | 'clock' | 'log' | 'newId'>;

/** The pool an existing address is recorded in: the subnet as it is, without the dedicated range or excludeIps. */
function adoptionPool(pool: Pool): Pool {
  const { only: _only, ...rest } = pool;
  return { ...rest, exclude: [] };
}

export async function adoptEips(
  deps: AdoptDeps,
  options: { dryRun?: boolean; onProgress?: (a: EipAdoption) => void } = {},
): Promise<AdoptReport> {
  const dryRun = !!options.dryRun;
  const [eips, pods] = await Promise.all([deps.cluster.listEips(), deps.cluster.listGatewayPods()]);
  const pools = new Map<string, Pool | PermanentError | undefined>();
  const v4PoolOf = async (subnet: string): Promise<Pool | PermanentError | undefined> => {
    if (!pools.has(subnet)) {
      const s = await deps.cluster.getSubnet(subnet);
      try {
        pools.set(subnet, s ? poolsOf(s).find((p) => p.family === 4) : undefined);
      } catch (e) {
        if (!(e instanceof PermanentError)) throw e;
        pools.set(subnet, e);
      }
    }
    return pools.get(subnet);
  };

  // Two EIPs with one address cannot both be adopted: neither is, and both are reported.
  const byAddress = new Map<string, string[]>();
  for (const e of eips)
    if (e.status?.ready && e.status.ip) {
      const k = `${externalNetworkOf(e)}|${e.status.ip}`;
      byAddress.set(k, [...(byAddress.get(k) ?? []), e.metadata.name]);
    }

  const results: EipAdoption[] = [];
  for (const eip of [...eips].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))) {
    const r = await adoptOne(deps, eip, pods, v4PoolOf, byAddress, dryRun);
    results.push(r);
    options.onProgress?.(r);
  }

  // Gateway pods' own addresses on the subnets seen: reserved for the pods (owner pod:<uid>), as the garbage
  // collector does (ADR 0042).
  const v4Pools = [...pools.keys()]
    .sort()
    .map((subnet) => pools.get(subnet))
    .filter((p): p is Pool => !!p && !(p instanceof PermanentError));
  const gatewayPods = await reservePodAddresses(deps, pods, v4Pools, { dryRun });

  const counts: Record<AdoptStatus, number> = { adopted: 0, already: 0, skipped: 0, conflict: 0, failed: 0 };
  for (const r of results) counts[r.status]++;
  deps.log.info('adoption', { dryRun, ...counts, gatewayPods: gatewayPods.length });
  return { dryRun, eips: results, gatewayPods, counts };
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: one EIP's adoption steps in the order ADR 0031 gives them, pinned by test/integration/adopt.test.ts; a command-line tool, not shipped
async function adoptOne(
  deps: AdoptDeps,
  eip: IptablesEip,
  pods: readonly GatewayPod[],
  v4PoolOf: (subnet: string) => Promise<Pool | PermanentError | undefined>,
  byAddress: Map<string, string[]>,
  dryRun: boolean,
): Promise<EipAdoption> {
  const name = eip.metadata.name;
  const ip = eip.status?.ip;
  const skip = (reason: string): EipAdoption => ({ eip: name, status: 'skipped', reason });
  if (eip.metadata.deletionTimestamp) return skip('terminating: the deletion path handles it');
  if (!ip) return skip('no status.ip: not configured yet; the add handler provisions it');
  if (!eip.status?.ready)
    return skip('status.ready is false (a redo is pending): the update handler adopts it and redoes it');
  const gateway = eip.spec.natGwDp;
  if (!gateway) return skip('spec.natGwDp is empty: the handlers reject it');
  const subnet = externalNetworkOf(eip);
  const base = { eip: name, address: ip, subnet, gateway };
  const fail = (reason: string): EipAdoption => ({ ...base, status: 'failed', reason });
  if (parseAddress(ip)?.family !== 4) return fail(`status.ip "${ip}" is not an IPv4 address`);
  const twins = byAddress.get(`${subnet}|${ip}`) ?? [];
  if (twins.length > 1)
    return {
      ...base,
      status: 'conflict',
      reason: `${ip} is the status.ip of several EIPs (${twins.join(', ')}); fix them by hand first`,
    };
  const pool = await v4PoolOf(subnet);
  if (!pool) return fail(`subnet ${subnet} not found, or it has no IPv4 CIDR`);
  if (pool instanceof PermanentError) return fail(pool.message);
  const problem = staticAddressProblem(adoptionPool(pool), ip);
  if (problem) return fail(problem);
  const prefix = prefixLength(pool);
  const placement = { gateway, prefix };

  const pod = pods.find((p) => p.app === gatewayApp(gateway));
  const { redo, reason: redoReason } = redoDecision(eip, pod, gateway);
  const withRedo = { ...(redo && { redo }), ...(redoReason && { reason: redoReason }) };

  const owner = { uid: eip.metadata.uid, name };
  // What the uid holds, read where the EIP records it, not through the owner index alone (ADR 0085). status.ip is
  // adopted only for an EIP that holds no address: one edited by hand is put back by the handlers (ADR 0086).
  const all = await deps.ipam.findByOwner(owner.uid, [
    { subnet, addresses: addressesOf(eip), pools: [pool] },
  ]);
  const held = all.find((a) => a.subnet === subnet && a.address === ip);
  const other = all.find((a) => a.family === 4 && a !== held);
  if (!held && other)
    return skip(
      `this EIP holds ${other.address} in ${other.subnet} already: status.ip ${ip} is not adopted (the update handler puts status.ip back)`,
    );
  if (dryRun)
    return held
      ? { ...base, prefix, status: 'already', ...withRedo }
      : { ...base, prefix, status: 'adopted', ...withRedo };

  let lease: Awaited<ReturnType<AdoptDeps['leases']['acquire']>>;
  try {
    lease = await deps.leases.acquire(leaseKey(name), deps.newId(), deps.clock.now() + LEASE_MAX_MS);
  } catch (e) {
    if (e instanceof LeaseHeldError) return fail('a handler holds its lease right now; run adopt again');
    throw e;
  }
  try {
    if (!held) {
      try {
        await deps.ipam.claimAddress(adoptionPool(pool), ip, owner);
      } catch (e) {
        if (e instanceof AddressConflictError) return { ...base, status: 'conflict', reason: e.message };
        throw e;
      }
    }
    if (!held?.placement) await deps.ipam.place(subnet, ip, owner.uid, placement);
    if (redo && eip.status?.redo !== redo) await deps.cluster.patchEipStatus(name, { redo });
    if (!held)
      await deps.cluster.emitEvent(eip, {
        type: 'Normal',
        reason: 'Adopted',
        message: `${ip} on gateway ${gateway} imported into eip-lambdas' IPAM; the gateway was not changed`,
      });
    return { ...base, prefix, status: held ? 'already' : 'adopted', ...withRedo };
  } finally {
    await deps.leases.release(lease).catch(() => {});
  }
}
