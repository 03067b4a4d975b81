/**
 * Loggers behind the Logger port: one JSON object per line (what CloudWatch Logs Insights and people with `jq`
 * read), correlated by the fields a child logger carries (event id, EIP name, handler, request id) and, in Lambda,
 * the X-Ray trace id of the invocation. Kept over Powertools' Logger for its import cost: ADR 0029.
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
  /** Where the X-Ray trace header is read at each line (Lambda sets `_X_AMZN_TRACE_ID` per invocation). */
  env?: NodeJS.ProcessEnv;
}

export function jsonLogger(options: JsonLoggerOptions = {}): Logger {
  const min = ORDER[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const now = options.now ?? Date.now;
  const base = options.fields ?? {};
  const env = options.env ?? process.env;
  const emit = (level: Level, message: string, fields?: Record<string, unknown>): void => {
    if (ORDER[level] < min) return;
    const trace = traceIdOf(env._X_AMZN_TRACE_ID);
    write(
      JSON.stringify({
        time: new Date(now()).toISOString(),
        level,
        message,
        ...base,
        ...(trace && { xrayTraceId: trace }),
        ...fields,
      }),
    );
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => jsonLogger({ ...options, fields: { ...base, ...fields } }),
  };
}

/** `Root=1-…;Parent=…;Sampled=1` → `1-…` (the id X-Ray and CloudWatch show). */
export function traceIdOf(header: string | undefined): string | undefined {
  return header ? /(?:^|;)Root=([^;]+)/.exec(header)?.[1] : undefined;
}

/**
 * The level from LOG_LEVEL, or from AWS_LAMBDA_LOG_LEVEL when the function's logging configuration sets one (it
 * wins: it is what the console shows). Lambda's TRACE counts as debug, FATAL as error.
 */
export function levelFromEnv(value: string | undefined, lambdaLevel?: string): Level {
  const v = (lambdaLevel?.trim() || value || 'info').toLowerCase();
  if (v === 'trace') return 'debug';
  if (v === 'fatal') return 'error';
  return v === 'debug' || v === 'warn' || v === 'error' ? v : 'info';
}
