/**
 * How often the maintenance runs (ADR 0088): a drift pass — the audit's read-only inspection of every gateway (three
 * execs each), then the repair of what is safe — every `DRIFT_PERIOD_SECONDS` (30 by default, so drift is repaired
 * within a minute), and garbage collection every `GC_EVERY_MINUTES` (60). On AWS the gc function is invoked once a
 * minute by its schedule and runs 60 / period passes, `period` apart; the local stack runs the same periods on its
 * own timers. Pure; the periods are read and checked by loadConfig (shared/config/config.ts).
 */
import type { Config } from '../config/config.js';

/** Execs one drift pass spends per gateway (addresses, ingress filters, egress filters: shared/audit/inspect.ts). */
export const EXECS_PER_GATEWAY_PASS = 3;

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
 * What the schedule costs, per month of 730 hours: invocations of the gc function and drift passes, and the execs a
 * gateway takes from them.
 */
export function monthlyCost(s: MaintenanceSchedule): {
  invocations: number;
  passes: number;
  execsPerGateway: number;
  collections: number;
} {
  const minutes = 730 * 60;
  return {
    invocations: minutes,
    passes: minutes * s.passesPerMinute,
    execsPerGateway: minutes * s.passesPerMinute * EXECS_PER_GATEWAY_PASS,
    collections: Math.floor(minutes / s.gcEveryMinutes),
  };
}
