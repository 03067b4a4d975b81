/**
 * A work queue that runs at most one item per key at a time (events for one EIP never overlap, and run in the
 * order they were routed) and up to `concurrency` keys at once. An item whose id is already waiting is dropped:
 * the same change routed twice (a relist replaying what a watch already delivered) costs one delivery.
 */

export interface KeyedQueueOptions<T> {
  concurrency: number;
  keyOf(item: T): string;
  idOf(item: T): string;
  /** Does the work. A rejection is reported to `onError`; the queue moves on. */
  run(item: T): Promise<void>;
  onError?(item: T, error: unknown): void;
}

export class KeyedQueue<T> {
  private readonly waiting = new Map<string, T[]>();
  private readonly waitingIds = new Set<string>();
  /** Keys with waiting items and nothing running, in the order they became runnable. */
  private readonly runnable: string[] = [];
  private readonly active = new Set<string>();
  private waitingCount = 0;
  private idleWaiters: (() => void)[] = [];
  private closed = false;

  constructor(private readonly options: KeyedQueueOptions<T>) {
    if (!(options.concurrency >= 1)) throw new RangeError('concurrency must be at least 1');
  }

  /** Queues an item; false when it was dropped (its id is already waiting, or the queue is closed). */
  push(item: T): boolean {
    if (this.closed) return false;
    const id = this.options.idOf(item);
    if (this.waitingIds.has(id)) return false;
    const key = this.options.keyOf(item);
    let list = this.waiting.get(key);
    if (!list) {
      list = [];
      this.waiting.set(key, list);
      if (!this.active.has(key)) this.runnable.push(key);
    }
    list.push(item);
    this.waitingIds.add(id);
    this.waitingCount++;
    this.pump();
    return true;
  }

  /** Items waiting plus items running. */
  depth(): number {
    return this.waitingCount + this.active.size;
  }

  running(): number {
    return this.active.size;
  }

  /** Resolves once nothing is waiting or running. */
  idle(): Promise<void> {
    if (this.depth() === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops accepting items; what is queued still runs. */
  close(): void {
    this.closed = true;
  }

  /** Removes and returns everything still waiting (not running), in queue order per key. */
  takeWaiting(): T[] {
    const out: T[] = [];
    for (const key of this.runnable.splice(0)) out.push(...(this.waiting.get(key) ?? []));
    for (const [key, list] of this.waiting) if (this.active.has(key)) out.push(...list);
    this.waiting.clear();
    this.waitingIds.clear();
    this.waitingCount = 0;
    this.settle();
    return out;
  }

  private pump(): void {
    while (this.active.size < this.options.concurrency && this.runnable.length > 0) {
      const key = this.runnable.shift()!;
      const list = this.waiting.get(key)!;
      const item = list.shift()!;
      if (list.length === 0) this.waiting.delete(key);
      this.waitingIds.delete(this.options.idOf(item));
      this.waitingCount--;
      this.active.add(key);
      void this.runOne(key, item);
    }
  }

  private async runOne(key: string, item: T): Promise<void> {
    try {
      await this.options.run(item);
    } catch (error) {
      try {
        this.options.onError?.(item, error);
      } catch {
        // a failing error reporter must not wedge the key
      }
    } finally {
      this.active.delete(key);
      if (this.waiting.has(key)) this.runnable.push(key);
      this.pump();
      this.settle();
    }
  }

  private settle(): void {
    if (this.depth() !== 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
