/**
 * Whether an external subnet is set up so that kube-ovn's IPAM and this product's never hand out the same address
 * beside an unmodified kube-ovn (docs/adr/0096-coexistence-check-at-bridge-start.md, ADR 0006): the product allocates
 * only inside its dedicated range (annotation `eip-lambdas.io/eip-range`), kube-ovn never allocates from the
 * subnet's `excludeIps`, so the whole range must be in `excludeIps`, and nothing kube-ovn already allocated may lie
 * inside it. Pure: the caller reads the subnets and kube-ovn's allocations.
 */
import type { Pool } from '../ports.js';
import {
  EIP_RANGE_ANNOTATION,
  formatAddress,
  parseAddress,
  parseRanges,
  poolsOf,
  type Range,
} from './addressing.js';
import { InvalidSpecError } from './errors.js';
import type { Subnet } from './kube-ovn.js';

/** An address kube-ovn's IPAM holds in a subnet: an `ips.kubeovn.io` object, or a gateway pod's own address. */
export interface KubeOvnAllocation {
  subnet: string;
  address: string;
  /** Who holds it, for the message: `ip/<name>` or `pod/<namespace>/<name>`. */
  owner: string;
}

export type CoexistenceCode =
  | 'NoDedicatedRange'
  | 'RangeNotExcluded'
  | 'KubeOvnAddressInRange'
  | 'InvalidSubnet';

export interface CoexistenceProblem {
  subnet: string;
  code: CoexistenceCode;
  /**
   * `conflict`: the two IPAMs can (or already do) hand out the same address — the bridge refuses to start.
   * `warning`: the subnet runs in the mode without a dedicated range (ADR 0006 point 2), which is safe only while
   * nothing else allocates from it — the bridge starts and says so.
   */
  severity: 'conflict' | 'warning';
  message: string;
}

function formatRange(family: 4 | 6, r: Range): string {
  return r.start === r.end
    ? formatAddress(family, r.start)
    : `${formatAddress(family, r.start)}..${formatAddress(family, r.end)}`;
}

/** The parts of one range `r` that `cover` (sorted and merged) leaves out. */
function gapsOf(r: Range, cover: readonly Range[]): Range[] {
  const out: Range[] = [];
  let cursor = r.start;
  for (const c of cover) {
    if (c.end < cursor) continue;
    if (c.start > r.end || cursor > r.end) break;
    if (c.start > cursor) out.push({ start: cursor, end: c.start - 1n });
    cursor = c.end + 1n;
  }
  if (cursor <= r.end) out.push({ start: cursor, end: r.end });
  return out;
}

/** The parts of `ranges` that `cover` leaves out (both sorted and merged, as parseRanges returns them). */
export function uncovered(ranges: readonly Range[], cover: readonly Range[]): Range[] {
  return ranges.flatMap((r) => gapsOf(r, cover));
}

function inside(ranges: readonly Range[], family: 4 | 6, address: string): boolean {
  const p = parseAddress(address);
  return !!p && p.family === family && ranges.some((r) => p.value >= r.start && p.value <= r.end);
}

function poolProblems(pool: Pool, allocations: readonly KubeOvnAllocation[]): CoexistenceProblem[] {
  const subnet = pool.subnet;
  const only = (pool.only ?? []).join(',');
  const range = parseRanges(pool, pool.only ?? [], `annotation ${EIP_RANGE_ANNOTATION}`);
  const excluded = parseRanges(pool, pool.exclude, 'excludeIps');
  const out: CoexistenceProblem[] = [];
  const gaps = uncovered(range, excluded);
  if (gaps.length > 0)
    out.push({
      subnet,
      code: 'RangeNotExcluded',
      severity: 'conflict',
      message:
        `subnet ${subnet}: ${gaps.map((g) => formatRange(pool.family, g)).join(', ')} of the dedicated EIP range ` +
        `(${EIP_RANGE_ANNOTATION}: ${only}) is not in spec.excludeIps, so kube-ovn's IPAM ` +
        'can hand it out too; add the whole range to excludeIps',
    });
  for (const a of allocations)
    if (a.subnet === subnet && inside(range, pool.family, a.address))
      out.push({
        subnet,
        code: 'KubeOvnAddressInRange',
        severity: 'conflict',
        message:
          `subnet ${subnet}: kube-ovn allocated ${a.address} (${a.owner}) inside the dedicated EIP range ` +
          `${only}; this product could hand it out again. Move the range, or re-create ` +
          `the holder after the range is in excludeIps`,
      });
  return out;
}

/** `fn`'s problems, or the subnet's InvalidSubnet when it cannot be read as a pool. */
function orInvalid(subnet: string, fn: () => CoexistenceProblem[]): CoexistenceProblem[] {
  try {
    return fn();
  } catch (e) {
    if (!(e instanceof InvalidSpecError)) throw e;
    return [{ subnet, code: 'InvalidSubnet', severity: 'conflict', message: e.message }];
  }
}

function subnetProblems(
  s: Pick<Subnet, 'metadata' | 'spec'>,
  allocations: readonly KubeOvnAllocation[],
): CoexistenceProblem[] {
  const name = s.metadata.name;
  const ranged = poolsOf(s).filter((p) => p.only?.length);
  if (ranged.length === 0)
    return [
      {
        subnet: name,
        code: 'NoDedicatedRange',
        severity: 'warning',
        message:
          `subnet ${name} has no dedicated EIP range (${EIP_RANGE_ANNOTATION}): this product allocates from the ` +
          "pool kube-ovn's IPAM also serves, which is safe only while nothing else allocates from it " +
          '(docs/deploy-eks.md, step 2)',
      },
    ];
  return ranged.flatMap((pool) => orInvalid(name, () => poolProblems(pool, allocations)));
}

/**
 * What is wrong with each external subnet for running beside kube-ovn; empty when nothing is. A subnet without the
 * range annotation is a warning (the product then allocates from kube-ovn's own pool); a range not wholly in
 * `excludeIps`, or a kube-ovn allocation inside it, is a conflict. A subnet that cannot be read as a pool at all is a
 * conflict too (the handlers refuse its EIPs anyway; the operator should know before the first one).
 */
export function coexistenceProblems(
  subnets: readonly Pick<Subnet, 'metadata' | 'spec'>[],
  allocations: readonly KubeOvnAllocation[],
): CoexistenceProblem[] {
  return subnets.flatMap((s) => orInvalid(s.metadata.name, () => subnetProblems(s, allocations)));
}
