/**
 * Loggers behind the Logger port: one JSON object per line (what CloudWatch Logs Insights and people with `jq`
 * read), correlated by the fields a child logger carries (event id, EIP name, handler).
 */
import type { Logger } from '../ports.js';

export type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface JsonLoggerOptions {
  level?: Level;
  /** Where lines go; defaults to stdout. */
  write?: (line: string) => void;
  fields?: Record<string, unknown>;
  now?: () => number;
}

export function jsonLogger(options: JsonLoggerOptions = {}): Logger {
  const min = ORDER[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const now = options.now ?? Date.now;
  const base = options.fields ?? {};
  const emit = (level: Level, message: string, fields?: Record<string, unknown>): void => {
    if (ORDER[level] < min) return;
    write(JSON.stringify({ time: new Date(now()).toISOString(), level, message, ...base, ...fields }));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => jsonLogger({ ...options, fields: { ...base, ...fields } }),
  };
}

/** Keeps every line in memory; for tests that assert what was logged. */
export function memoryLogger(level: Level = 'debug'): Logger & { lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = jsonLogger({ level, write: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) });
  return Object.assign(logger, { lines });
}

export function levelFromEnv(value: string | undefined): Level {
  const v = (value ?? 'info').toLowerCase();
  return v === 'debug' || v === 'warn' || v === 'error' ? v : 'info';
}
