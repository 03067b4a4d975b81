/**
 * What one allocator (one Lambda container) knows of the pools it claims in, and its estimates: the home blocks it
 * read and what they left free (ADR 0043), how fast others claim there, how used the pool looks (which decides the
 * blind write), whether a pool read whole is busy (which decides the window read, ADR 0044), the block it proposes
 * as new owners' home, the pool-wide never-used cursor (cursor.ts) and the list of released addresses. Everything
 * here is read from the table; stale knowledge costs a failed conditional write, never a wrong answer.
 */
import { formatAddress, parseAddress } from '../../domain/addressing.js';
import type { Clock, Logger, Pool } from '../../ports.js';
import { DEFAULT_CURSOR, NeverUsedCursor } from './cursor.js';
import { tableCursorIo } from './cursor-io.js';
import type { ClaimStats, IpamTuning } from './ipam.js';
import { blockId, type Item, names, poolId, randomBelow, setBounded, shuffle } from './items.js';
import {
  addressSk,
  BLOCK_SIZE,
  blockRange,
  geometryOf,
  type HomeBlock,
  homeBlock,
  INDEX,
  type PoolGeometry,
  pointerSk,
  valueOfSk,
} from './layout.js';
import type { Store } from './store.js';

/** How far back a block read looks at claim times to tell how busy others are there (ADR 0043). */
const RATE_WINDOW_MS = 10_000;

/** First attempts in a block that read it first after a claim from memory lost a race there (ADR 0043). */
const WARY_CLAIMS = 4;

/** Uncontested reuse claims in a row before an allocator trusts its cached list of released addresses. */
const CALM_BEFORE_CACHING = 8;

/** A consistent read of an owner's home block: what it holds there, its pointer, and the free candidates. */
export interface BlockView {
  mine: Item[];
  pointer: Item | undefined;
  neverUsed: bigint[];
  /** Released, still eligible addresses of the block, oldest release first. */
  released: bigint[];
  /** Share of the block's eligible addresses that have an item (held or released). */
  used: number;
  /** Claims per millisecond others made in the block over the last RATE_WINDOW_MS (their claimedAt). */
  othersRate: number;
}

/** What this allocator last read of one home block, less what it has since claimed or lost a race for. */
export interface RememberedBlock {
  neverUsed: bigint[];
  released: bigint[];
  loadedAt: number;
  /** BlockView.othersRate at the read: how fast what is remembered goes stale. */
  othersRate: number;
  /** Reads of this block by this allocator so far. */
  reads: number;
}

