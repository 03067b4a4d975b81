/**
 * claimAny's strategies (ADR 0026, ADR 0043, ADR 0044), in the order DynamoIpam.claimAny tries them:
 * 1. memory (first attempts only): a free address of the home block from this allocator's recent read of it;
 * 2. blind (first attempts at the owner's own block only): while the pool looks sparse, the owner's first candidate;
 * 3. window (first attempts in a pool read whole where others are busy): one read of a random 64-address window;
 * 4. block: one consistent Query of the home block; the owner's own address there (or behind its pointer) is the
 *    answer, else the block's never-used addresses, then its oldest released ones;
 * 5. pointer: the block has nothing free: a pointer item in the block names each candidate before it is claimed;
 *    candidates come from the pool-wide cursor (never used), then the oldest released addresses of the pool.
 * Every path claims inside the home block or behind its pointer, so a retry finds the claim in step 4. What the
 * allocator knows and reads is knowledge.ts; the writes themselves are claim-writes.ts.
 */
import type { Allocation, Logger } from '../../ports.js';
import type { ClaimWrites } from './claim-writes.js';
import type { ClaimStats, IpamTuning } from './ipam.js';
import { blockId, type Claimant, getItem, type Item, randomBelow, shuffled, toAllocation } from './items.js';
import type { BlockView, PoolKnowledge, RememberedBlock } from './knowledge.js';
import { BLOCK_SIZE, blockRange, type HomeBlock, type PoolGeometry, pointerSk } from './layout.js';
import type { Store } from './store.js';

export class ClaimStrategies {
  constructor(
    private readonly store: Store,
    private readonly known: PoolKnowledge,
    private readonly writes: ClaimWrites,
    private readonly tuning: IpamTuning,
    /** The owner's allocations in one pool partition, through the owner index (release.ts). */
    private readonly held: (ownerUid: string, pk: string) => Promise<Allocation[]>,
    private readonly log?: Logger,
  ) {}

  /**
   * A first attempt without a read (ADR 0043): from what this allocator remembers of the home block, else (at the
   * owner's own block, not a suggested one) blind at its first candidate while the pool looks sparse. Undefined
   * sends the claim on to the block read.
   */
  async first(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    stats: ClaimStats,
    suggested: boolean,
  ): Promise<Allocation | undefined> {
    const id = blockId(g, home);
    const known = this.known.recall(id, suggested);
    if (known) {
      const got = await this.fromMemory(g, id, known, owner, stats);
      if (got) return got;
      // A lost race means others are busy in this block and what is remembered is going stale: read it instead,
      // this time and for the next few claims.
      this.known.distrust(id);
    }
    // Blind only at the owner's own block: a suggested one is where this allocator goes on claiming, so reading it
    // once pays for the claims after it.
    return suggested ? undefined : this.blind(g, home, owner, stats);
  }

  /**
   * Never-used first, then the oldest released ones, at random among them so that allocators remembering the same
   * block spread out; one conditional write (a race lost there ends the memory path).
   */
  private async fromMemory(
    g: PoolGeometry,
    id: string,
    known: RememberedBlock,
    owner: Claimant,
    stats: ClaimStats,
  ): Promise<Allocation | undefined> {
    stats.path = 'memory';
    for (;;) {
      const neverUsed = known.neverUsed.length > 0;
      const list = neverUsed ? known.neverUsed : known.released.slice(0, this.tuning.reuseBatch);
      if (list.length === 0) return undefined;
      const value = list[Math.floor(Math.random() * list.length)]!;
      this.known.forget(id, value);
      if (owner.avoid.has(value)) continue;
      return neverUsed
        ? await this.writes.neverUsed(g, value, owner, stats)
        : await this.writes.released(g, value, owner, stats);
    }
  }

