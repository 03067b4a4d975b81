/**
 * How often the maintenance runs (ADR 0088): a drift pass — the audit's read-only inspection of every gateway (3
 * execs on kube-ovn 1.12–1.14, 4 on 1.15, 7 or 8 on 1.16+: `inspectionExecs`), then the repair of what is safe —
 * every `DRIFT_PERIOD_SECONDS` (30 by default, so drift is repaired within a minute), and garbage collection every
 * `GC_EVERY_MINUTES` (60). On AWS the gc function is invoked once a minute by its schedule and runs 60 / period
 * passes, `period` apart; the local stack runs the same periods on its own timers. Pure; the periods are read and
 * checked by loadConfig (shared/config/config.ts).
 */
import type { Config } from '../config/config.js';
import { DIALECTS, inspectionExecs, RELEASE_LINES, type ReleaseLine } from '../domain/dialect/index.js';

export const DEFAULT_DRIFT_PERIOD_MS = 30_000;

/** When the maintenance runs: the periods loadConfig reads (DRIFT_PERIOD_SECONDS, GC_EVERY_MINUTES). */
export type MaintenanceSchedule = Config['maintenance'];

/** The schedule with nothing configured: a pass every 30 s, two a minute, collection hourly. */
export const DEFAULT_SCHEDULE: MaintenanceSchedule = {
  driftPeriodMs: DEFAULT_DRIFT_PERIOD_MS,
  passesPerMinute: 2,
  gcEveryMinutes: 60,
};

/** Whether the invocation scheduled for `at` (epoch ms, the event's time) is one that collects garbage. */
export function collectsAt(at: number, everyMinutes: number): boolean {
  return Math.floor(at / 60_000) % everyMinutes === 0;
}

/**
 * What the schedule costs, per month of 730 hours: invocations of the gc function, drift passes and collections,
 * and the execs one gateway of each release line takes from the passes (at most: the nat table's nft view read
 * too; shared/domain/dialect/inspect.ts `inspectionExecs`).
 */
export function monthlyCost(s: MaintenanceSchedule): {
  invocations: number;
  passes: number;
  collections: number;
  execsPerGateway: Record<ReleaseLine, number>;
} {
  const minutes = 730 * 60;
  const passes = minutes * s.passesPerMinute;
  const execsPerGateway = Object.fromEntries(
    RELEASE_LINES.map((line) => [line, passes * inspectionExecs(DIALECTS[line]).max]),
  ) as Record<ReleaseLine, number>;
  return {
    invocations: minutes,
    passes,
    collections: Math.floor(minutes / s.gcEveryMinutes),
    execsPerGateway,
  };
}
