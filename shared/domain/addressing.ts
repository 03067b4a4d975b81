/**
 * Address arithmetic for allocation pools: which addresses of a subnet may be handed out, and why a
 * requested one may not. Pure functions over ip-address; used by every Ipam adapter and by the core's
 * validation, so they all agree on the rules:
 *
 * - never the network or the broadcast address (IPv4; for IPv6 the subnet-router anycast and the last address);
 * - never the subnet gateway;
 * - never an excludeIps entry (a single address or an `a..b` range).
 */
import { Address4, Address6 } from 'ip-address';
import type { Pool } from '../ports.js';
import { AddressOutOfRangeError, InvalidSpecError } from './errors.js';
import type { Subnet } from './kube-ovn.js';

export type Family = 4 | 6;

/**
 * Annotation on a Subnet giving eip-lambdas a dedicated range (`a..b` or single addresses, comma-separated, either
 * family). Only those addresses are handed out, so this product and kube-ovn's own IPAM never collide once the same
 * range is also in the Subnet's excludeIps (which keeps kube-ovn out of it).
 */
export const EIP_RANGE_ANNOTATION = 'eip-lambdas.io/eip-range';

/**
 * Annotation on an IptablesEip, from the write that adds the finalizer until the one that sets spec.v4ip: where in
 * its pool the allocator places the EIP's claim (Ipam.suggestHome), so that a retry of the add looks there
 * (ADR 0043). Internal; a value the allocator does not recognise is ignored.
 */
export const IPAM_HOME_ANNOTATION = 'eip-lambdas.io/ipam-home';

export interface Range {
  /** Inclusive. */
  start: bigint;
  /** Inclusive. */
  end: bigint;
}

type Addr = Address4 | Address6;

/** Parses a plain address (no prefix) strictly; undefined if it is not one. */
export function parseAddress(text: string): { family: Family; value: bigint } | undefined {
  // Only the characters of an address: the library's parser tolerates trailing text ("1.2.3.4$(id)") and zones.
  if (!/^[0-9A-Fa-f:.]+$/.test(text)) return undefined;
  if (Address4.isValid(text)) return { family: 4, value: new Address4(text).bigInt() };
  if (Address6.isValid(text)) return { family: 6, value: new Address6(text).bigInt() };
  return undefined;
}

export function formatAddress(family: Family, value: bigint): string {
  return family === 4 ? Address4.fromBigInt(value).correctForm() : Address6.fromBigInt(value).correctForm();
}

/** Canonical text of an address (lower-case, compressed v6) so equal addresses compare equal as strings. */
export function canonicalAddress(text: string): string {
  const p = parseAddress(text);
  if (!p) throw new InvalidSpecError(`invalid IP address "${text}"`);
  return formatAddress(p.family, p.value);
}

function parseCidr(cidr: string): { family: Family; addr: Addr } {
  if (Address4.isValid(cidr) && cidr.includes('/')) return { family: 4, addr: new Address4(cidr) };
  if (Address6.isValid(cidr) && cidr.includes('/')) return { family: 6, addr: new Address6(cidr) };
  throw new InvalidSpecError(`invalid CIDR "${cidr}"`);
}

/** Prefix length of a pool's CIDR. */
export function prefixLength(pool: Pick<Pool, 'cidr'>): number {
  return parseCidr(pool.cidr).addr.subnetMask;
}

/** Network (first) and last address of the CIDR, inclusive. */
export function cidrBounds(cidr: string): Range & { family: Family } {
  const { family, addr } = parseCidr(cidr);
  return { family, start: addr.startAddress().bigInt(), end: addr.endAddress().bigInt() };
}

/** The addresses a pool may ever hand out, before gateway and exclusions: network+1 … last−1. */
export function hostRange(pool: Pick<Pool, 'cidr'>): Range {
  const b = cidrBounds(pool.cidr);
  // A /31 or /32 (/127, /128) has no host range by this rule; kube-ovn would not allocate from it either.
  return { start: b.start + 1n, end: b.end - 1n };
}

/** Number of addresses in the host range (before gateway and exclusions). */
export function hostCount(pool: Pick<Pool, 'cidr'>): bigint {
  const r = hostRange(pool);
  return r.end >= r.start ? r.end - r.start + 1n : 0n;
}

/**
 * The reserved ranges of a pool (gateway and excludeIps of the pool's family), sorted and merged. Entries of the
 * other family are ignored, as kube-ovn does. Inside a dedicated EIP range excludeIps do not apply: they are how
 * kube-ovn's own IPAM is kept out of that range.
 */
