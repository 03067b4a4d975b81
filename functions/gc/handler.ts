// Scheduled garbage collection of allocations whose EIP (or gateway pod) is gone, and reservation of the gateway
// pods' own addresses (ADR 0042): wiring only (shared/core/gc.ts).
// Then the hourly drift check of every gateway, repairing what is safe (shared/audit, docs/adr/0039-drift-repair.md).
import { liveConfig, liveDeps } from '../../shared/adapters/live.js';
import { auditDepsOf, gcHandler } from '../../shared/audit/live.js';

export const handler = gcHandler({
  deps: liveDeps,
  auditDeps: (deps) => {
    const config = liveConfig();
    return config.driftRepair ? auditDepsOf(config, deps) : undefined;
  },
});