export class PoolKnowledge {
  private readonly cursors = new Map<string, NeverUsedCursor>();
  /** Home block (pool key, fingerprint, start) → what the last read of it left free (ADR 0043). */
  private readonly blocks = new Map<string, RememberedBlock>();
  /** Owners this allocator claimed for lately: their claims are not others' activity (BlockView.othersRate). */
  private readonly claimedHere = new Map<string, true>();
  /** Home block → first attempts left that read the block before claiming, after a race lost from memory. */
  private readonly wary = new Map<string, number>();
  /** Per pool (key, fingerprint): claims in a row that found their home block full (the pointer path). */
  private readonly fullHomes = new Map<string, number>();
  /** Per pool (key, fingerprint): the block this allocator proposes as new owners' home while it has room. */
  private readonly homes = new Map<string, bigint>();
  private readonly freeCache = new Map<string, { values: bigint[]; loadedAt: number }>();
  /** Released-address claims won in a row by this allocator. */
  private reuseCalm = 0;
  /** Per pool: moving estimate of how used the home blocks this allocator read were (decides the blind try). */
  private readonly fill = new Map<string, number>();
  /** Per block: whether its last read saw other allocators' recent claims (a window read then, ADR 0044). */
  private readonly busy = new Map<string, boolean>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly tuning: IpamTuning,
    private readonly log?: Logger,
  ) {}

  // ------------------------------------------------------------------ estimates

  /** This allocator's estimate of how used the pool's home blocks are; undefined before it has read any. */
  fillOf(g: PoolGeometry): number | undefined {
    return this.fill.get(g.pk);
  }

  /** While the pool looks sparse (or nothing of it has been read yet), a blind write is worth trying. */
  looksSparse(g: PoolGeometry): boolean {
    const estimate = this.fill.get(g.pk);
    return estimate === undefined || estimate < this.tuning.blindBelow;
  }

  observeFill(g: PoolGeometry, used: number): void {
    const prev = this.fill.get(g.pk);
    setBounded(this.fill, g.pk, prev === undefined ? used : prev * 0.7 + used * 0.3);
  }

  /** Whether the last read of this block saw other allocators' recent claims (ADR 0044). */
  othersBusyIn(id: string): boolean {
    return this.busy.get(id) === true;
  }

  // ------------------------------------------------------------------ home blocks

  /**
   * What is remembered of a block, when it is still worth claiming from: none while the block is read first after
   * a race lost from memory (each call spends one of those claims), else the memory if `fresh`.
   */
  recall(id: string, suggested: boolean): RememberedBlock | undefined {
    const known = this.blocks.get(id);
    const wary = this.wary.get(id) ?? 0;
    if (wary > 0) {
      this.wary.set(id, wary - 1);
      return undefined;
    }
    return known && this.fresh(known, suggested) ? known : undefined;
  }

  /**
   * Whether what is remembered of a block is still worth claiming from: younger than `blockCacheMs`, and the claims
   * others were making there when it was read (their rate, times its age) have likely taken under a tenth of what
   * it lists as free. A block everybody shares (not one this allocator chose, `suggested`) must also have been read
   * twice: allocators that start together see no one else's claims in their first read. A block shared with busy
   * allocators is read before every claim instead.
   */
  private fresh(known: RememberedBlock, suggested: boolean): boolean {
    const age = this.clock.now() - known.loadedAt;
    const free = known.neverUsed.length + known.released.length;
    return (
      (suggested || known.reads >= 2) &&
      age <= this.tuning.blockCacheMs &&
      known.othersRate * age <= 0.1 * free
    );
  }

  /** Drops an address from what this allocator remembers of a block: it has just been claimed or raced for. */
  forget(id: string, value: bigint): void {
    const known = this.blocks.get(id);
    if (!known) return;
    known.neverUsed = known.neverUsed.filter((v) => v !== value);
    known.released = known.released.filter((v) => v !== value);
  }

  /** A race lost from memory: others are busy in this block; read it instead, this time and for the next few claims. */
  distrust(id: string): void {
    this.blocks.delete(id);
    setBounded(this.wary, id, WARY_CLAIMS);
  }

  /** One consistent Query of the owner's home block: its address items and the pointer items kept there. */
  async readBlock(
    g: PoolGeometry,
    home: HomeBlock,
    uid: string,
    memoryId = blockId(g, home),
  ): Promise<BlockView> {
    const since = this.clock.now() - RATE_WINDOW_MS;
    const items: Item[] = [];
    for await (const it of this.store.queryItems({
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :a AND :b',
      ExpressionAttributeValues: {
        ':pk': { S: g.pk },
        ':a': { S: addressSk(g.pool.family, home.start) },
        // `~` sorts after the `#P#…` suffix of pointer keys and before the next address key.
        ':b': { S: `${addressSk(g.pool.family, home.end)}~` },
      },
      // Only what the choice needs: the owner's own item, when there is one, is read whole afterwards.
      ProjectionExpression: 'sk, #ownerUid, #releasedAt, #ptrSk, #claimedAt',
      ExpressionAttributeNames: names('ownerUid', 'releasedAt', 'ptrSk', 'claimedAt'),
      ConsistentRead: true,
    }))
      items.push(it);
    const byOthersLately = (owner: string | undefined, it: Item): boolean =>
      !!owner && Number(it.claimedAt?.N ?? '0') >= since && !this.claimedHere.has(owner);
    const view = blockView(g, home, uid, items, byOthersLately);
    if (home.eligible.length > 0) this.observeFill(g, view.used);
    this.remember(memoryId, view);
    setBounded(this.busy, memoryId, view.othersRate > 0);
    return view;
  }

  /** Keeps what a block read left free for this allocator's next first attempts there (ADR 0043). */
  private remember(id: string, view: BlockView): void {
    if (this.tuning.blockCacheMs <= 0) return;
    setBounded(this.blocks, id, {
      reads: (this.blocks.get(id)?.reads ?? 0) + 1,
      neverUsed: [...view.neverUsed],
      released: [...view.released],
      loadedAt: this.clock.now(),
      othersRate: view.othersRate,
    });
  }

  /**
   * The block this allocator is filling, as a home for new owners (ADR 0043): kept while it remembers free
   * addresses there (or has not read it yet), else another block of the pool at random, so that concurrent
   * allocators rarely share one. Undefined for a pool read whole (one block, everybody's home), and while the pool
   * looks sparse to this allocator (blind writes at the owners' own blocks are cheaper there).
   */
  suggestHome(pool: Pool): string | undefined {
    const g = geometryOf(pool);
    const range = blockRange(g);
    if (!range) return undefined;
    // While the pool looks sparse (or nothing of it has been read yet), an owner's own block and a blind write at
    // its first candidate is one request without any memory: no home to propose.
    if (this.looksSparse(g)) return undefined;
    const id = poolId(g);
    const current = this.homes.get(id);
    if (current !== undefined) {
      const known = this.blocks.get(`${id}|${current}`);
      // Moved on from with one address left: racing others for a block's last address ends behind a pointer.
      if (!known || known.neverUsed.length + known.released.length > 1)
        return formatAddress(g.pool.family, current);
    }
    const count = (range.last - range.first) / BLOCK_SIZE + 1n;
    let start = range.first;
    for (let i = 0; i < 8; i++) {
      start = range.first + randomBelow(count) * BLOCK_SIZE;
      if (start !== current && homeBlock(g, '', start).eligible.length > 0) break;
    }
    setBounded(this.homes, id, start);
    return formatAddress(g.pool.family, start);
  }

  /**
   * A new claim of `address` for `uid`. Home blocks found full twice in a row (a pool filled block by block) and the
   * pool-wide cursor found room elsewhere: propose that block from now on, so that the next new owners claim there
   * from memory instead of each meeting a full block (ADR 0043). Once only is usually a race lost in a busy block: a
   * random block then.
   */
  claimed(g: PoolGeometry, uid: string, address: string, stats: ClaimStats): void {
    const id = poolId(g);
    const fullInARow = stats.path === 'pointer' ? (this.fullHomes.get(id) ?? 0) + 1 : 0;
    setBounded(this.fullHomes, id, fullInARow);
    const range = blockRange(g);
    if (fullInARow >= 2 && stats.source === 'never-used' && range) {
      const start = (parseAddress(address)!.value / BLOCK_SIZE) * BLOCK_SIZE;
      if (start >= range.first && start <= range.last) setBounded(this.homes, id, start);
    }
    setBounded(this.claimedHere, uid, true, 1024);
  }

  // ------------------------------------------------------------------ pool-wide

  /** The pool's never-used cursor (cursor.ts), one per pool and geometry. */
  cursorOf(g: PoolGeometry): NeverUsedCursor {
    const id = poolId(g);
    let c = this.cursors.get(id);
    if (!c) {
      c = new NeverUsedCursor(g, tableCursorIo(this.store, g, this.log), this.clock, {
        ...DEFAULT_CURSOR,
        ...this.tuning.cursor,
      });
      this.cursors.set(id, c);
    }
    return c;
  }

  /**
   * The next released candidate of the pool, oldest release first, spread at random over the oldest few; undefined
   * when there is none. When this allocator has not lost a race for a while, the list it read serves its next claims
   * for `reuseCacheMs` (a read saved per claim); after a lost race (`reuseLost`) it reads a fresh list for every
   * claim again (a read is cheaper than a failed write).
   */
  async nextReleased(g: PoolGeometry, avoid: ReadonlySet<bigint>): Promise<bigint | undefined> {
    const id = poolId(g);
    let cached = this.freeCache.get(id);
    const trusted = this.reuseCalm >= CALM_BEFORE_CACHING;
    if (
      !trusted ||
      !cached ||
      cached.values.length === 0 ||
      this.clock.now() - cached.loadedAt > this.tuning.reuseCacheMs
    ) {
      const values = (await this.oldestReleased(g)).filter((v) => !avoid.has(v));
      if (values.length === 0) {
        this.freeCache.delete(id);
        return undefined;
      }
      shuffle(values);
      cached = { values, loadedAt: this.clock.now() };
      this.freeCache.set(id, cached);
    }
    return cached.values.shift()!;
  }

  /** A released address won: one more calm claim. */
  reuseWon(): void {
    this.reuseCalm++;
  }

  /** A race for a released address lost: others are busy here; the cached list goes. */
  reuseLost(g: PoolGeometry): void {
    this.reuseCalm = 0;
    this.freeCache.delete(poolId(g));
  }

  /** Values of the oldest released, still-eligible addresses of the pool (byFree index, eventually consistent). */
  private async oldestReleased(g: PoolGeometry): Promise<bigint[]> {
    const batch = this.tuning.reuseBatch;
    const out: bigint[] = [];
    for await (const it of this.store.queryItems({
      IndexName: INDEX.byFree,
      KeyConditionExpression: '#freePool = :pk',
      ExpressionAttributeNames: names('freePool'),
      ExpressionAttributeValues: { ':pk': { S: g.pk } },
      ScanIndexForward: true,
      Limit: batch,
    })) {
      const v = valueOfSk(it.sk?.S ?? '');
      // Released before the subnet's excludeIps or CIDR changed: no longer eligible, skipped (kept, not lost).
      if (v !== undefined && g.slotOf(v) !== undefined) out.push(v);
      if (out.length >= batch) break;
    }
    return out;
  }
}

