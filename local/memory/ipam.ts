/**
 * In-memory Ipam with the product's allocation rules (the same as the DynamoDB adapter's):
 * - eligible addresses are `allocatableRanges(pool)`: never network, broadcast, gateway or excluded;
 * - claimAny hands out the lowest never-used address first, and reuses released addresses only after every
 *   never-used one is gone (oldest release first), as kube-ovn does;
 * - owner is the uid: same-owner claims are idempotent, another owner's address is a conflict.
 * Both adapters pass the same contract suite (test/contract/ipam.ts). Order within a phase may differ: the
 * DynamoDB allocator spreads concurrent allocators over the pool on purpose (docs/adr/0012).
 *
 * The owner index is modelled (ADR 0085): findByOwner without a record of where to look sees an allocation only
 * once its index entry is visible — at once by default, `indexLagMs` after the claim with that option (DynamoDB's
 * global secondary index on AWS), never after `hideFromIndex` (dynalite's index entry lost to a crash between the
 * index write and the item write, test/crash/index-item.test.ts shows it on the real adapter). The places an
 * OwnerRecord names are read as the DynamoDB adapter reads them, consistently: the addresses it lists, and — for
 * a record with pools — the owner's claimAny claims in those pools (its home block, or the pointer there).
 */
import {
  allocatableRanges,
  assertClaimable,
  canonicalAddress,
  formatAddress,
  parseAddress,
  staticAddressProblem,
} from '../../shared/domain/addressing.js';
import { AddressConflictError, NoAvailableAddressError } from '../../shared/domain/errors.js';
import type {
  Allocation,
  ClaimOptions,
  Clock,
  Ipam,
  Owner,
  OwnerRecord,
  Placement,
  Pool,
} from '../../shared/ports.js';

const keyOf = (subnet: string, address: string): string => `${subnet}|${address}`;

export interface MemoryIpamOptions {
  /** The clock the index lag is measured on (required with indexLagMs). */
  clock?: Clock;
  /** The owner index shows a claim this long after it was made. Default 0 (at once). */
  indexLagMs?: number;
}

export class MemoryIpam implements Ipam {
  /** (subnet|address) → allocation */
  readonly allocations = new Map<string, Allocation>();
  /** (subnet|address) → when the owner index shows the allocation (epoch ms; Infinity: never). */
  private readonly indexedAt = new Map<string, number>();
  /** (subnet|address) of allocations made by claimAny (found through the owner's home block, ADR 0026). */
  private readonly byAny = new Set<string>();
  /** (subnet|address) → when it was claimed (epoch ms on the clock). */
  private readonly claimedAt = new Map<string, number>();
  /** (subnet|family) → released addresses, oldest first */
  private readonly released = new Map<string, string[]>();
  /** (subnet|family) → addresses ever handed out */
  private readonly used = new Map<string, Set<string>>();

  constructor(private readonly options: MemoryIpamOptions = {}) {}

  /** The owner index loses this allocation's entry: only a consistent read of where it is finds it from now on. */
  hideFromIndex(subnet: string, address: string): void {
    const k = keyOf(subnet, canonicalAddress(address));
    if (this.allocations.has(k)) this.indexedAt.set(k, Number.POSITIVE_INFINITY);
  }

