// Scheduled garbage collection of allocations whose EIP (or gateway pod) is gone, and reservation of the gateway
// pods' own addresses (ADR 0042): wiring only (shared/core/gc.ts).
// Then the hourly drift check of every gateway, repairing what is safe (shared/audit, docs/adr/0039-drift-repair.md).
import { liveConfig, liveDeps } from '../../shared/adapters/live.js';
import { auditAndRepair, auditDepsOf, collect } from '../../shared/audit/live.js';

export const handler = async (): Promise<{
  scanned: number;
  orphans: number;
  released: number;
  podAddressesReserved: number;
  drift: number | string;
  repaired: number;
}> => {
  const deps = await liveDeps();
  const gc = await collect(deps);
  const config = liveConfig();
  if (!config.driftRepair) return { ...gc, drift: 'off', repaired: 0 };
  try {
    const d = await auditAndRepair(auditDepsOf(config, deps));
    return { ...gc, drift: d.drift.length, repaired: d.actions.filter((a) => a.result === 'done').length };
  } catch (e) {
    // Collection succeeded; a failed drift check must not hide that (it is logged and counted, and runs next hour).
    deps.log.error('drift check failed', { error: String(e) });
    deps.metrics.count('DriftCheckFailures', 1);
    return { ...gc, drift: `failed: ${(e as Error).message}`, repaired: 0 };
  }
};