/**
 * What a block read found: the owner's own items and pointer, the block's never-used and released (oldest release
 * first) eligible addresses, how used it is, and how fast others claimed there lately (`byOthersLately`).
 */
function blockView(
  g: PoolGeometry,
  home: HomeBlock,
  uid: string,
  items: readonly Item[],
  byOthersLately: (owner: string | undefined, it: Item) => boolean,
): BlockView {
  const view: BlockView = {
    mine: [],
    pointer: undefined,
    neverUsed: [],
    released: [],
    used: 0,
    othersRate: 0,
  };
  const seen = new Set<bigint>();
  const released: { value: bigint; at: number }[] = [];
  let othersRecent = 0;
  // The owner's pointer; any other key that is not an address is another owner's pointer.
  const ptr = pointerSk(g, home, uid);
  view.pointer = items.find((it) => it.sk?.S === ptr);
  for (const it of items) {
    const v = valueOfSk(it.sk?.S ?? '');
    if (v === undefined) continue; // a pointer
    const owner = it.ownerUid?.S;
    if (owner === uid) view.mine.push(it);
    if (byOthersLately(owner, it)) othersRecent++;
    if (g.slotOf(v) === undefined) continue; // no longer eligible (excludeIps changed): not a candidate
    seen.add(v);
    if (!owner) released.push({ value: v, at: Number(it.releasedAt?.N ?? '0') });
  }
  view.neverUsed = home.eligible.filter((v) => !seen.has(v));
  view.released = released.sort((a, b) => a.at - b.at).map((r) => r.value);
  view.used = home.eligible.length === 0 ? 1 : seen.size / home.eligible.length;
  view.othersRate = othersRecent / RATE_WINDOW_MS;
  return view;
}
