/**
 * A redo asked for on some pods of a gateway only (docs/adr/0120-audit-reads-every-replica.md): the audit read an
 * EIP's address, its QoS or its hairpin rule missing on those pods while its allocation records them as carrying it
 * (ADR 0105's per-pod placement). Under the EIP's lease their entries are dropped from the record — it is untrue of
 * them — so that the core's update configures exactly the pods without an entry and sends nothing to the others.
 */
import { heldBy } from '../core/held.js';
import { type Invocation, withLease } from '../core/invocation.js';
import type { Reason } from '../events.js';
import type { Deps } from '../ports.js';
import type { Drift } from './model.js';

export interface PodRedo {
  /**
   * The reason the core's update runs with: `manual` when the allocation names the pods that carry the address (the
   * record then tells the core which pods to configure), `gateway-restarted` when it names none (a single-pod
   * gateway, or an allocation placed before per-pod placement: the core's rule of today redoes the pod).
   */
  reason: Reason;
  /** The pods whose entries were dropped, `<namespace>/<name>`. */
  forgot: string[];
}

/**
 * Drops the entries of the pods `drift` names from the placement of the EIP's address (one conditional write,
 * `Ipam.place`, only when one is named). Nothing is written for an EIP gone, terminating, or no longer holding
 * the address.
 */
export async function forgetPods(deps: Deps, inv: Invocation, drift: readonly Drift[]): Promise<PodRedo> {
  const named = drift.filter((d) => d.repair === 'redo' && d.podUid && d.address);
  const first = named[0];
  if (!first) return { reason: 'gateway-restarted', forgot: [] };
  return withLease(inv, deps, async (): Promise<PodRedo> => {
    const eip = await deps.cluster.getEip(first.eip!);
    if (!eip || eip.metadata.uid !== first.uid || eip.metadata.deletionTimestamp)
      return { reason: 'gateway-restarted', forgot: [] };
    const mine = (await heldBy(deps, eip)).find((a) => a.family === 4 && a.address === first.address);
    const placement = mine?.placement;
    if (!mine || !placement?.pods) return { reason: 'gateway-restarted', forgot: [] };
    const pods = { ...placement.pods };
    const forgot: string[] = [];
    for (const d of named)
      if (pods[d.podUid!]) {
        delete pods[d.podUid!];
        forgot.push(d.pod ?? d.podUid!);
      }
    if (forgot.length)
      await deps.ipam.place(mine.subnet, mine.address, mine.owner.uid, { ...placement, pods });
    return { reason: 'manual', forgot };
  });
}
