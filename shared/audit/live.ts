/**
 * Wiring of the audit on the real adapters (pods/exec inspection, the DynamoDB table), and the periodic drift
 * repair the scheduled gc function and the local stack run (docs/adr/0039-drift-repair.md).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createDynamoAuditStore } from '../adapters/dynamo/audit.js';
import { createK8sInspector } from '../adapters/k8s/inspect.js';
import { dynamoClientOf, kubeConfigOf } from '../adapters/live.js';
import type { Config } from '../config/config.js';
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
      kubeConfig: options.kubeConfig ?? kubeConfigOf(config),
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

/** Runs auditAndRepair every `intervalMs` (never two at once); `stop()` waits for a run in progress. */
export function startDriftRepair(
  deps: AuditDeps,
  intervalMs: number,
  options: RepairOptions = {},
): { runNow(): Promise<DriftRepairSummary | undefined>; stop(): Promise<void> } {
  let running: Promise<DriftRepairSummary | undefined> | undefined;
  const runNow = (): Promise<DriftRepairSummary | undefined> => {
    running ??= auditAndRepair(deps, options)
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
