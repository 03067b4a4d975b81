/**
 * The product's one backoff helper: exponential delays with "equal jitter" (half of each delay fixed, half
 * random, so retries of many clients spread out), and a sleep that an AbortSignal cuts short. The bridge, its
 * sinks, the watch restarts and the local stand-ins use it; so should any other retry loop in shared/.
 */

/** The delay before retry number `attempt` (1-based): base·2^(attempt-1), capped at `maxMs`, with equal jitter. */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number, random = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** The same delay without jitter (the upper bound of `backoffDelay`), for schedules that must be predictable. */
export function backoffCeiling(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
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
