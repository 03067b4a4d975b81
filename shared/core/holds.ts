/**
 * The collector's part for unshared QoS policy holds (ADR 0087): a hold whose holder is gone, or no longer asks for
 * nor has the policy applied, is let go of; an unshared policy a live EIP has applied but nobody holds (bound before
 * holds were recorded) is recorded for it. Costs one consistent Query of the holds, plus one read per hold that looks
 * stale and one QoS policy read per distinct policy in use.
 */
import type { IptablesEip } from '../domain/kube-ovn.js';
import type { Deps, Owner } from '../ports.js';
import { holdIsStale, validateQos } from './qos.js';

export interface HoldReport {
  /** Holds let go of (or, in a dry run, that would be), with why. */
  released: { policy: string; holder: Owner; why: string }[];
  /** Bindings recorded as holds (or that would be). */
  recorded: { policy: string; holder: Owner }[];
  /** Unshared policies applied on several EIPs: reported, never decided here. */
  contested: { policy: string; eips: string[] }[];
}

export async function collectHolds(
  deps: Pick<Deps, 'cluster' | 'ipam' | 'holds' | 'log'>,
  eips: readonly IptablesEip[],
  options: { dryRun?: boolean } = {},
): Promise<HoldReport> {
  const report: HoldReport = { released: [], recorded: [], contested: [] };
  const holds = await deps.holds.listHolds();
  const held = new Map(holds.map((h) => [h.policy, h.holder]));
  for (const { policy, holder } of holds) {
    if (!(await holdIsStale(deps, policy, holder))) continue;
    const live = eips.some((e) => e.metadata.uid === holder.uid);
    const why = live ? 'its holder neither asks for the policy nor has it applied' : 'its holder is gone';
    if (!options.dryRun && !(await deps.holds.release(policy, holder.uid))) continue;
    report.released.push({ policy, holder, why });
    held.delete(policy);
  }

  // Applied, unshared, and held by nobody: the EIP that has it applied holds it.
  const users = new Map<string, IptablesEip[]>();
  for (const e of eips) {
    const p = e.status?.qosPolicy;
    if (p && !e.metadata.deletionTimestamp && !held.has(p)) users.set(p, [...(users.get(p) ?? []), e]);
  }
  for (const [policy, list] of users) {
    const found = await deps.cluster.getQosPolicy(policy);
    let shared = true;
    try {
      shared = found ? validateQos(found).shared : true;
    } catch {
      shared = true; // invalid: the handlers report it on each EIP
    }
    if (shared) continue;
    if (list.length > 1) {
      report.contested.push({ policy, eips: list.map((e) => e.metadata.name).sort() });
      continue;
    }
    const eip = list[0]!;
    const holder = { uid: eip.metadata.uid, name: eip.metadata.name };
    if (!options.dryRun && (await deps.holds.hold(policy, holder)).uid !== holder.uid) continue;
    report.recorded.push({ policy, holder });
  }
  if (report.released.length || report.recorded.length || report.contested.length)
    deps.log.info('qos policy holds', {
      released: report.released.length,
      recorded: report.recorded.length,
      contested: report.contested,
      dryRun: !!options.dryRun,
    });
  return report;
}
