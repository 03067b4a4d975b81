/**
 * The Ipam port on one DynamoDB table, with single-item conditional writes only (dynalite has no transactions).
 * Item types, access patterns and the write order of every protocol: README.md next to this file; the IPAM as a
 * whole: docs/ipam.md. Allocation rules (the same as local/memory/ipam.ts, ADR 0012):
 * - eligible addresses come from allocatableRanges(): never network, broadcast, gateway or excluded;
 * - claimAny takes never-used addresses first; released ones only after every never-used one is gone,
 *   oldest release first (spread at random over the oldest few, so concurrent allocators do not collide);
 * - the owner is the EIP uid: same-owner claims are idempotent, another owner's address is a conflict;
 * - claimAny is idempotent through strongly consistent reads only (ADR 0026): an owner claims inside its *home
 *   block* (64 addresses chosen by a hash of its uid), or, when that block has nothing free, records a pointer
 *   item inside the block before claiming elsewhere; one consistent Query of the block finds either;
 * - an address item is never deleted: release turns it into a free marker, which is what lets any allocator
 *   know, from the item's mere existence, that an address has been used before.
 *
 * This file is the port's face: it checks the arguments, runs claimAny's strategies in order and keeps its
 * bookkeeping. The strategies are claim.ts, their conditional writes claim-writes.ts, what this allocator knows of
 * the pools and its estimates knowledge.ts (with the cursor's items in cursor-io.ts), findByOwner lookup.ts,
 * releases and the garbage collection release.ts.
 */
import { NoAvailableAddressError } from '../../domain/errors.js';
import type {
  Allocation,
  ClaimOptions,
  Clock,
  Ipam,
  Logger,
  Metrics,
  Owner,
  OwnerRecord,
  Placement,
  Pool,
} from '../../ports.js';
import { ClaimStrategies } from './claim.js';
import { ClaimWrites } from './claim-writes.js';
import type { CursorOptions } from './cursor.js';
import { heldAt } from './held-at.js';
import { assertOwner, avoidedValues, type Claimant } from './items.js';
import { PoolKnowledge } from './knowledge.js';
import { geometryOf, homeBlock, homeOfHint } from './layout.js';
import { OwnerLookup } from './lookup.js';
import { type GcOptions, type GcReport, Releases } from './release.js';
import type { Store } from './store.js';

export type { GcOptions, GcReport } from './release.js';

export interface IpamTuning {
  /** Cursor options (window of segments, cache age). */
  cursor: Partial<CursorOptions>;
  /** How many of the oldest released addresses the reuse phase reads at once. Default 100. */
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

export class DynamoIpam implements Ipam {
  private readonly tuning: IpamTuning;
  private readonly known: PoolKnowledge;
  private readonly writes: ClaimWrites;
  private readonly strategies: ClaimStrategies;
  private readonly releases: Releases;
  private readonly lookup: OwnerLookup;
  /** Stats of the last claimAny, for the benchmark and the tests (not part of the port). */
  lastClaim: ClaimStats | undefined;

  constructor(
    private readonly store: Store,
    clock: Clock,
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
    this.known = new PoolKnowledge(store, clock, this.tuning, log);
    this.writes = new ClaimWrites(store, clock, this.tuning.maxClaimAttempts, metrics);
    this.releases = new Releases(store, clock, log, metrics);
    this.lookup = new OwnerLookup(store, this.known);
    this.strategies = new ClaimStrategies(
      store,
      this.known,
      this.writes,
      this.tuning,
      (uid, pk) => this.releases.held(uid, pk),
      log,
    );
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
   * eventually consistent index in the way. The order of attempts (claim.ts):
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
      (options.firstAttempt && (await this.strategies.first(g, home, owner, stats, at !== undefined))) ||
      (await this.strategies.inBlock(g, home, owner, stats, !options.firstAttempt));
    if (stats.conflicts > 0) this.metrics?.count('IpamConflicts', stats.conflicts, { subnet: pool.subnet });
    if (!result) {
      this.metrics?.count('IpamExhausted', 1, { subnet: pool.subnet });
      throw new NoAvailableAddressError(`no available IPv${pool.family} address in subnet ${pool.subnet}`);
    }
    if (stats.source === 'existing') return result;
    this.known.claimed(g, owner.uid, result.address, stats);
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
   * The block this allocator is filling, as a home for new owners (ADR 0043; PoolKnowledge.suggestHome). No
   * request.
   */
  suggestHome(pool: Pool): string | undefined {
    return this.known.suggestHome(pool);
  }

  /** One conditional UpdateItem on the address item: the placement is written only while `ownerUid` holds it. */
  place(subnet: string, address: string, ownerUid: string, placement: Placement): Promise<boolean> {
    return this.writes.place(subnet, address, ownerUid, placement);
  }

  /** One conditional UpdateItem `IF ownerUid = :from` (claim-writes.ts). */
  transfer(subnet: string, address: string, fromUid: string, to: Owner): Promise<boolean> {
    return this.writes.transfer(subnet, address, fromUid, to);
  }

  // ------------------------------------------------------------------ lookups, releases, collection

  /** Consistent BatchGetItem of the address items (held-at.ts). */
  heldAt(subnet: string, addresses: readonly string[]): Promise<Map<string, Allocation>> {
    return heldAt(this.store, subnet, addresses);
  }

  /** Read where `where` says the owner's allocations are, as well as through the owner index (lookup.ts). */
  findByOwner(ownerUid: string, where?: readonly OwnerRecord[]): Promise<Allocation[]> {
    return this.lookup.held(ownerUid, where);
  }

  release(subnet: string, address: string, ownerUid: string): Promise<boolean> {
    return this.releases.release(subnet, address, ownerUid);
  }

  /** Releases allocations whose owner is not live (release.ts says how it stays safe against claims in flight). */
  collectGarbage(liveOwnerUids: ReadonlySet<string>, options: GcOptions = {}): Promise<GcReport> {
    return this.releases.collectGarbage(liveOwnerUids, options);
  }
}
