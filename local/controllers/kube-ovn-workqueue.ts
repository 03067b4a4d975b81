/**
 * client-go's rate-limited work queue, as kube-ovn-controller uses it (k8s.io/client-go/util/workqueue), for the lab's
 * model of kube-ovn's IptablesEIP controller (local/controllers/kube-ovn-eip.ts):
 *
 * - a key added while it waits is folded; a key added while a worker has it is queued again when the worker is done
 *   (the dirty/processing sets); one worker per queue, as kube-ovn starts one goroutine per EIP queue;
 * - `addRateLimited` waits `limiter.when(key)`; `forget` resets the key's failures;
 * - the limiters: `ItemExponentialFailureRateLimiter` (base · 2^failures, capped) and `BucketRateLimiter` (a token
 *   bucket, golang.org/x/time/rate semantics: reservations past the burst wait their turn), combined by
 *   `MaxOfRateLimiter`.
 *
 * kube-ovn builds one `custCrdRateLimiter` in NewController (pkg/controller/controller.go, every release 1.12 to
 * master): exponential from `--cust-crd-retry-min-delay` (1 s) to `--cust-crd-retry-max-delay` (20 s), and a bucket of
 * 10 per second with a burst of 100 — one instance shared by every custom-resource queue, so the failures of a key
 * count across the add, update and reset queues and the bucket across all of them. Queues built with a nil limiter
 * (the delete queue from 1.15 on) get client-go's DefaultControllerRateLimiter: 5 ms to 1000 s, and a bucket of its own.
 */

export interface RateLimiter {
  /** How long to wait before the key is retried (and counts this failure). */
  when(key: string): number;
  forget(key: string): void;
  retries(key: string): number;
}

export class ItemExponentialLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();
  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
  ) {}
  when(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    return Math.min(this.baseMs * 2 ** n, this.maxMs);
  }
  forget(key: string): void {
    this.failures.delete(key);
  }
  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

export class BucketLimiter implements RateLimiter {
  private tokens: number;
  private last: number;
  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = burst;
    this.last = this.now();
  }
  when(): number {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.perSecond);
    this.last = t;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens / this.perSecond) * 1000;
  }
  forget(): void {}
  retries(): number {
    return 0;
  }
}

export class MaxOfLimiter implements RateLimiter {
  private readonly limiters: RateLimiter[];
  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }
  when(key: string): number {
    return Math.max(...this.limiters.map((l) => l.when(key)));
  }
  forget(key: string): void {
    for (const l of this.limiters) l.forget(key);
  }
  retries(key: string): number {
    return Math.max(...this.limiters.map((l) => l.retries(key)));
  }
}

/** kube-ovn's custCrdRateLimiter (defaults of its flags: 1 s to 20 s, 10 qps, burst 100). */
export function custCrdRateLimiter(minDelayS = 1, maxDelayS = 20): RateLimiter {
  return new MaxOfLimiter(
    new ItemExponentialLimiter(minDelayS * 1000, maxDelayS * 1000),
    new BucketLimiter(10, 100),
  );
}

/** client-go's DefaultControllerRateLimiter: 5 ms to 1000 s per item, 10 qps with a burst of 100 overall. */
export function defaultControllerRateLimiter(): RateLimiter {
  return new MaxOfLimiter(new ItemExponentialLimiter(5, 1_000_000), new BucketLimiter(10, 100));
}

/** What a queue's worker reports for a key it handled. */
export type Handler = (key: string) => Promise<void>;

export class RateLimitedQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private wake: (() => void) | undefined;
  private stopped = false;
  private readonly worker: Promise<void>;

  constructor(
    readonly name: string,
    private readonly limiter: RateLimiter,
    private readonly handle: Handler,
    /** Called with kube-ovn's `error syncing '<key>': <err>, requeuing` when a key failed. */
    private readonly onError: (key: string, e: unknown, retryInMs: number) => void,
  ) {
    this.worker = this.run();
  }

  add(key: string): void {
    if (this.stopped || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.queue.push(key);
    this.wake?.();
  }

  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.add(key);
    }, ms);
    this.timers.add(t);
  }

  addRateLimited(key: string): number {
    const ms = this.limiter.when(key);
    this.addAfter(key, ms);
    return ms;
  }

  forget(key: string): void {
    this.limiter.forget(key);
  }

  /** Keys waiting or being handled (not those waiting for a retry timer). */
  get length(): number {
    return this.queue.length + this.processing.size;
  }

  get pendingRetries(): number {
    return this.timers.size;
  }

  private async next(): Promise<string | undefined> {
    while (!this.stopped && this.queue.length === 0) await new Promise<void>((r) => (this.wake = r));
    this.wake = undefined;
    return this.stopped ? undefined : this.queue.shift();
  }

  private async run(): Promise<void> {
    for (;;) {
      const key = await this.next();
      if (key === undefined) return;
      this.dirty.delete(key);
      this.processing.add(key);
      try {
        await this.handle(key);
        this.forget(key);
      } catch (e) {
        if (!this.stopped) this.onError(key, e, this.addRateLimited(key));
      } finally {
        this.processing.delete(key);
        if (this.dirty.has(key) && !this.stopped) {
          this.queue.push(key);
          this.wake?.();
        }
      }
    }
  }

  /** ShutDown: nothing new is taken; the key in hand finishes. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.wake?.();
    await this.worker;
  }
}
