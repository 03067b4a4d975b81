/**
 * The periodic resync, spread over its period: a round lists the EIPs once, then sends them one by one, evenly
 * over the period and never faster than `ratePerSecond`, so that a resync of many EIPs is a steady trickle of
 * updates rather than one burst against the update function's reserved concurrency, the API server and the
 * gateways (docs/adr/0082-resync-spread-over-its-period.md). When the rate cannot fit every EIP into one period, the
 * round takes longer and the next one starts when it ends: rounds never overlap.
 *
 * Time comes from `Timers`, so that a test drives it with a fake clock.
 */

export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Node's timers, unref'd: a pending resync never keeps the process alive. */
const realTimers: Timers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Timers fire no more often than this; a faster rate sends several items per tick. */
export const MIN_TICK_MS = 20;

export interface SpreadResyncOptions<T> {
  /** Period of the rounds, and the time one round is spread over. */
  periodMs: number;
  /** The most items sent in any second. */
  ratePerSecond: number;
  /** What a round sends, read once at its start. */
  list(): readonly T[];
  /** Sends one item, at its turn. */
  send(item: T): void;
  /** Told at the start of each round: how many items, and over how long they will go. */
  onRound?(round: { items: number; spreadMs: number }): void;
  timers?: Timers;
}

export class SpreadResync<T> {
  private readonly timers: Timers;
  private handle: unknown;
  private items: readonly T[] = [];
  private sent = 0;
  private startedAt = 0;
  private gapMs = 0;
  private stopped = true;

  constructor(private readonly options: SpreadResyncOptions<T>) {
    if (!(options.periodMs > 0)) throw new RangeError('periodMs must be positive');
    if (!(options.ratePerSecond > 0)) throw new RangeError('ratePerSecond must be positive');
    this.timers = options.timers ?? realTimers;
  }

  /** Starts the rounds: the first one a period from now (the bridge's start-up list has just sent everything). */
  start(): void {
    this.stopped = false;
    this.schedule(() => this.round(), this.options.periodMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.handle !== undefined) this.timers.clearTimeout(this.handle);
    this.handle = undefined;
  }

  /** Time between two sends of a round of `n` items: the period shared out, but no less than the rate allows. */
  static gapOf(n: number, periodMs: number, ratePerSecond: number): number {
    return n === 0 ? 0 : Math.max(periodMs / n, 1000 / ratePerSecond);
  }

  private schedule(fn: () => void, ms: number): void {
    if (this.stopped) return;
    this.handle = this.timers.setTimeout(fn, Math.max(0, ms));
  }

  private round(): void {
    this.items = this.options.list();
    this.sent = 0;
    this.startedAt = this.timers.now();
    this.gapMs = SpreadResync.gapOf(this.items.length, this.options.periodMs, this.options.ratePerSecond);
    this.options.onRound?.({
      items: this.items.length,
      spreadMs: Math.max(this.options.periodMs, this.gapMs * this.items.length),
    });
    this.tick();
  }

  /**
   * Sends what is due, at most as many as one tick's share of the rate (a late timer catches up no faster than the
   * rate), then sleeps until the next item is due, or the next round.
   */
  private tick(): void {
    if (this.stopped) return;
    const now = this.timers.now();
    const tickMs = Math.max(this.gapMs, MIN_TICK_MS);
    // One per tick, or at a high rate the items of one MIN_TICK_MS (the gap is never below 1000 / rate).
    const allowance = Math.max(1, Math.floor(tickMs / this.gapMs));
    let n = 0;
    while (this.sent < this.items.length && n < allowance && this.dueAt(this.sent) <= now) {
      this.options.send(this.items[this.sent]!);
      this.sent++;
      n++;
    }
    if (this.sent < this.items.length) {
      const next = Math.max(this.dueAt(this.sent), now + (n > 0 ? tickMs : 0));
      this.schedule(() => this.tick(), next - now);
      return;
    }
    this.items = [];
    const nextRound = Math.max(this.startedAt + this.options.periodMs, now + tickMs);
    this.schedule(() => this.round(), nextRound - now);
  }

  private dueAt(i: number): number {
    return this.startedAt + i * this.gapMs;
  }
}