  async claimAddress(pool: Pool, address: string, owner: Owner, placement?: Placement): Promise<Allocation> {
    assertClaimable(pool, address);
    const addr = canonicalAddress(address);
    const held = this.allocations.get(keyOf(pool.subnet, addr));
    if (held) {
      if (held.owner.uid === owner.uid) return held;
      throw new AddressConflictError(
        `address ${addr} in subnet ${pool.subnet} is already allocated to ${held.owner.name}`,
        held.owner.uid,
      );
    }
    return this.record(pool, addr, owner, placement);
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the in-memory IPAM mirrors the DynamoDB allocator's claim order, pinned by the port contract tests
  async claimAny(
    pool: Pool,
    owner: Owner,
    placement?: Placement,
    options: ClaimOptions = {},
  ): Promise<Allocation> {
    // A first attempt has nothing to find; looking anyway keeps this stand-in the strict one.
    for (const a of this.allocations.values()) {
      if (a.subnet === pool.subnet && a.family === pool.family && a.owner.uid === owner.uid) return a;
    }
    const avoid = new Set((options.avoid ?? []).map(canonicalAddress));
    const used = this.usedSet(pool);
    for (const r of allocatableRanges(pool)) {
      for (let v = r.start; v <= r.end; v++) {
        const addr = formatAddress(pool.family, v);
        if (!used.has(addr) && !avoid.has(addr) && !this.allocations.has(keyOf(pool.subnet, addr)))
          return this.record(pool, addr, owner, placement, true);
      }
    }
    const released = this.released.get(`${pool.subnet}|${pool.family}`) ?? [];
    for (let i = 0; i < released.length; ) {
      const addr = released[i]!;
      // Claimed statically since: drop it (a later release lists it again).
      if (this.allocations.has(keyOf(pool.subnet, addr))) {
        released.splice(i, 1);
        continue;
      }
      // Left the pool when the subnet's excludeIps or CIDR changed, or avoided: skip it, but keep it for later.
      if (staticAddressProblem(pool, addr) !== undefined || avoid.has(addr)) {
        i++;
        continue;
      }
      released.splice(i, 1);
      return this.record(pool, addr, owner, placement, true);
    }
    throw new NoAvailableAddressError(`no available IPv${pool.family} address in subnet ${pool.subnet}`);
  }

  async findByOwner(ownerUid: string, where: readonly OwnerRecord[] = []): Promise<Allocation[]> {
    const found = new Map<string, Allocation>();
    for (const [k, a] of this.allocations)
      if (a.owner.uid === ownerUid && this.indexShows(k)) found.set(k, a);
    for (const r of where) for (const [k, a] of this.recordedAt(ownerUid, r)) found.set(k, a);
    return [...found.values()].sort((a, b) => (a.subnet + a.family < b.subnet + b.family ? -1 : 1));
  }

  /**
   * What a record's places hold for the owner, read as the DynamoDB adapter reads them: each address it names, and
   * the owner's claims from its pools (claimAny's, which a home block Query finds).
   */
  private recordedAt(ownerUid: string, r: OwnerRecord): [string, Allocation][] {
    const out: [string, Allocation][] = [];
    for (const address of r.addresses) {
      const k = keyOf(r.subnet, canonicalAddressOrSelf(address));
      const a = this.allocations.get(k);
      if (a?.owner.uid === ownerUid) out.push([k, a]);
    }
    const inPool = (a: Allocation, pool: Pool) => a.subnet === pool.subnet && a.family === pool.family;
    for (const pool of r.pools ?? [])
      for (const [k, a] of this.allocations)
        if (a.owner.uid === ownerUid && inPool(a, pool) && this.byAny.has(k)) out.push([k, a]);
    return out;
  }

  /** Whether the owner index shows the allocation at key `k` now. */
  private indexShows(k: string): boolean {
    return (this.indexedAt.get(k) ?? 0) <= this.now();
  }

  private now(): number {
    return this.options.clock?.now() ?? Date.now();
  }

  /**
   * The collector (shared/core/gc.ts's GarbageCollector), as the DynamoDB adapter's: every allocation is read (the
   * twin's table is its map, read whole), and one whose owner is not live, claimed before `liveAsOf − graceMs` and
   * confirmed gone is released.
   */
  async collectGarbage(
    liveOwnerUids: ReadonlySet<string>,
    options: {
      liveAsOf?: number;
      graceMs?: number;
      confirm?: (a: Allocation) => Promise<boolean>;
      dryRun?: boolean;
    } = {},
  ): Promise<{ scanned: number; orphans: Allocation[]; released: Allocation[] }> {
    const cutoff = (options.liveAsOf ?? this.now()) - (options.graceMs ?? 120_000);
    const all = [...this.allocations];
    const orphans: Allocation[] = [];
    const released: Allocation[] = [];
    for (const [k, a] of all) {
      if (liveOwnerUids.has(a.owner.uid) || (this.claimedAt.get(k) ?? 0) >= cutoff) continue;
      orphans.push(a);
      if (options.confirm && !(await options.confirm(a))) continue;
      if (!options.dryRun && (await this.release(a.subnet, a.address, a.owner.uid))) released.push(a);
    }
    return { scanned: all.length, orphans, released };
  }

  async release(subnet: string, address: string, ownerUid: string): Promise<boolean> {
    const addr = canonicalAddress(address);
    const held = this.allocations.get(keyOf(subnet, addr));
    if (!held || held.owner.uid !== ownerUid) return false;
    this.allocations.delete(keyOf(subnet, addr));
    this.indexedAt.delete(keyOf(subnet, addr));
    this.byAny.delete(keyOf(subnet, addr));
    this.claimedAt.delete(keyOf(subnet, addr));
    const k = `${subnet}|${held.family}`;
    const list = this.released.get(k) ?? [];
    list.push(addr);
    this.released.set(k, list);
    return true;
  }

  async place(subnet: string, address: string, ownerUid: string, placement: Placement): Promise<boolean> {
    const k = keyOf(subnet, canonicalAddress(address));
    const held = this.allocations.get(k);
    if (!held || held.owner.uid !== ownerUid) return false;
    this.allocations.set(k, { ...held, placement: copyPlacement(placement) });
    return true;
  }

  async transfer(subnet: string, address: string, fromUid: string, to: Owner): Promise<boolean> {
    const k = keyOf(subnet, canonicalAddress(address));
    const held = this.allocations.get(k);
    if (!held || !fromUid || held.owner.uid !== fromUid) return false;
    this.allocations.set(k, {
      subnet: held.subnet,
      family: held.family,
      address: held.address,
      owner: { ...to },
    });
    this.claimedAt.set(k, this.now());
    this.byAny.delete(k);
    if (this.options.indexLagMs)
      this.indexedAt.set(k, (this.options.clock?.now() ?? Date.now()) + this.options.indexLagMs);
    return true;
  }

  async heldAt(subnet: string, addresses: readonly string[]): Promise<Map<string, Allocation>> {
    const out = new Map<string, Allocation>();
    for (const address of addresses) {
      const parsed = parseAddress(address);
      if (parsed?.family !== 4) continue;
      const held = this.allocations.get(keyOf(subnet, canonicalAddress(address)));
      if (held)
        out.set(address, {
          ...held,
          owner: { ...held.owner },
          ...(held.placement && { placement: copyPlacement(held.placement) }),
        });
    }
    return out;
  }

  private usedSet(pool: Pool): Set<string> {
    const k = `${pool.subnet}|${pool.family}`;
    let s = this.used.get(k);
    if (!s) {
      s = new Set();
      this.used.set(k, s);
    }
    return s;
  }

  private record(pool: Pool, address: string, owner: Owner, placement?: Placement, any = false): Allocation {
    const a: Allocation = {
      subnet: pool.subnet,
      family: pool.family,
      address,
      owner: { ...owner },
      // A claim records no pods (a claim precedes every exec, ADR 0041), as the DynamoDB adapter's.
      ...(placement && { placement: copyPlacement({ ...placement, pods: undefined }) }),
    };
    const k = keyOf(pool.subnet, address);
    this.allocations.set(k, a);
    this.claimedAt.set(k, this.now());
    if (any) this.byAny.add(k);
    if (this.options.indexLagMs)
      this.indexedAt.set(k, (this.options.clock?.now() ?? Date.now()) + this.options.indexLagMs);
    this.usedSet(pool).add(address);
    return a;
  }
}

/** The canonical form of an address; a value that does not parse is kept as it is (it then matches nothing). */
function canonicalAddressOrSelf(address: string): string {
  try {
    return canonicalAddress(address);
  } catch {
    return address;
  }
}

/** A placement copied deep enough that the caller's later changes do not reach the store (its pods map too). */
function copyPlacement(p: Placement): Placement {
  const { pods, ...rest } = p;
  return {
    ...rest,
    ...(pods && { pods: Object.fromEntries(Object.entries(pods).map(([uid, e]) => [uid, { ...e }])) }),
  };
}
