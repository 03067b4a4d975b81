/**
 * The `release` repair (shared/audit/model.ts): leaked allocations are handed to the garbage collector, which judges
 * them again from its own consistent read; what it keeps is reported with why (ADR 0085).
 */
import { collectGarbage, isGarbageCollector } from '../core/gc.js';
import type { Allocation } from '../ports.js';
import type { AuditDeps, AuditReport, RepairAction } from './audit.js';
import type { Drift } from './model.js';

/** Leaked allocations: the garbage collector judges them again and releases what it agrees is gone. */
export async function repairLeaks(
  deps: AuditDeps,
  report: AuditReport,
  o: { dry: boolean; note: (a: RepairAction) => void },
): Promise<void> {
  const leaks = report.drift.filter((x) => x.repair === 'release');
  if (leaks.length === 0) return;
  if (!isGarbageCollector(deps.ipam)) {
    const detail = 'this IPAM cannot collect garbage';
    o.note({ kind: 'leaked-allocation', target: '(ipam)', action: 'release', result: 'skipped', detail });
    return;
  }
  const gc = await collectGarbage(deps, deps.ipam, { dryRun: o.dry });
  const released = new Set(gc.released.map((a) => `${a.subnet}|${a.address}`));
  for (const d of leaks) {
    const done = released.has(`${d.subnet}|${d.address}`);
    const detail = o.dry || done ? undefined : await whyKept(deps, d, gc.orphans);
    o.note({
      kind: 'leaked-allocation',
      target: `${d.address} (${d.subnet})`,
      action: 'release through garbage collection',
      result: o.dry ? 'planned' : done ? 'done' : 'skipped',
      ...(detail && { detail }),
    });
  }
}

/**
 * Why the collector did not release an allocation the audit calls leaked, read from the table as it is now (ADR
 * 0085): released meanwhile, claimed by someone else, its owner found again by the collector's second read, or not
 * judged at all (claimed within the collector's grace of its live list, or its owner in that list).
 */
async function whyKept(deps: AuditDeps, d: Drift, orphans: readonly Allocation[]): Promise<string> {
  const record = await deps.store.addressRecord(d.subnet!, d.address!);
  if (record.state !== 'held') return `already released (${record.state}) when the collector came to it`;
  if (record.ownerUid !== d.uid) return `claimed since by another owner (uid ${record.ownerUid})`;
  if (orphans.some((a) => a.subnet === d.subnet && a.address === d.address))
    return `the collector's second read found its owner (uid ${d.uid}) again, or the claim changed under it`;
  return `not judged by the collector: claimed less than its grace (2 min) before the live set was read, or its owner (uid ${d.uid}) is in that set`;
}
