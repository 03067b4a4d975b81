/**
 * Garbage collection of allocations: DynamoDB is durable, so nothing here "heals on restart" the way kube-ovn's
 * in-memory IPAM does. Allocations whose owner no longer exists — an EIP uid, or a gateway pod
 * (`pod:<uid>`, ADR 0006) — are released. The live set is read first; the collector only judges claims older
 * than that read (minus a grace period), and asks again, per candidate, whether the owner is really gone.
 *
 * And it lets go of unshared QoS policy holds whose holder is gone (./holds.ts, ADR 0087).
 *
 * It also keeps the table true about the gateway pods' own addresses: each live pod's address in each pool it looks
 * at is reserved for the pod, a re-created pod taking over its predecessor's reservation (ADR 0042). The add no
 * longer does this: it avoids those addresses from the pod list it reads anyway.
 */
import { poolsOf } from '../domain/addressing.js';
import { isPodOwner, podOwner } from '../domain/gateway-pod.js';
import { externalNetworkOf } from '../domain/kube-ovn.js';
import type { Allocation, Deps, Pool } from '../ports.js';
import { collectHolds, type HoldReport } from './holds.js';
import { type PodReservation, reservePodAddresses } from './pod-addresses.js';

export interface GcSummary {
  scanned: number;
  orphans: Allocation[];
  released: Allocation[];
}

/** What an Ipam adapter offers for collection (the DynamoDB one does; its report carries more detail). */
export interface GarbageCollector<R extends GcSummary = GcSummary> {
  collectGarbage(
    liveOwnerUids: ReadonlySet<string>,
    options: {
      liveAsOf?: number;
      confirm?: (allocation: Allocation) => Promise<boolean>;
      dryRun?: boolean;
      pools?: readonly Pool[];
    },
  ): Promise<R>;
}

export function isGarbageCollector(ipam: unknown): ipam is GarbageCollector {
  return typeof (ipam as Partial<GarbageCollector>).collectGarbage === 'function';
}

/**
 * One collection: reserves the live gateway pods' own addresses (a dry run only reports them), then releases what
 * the collector finds orphaned. Returns the collector's report with the pod reservations.
 */
export async function collectGarbage<R extends GcSummary>(
  deps: Pick<Deps, 'cluster' | 'ipam' | 'clock' | 'log'> & Partial<Pick<Deps, 'holds'>>,
  collector: GarbageCollector<R>,
  options: { dryRun?: boolean } = {},
): Promise<R & { gatewayPods: PodReservation[]; policyHolds?: HoldReport }> {
  const { cluster, log } = deps;
  const liveAsOf = deps.clock.now();
  const [eips, pods] = await Promise.all([cluster.listEips(), cluster.listGatewayPods()]);
  const live = new Set([...eips.map((e) => e.metadata.uid), ...pods.map((p) => podOwner(p.uid))]);

  const pools: Pool[] = [];
  for (const name of new Set(eips.map(externalNetworkOf))) {
    const subnet = await cluster.getSubnet(name);
    try {
      if (subnet) pools.push(...poolsOf(subnet));
    } catch (e) {
      log.warn('subnet skipped for utilisation', { subnet: name, error: String(e) });
    }
  }

  // The pods' own addresses first: a re-created pod takes its predecessor's reservation over at once, whatever its
  // age, instead of waiting for the collector to release it.
  const gatewayPods = await reservePodAddresses(deps, pods, pools, { dryRun: !!options.dryRun });

  // Second opinion per candidate: the owner is gone only if a fresh read agrees.
  const confirm = async (a: Allocation): Promise<boolean> => {
    if (isPodOwner(a.owner.uid))
      return !(await cluster.listGatewayPods()).some((p) => podOwner(p.uid) === a.owner.uid);
    const eip = await cluster.getEip(a.owner.name);
    return eip?.metadata.uid !== a.owner.uid;
  };

  const report = await collector.collectGarbage(live, {
    liveAsOf,
    confirm,
    pools,
    ...(options.dryRun !== undefined && { dryRun: options.dryRun }),
  });
  // Unshared QoS policy holds of owners that are gone, or that no longer use them (ADR 0087).
  const policyHolds = deps.holds
    ? await collectHolds({ ...deps, holds: deps.holds }, eips, { dryRun: !!options.dryRun })
    : undefined;
  log.info('garbage collection', {
    live: live.size,
    scanned: report.scanned,
    orphans: report.orphans.length,
    released: report.released.length,
    podAddressesReserved: gatewayPods.filter((p) => p.status === 'reserved').length,
    podAddressesTakenOver: gatewayPods.filter((p) => p.takenOverFrom).length,
    podAddressesAlready: gatewayPods.filter((p) => p.status === 'already').length,
    podAddressConflicts: gatewayPods.filter((p) => p.status === 'conflict').length,
    dryRun: !!options.dryRun,
  });
  return { ...report, gatewayPods, ...(policyHolds && { policyHolds }) };
}
