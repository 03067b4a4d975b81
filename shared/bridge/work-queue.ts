/**
 * The work queue the bridge and the local stand-ins share. It runs at most one item per key at a time (events for
 * one EIP never overlap, and run in the order they were queued) and up to `concurrency` keys at once, and:
 *
 * - coalesces: each item has a slot (default: its key); a newer item for a slot that is already waiting replaces
 *   the waiting one in place, so the queue never holds two states of one thing and never drops the last one. An
 *   item whose id equals the waiting one is a duplicate and is dropped.
 * - retries: a failed item is queued again after a backoff (`retry` decides the delay, or gives up), unless a newer
 *   item for its slot arrived meanwhile — that one supersedes the retry.
 * - is bounded by count: `limit` waiting items. The queue itself never refuses an item (refusing would lose the
 *   last state of a key); when it holds `limit` or more it reports pressure, and the producer is expected to stop
 *   producing (the bridge pauses its watches) until it reports relief at half the limit. See ADR 0018.
 */

export type PushResult = 'queued' | 'replaced' | 'duplicate' | 'closed';

export interface WorkQueueOptions<T> {
  concurrency: number;
  /** Items with one key never run at the same time. */
  keyOf(item: T): string;
  /** Coalescing slot: a newer item replaces a waiting one with the same slot. Default: the key. */
  slotOf?(item: T): string;
  /** Identity for duplicates. Default: the slot (every re-push of a waiting slot is then a duplicate). */
  idOf?(item: T): string;
  /** Does the work. A rejection goes to `retry` and `onError`; the queue moves on. */
  run(item: T): Promise<void>;
  /** After a failed run: the delay before the item runs again, or undefined to give it up. Default: give up. */
  retry?(item: T, error: unknown, attempt: number): number | undefined;
  /** Told about every failed run; `retryInMs` is set when the item will run again. */
  onError?(item: T, error: unknown, info: { attempt: number; retryInMs?: number }): void;
  /** Waiting items at which the queue reports pressure. Default: no limit. */
  limit?: number;
  /** `true` when the waiting count reaches `limit`, `false` when it is back at or below half of it. */
  onPressure?(full: boolean): void;
}

interface Delayed<T> {
  item: T;
  timer: NodeJS.Timeout;
}

export class WorkQueue<T> {
  /** Waiting slots per key, in queue order. */
  private readonly waitingByKey = new Map<string, string[]>();
  private readonly waiting = new Map<string, T>();
  /** Keys with waiting items and nothing running, in the order they became runnable. */
  private readonly runnable: string[] = [];
  private readonly active = new Set<string>();
  private readonly delayed = new Map<string, Delayed<T>>();
  private readonly attempts = new Map<string, number>();
  private idleWaiters: (() => void)[] = [];
  private closed = false;
  private full = false;
  private readonly slotOf: (item: T) => string;
  private readonly idOf: (item: T) => string;

  constructor(private readonly options: WorkQueueOptions<T>) {
    if (!(options.concurrency >= 1)) throw new RangeError('concurrency must be at least 1');
    if (options.limit !== undefined && !(options.limit >= 1))
      throw new RangeError('limit must be at least 1');
    this.slotOf = options.slotOf ?? options.keyOf;
    this.idOf = options.idOf ?? this.slotOf;
  }

  /** Queues an item, coalescing it with a waiting item of the same slot. */
  push(item: T): PushResult {
    if (this.closed) return 'closed';
    const slot = this.slotOf(item);
    const waiting = this.waiting.get(slot);
    if (waiting !== undefined) {
      if (this.idOf(waiting) === this.idOf(item)) return 'duplicate';
      this.waiting.set(slot, item);
      return 'replaced';
    }
    const delayed = this.delayed.get(slot);
    if (delayed) {
      clearTimeout(delayed.timer);
      this.delayed.delete(slot);
    }
    this.enqueue(slot, item);
    return delayed ? 'replaced' : 'queued';
  }

  private enqueue(slot: string, item: T): void {
    const key = this.options.keyOf(item);
    this.waiting.set(slot, item);
    let slots = this.waitingByKey.get(key);
    if (!slots) {
      slots = [];
      this.waitingByKey.set(key, slots);
      if (!this.active.has(key)) this.runnable.push(key);
    }
    slots.push(slot);
    this.pressure();
    this.pump();
  }

  /** Items waiting (not running, not waiting for a retry). */
  waitingCount(): number {
    return this.waiting.size;
  }

  /** Items waiting plus items running. */
  depth(): number {
    return this.waiting.size + this.active.size;
  }

  running(): number {
    return this.active.size;
  }

  /** Failed items waiting for their retry delay. */
  retrying(): number {
    return this.delayed.size;
  }

  /** True while the waiting count is at the limit (and until it falls to half of it). */
  isFull(): boolean {
    return this.full;
  }

