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
  const held = await releaseStale(deps, eips, report, !!options.dryRun);
  // Applied, unshared, and held by nobody: the EIP that has it applied holds it.
  for (const [policy, list] of appliedUnheld(eips, held)) {
    if (await isShared(deps, policy)) continue;
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

/** Lets go of the holds whose holder is gone or no longer wants the policy; returns the policies still held. */
async function releaseStale(
  deps: Pick<Deps, 'cluster' | 'ipam' | 'holds'>,
  eips: readonly IptablesEip[],
  report: HoldReport,
  dryRun: boolean,
): Promise<Set<string>> {
  const holds = await deps.holds.listHolds();
  const held = new Set(holds.map((h) => h.policy));
  for (const { policy, holder } of holds) {
    if (!(await holdIsStale(deps, policy, holder))) continue;
    const live = eips.some((e) => e.metadata.uid === holder.uid);
    const why = live ? 'its holder neither asks for the policy nor has it applied' : 'its holder is gone';
    if (!dryRun && !(await deps.holds.release(policy, holder.uid))) continue;
    report.released.push({ policy, holder, why });
    held.delete(policy);
  }
  return held;
}

/** The live EIPs by the policy they have applied, for policies nobody holds. */
function appliedUnheld(eips: readonly IptablesEip[], held: ReadonlySet<string>): Map<string, IptablesEip[]> {
  const users = new Map<string, IptablesEip[]>();
  for (const e of eips) {
    const p = e.status?.qosPolicy;
    if (p && !e.metadata.deletionTimestamp && !held.has(p)) users.set(p, [...(users.get(p) ?? []), e]);
  }
  return users;
}

/** Whether a policy is shared; a missing or invalid one counts as shared (the handlers report it on each EIP). */
async function isShared(deps: Pick<Deps, 'cluster'>, policy: string): Promise<boolean> {
  const found = await deps.cluster.getQosPolicy(policy);
  try {
    return found ? validateQos(found).shared : true;
  } catch {
    return true;
  }
}
