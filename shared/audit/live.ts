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
import {
  type AuditDeps,
  type AuditReport,
  type RepairAction,
  type RepairOptions,
  repairDrift,
  runAudit,
} from './audit.js';
import type { Drift } from './model.js';
import { collectsAt, DEFAULT_SCHEDULE, type MaintenanceSchedule } from './schedule.js';

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
  /** The gateway pods the pass read (the local dashboard shows which pods carry each EIP's address). */
  gateways: AuditReport['gateways'];
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
  return { drift: report.drift, actions, gateways: report.gateways };
}

/** What one scheduled invocation of the gc function did (ADR 0088). */
export interface ScheduledRun {
  /** The garbage collection's counts, when this invocation collected. */
  gc?: GcCounts;
  /** Drift passes run, drift found over all of them, repairs done. */
  passes: number;
  drift: number;
  repaired: number;
  /** Passes that failed, with why (the next pass runs anyway). */
  failures: string[];
}

/**
 * One scheduled invocation: garbage collection when `collect` says so, then `passes` drift passes `periodMs` apart
 * (the first at once). A failed collection or pass is logged and counted (DriftCheckFailures) and does not stop the
 * others. `sleep` is the wait between passes (a test passes its own).
 */
export async function scheduledMaintenance(
  deps: Deps,
  audit: (() => AuditDeps) | undefined,
  o: {
    collect: boolean;
    passes: number;
    periodMs: number;
    sleep?: (ms: number) => Promise<void>;
  },
): Promise<ScheduledRun> {
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const out: ScheduledRun = { passes: 0, drift: 0, repaired: 0, failures: [] };
  if (o.collect) out.gc = await collect(deps);
  if (!audit) return out;
  const start = deps.clock.now();
  const auditDeps = audit();
  for (let i = 0; i < o.passes; i++) {
    const wait = start + i * o.periodMs - deps.clock.now();
    if (wait > 0) await sleep(wait);
    try {
      const d = await auditAndRepair(auditDeps);
      out.drift += d.drift.length;
      out.repaired += d.actions.filter((a) => a.result === 'done').length;
    } catch (e) {
      // Collection succeeded; a failed drift check must not hide that (it is logged and counted, and runs next pass).
      deps.log.error('drift check failed', { error: String(e) });
      deps.metrics.count('DriftCheckFailures', 1);
      out.failures.push((e as Error).message);
    }
    out.passes++;
  }
  return out;
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

/** What the gc function returns: the collection's counts when it collected, then the passes, drift and repairs. */
export interface GcResult extends Partial<GcCounts> {
  passes: number;
  /** Drift found over the passes; 'off' (DRIFT_REPAIR=off), or 'failed: …' when every pass failed. */
  drift: number | string;
  repaired: number;
}

/**
 * The scheduled gc function (functions/gc/handler.ts wires it; ADR 0088): invoked once a minute with the schedule's
 * time, it collects garbage in every `gcEveryMinutes`-th minute, then runs `passesPerMinute` drift passes
 * `driftPeriodMs` apart. Invoked without a time (by hand, a test): one collection and one pass. `auditDeps` is
 * undefined when the drift passes are off (DRIFT_REPAIR=off). A failed pass is logged, counted (DriftCheckFailures)
 * and returned, never thrown: the collection succeeded, and the next pass runs anyway.
 */
export function gcHandler(wiring: {
  deps(): Promise<Deps>;
  auditDeps(deps: Deps): AuditDeps | undefined;
  schedule?(): MaintenanceSchedule;
}): (event?: { time?: string }) => Promise<GcResult> {
  return async (event) => {
    const deps = await wiring.deps();
    const schedule = wiring.schedule?.() ?? DEFAULT_SCHEDULE;
    const at = Date.parse(event?.time ?? '');
    const scheduled = Number.isFinite(at);
    const audit = wiring.auditDeps(deps);
    const run = await scheduledMaintenance(deps, audit && (() => audit), {
      collect: !scheduled || collectsAt(at, schedule.gcEveryMinutes),
      passes: scheduled ? schedule.passesPerMinute : 1,
      periodMs: schedule.driftPeriodMs,
    });
    const allFailed = run.passes > 0 && run.passes === run.failures.length;
    const drift = !audit ? 'off' : allFailed ? `failed: ${run.failures.join('; ')}` : run.drift;
    return { ...run.gc, passes: run.passes, drift, repaired: run.repaired };
  };
}