export function reservedRanges(pool: Pool): Range[] {
  const entries = [...(pool.only?.length ? [] : pool.exclude), ...(pool.gateway ? [pool.gateway] : [])];
  return parseRanges(pool, entries, 'excludeIps');
}

/** Parses `a` / `a..b` entries of the pool's family into sorted, merged ranges (other families are ignored). */
export function parseRanges(
  pool: Pick<Pool, 'subnet' | 'family'>,
  entries: readonly string[],
  what: string,
): Range[] {
  const ranges = entries.flatMap((text) => parseRangeEntry(pool, text, what));
  ranges.sort((x, y) => (x.start < y.start ? -1 : x.start > y.start ? 1 : 0));
  const merged: Range[] = [];
  for (const r of ranges) {
    const last = merged[merged.length - 1];
    if (last && r.start <= last.end + 1n) {
      if (r.end > last.end) last.end = r.end;
    } else merged.push({ ...r });
  }
  return merged;
}

/** One `a` / `a..b` entry as a range of the pool's family; none for another family. */
function parseRangeEntry(pool: Pick<Pool, 'subnet' | 'family'>, text: string, what: string): Range[] {
  const [a, b] = text.includes('..') ? text.split('..') : [text, text];
  const pa = parseAddress((a ?? '').trim());
  const pb = parseAddress((b ?? '').trim());
  if (!pa || !pb) throw new InvalidSpecError(`subnet ${pool.subnet}: invalid ${what} entry "${text}"`);
  if (pa.family !== pool.family || pb.family !== pool.family) return [];
  if (pa.value > pb.value)
    throw new InvalidSpecError(
      `subnet ${pool.subnet}: invalid ${what} entry "${text}" (its first address is above its last)`,
    );
  return [{ start: pa.value, end: pb.value }];
}

/**
 * The allocatable ranges of a pool: the host range (or the dedicated EIP range inside it) minus the reserved
 * ranges, ascending. Its total size is the pool's capacity; a /16 gives a handful of ranges, never a list of 65k
 * addresses.
 */
export function allocatableRanges(pool: Pool): Range[] {
  const host = hostRange(pool);
  if (host.end < host.start) return [];
  const bases = pool.only?.length
    ? parseRanges(pool, pool.only, 'EIP range')
        .map((r) => ({
          start: r.start > host.start ? r.start : host.start,
          end: r.end < host.end ? r.end : host.end,
        }))
        .filter((r) => r.start <= r.end)
    : [host];
  const reserved = reservedRanges(pool);
  return bases.flatMap((base) => subtract(base, reserved));
}

/** `base` less the sorted, merged `reserved` ranges, ascending. */
function subtract(base: Range, reserved: readonly Range[]): Range[] {
  const out: Range[] = [];
  let cursor = base.start;
  for (const r of reserved) {
    if (r.end < cursor) continue;
    if (r.start > base.end) break;
    if (r.start > cursor) out.push({ start: cursor, end: r.start - 1n });
    cursor = r.end + 1n;
    if (cursor > base.end) break;
  }
  if (cursor <= base.end) out.push({ start: cursor, end: base.end });
  return out;
}

export function capacity(pool: Pool): bigint {
  return allocatableRanges(pool).reduce((n, r) => n + (r.end - r.start + 1n), 0n);
}

/** Why `address` may not be claimed statically in `pool`, or undefined if it may. */
export function staticAddressProblem(pool: Pool, address: string): string | undefined {
  const p = parseAddress(address);
  if (!p) return `invalid IP address "${address}"`;
  if (p.family !== pool.family) return `${address} is not an IPv${pool.family} address`;
  const b = cidrBounds(pool.cidr);
  if (p.value < b.start || p.value > b.end)
    return `${address} is out of the range of subnet ${pool.subnet} (${pool.cidr})`;
  if (p.value === b.start) return `${address} is the network address of subnet ${pool.subnet}`;
  if (p.value === b.end) return `${address} is the broadcast address of subnet ${pool.subnet}`;
  if (pool.gateway && parseAddress(pool.gateway)?.value === p.value)
    return `${address} is the gateway of subnet ${pool.subnet}`;
  if (
    pool.only?.length &&
    !parseRanges(pool, pool.only, 'EIP range').some((r) => p.value >= r.start && p.value <= r.end)
  )
    return `${address} is outside the dedicated EIP range of subnet ${pool.subnet} (${pool.only.join(', ')})`;
  for (const r of reservedRanges(pool)) {
    if (p.value >= r.start && p.value <= r.end)
      return `${address} is excluded in subnet ${pool.subnet} (excludeIps)`;
  }
  return undefined;
}