  /**
   * Before this allocator has read anything of the pool it tries blind too: in a used pool that costs one failed
   * write, once per container, and the read after it sets the estimate. In a pool known to be sparse, a first
   * candidate already taken (another owner's hashed to it) is followed by one more blind write at another address
   * of the block rather than a read: the block is the owner's own, so a retry still finds the claim there.
   */
  private async blind(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    stats: ClaimStats,
  ): Promise<Allocation | undefined> {
    const estimate = this.known.fillOf(g);
    if (!this.known.looksSparse(g)) return undefined;
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
        if (estimate !== undefined) this.known.observeFill(g, 0);
        return got;
      }
    }
    return undefined;
  }

  /** The block path, then the pointer path (steps 3–5 above); `retry` when the caller made no first attempt. */
  async inBlock(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    stats: ClaimStats,
    retry: boolean,
  ): Promise<Allocation | undefined> {
    // A first attempt in a pool read whole has no claim to find: a window of it shows enough free addresses.
    if (!retry) {
      const got = await this.inWindow(g, home, owner, stats);
      if (got) return got;
    }
    // Block: read it consistently; the owner's own claim there (or behind its pointer) is the answer.
    stats.path = 'block';
    let view = await this.known.readBlock(g, home, owner.uid);
    const found = await this.existing(g, view, owner.uid);
    if (found) return found;
    // A retry that finds nothing at home: the home it was given may not be where the first attempt claimed (an
    // annotation edited by hand, a subnet edit that moved the blocks). The owner index is the last resort: it
    // sees any claim older than its lag (ADR 0043).
    if (retry) {
      const elsewhere = (await this.held(owner.uid, g.pk)).find((a) => a.family === g.pool.family);
      if (elsewhere) return elsewhere;
    }
    const maxReads = Math.max(2, Math.ceil(8 / this.tuning.triesPerRead));
    for (
      let reads = 0;
      reads < maxReads && (view.neverUsed.length > 0 || view.released.length > 0);
      reads++
    ) {
      if (reads > 0) view = await this.known.readBlock(g, home, owner.uid);
      const got = await this.tryCandidates(g, home, view, owner, stats);
      if (got) return got;
    }

    // Pointer: nothing free in the block (or lost every race there): claim elsewhere, behind a pointer.
    stats.path = 'pointer';
    return this.behindPointer(g, home, owner, view.pointer, stats);
  }

  /**
   * A first attempt in a pool read whole (up to SINGLE_BLOCK_MAX addresses, one block for everybody) where other
   * allocators are busy: one consistent Query of a random aligned BLOCK_SIZE window of it instead of the whole pool —
   * a quarter of the keys on a /24 — and concurrent allocators spread over the windows. What it finds free is
   * remembered for the whole block (ADR 0044).
   */
  private async inWindow(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    stats: ClaimStats,
  ): Promise<Allocation | undefined> {
    // Only while others claim here too: alone, a whole read feeds more of this allocator's next claims from memory.
    if (blockRange(g) || home.end - home.start < BLOCK_SIZE || !this.known.othersBusyIn(blockId(g, home)))
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
    const view = await this.known.readBlock(g, window, owner.uid, blockId(g, home));
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
      this.known.forget(id, value);
      const got = await this.writes.neverUsed(g, value, owner, stats);
      if (got) return got;
    }
    if (view.neverUsed.length > 0) return undefined; // read again: never-used ones still come first
    const released = view.released.filter((v) => !owner.avoid.has(v)).slice(0, this.tuning.reuseBatch);
    for (const value of shuffled(released).slice(0, this.tuning.triesPerRead)) {
      this.known.forget(id, value);
      const got = await this.writes.released(g, value, owner, stats);
      if (got) return got;
    }
    return undefined;
  }

  /**
   * Claims outside the home block. The pointer item in the block names each candidate before it is claimed
   * (a conditional write on the pointer as last seen), so a retry that reads the block follows it to the claim.
   * A crash between the two writes leaves a pointer to an address the owner does not hold: ignored, replaced.
   */
  private async behindPointer(
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
    return (
      (await this.neverUsedInPool(g, owner, stats, point, pointerKey)) ??
      (await this.releasedInPool(g, owner, stats, point, pointerKey))
    );
  }

  /** Pool-wide never-used phase: a never-used address (no item at all), found through the pool's cursor. */
  private async neverUsedInPool(
    g: PoolGeometry,
    owner: Claimant,
    stats: ClaimStats,
    before: (value: bigint) => Promise<void>,
    pointerKey: string,
  ): Promise<Allocation | undefined> {
    const cursor = this.known.cursorOf(g);
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

  /** Pool-wide reuse phase: a released address, oldest release first (PoolKnowledge.nextReleased). */
  private async releasedInPool(
    g: PoolGeometry,
    owner: Claimant,
    stats: ClaimStats,
    before: (value: bigint) => Promise<void>,
    pointerKey: string,
  ): Promise<Allocation | undefined> {
    for (;;) {
      const value = await this.known.nextReleased(g, owner.avoid);
      if (value === undefined) return undefined;
      if (owner.avoid.has(value)) continue;
      await before(value);
      const got = await this.writes.released(g, value, owner, stats, pointerKey);
      if (got) {
        this.known.reuseWon();
        return got;
      }
      this.known.reuseLost(g);
    }
  }
}
