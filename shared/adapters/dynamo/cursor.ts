/**
 * Where to look for a never-used address, without scanning the pool and without every allocator racing for
 * the same one (ADR 0002).
 *
 * The slots of a pool are grouped into segments (layout.ts). A segment is *full* when every one of its slots
 * has an address item (held or released: address items are never deleted). Full segments only ever stay full,
 * so "every segment below `hwm` is full" is a fact that can be cached anywhere and published in the pool's
 * cursor item without coordination (a conditional max-update).
 *
 * An allocator (one per adapter instance, i.e. per warm Lambda container) keeps a small view per pool:
 * the high-water mark, the segments above it it has seen full, and the free slots of the segment it is
 * working in. To find a slot it takes the next free slot of its current segment; when that runs out it picks
 * a *random* segment among the first `window` not-known-full segments above the mark and reads that segment's
 * keys once (one Query of at most `segmentSize` keys). Concurrent allocators therefore work in different
 * segments and collide only when two pick the same one — and then walk it from different, random offsets.
 */
import type { Clock } from '../../ports.js';
import type { PoolGeometry } from './layout.js';

export interface CursorIo {
  /** The published high-water mark for this geometry (0 when none or published for another fingerprint). */
  readHwm(): Promise<bigint>;
  /** Raises the published mark to `hwm` if it is lower (conditional; best effort). */
  publishHwm(hwm: bigint): Promise<void>;
  /** Slots of `seg` that have an item (strongly consistent). */
  usedSlots(seg: bigint): Promise<Set<bigint>>;
}

export interface CursorOptions {
  /** How many not-known-full segments above the mark an allocator chooses among. Default 32. */
  window: number;
  /** A segment's free-slot list older than this is re-read before use. Default 30 s. */
  maxAgeMs: number;
  random: () => number;
}

export const DEFAULT_CURSOR: CursorOptions = { window: 32, maxAgeMs: 30_000, random: Math.random };

export class NeverUsedCursor {
  /** Every segment below this is full. */
  private hwm = 0n;
  private published = 0n;
  private hwmRead = false;
  private fullStreak = 0;
  private readonly full = new Set<bigint>();
  private current: { seg: bigint; free: bigint[]; loadedAt: number } | undefined;

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
      if (c && this.clock.now() - c.loadedAt > this.options.maxAgeMs) this.current = undefined;
      else if (c && c.free.length > 0) return c.free.shift();
      else if (c) {
        // Our segment ran out (we used it up, or lost races for the rest): it is full now.
        this.markFull(c.seg);
        this.current = undefined;
      }
      const seg = await this.pickSegment();
      if (seg === undefined) return undefined;
      const used = await this.io.usedSlots(seg);
      const { first, last } = this.geometry.segment(seg);
      const free: bigint[] = [];
      for (let s = first; s <= last; s++) if (!used.has(s)) free.push(s);
      if (free.length === 0) {
        this.markFull(seg);
        // Others may be far ahead (a container warm for hours): after two full segments in a row, one cheap
        // read of the published mark instead of one Query per segment.
        if (++this.fullStreak >= 2) {
          this.fullStreak = 0;
          await this.catchUp();
        }
        continue;
      }
      this.fullStreak = 0;
      // Walk from a random offset: two allocators in one segment meet once, not at every slot.
      const offset = Math.floor(this.options.random() * free.length);
      this.current = {
        seg,
        free: [...free.slice(offset), ...free.slice(0, offset)],
        loadedAt: this.clock.now(),
      };
      await this.publish();
    }
  }

  private async pickSegment(): Promise<bigint | undefined> {
    if (!this.hwmRead) {
      this.hwmRead = true;
      await this.catchUp();
    }
    this.advance();
    const count = this.geometry.segmentCount;
    if (this.hwm >= count) return undefined;
    const candidates: bigint[] = [];
    for (let s = this.hwm; s < count && candidates.length < this.options.window; s++) {
      if (!this.full.has(s)) candidates.push(s);
    }
    return candidates[Math.floor(this.options.random() * candidates.length)];
  }

  private markFull(seg: bigint): void {
    if (seg >= this.hwm) this.full.add(seg);
    this.advance();
  }

  private advance(): void {
    while (this.full.has(this.hwm)) {
      this.full.delete(this.hwm);
      this.hwm++;
    }
  }

  private async catchUp(): Promise<void> {
    const published = await this.io.readHwm();
    if (published > this.published) this.published = published;
    if (published > this.hwm) {
      this.hwm = published;
      for (const s of this.full) if (s < published) this.full.delete(s);
      if (this.current && this.current.seg < published) this.current = undefined;
    }
  }

  /** Publishes our mark when we know more than the table does. */
  private async publish(): Promise<void> {
    if (this.hwm <= this.published) return;
    const hwm = this.hwm;
    await this.io.publishHwm(hwm);
    if (hwm > this.published) this.published = hwm;
  }
}