/** @throws AddressOutOfRangeError unless `address` may be claimed statically in `pool`. */
export function assertClaimable(pool: Pool, address: string): void {
  const problem = staticAddressProblem(pool, address);
  if (problem) throw new AddressOutOfRangeError(problem);
}

/** The non-empty, trimmed entries of a comma-separated list. */
function commaList(text: string | undefined): string[] {
  return (text ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
}

/** @throws InvalidSpecError unless `r` is `a` or `a..b` with both ends of one family. */
function assertEipRangeEntry(subnet: string, r: string): void {
  const ends = r.split('..').map((x) => parseAddress(x.trim()));
  if (ends.length > 2 || ends.some((e) => !e) || ends[0]?.family !== ends.at(-1)?.family)
    throw new InvalidSpecError(
      `subnet ${subnet}: annotation ${EIP_RANGE_ANNOTATION} has an invalid entry "${r}"`,
    );
}

/** The pool of one CIDR of the subnet (the first of its family): its canonical CIDR, its gateway (inside it), its share of the EIP range. */
function poolOfCidr(
  subnet: {
    name: string;
    cidrBlock: string;
    gateways: readonly string[];
    exclude: string[];
    only: readonly string[];
  },
  cidr: string,
  before: readonly Pool[],
): Pool {
  const { name, cidrBlock, gateways, exclude, only } = subnet;
  let parsed: { family: Family; addr: Addr };
  try {
    parsed = parseCidr(cidr);
  } catch {
    throw new InvalidSpecError(`subnet ${name} has an invalid cidrBlock "${cidrBlock}"`);
  }
  const { family, addr } = parsed;
  if (before.some((p) => p.family === family))
    throw new InvalidSpecError(`subnet ${name} has two IPv${family} CIDRs in "${cidrBlock}"`);
  const network = addr.startAddress().bigInt();
  const cidrText = `${formatAddress(family, network)}/${addr.subnetMask}`;
  const gw = gateways.find((g) => parseAddress(g)?.family === family);
  const gateway = gw ? canonicalAddress(gw) : formatAddress(family, network + 1n);
  const bounds = cidrBounds(cidrText);
  const g = parseAddress(gateway)!.value;
  if (g < bounds.start || g > bounds.end)
    throw new InvalidSpecError(`subnet ${name}: gateway ${gateway} is not inside ${cidrText}`);
  const mine = only.filter((r) => parseAddress(r.split('..')[0]!.trim())?.family === family);
  return { subnet: name, family, cidr: cidrText, gateway, exclude, ...(mine.length > 0 && { only: mine }) };
}

/**
 * The allocation pools of a Subnet CR: one per family in `spec.cidrBlock` ("v4", "v6" or "v4,v6").
 * `spec.gateway` is "v4gw", "v6gw" or "v4gw,v6gw"; a family without one defaults to the first host address
 * (what kube-ovn's subnet controller writes back).
 * @throws InvalidSpecError for a malformed cidrBlock or gateway
 */
export function poolsOf(subnet: {
  metadata: Pick<Subnet['metadata'], 'name' | 'annotations'>;
  spec: Subnet['spec'];
}): Pool[] {
  const name = subnet.metadata.name;
  const gateways = commaList(subnet.spec.gateway);
  for (const g of gateways)
    if (!parseAddress(g))
      throw new InvalidSpecError(`subnet ${name} has an invalid gateway ${JSON.stringify(g.slice(0, 64))}`);
  const exclude = subnet.spec.excludeIps ?? [];
  const only = commaList(subnet.metadata.annotations?.[EIP_RANGE_ANNOTATION]);
  for (const r of only) assertEipRangeEntry(name, r);
  const pools: Pool[] = [];
  for (const cidr of commaList(subnet.spec.cidrBlock)) {
    pools.push(poolOfCidr({ name, cidrBlock: subnet.spec.cidrBlock, gateways, exclude, only }, cidr, pools));
  }
  if (pools.length === 0) throw new InvalidSpecError(`subnet ${name} has no cidrBlock`);
  return pools;
}
