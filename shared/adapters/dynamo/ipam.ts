/**
 * The Ipam port on one DynamoDB table, with single-item conditional writes only (dynalite has no transactions).
 * Item types, access patterns and the write order of every protocol: README.md next to this file.
 * Allocation rules (the same as local/memory/ipam.ts, ADR 0012):
 * - eligible addresses come from allocatableRanges(): never network, broadcast, gateway or excluded;
 * - claimAny takes never-used addresses first; released ones only after every never-used one is gone,
 *   oldest release first (spread at random over the oldest few, so concurrent allocators do not collide);
 * - the owner is the EIP uid: same-owner claims are idempotent, another owner's address is a conflict;
 * - claimAny is idempotent through strongly consistent reads only (ADR 0026): an owner claims inside its *home
 *   block* (64 addresses chosen by a hash of its uid), or, when that block has nothing free, records a pointer
 *   item inside the block before claiming elsewhere; one consistent Query of the block finds either;
 * - an address item is never deleted: release turns it into a free marker, which is what lets any allocator
 *   know, from the item's mere existence, that an address has been used before.
 */
import { formatAddress, parseAddress } from '../../domain/addressing.js';
import { NoAvailableAddressError } from '../../domain/errors.js';
import type {
  Allocation,
  ClaimOptions,
  Clock,
  Ipam,
  Logger,
  Metrics,
  Owner,
  Placement,
  Pool,
} from '../../ports.js';
import { ClaimWrites } from './claim-writes.js';
import { type CursorOptions, DEFAULT_CURSOR, NeverUsedCursor } from './cursor.js';
import { tableCursorIo } from './cursor-io.js';
import {
  assertOwner,
  avoidedValues,
  blockId,
  type Claimant,
  getItem,
  type Item,
  names,
  randomBelow,
  setBounded,
  shuffle,
  shuffled,
  toAllocation,
} from './items.js';
import {
  addressSk,
  BLOCK_SIZE,
  blockRange,
  geometryOf,
  type HomeBlock,
  homeBlock,
  homeOfHint,
  INDEX,
  type PoolGeometry,
  pointerSk,
  valueOfSk,
} from './layout.js';
import { type GcOptions, type GcReport, Releases } from './release.js';
import type { Store } from './store.js';

export type { GcOptions, GcReport } from './release.js';

/** How far back a block read looks at claim times to tell how busy others are there (ADR 0043). */
const RATE_WINDOW_MS = 10_000;

/** First attempts in a block that read it first after a claim from memory lost a race there (ADR 0043). */
const WARY_CLAIMS = 4;

/** Uncontested reuse claims in a row before an allocator trusts its cached list of released addresses. */
const CALM_BEFORE_CACHING = 8;

export interface IpamTuning {
  /** Cursor options (window of segments, cache age). */
  cursor: Partial<CursorOptions>;
  /** How many of the oldest released addresses the reuse phase reads at once. Default 32. */
  reuseBatch: number;
  /** Conditional writes one claimAny may spend before giving up with a retryable ConflictError. Default 64. */
  maxClaimAttempts: number;
  /** How long an allocator reuses the list of released addresses it read for its next claims. Default 500 ms. */
  reuseCacheMs: number;
  /**
   * On a first attempt (ClaimOptions.firstAttempt) with no recent read of the home block in memory, a blind
   * PutItem of the owner's own first candidate is tried while this allocator's estimate of the home blocks' fill is
   * below this share (one request per allocation in a sparse pool). Default 0.25.
   */
  blindBelow: number;
  /**
   * How long what this allocator read of a home block serves first attempts there without a new read (ADR 0043).
   * Stale knowledge costs a failed conditional write, never a wrong answer. 0 turns it off. Default 5000 ms.
   */
  blockCacheMs: number;
  /**
   * Conditional writes one read of a home block may feed before it is read again. Default 1: after a lost race the
   * block is read again (a read costs less than a write that fails, and the fresh read shows what the others took).
   */
  triesPerRead: number;
}

