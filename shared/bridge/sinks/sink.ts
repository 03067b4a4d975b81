/**
 * Where routed events go. The bridge hands a sink one event at a time per EIP (its keyed queue), so `send`
 * resolving means "accepted": buffered for EventBridge, accepted (202) by Lambda, handled in-process.
 */
import type { EipEvent } from '../../events.js';

export interface SinkStats {
  /** Deliveries attempted again after a failure. */
  retries: number;
  /** Events given up on (not delivered, or parked as dead letters). */
  failures: number;
  /** Events parked where a person can see them (in-process only). */
  deadLetters: number;
  /** Events accepted but not yet delivered (EventBridge buffer). */
  buffered: number;
}

export interface Sink {
  /**
   * Accepts one event. May wait (backpressure) when the sink is full.
   * @throws when the event could not be accepted at all (the bridge counts a failure; the periodic resync
   *   re-sends the EIP's state later)
   */
  send(event: EipEvent): Promise<void>;
  /** Delivers everything accepted so far (EventBridge: empties the buffer). Used by a graceful drain. */
  flush?(): Promise<void>;
  stats?(): SinkStats;
  /** A short name for logs and metrics labels. */
  readonly name?: string;
}

/** Exponential backoff with "equal jitter": half the delay fixed, half random, so retries spread out. */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number, random = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export function errorText(e: unknown): string {
  if (e instanceof Error) return e.name && e.name !== 'Error' ? `${e.name}: ${e.message}` : e.message;
  return String(e);
}
