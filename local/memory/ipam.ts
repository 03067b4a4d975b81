/**
 * In-memory Ipam with the product's allocation rules (the same as the DynamoDB adapter's):
 * - eligible addresses are `allocatableRanges(pool)`: never network, broadcast, gateway or excluded;
 * - claimAny hands out the lowest never-used address first, and reuses released addresses only after every
 *   never-used one is gone (oldest release first), as kube-ovn does;
 * - owner is the uid: same-owner claims are idempotent, another owner's address is a conflict.
 * Both adapters pass the same contract suite (test/contract/ipam.ts). Order within a phase may differ: the
 * DynamoDB allocator spreads concurrent allocators over the pool on purpose (docs/adr/0012).
 */
import {
  allocatableRanges,
  assertClaimable,
  canonicalAddress,
  formatAddress,
  staticAddressProblem,
} from '../../shared/domain/addressing.js';
import { AddressConflictError, NoAvailableAddressError } from '../../shared/domain/errors.js';
import type { Allocation, ClaimOptions, Ipam, Owner, Placement, Pool } from '../../shared/ports.js';

const keyOf = (subnet: string, address: string): string => `${subnet}|${address}`;

export class MemoryIpam implements Ipam {
  /** (subnet|address) → allocation */
  readonly allocations = new Map<string, Allocation>();
  /** (subnet|family) → released addresses, oldest first */
  private readonly released = new Map<string, string[]>();
  /** (subnet|family) → addresses ever handed out */
  private readonly used = new Map<string, Set<string>>();

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
          return this.record(pool, addr, owner, placement);
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
      return this.record(pool, addr, owner, placement);
    }
    throw new NoAvailableAddressError(`no available IPv${pool.family} address in subnet ${pool.subnet}`);
  }

  async findByOwner(ownerUid: string): Promise<Allocation[]> {
    return [...this.allocations.values()].filter((a) => a.owner.uid === ownerUid);
  }

  async releaseByOwner(ownerUid: string): Promise<Allocation[]> {
    const mine = await this.findByOwner(ownerUid);
    for (const a of mine) await this.release(a.subnet, a.address, ownerUid);
    return mine;
  }

  async release(subnet: string, address: string, ownerUid: string): Promise<boolean> {
    const addr = canonicalAddress(address);
    const held = this.allocations.get(keyOf(subnet, addr));
    if (!held || held.owner.uid !== ownerUid) return false;
    this.allocations.delete(keyOf(subnet, addr));
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
    this.allocations.set(k, { ...held, placement: { ...placement } });
    return true;
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

  private record(pool: Pool, address: string, owner: Owner, placement?: Placement): Allocation {
    const a: Allocation = {
      subnet: pool.subnet,
      family: pool.family,
      address,
      owner: { ...owner },
      ...(placement && { placement: { ...placement } }),
    };
    this.allocations.set(keyOf(pool.subnet, address), a);
    this.usedSet(pool).add(address);
    return a;
  }
}