export interface ClaimStats {
  writes: number;
  conflicts: number;
  source: 'existing' | 'never-used' | 'released';
  /**
   * How the claim was decided: `memory` (a first attempt from this allocator's recent read of the home block, one
   * write), `blind` (a first attempt at the owner's first candidate, one write), `block` (its home block, read
   * once), `pointer` (elsewhere in the pool, behind a pointer item in the home block).
   */
  path: 'memory' | 'blind' | 'block' | 'pointer';
}

/** A consistent read of an owner's home block: what it holds there, its pointer, and the free candidates. */
interface BlockView {
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
interface RememberedBlock {
  neverUsed: bigint[];
  released: bigint[];
  loadedAt: number;
  /** BlockView.othersRate at the read: how fast what is remembered goes stale. */
  othersRate: number;
  /** Reads of this block by this allocator so far. */
  reads: number;
}

export class DynamoIpam implements Ipam {
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
  private readonly tuning: IpamTuning;
  private readonly releases: Releases;
  private readonly writes: ClaimWrites;
  /** Stats of the last claimAny, for the benchmark and the tests (not part of the port). */
  lastClaim: ClaimStats | undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly log?: Logger,
    private readonly metrics?: Metrics,
    tuning: Partial<IpamTuning> = {},
  ) {
    this.tuning = {
      cursor: {},
      reuseBatch: 100,
      maxClaimAttempts: 64,
      reuseCacheMs: 500,
      blindBelow: 0.25,
      blockCacheMs: 5000,
      triesPerRead: 1,
      ...tuning,
    };
    this.releases = new Releases(store, clock, log, metrics);
    this.writes = new ClaimWrites(store, clock, this.tuning.maxClaimAttempts, metrics);
  }

  // ------------------------------------------------------------------ claims

  async claimAddress(pool: Pool, address: string, owner: Owner, placement?: Placement): Promise<Allocation> {
    assertOwner(owner);
    return this.writes.claimStatic(pool, address, owner, placement);
  }