  /** Resolves once nothing is waiting or running (retries scheduled for later do not count). */
  idle(): Promise<void> {
    if (this.depth() === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops accepting items (and retries); what is waiting still runs. */
  close(): void {
    this.closed = true;
  }

  /** Removes and returns everything waiting or waiting for a retry (not running); cancels the retries. */
  takeWaiting(): T[] {
    const out: T[] = [];
    for (const key of this.runnable.splice(0))
      for (const s of this.waitingByKey.get(key) ?? []) out.push(this.waiting.get(s)!);
    for (const [key, slots] of this.waitingByKey)
      if (this.active.has(key)) for (const s of slots) out.push(this.waiting.get(s)!);
    for (const d of this.delayed.values()) {
      clearTimeout(d.timer);
      out.push(d.item);
    }
    this.delayed.clear();
    this.waiting.clear();
    this.waitingByKey.clear();
    this.pressure();
    this.settle();
    return out;
  }

  private pressure(): void {
    const limit = this.options.limit;
    if (limit === undefined) return;
    if (!this.full && this.waiting.size >= limit) {
      this.full = true;
      this.options.onPressure?.(true);
    } else if (this.full && this.waiting.size <= Math.floor(limit / 2)) {
      this.full = false;
      this.options.onPressure?.(false);
    }
  }

  private pump(): void {
    while (this.active.size < this.options.concurrency && this.runnable.length > 0) {
      const key = this.runnable.shift()!;
      const slots = this.waitingByKey.get(key)!;
      const slot = slots.shift()!;
      if (slots.length === 0) this.waitingByKey.delete(key);
      const item = this.waiting.get(slot)!;
      this.waiting.delete(slot);
      this.active.add(key);
      void this.runOne(key, slot, item);
    }
    this.pressure();
  }

  private async runOne(key: string, slot: string, item: T): Promise<void> {
    try {
      await this.options.run(item);
      this.attempts.delete(slot);
    } catch (error) {
      this.failed(slot, item, error);
    } finally {
      this.active.delete(key);
      if (this.waitingByKey.has(key)) this.runnable.push(key);
      this.pump();
      this.settle();
    }
  }

  private failed(slot: string, item: T, error: unknown): void {
    const attempt = (this.attempts.get(slot) ?? 0) + 1;
    let retryInMs: number | undefined;
    try {
      retryInMs = this.closed ? undefined : this.options.retry?.(item, error, attempt);
    } catch {
      retryInMs = undefined;
    }
    // A newer item for the slot is already waiting: it supersedes the retry.
    if (this.waiting.has(slot)) retryInMs = undefined;
    if (retryInMs === undefined) this.attempts.delete(slot);
    else {
      this.attempts.set(slot, attempt);
      this.retryLater(slot, item, retryInMs);
    }
    try {
      this.options.onError?.(item, error, { attempt, ...(retryInMs !== undefined && { retryInMs }) });
    } catch {
      // a failing error reporter must not wedge the key
    }
  }

  /**
   * Runs `item` again after `delayMs` unless a newer item for its slot arrives first. For work that failed
   * somewhere the queue cannot see (a sink that gives up after accepting an event).
   */
  pushLater(item: T, delayMs: number): void {
    if (this.closed) return;
    const slot = this.slotOf(item);
    if (this.waiting.has(slot)) return;
    this.attempts.set(slot, (this.attempts.get(slot) ?? 0) + 1);
    this.retryLater(slot, item, delayMs);
  }

  /**
   * Queues `item` after `delayMs` (not a failure: no attempt is counted), unless an item for its slot is waiting
   * or arrives first. A later call for the same slot replaces the earlier timer.
   */
  later(item: T, delayMs: number): void {
    if (this.closed) return;
    const slot = this.slotOf(item);
    if (this.waiting.has(slot)) return;
    this.retryLater(slot, item, delayMs);
  }

  /** Consecutive failures recorded for the item's slot (0 after a success). */
  attemptsOf(item: T): number {
    return this.attempts.get(this.slotOf(item)) ?? 0;
  }

  private retryLater(slot: string, item: T, delayMs: number): void {
    const previous = this.delayed.get(slot);
    if (previous) clearTimeout(previous.timer);
    const timer = setTimeout(() => {
      if (this.delayed.get(slot)?.timer !== timer) return;
      this.delayed.delete(slot);
      if (this.closed || this.waiting.has(slot)) return;
      this.enqueue(slot, item);
    }, delayMs);
    timer.unref?.();
    this.delayed.set(slot, { item, timer });
  }

  /** Stops: no new items, no retries; what is running finishes on its own. */
  stop(): void {
    this.closed = true;
    for (const d of this.delayed.values()) clearTimeout(d.timer);
    this.delayed.clear();
  }

  private settle(): void {
    if (this.depth() !== 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
