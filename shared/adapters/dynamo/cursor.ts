/**
 * Where to look for a never-used address, without scanning the pool and without every allocator racing for
 * the same one (ADR 0012).
 *
 * The slots of a pool are grouped into segments (layout.ts). A segment is *full* when every one of its slots
 * has an address item (held or released: address items are never deleted), and a full segment stays full.
 * So "every segment below `hwm` is full" and "segment n is full" are facts that any allocator may record for
 * the others without coordination: the pool's cursor item holds the high-water mark (a conditional
 * max-update), and a small marker item per full segment above it lets an allocator learn, in one Query, which
 * segments of its window not to bother reading.
 *
 * An allocator (one per adapter instance, i.e. per warm Lambda container) keeps a small view per pool and
 * takes the next free slot of its current segment. When that runs out, it picks a *random* not-full segment
 * among the first `window` above the mark and reads that segment's keys once (one Query of at most
 * `segmentSize` keys). A lost race (a conditional write that failed) means someone else works nearby: the
 * allocator drops its segment and doubles its window, so concurrent allocators spread out over the pool;
 * quiet periods shrink the window back, so addresses are handed out low-first when there is no contention.
 */
import type { Clock } from '../../ports.js';
import type { PoolGeometry } from './layout.js';

export interface CursorIo {
  /** The published high-water mark for this geometry (0 when none or published for another fingerprint). */
  readHwm(): Promise<bigint>;
  /** Raises the published mark to `hwm` if it is lower (conditional; best effort). */
  publishHwm(hwm: bigint): Promise<void>;
  /** Segments in [from, to] known full by a marker (eventually consistent; a hint). */
  fullMarkers(from: bigint, to: bigint): Promise<Set<bigint>>;
  /** Records that `seg` is full (idempotent; best effort). */
  markFull(seg: bigint): Promise<void>;
  /** Slots of `seg` that have an item (strongly consistent). */
  usedSlots(seg: bigint): Promise<Set<bigint>>;
}

export interface CursorOptions {
  /** Segments above the mark an uncontended allocator chooses among. Default 16. */
  window: number;
  /** The window grows up to `window × maxSpread` under contention. Default 8. */
  maxSpread: number;
  /** A segment's free-slot list older than this is re-read before use. Default 30 s. */
  maxAgeMs: number;
  random: () => number;
}

export const DEFAULT_CURSOR: CursorOptions = {
  window: 16,
  maxSpread: 8,
  maxAgeMs: 30_000,
  random: Math.random,
};

/** Segments the table's mark may trail ours by before we update it. */
const PUBLISH_LAG = 16n;
/** How long the markers of a window are trusted before they are read again. */
const MARKERS_MAX_AGE_MS = 1_000;

export class NeverUsedCursor {
  /** Every segment below this is full. */
  private hwm = 0n;
  private published = 0n;
  private hwmRead = false;
  private readonly full = new Set<bigint>();
  private current: { seg: bigint; free: bigint[]; loadedAt: number } | undefined;
  private spread = 1;
  private markersRead: { from: bigint; to: bigint; at: number } | undefined;
  private calm = 0;

  constructor(
    readonly geometry: PoolGeometry,
    private readonly io: CursorIo,
    private readonly clock: Clock,
    private readonly options: CursorOptions = DEFAULT_CURSOR,
  ) {}

  /** True once every segment is known full: the pool has no never-used address left (monotone). */
  get exhausted(): boolean {
    return this.hwm >= this.geometry.segmentCount;
  }

  /** The next never-used candidate slot, or undefined when there is none left. */
  async next(): Promise<bigint | undefined> {
    for (;;) {
      const c = this.current;
      if (c && c.free.length === 0) {
        // We won every slot our read of this segment left free (a lost race drops the segment before this):
        // it is full. Say so, so that nobody else spends a read on it.
        this.current = undefined;
        this.full.add(c.seg);
        await this.io.markFull(c.seg);
      } else if (c && this.clock.now() - c.loadedAt <= this.options.maxAgeMs) return c.free.shift();
      this.current = undefined;
      const seg = await this.pickSegment();
      if (seg === undefined) return undefined;
      this.current = await this.load(seg);
    }
  }

  /**
   * A fresh read of segment `seg`: its free slots, walked from a random offset (two allocators in one segment meet
   * once, not at every slot); undefined, and the segment marked full, when it has none.
   */
  private async load(seg: bigint): Promise<typeof this.current> {
    const used = await this.io.usedSlots(seg);
    const { first, last } = this.geometry.segment(seg);
    const free: bigint[] = [];
    for (let s = first; s <= last; s++) if (!used.has(s)) free.push(s);
    if (free.length === 0) {
      this.full.add(seg);
      await this.io.markFull(seg);
      return undefined;
    }
    const offset = Math.floor(this.options.random() * free.length);
    return { seg, free: [...free.slice(offset), ...free.slice(0, offset)], loadedAt: this.clock.now() };
  }

  /** The candidate was taken by someone else: move away and widen the search. */
  conflicted(): void {
    this.current = undefined;
    this.calm = 0;
    this.spread = Math.min(this.options.maxSpread, this.spread * 2);
  }

  /** The candidate was ours: after a calm stretch, narrow the search again. */
  claimed(): void {
    if (++this.calm >= 16 && this.spread > 1) {
      this.spread /= 2;
      this.calm = 0;
    }
  }

  private async pickSegment(): Promise<bigint | undefined> {
    await this.readHwmOnce();
    const count = this.geometry.segmentCount;
    for (;;) {
      this.advance();
      if (this.hwm >= count) return undefined;
      const width = BigInt(this.options.window * this.spread);
      const end = this.hwm + width < count ? this.hwm + width : count; // exclusive
      await this.readMarkers(this.hwm, end - 1n);
      this.advance();
      await this.publish();
      const candidates: bigint[] = [];
      for (let s = this.hwm; s < end; s++) if (!this.full.has(s)) candidates.push(s);
      if (candidates.length > 0) return candidates[Math.floor(this.options.random() * candidates.length)];
      // The whole window is full: the mark has moved past it; look at the next one.
    }
  }

  /** The published mark, read once per cursor: a new allocator starts where the others got to. */
  private async readHwmOnce(): Promise<void> {
    if (this.hwmRead) return;
    this.hwmRead = true;
    const published = await this.io.readHwm();
    if (published > this.published) this.published = published;
    if (published > this.hwm) this.hwm = published;
  }

  /** The full markers of segments from..to, unless this window's were read a moment ago (full stays full). */
  private async readMarkers(from: bigint, to: bigint): Promise<void> {
    const seen = this.markersRead;
    const fresh = seen?.from === from && seen.to === to && this.clock.now() - seen.at <= MARKERS_MAX_AGE_MS;
    if (fresh) return;
    for (const s of await this.io.fullMarkers(from, to)) this.full.add(s);
    this.markersRead = { from, to, at: this.clock.now() };
  }

  private advance(): void {
    for (const s of this.full) if (s < this.hwm) this.full.delete(s);
    while (this.full.has(this.hwm)) {
      this.full.delete(this.hwm);
      this.hwm++;
    }
  }

  /**
   * Publishes our mark when we know a good deal more than the table does. The markers carry the same facts;
   * the mark only spares a new allocator from reading long runs of them.
   */
  private async publish(): Promise<void> {
    if (this.hwm - this.published < PUBLISH_LAG) return;
    const hwm = this.hwm;
    await this.io.publishHwm(hwm);
    if (hwm > this.published) this.published = hwm;
  }
}