  /**
   * Idempotent for the owner with strongly consistent reads only (ADR 0026). An owner's claims live in its home
   * block (homeBlock in layout.ts) or behind a pointer item there, so one consistent Query of that block answers
   * "does this owner already hold an address here?" — a retry meets its own claim however soon it comes, with no
   * eventually consistent index in the way. The order of attempts:
   * 1. memory (first attempts only, ADR 0043): the owner holds nothing yet, so there is nothing to find; a free
   *    address of the home block from this allocator's recent read of it, one conditional write;
   * 2. blind (first attempts only): while this allocator has found the pool sparse, one conditional PutItem of the
   *    owner's first candidate (never used only);
   * 3. block: one consistent Query of the home block; the owner's own address there is the answer; else a
   *    never-used address of the block, else its oldest released ones;
   * 4. pointer: the block has nothing free: a pointer item in the block names the candidate *before* it is
   *    claimed, the candidate comes from the pool-wide cursor (never-used) or the released list.
   * Every path claims inside the home block or behind its pointer, so a later retry (not a first attempt) finds the
   * claim in step 3. `options.avoid` addresses are never handed out.
   */
  async claimAny(
    pool: Pool,
    owner0: Owner,
    placement?: Placement,
    options: ClaimOptions = {},
  ): Promise<Allocation> {
    assertOwner(owner0);
    const g = geometryOf(pool);
    const owner: Claimant = {
      ...owner0,
      ...(placement && { placement }),
      avoid: avoidedValues(pool, options.avoid),
    };
    const stats: ClaimStats = { writes: 0, conflicts: 0, source: 'existing', path: 'block' };
    this.lastClaim = stats;
    const at = homeOfHint(g, options.home);
    const home = homeBlock(g, owner.uid, at);

    const result =
      (options.firstAttempt && (await this.claimFirst(g, home, owner, stats, at !== undefined))) ||
      (await this.claimInBlock(g, home, owner, stats, !options.firstAttempt));
    if (stats.conflicts > 0) this.metrics?.count('IpamConflicts', stats.conflicts, { subnet: pool.subnet });
    if (!result) {
      this.metrics?.count('IpamExhausted', 1, { subnet: pool.subnet });
      throw new NoAvailableAddressError(`no available IPv${pool.family} address in subnet ${pool.subnet}`);
    }
    if (stats.source === 'existing') return result;
    // Home blocks found full twice in a row (a pool filled block by block) and the pool-wide cursor found room
    // elsewhere: propose that block from now on, so that the next new owners claim there from memory instead of
    // each meeting a full block (ADR 0043). Once only is usually a race lost in a busy block: a random block then.
    const poolId = `${g.pk}|${g.fingerprint}`;
    const fullInARow = stats.path === 'pointer' ? (this.fullHomes.get(poolId) ?? 0) + 1 : 0;
    setBounded(this.fullHomes, poolId, fullInARow);
    const range = blockRange(g);
    if (fullInARow >= 2 && stats.source === 'never-used' && range) {
      const start = (parseAddress(result.address)!.value / BLOCK_SIZE) * BLOCK_SIZE;
      if (start >= range.first && start <= range.last) setBounded(this.homes, poolId, start);
    }
    setBounded(this.claimedHere, owner.uid, true, 1024);
    this.metrics?.count('IpamAllocations', 1, { subnet: pool.subnet, source: stats.source });
    this.metrics?.count('IpamAllocationRetries', stats.conflicts, { subnet: pool.subnet });
    this.log?.debug('address allocated', {
      subnet: pool.subnet,
      address: result.address,
      ownerUid: owner.uid,
      source: stats.source,
      path: stats.path,
      writes: stats.writes,
    });
    return result;
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
    const estimate = this.fill.get(g.pk);
    if (estimate === undefined || estimate < this.tuning.blindBelow) return undefined;
    const id = `${g.pk}|${g.fingerprint}`;
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
   * A first attempt without a read (ADR 0043): from what this allocator remembers of the home block, else (at the
   * owner's own block, not a suggested one) blind at its first candidate while the pool looks sparse. Undefined
   * sends the claim on to the block read.
   */
  private async claimFirst(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    stats: ClaimStats,
    suggested: boolean,
  ): Promise<Allocation | undefined> {
    const id = blockId(g, home);
    const known = this.blocks.get(id);
    const wary = this.wary.get(id) ?? 0;
    if (wary > 0) this.wary.set(id, wary - 1);
    else if (known && this.fresh(known, suggested)) {
      stats.path = 'memory';
      // Never-used first, then the oldest released ones, at random among them so that allocators remembering the
      // same block spread out. A lost race means others are busy in this block and what is remembered is going
      // stale: read it instead, this time and for the next few claims.
      for (;;) {
        const neverUsed = known.neverUsed.length > 0;
        const list = neverUsed ? known.neverUsed : known.released.slice(0, this.tuning.reuseBatch);
        if (list.length === 0) break;
        const value = list[Math.floor(Math.random() * list.length)]!;
        this.forget(id, value);
        if (owner.avoid.has(value)) continue;
        const got = neverUsed
          ? await this.writes.neverUsed(g, value, owner, stats)
          : await this.writes.released(g, value, owner, stats);
        if (got) return got;
        break; // one race lost
      }
      this.blocks.delete(id);
      setBounded(this.wary, id, WARY_CLAIMS);
    }
    // Blind only at the owner's own block: a suggested one is where this allocator goes on claiming, so reading it
    // once pays for the claims after it. Before this allocator has read anything of the pool it tries blind too: in
    // a used pool that costs one failed write, once per container, and the read after it sets the estimate. In a
    // pool known to be sparse, a first candidate already taken (another owner's hashed to it) is followed by one
    // more blind write at another address of the block rather than a read: the block is the owner's own, so a retry
    // still finds the claim there.
    const estimate = this.fill.get(g.pk);
    if (!suggested && (estimate === undefined || estimate < this.tuning.blindBelow)) {
      const candidates = [home.first];
      if (estimate !== undefined && home.eligible.length > 1)
        candidates.push(home.eligible[Math.floor(Math.random() * home.eligible.length)]);
      for (const value of new Set(candidates)) {
        if (value === undefined || owner.avoid.has(value)) continue;
        stats.path = 'blind';
        const got = await this.writes.neverUsed(g, value, owner, stats);
        if (got) {
          // Evidence of a sparse pool only once a read has said how used it is: one lucky write in a used pool
          // must not make the allocator think it sparse.
          if (estimate !== undefined) this.observeFill(g, 0);
          return got;
        }
      }
    }
    return undefined;
  }

  private async claimInBlock(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    stats: ClaimStats,
    retry: boolean,
  ): Promise<Allocation | undefined> {
    // A first attempt in a pool read whole has no claim to find: a window of it shows enough free addresses.
    if (!retry) {
      const got = await this.claimInWindow(g, home, owner, stats);
      if (got) return got;
    }
    // Block: read it consistently; the owner's own claim there (or behind its pointer) is the answer.
    stats.path = 'block';
    let view = await this.readBlock(g, home, owner.uid);
    const found = await this.existing(g, view, owner.uid);
    if (found) return found;
    // A retry that finds nothing at home: the home it was given may not be where the first attempt claimed (an
    // annotation edited by hand, a subnet edit that moved the blocks). The owner index is the last resort: it
    // sees any claim older than its lag (ADR 0043).
    if (retry) {
      const elsewhere = (await this.releases.held(owner.uid, g.pk)).find((a) => a.family === g.pool.family);
      if (elsewhere) return elsewhere;
    }
    const maxReads = Math.max(2, Math.ceil(8 / this.tuning.triesPerRead));
    for (
      let reads = 0;
      reads < maxReads && (view.neverUsed.length > 0 || view.released.length > 0);
      reads++
    ) {
      if (reads > 0) view = await this.readBlock(g, home, owner.uid);
      const got = await this.tryCandidates(g, home, view, owner, stats);
      if (got) return got;
    }

    // Pointer: nothing free in the block (or lost every race there): claim elsewhere, behind a pointer.
    stats.path = 'pointer';
    return this.claimBehindPointer(g, home, owner, view.pointer, stats);
  }

  /**
   * A first attempt in a pool read whole (up to SINGLE_BLOCK_MAX addresses, one block for everybody) where other
   * allocators are busy: one consistent Query of a random aligned BLOCK_SIZE window of it instead of the whole pool —
   * a quarter of the keys on a /24 — and concurrent allocators spread over the windows. What it finds free is
   * remembered for the whole block (ADR 0044).
   */
  private async claimInWindow(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    stats: ClaimStats,
  ): Promise<Allocation | undefined> {
    // Only while others claim here too: alone, a whole read feeds more of this allocator's next claims from memory.
    if (blockRange(g) || home.end - home.start < BLOCK_SIZE || !this.busy.get(blockId(g, home)))
      return undefined;
    const first = home.start / BLOCK_SIZE;
    const start = (first + randomBelow(home.end / BLOCK_SIZE - first + 1n)) * BLOCK_SIZE;
    const end = start + BLOCK_SIZE - 1n;
    const window: HomeBlock = {
      start,
      end,
      eligible: home.eligible.filter((v) => v >= start && v <= end),
      first: undefined,
    };
    if (window.eligible.length === 0) return undefined;
    stats.path = 'block';
    const view = await this.readBlock(g, window, owner.uid, blockId(g, home));
    return this.tryCandidates(g, home, view, owner, stats);
  }

  /** The owner's allocation in its block, or the one its pointer names, confirmed on the address item. */
  private async existing(g: PoolGeometry, view: BlockView, uid: string): Promise<Allocation | undefined> {
    if (view.mine.length > 1)
      this.log?.warn('owner holds more than one address in one pool', {
        ownerUid: uid,
        subnet: g.pool.subnet,
        addresses: view.mine.map((it) => it.sk?.S),
      });
    const target = view.mine[0]?.sk?.S ?? view.pointer?.ptrSk?.S;
    if (!target) return undefined;
    const it = await getItem(this.store, g.pk, target);
    return it?.ownerUid?.S === uid ? toAllocation(it) : undefined;
  }

  /**
   * Never-used candidates of the block first, then its oldest released ones (up to `reuseBatch` of them, in random
   * order so that concurrent owners spread out), each a conditional write; at most `triesPerRead` per read.
   */
  private async tryCandidates(
    g: PoolGeometry,
    home: HomeBlock,
    view: BlockView,
    owner: Claimant,
    stats: ClaimStats,
  ): Promise<Allocation | undefined> {
    const id = blockId(g, home);
    const neverUsed = view.neverUsed.filter((v) => !owner.avoid.has(v));
    for (const value of shuffled(neverUsed).slice(0, this.tuning.triesPerRead)) {
      this.forget(id, value);
      const got = await this.writes.neverUsed(g, value, owner, stats);
      if (got) return got;
    }
    if (view.neverUsed.length > 0) return undefined; // read again: never-used ones still come first
    const released = view.released.filter((v) => !owner.avoid.has(v)).slice(0, this.tuning.reuseBatch);
    for (const value of shuffled(released).slice(0, this.tuning.triesPerRead)) {
      this.forget(id, value);
      const got = await this.writes.released(g, value, owner, stats);
      if (got) return got;
    }
    return undefined;
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
  private forget(id: string, value: bigint): void {
    const known = this.blocks.get(id);
    if (!known) return;
    known.neverUsed = known.neverUsed.filter((v) => v !== value);
    known.released = known.released.filter((v) => v !== value);
  }

  /**
   * Claims outside the home block. The pointer item in the block names each candidate before it is claimed
   * (a conditional write on the pointer as last seen), so a retry that reads the block follows it to the claim.
   * A crash between the two writes leaves a pointer to an address the owner does not hold: ignored, replaced.
   */
  private async claimBehindPointer(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    pointer: Item | undefined,
    stats: ClaimStats,
  ): Promise<Allocation | undefined> {
    let seen = pointer?.ptrSk?.S;
    const point = async (value: bigint): Promise<void> => {
      seen = await this.writes.point(g, home, owner, seen, value, stats);
    };
    const pointerKey = pointerSk(g, home, owner.uid);
    const got =
      (await this.claimNeverUsed(g, owner, stats, point, pointerKey)) ??
      (await this.claimReleased(g, owner, stats, point, pointerKey));
    return got;
  }

  /** One consistent Query of the owner's home block: its address items and the pointer items kept there. */
  private async readBlock(
    g: PoolGeometry,
    home: HomeBlock,
    uid: string,
    memoryId = blockId(g, home),
  ): Promise<BlockView> {
    const view: BlockView = {
      mine: [],
      pointer: undefined,
      neverUsed: [],
      released: [],
      used: 0,
      othersRate: 0,
    };
    const seen = new Set<bigint>();
    const since = this.clock.now() - RATE_WINDOW_MS;
    let othersRecent = 0;
    const released: { value: bigint; at: number }[] = [];
    const ptr = pointerSk(g, home, uid);
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
    })) {
      const sk = it.sk?.S ?? '';
      if (sk === ptr) {
        view.pointer = it;
        continue;
      }
      const v = valueOfSk(sk);
      if (v === undefined) continue; // another owner's pointer
      if (it.ownerUid?.S === uid) view.mine.push(it);
      const owner = it.ownerUid?.S;
      if (owner && Number(it.claimedAt?.N ?? '0') >= since && !this.claimedHere.has(owner)) othersRecent++;
      if (g.slotOf(v) === undefined) continue; // no longer eligible (excludeIps changed): not a candidate
      seen.add(v);
      if (!it.ownerUid?.S) released.push({ value: v, at: Number(it.releasedAt?.N ?? '0') });
    }
    for (const v of home.eligible) if (!seen.has(v)) view.neverUsed.push(v);
    view.released = released.sort((a, b) => a.at - b.at).map((r) => r.value);
    view.used = home.eligible.length === 0 ? 1 : seen.size / home.eligible.length;
    view.othersRate = othersRecent / RATE_WINDOW_MS;
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

  private observeFill(g: PoolGeometry, used: number): void {
    const prev = this.fill.get(g.pk);
    setBounded(this.fill, g.pk, prev === undefined ? used : prev * 0.7 + used * 0.3);
  }

  /** Pool-wide never-used phase: a never-used address (no item at all), found through the pool's cursor. */
  private async claimNeverUsed(
    g: PoolGeometry,
    owner: Claimant,
    stats: ClaimStats,
    before: (value: bigint) => Promise<void>,
    pointerKey: string,
  ): Promise<Allocation | undefined> {
    const cursor = this.cursorOf(g);
    for (;;) {
      const slot = await cursor.next();
      if (slot === undefined) return undefined;
      const value = g.valueOf(slot);
      if (owner.avoid.has(value)) continue; // a gateway pod's own address: left for its reservation
      await before(value);
      const got = await this.writes.neverUsed(g, value, owner, stats, pointerKey);
      if (got) {
        cursor.claimed();
        return got;
      }
      cursor.conflicted();
    }
  }

  /**
   * Pool-wide reuse phase: a released address, oldest release first, spread at random over the oldest few. When
   * this allocator has not lost a race for a while, the list it read serves its next claims for `reuseCacheMs`
   * (a read saved per claim); a lost race means others are busy here, so it reads a fresh list for every claim
   * again (a read is cheaper than a failed write).
   */
  private async claimReleased(
    g: PoolGeometry,
    owner: Claimant,
    stats: ClaimStats,
    before: (value: bigint) => Promise<void>,
    pointerKey: string,
  ): Promise<Allocation | undefined> {
    const id = `${g.pk}|${g.fingerprint}`;
    for (;;) {
      let cached = this.freeCache.get(id);
      const trusted = this.reuseCalm >= CALM_BEFORE_CACHING;
      if (
        !trusted ||
        !cached ||
        cached.values.length === 0 ||
        this.clock.now() - cached.loadedAt > this.tuning.reuseCacheMs
      ) {
        const values = (await this.oldestReleased(g)).filter((v) => !owner.avoid.has(v));
        if (values.length === 0) {
          this.freeCache.delete(id);
          return undefined;
        }
        shuffle(values);
        cached = { values, loadedAt: this.clock.now() };
        this.freeCache.set(id, cached);
      }
      const value = cached.values.shift()!;
      if (owner.avoid.has(value)) continue;
      await before(value);
      const got = await this.writes.released(g, value, owner, stats, pointerKey);
      if (got) {
        this.reuseCalm++;
        return got;
      }
      this.reuseCalm = 0;
      this.freeCache.delete(id);
    }
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

  private cursorOf(g: PoolGeometry): NeverUsedCursor {
    const id = `${g.pk}|${g.fingerprint}`;
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

  // ------------------------------------------------------------------ lookups, releases, collection

  findByOwner(ownerUid: string): Promise<Allocation[]> {
    return this.releases.held(ownerUid);
  }

  releaseByOwner(ownerUid: string): Promise<Allocation[]> {
    return this.releases.releaseByOwner(ownerUid);
  }

  /** One conditional UpdateItem on the address item: the placement is written only while `ownerUid` holds it. */
  place(subnet: string, address: string, ownerUid: string, placement: Placement): Promise<boolean> {
    return this.writes.place(subnet, address, ownerUid, placement);
  }

  release(subnet: string, address: string, ownerUid: string): Promise<boolean> {
    return this.releases.release(subnet, address, ownerUid);
  }

  /** Releases allocations whose owner is not live (release.ts says how it stays safe against claims in flight). */
  collectGarbage(liveOwnerUids: ReadonlySet<string>, options: GcOptions = {}): Promise<GcReport> {
    return this.releases.collectGarbage(liveOwnerUids, options);
  }
}
