/**
 * Wiring of the audit on the real adapters (pods/exec inspection, the DynamoDB table), and the periodic maintenance
 * the scheduled gc function and the local stack run: garbage collection, then the drift check and repair
 * (docs/adr/0039-drift-repair.md).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createDynamoAuditStore } from '../adapters/dynamo/audit.js';
import { createK8sInspector } from '../adapters/k8s/inspect.js';
import { dynamoClientOf, kubeConfigOf } from '../adapters/live.js';
import type { Config } from '../config/config.js';
import { collectGarbage, isGarbageCollector } from '../core/gc.js';
import type { Deps } from '../ports.js';
import { type AuditDeps, type RepairAction, type RepairOptions, repairDrift, runAudit } from './audit.js';
import type { Drift } from './model.js';

export function auditDepsOf(
  config: Config,
  deps: Deps,
  options: {
    kubeConfig?: Parameters<typeof createK8sInspector>[0]['kubeConfig'];
    dynamo?: DynamoDBClient;
  } = {},
): AuditDeps {
  return {
    ...deps,
    inspector: createK8sInspector({
      kubeConfig: kubeConfigOf(config, options.kubeConfig),
      timeoutMs: config.execTimeoutMs,
    }),
    store: createDynamoAuditStore({
      client: options.dynamo ?? dynamoClientOf(config),
      tableName: config.dynamo.tableName,
      log: deps.log,
    }),
  };
}

export interface DriftRepairSummary {
  drift: Drift[];
  actions: RepairAction[];
}

/** What one garbage collection did, in counts (the gc function's output, the local stack's log). */
export interface GcCounts {
  scanned: number;
  orphans: number;
  released: number;
  podAddressesReserved: number;
}

/**
 * One garbage collection on the configured IPAM (shared/core/gc.ts): allocations of owners that are gone released,
 * the gateway pods' own addresses reserved (ADR 0042). Throws when the IPAM cannot collect, or on failure.
 */
export async function collect(deps: Deps): Promise<GcCounts> {
  if (!isGarbageCollector(deps.ipam)) throw new Error('the configured IPAM cannot collect garbage');
  const report = await collectGarbage(deps, deps.ipam);
  return {
    scanned: report.scanned,
    orphans: report.orphans.length,
    released: report.released.length,
    podAddressesReserved: report.gatewayPods.filter((p) => p.status === 'reserved').length,
  };
}

/** One audit and the repair of what is safe, logged and counted (metrics DriftFound {kind}, DriftRepaired {kind}). */
export async function auditAndRepair(
  deps: AuditDeps,
  options: RepairOptions = {},
): Promise<DriftRepairSummary> {
  const report = await runAudit(deps);
  for (const d of report.drift) deps.metrics.count('DriftFound', 1, { kind: d.kind });
  if (report.drift.length) deps.log.warn('gateway drift found', { drift: report.drift });
  const actions = report.drift.length ? await repairDrift(deps, report, options) : [];
  for (const a of actions) if (a.result === 'done') deps.metrics.count('DriftRepaired', 1, { kind: a.kind });
  if (actions.length) deps.log.info('drift repair', { actions });
  return { drift: report.drift, actions };
}

/**
 * Runs auditAndRepair every `intervalMs` (never two at once), after a garbage collection when `collectFirst` is set
 * (what the hourly gc function does; a failed collection is logged and the drift check runs anyway); `stop()` waits
 * for a run in progress.
 */
export function startDriftRepair(
  deps: AuditDeps,
  intervalMs: number,
  options: RepairOptions & { collectFirst?: boolean } = {},
): { runNow(): Promise<DriftRepairSummary | undefined>; stop(): Promise<void> } {
  const { collectFirst, ...repair } = options;
  let running: Promise<DriftRepairSummary | undefined> | undefined;
  const collected = async (): Promise<void> => {
    if (!collectFirst) return;
    try {
      await collect(deps); // logged by the collector itself
    } catch (e) {
      deps.log.warn('garbage collection failed', { error: String(e) });
    }
  };
  const runNow = (): Promise<DriftRepairSummary | undefined> => {
    running ??= collected()
      .then(() => auditAndRepair(deps, repair))
      .catch((e: unknown) => {
        deps.log.warn('drift repair failed', { error: String(e) });
        return undefined;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  const timer = intervalMs > 0 ? setInterval(() => void runNow(), intervalMs) : undefined;
  timer?.unref();
  return {
    runNow,
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/** What the gc function returns: the collection's counts, then the drift found and repaired (or why not). */
export interface GcResult extends GcCounts {
  drift: number | string;
  repaired: number;
}

/**
 * The scheduled gc function (functions/gc/handler.ts wires it): garbage collection, then the drift check and repair
 * of every gateway. `auditDeps` is undefined when the drift check is off (DRIFT_REPAIR=off). A failed drift check is
 * logged, counted (DriftCheckFailures) and returned, never thrown: the collection succeeded, and the check runs
 * again next hour.
 */
export function gcHandler(wiring: {
  deps(): Promise<Deps>;
  auditDeps(deps: Deps): AuditDeps | undefined;
}): () => Promise<GcResult> {
  return async () => {
    const deps = await wiring.deps();
    const gc = await collect(deps);
    const audit = wiring.auditDeps(deps);
    if (!audit) return { ...gc, drift: 'off', repaired: 0 };
    try {
      const d = await auditAndRepair(audit);
      return { ...gc, drift: d.drift.length, repaired: d.actions.filter((a) => a.result === 'done').length };
    } catch (e) {
      deps.log.error('drift check failed', { error: String(e) });
      deps.metrics.count('DriftCheckFailures', 1);
      return { ...gc, drift: `failed: ${(e as Error).message}`, repaired: 0 };
    }
  };
}
