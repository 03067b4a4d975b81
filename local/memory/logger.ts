/**
 * A Logger that keeps every line in memory, for the lab and the tests that assert what was logged. The lines are
 * the JSON logger's own (shared/observability/log.ts), parsed back.
 */
import { jsonLogger, type Level } from '../../shared/observability/log.js';
import type { Logger } from '../../shared/ports.js';

export function memoryLogger(level: Level = 'debug'): Logger & { lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = jsonLogger({ level, write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) });
  return Object.assign(logger, { lines });
}
