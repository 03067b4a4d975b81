// Scheduled maintenance (ADR 0088), invoked once a minute by its schedule: garbage collection of allocations whose
// EIP (or gateway pod) is gone and reservation of the gateway pods' own addresses (ADR 0042; shared/core/gc.ts) in
// every GC_EVERY_MINUTES-th minute, then DRIFT_PERIOD_SECONDS-apart drift passes over every gateway, repairing what
// is safe (shared/audit, docs/adr/0039-drift-repair.md). Wiring only (shared/audit/live.ts).
import { liveConfig, liveDeps } from '../../shared/adapters/live.js';
import { auditDepsOf, gcHandler } from '../../shared/audit/live.js';

export const handler = gcHandler({
  deps: liveDeps,
  auditDeps: (deps) => {
    const config = liveConfig();
    return config.driftRepair ? auditDepsOf(config, deps) : undefined;
  },
  schedule: () => liveConfig().maintenance,
});
