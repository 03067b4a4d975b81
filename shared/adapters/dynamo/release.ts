/**
 * Lookups by owner, releases and garbage collection of the IPAM (README.md next to this file, "Protocols"). A
 * release is one conditional UpdateItem that turns a held address into a released marker, only while the owner (and,
 * for the collector, the very claim it looked at) still holds it: a stale release changes nothing. The item stays:
 * its existence is what marks the address as used before (ADR 0011).
 */
import { DeleteItemCommand, UpdateItemCommand, type UpdateItemCommandOutput } from '@aws-sdk/client-dynamodb';
import { capacity, type Family, parseAddress } from '../../domain/addressing.js';
import { InvalidSpecError } from '../../domain/errors.js';
import type { Allocation, Clock, Logger, Metrics, Pool } from '../../ports.js';
import { byPool, getItem, type Item, key, names, toAllocation } from './items.js';
import { addressSk, INDEX, poolPk } from './layout.js';
import { PLACEMENT_ATTRIBUTES, PLACEMENT_REFS } from './placement.js';
import type { Store } from './store.js';

export interface GcOptions {
  /**
   * When the live set was read (epoch ms). Only allocations claimed at least `graceMs` before it are
   * candidates, so an EIP created after the list was taken never loses its fresh allocation. Default: now.
   */
  liveAsOf?: number;
  /** Margin for clock skew between writers and the collector. Default 120 000 ms. */
  graceMs?: number;
  /** Second opinion per candidate (e.g. re-read the EIP by name and compare uids); false keeps it. */
  confirm?: (allocation: Allocation) => Promise<boolean>;
  /** Report only; change nothing. */
  dryRun?: boolean;
  /** Pools whose utilisation to report (held / capacity) and emit as IpamSubnetUtilisation. */
  pools?: readonly Pool[];
}

export interface GcReport {
  /** Allocations seen (held addresses). */
  scanned: number;
  /** Held by an owner not in the live set, old enough to judge. */
  orphans: Allocation[];
  /** Orphans actually released (a subset: the rest raced with a release or re-claim, or were kept by confirm). */
  released: Allocation[];
  /** Orphan-looking allocations younger than liveAsOf − graceMs (possibly in flight), left alone. */
  tooYoung: number;
  /** Kept because `confirm` said the owner still exists. */
  confirmedLive: number;
  /** Owners holding more than one address in one pool (should not happen; reported, never auto-released). */
  surplus: { ownerUid: string; subnet: string; family: Family; addresses: string[] }[];
  utilisation: { subnet: string; family: Family; held: number; capacity: number; percent: number }[];
}

/** What one Scan of the held address items found: held counts per pool, allocations per owner and pool, release candidates. */
interface HeldScan {
  held: Map<string, number>;
  perOwnerPool: Map<string, Allocation[]>;
  candidates: { item: Item; allocation: Allocation }[];
}

export class Releases {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly log?: Logger,
    private readonly metrics?: Metrics,
  ) {}

  /** The owner's allocations (in one pool partition only, when `pk` is given), confirmed on the items. */
  async held(ownerUid: string, pk?: string): Promise<Allocation[]> {
    if (!ownerUid) return [];
    const seen: Item[] = [];
    for await (const it of this.byOwner(ownerUid)) seen.push(it);
    // The index is eventually consistent on AWS: confirm each hit on the item itself (strongly consistent),
    // so that an address released (and maybe re-claimed by someone else) a moment ago is not reported as ours.
    const confirmed = await Promise.all(
      seen
        .filter((it) => pk === undefined || it.pk?.S === pk)
        .map(async (it) => {
          const fresh = await getItem(this.store, it.pk!.S!, it.sk!.S!);
          return fresh?.ownerUid?.S === ownerUid ? toAllocation(fresh) : undefined;
        }),
    );
    return confirmed.filter((a): a is Allocation => a !== undefined).sort(byPool);
  }

  async release(subnet: string, address: string, ownerUid: string): Promise<boolean> {
    const p = parseAddress(address);
    if (!p) throw new InvalidSpecError(`invalid IP address "${address}"`);
    const before = await this.releaseItem(
      poolPk(subnet, p.family),
      addressSk(p.family, p.value),
      ownerUid,
      undefined,
      subnet,
    );
    return before !== undefined;
  }

  private byOwner(ownerUid: string): AsyncIterable<Item> {
    return this.store.queryItems({
      IndexName: INDEX.byOwner,
      KeyConditionExpression: '#ownerUid = :uid',
      ExpressionAttributeNames: names('ownerUid'),
      ExpressionAttributeValues: { ':uid': { S: ownerUid } },
    });
  }

  /**
   * Turns a held address into a released marker, only if `ownerUid` (and, for the collector, the very claim it
   * looked at) still holds it. The item stays: its existence is what marks the address as used before.
   * Returns the item as it was before the release, or undefined when the condition failed (nothing changed).
   */
  private async releaseItem(
    pk: string,
    sk: string,
    ownerUid: string,
    claimId: string | undefined,
    subnet: string,
  ): Promise<Item | undefined> {
    const values: Item = {
      ':uid': { S: ownerUid },
      ':pk': { S: pk },
      ':now': { N: String(this.clock.now()) },
    };
    let condition = '#ownerUid = :uid';
    if (claimId) {
      condition += ' AND #claimId = :cid';
      values[':cid'] = { S: claimId };
    }
    const r = await this.store.sendConditional<UpdateItemCommandOutput>(
      new UpdateItemCommand({
        TableName: this.store.tableName,
        Key: key(pk, sk),
        UpdateExpression:
          'SET #freePool = :pk, #releasedAt = :now, #lastOwnerUid = :uid ' +
          `REMOVE #ownerUid, #ownerName, #claimId, #claimedAt, ${PLACEMENT_REFS}, #pointerSk`,
        ConditionExpression: condition,
        ExpressionAttributeNames: names(
          'freePool',
          'releasedAt',
          'lastOwnerUid',
          'ownerUid',
          'ownerName',
          'claimId',
          'claimedAt',
          ...PLACEMENT_ATTRIBUTES,
          'pointerSk',
        ),
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_OLD',
      }),
    );
    if (!r.ok) return undefined;
    this.metrics?.count('IpamReleases', 1, { subnet });
    // Claimed from outside the owner's home block: its pointer goes too, unless it names another claim by now.
    const ptr = r.output.Attributes?.pointerSk?.S;
    if (ptr)
      await this.store.sendConditional(
        new DeleteItemCommand({
          TableName: this.store.tableName,
          Key: key(pk, ptr),
          ConditionExpression: '#ptrOwner = :uid AND #ptrSk = :sk',
          ExpressionAttributeNames: names('ptrOwner', 'ptrSk'),
          ExpressionAttributeValues: { ':uid': { S: ownerUid }, ':sk': { S: sk } },
        }),
      );
    return r.output.Attributes ?? {};
  }

  // ------------------------------------------------------------------ garbage collection

  /**
   * Releases allocations whose owner uid is not in `liveOwnerUids`. Safe against an allocation in flight:
   * only claims older than `liveAsOf − graceMs` are judged (an EIP that claimed before the live set was read
   * is in it, unless it is gone), an optional `confirm` re-checks each owner, and each release is conditioned
   * on the exact claim (owner uid and claim id) the collector saw, so it never frees an address that was
   * released and re-claimed meanwhile — not even by the same owner.
   */
  async collectGarbage(liveOwnerUids: ReadonlySet<string>, options: GcOptions = {}): Promise<GcReport> {
    const liveAsOf = options.liveAsOf ?? this.clock.now();
    const cutoff = liveAsOf - (options.graceMs ?? 120_000);
    const report: GcReport = {
      scanned: 0,
      orphans: [],
      released: [],
      tooYoung: 0,
      confirmedLive: 0,
      surplus: [],
      utilisation: [],
    };
    const scan = await this.scanHeld(liveOwnerUids, cutoff, report);
    await this.releaseOrphans(scan.candidates, options, report);
    report.surplus = surplusOf(scan.perOwnerPool);
    report.utilisation = (options.pools ?? []).map((pool) => this.utilisationOf(pool, scan.held));
    this.metrics?.count('IpamGcOrphans', report.orphans.length);
    this.metrics?.count('IpamGcReleased', report.released.length);
    if (report.surplus.length > 0)
      this.log?.warn('owners holding several addresses in one pool', { surplus: report.surplus });
    this.log?.info('ipam garbage collection', {
      scanned: report.scanned,
      orphans: report.orphans.length,
      released: report.released.length,
      tooYoung: report.tooYoung,
      confirmedLive: report.confirmedLive,
      dryRun: options.dryRun ?? false,
    });
    return report;
  }

  /**
   * One paginated, consistent Scan of the table's held address items (ADR 0085): not of the `byOwner` index, which
   * may lag the table on AWS and, on dynalite, miss an item whose index entry a crash lost. It reads every item of
   * the table once (1 read request unit per 4 KB of items, consistent: measured in docs/scale.md); the filter only
   * trims what comes back. Counts `scanned` and `tooYoung` in the report, and returns what the rest needs.
   */
  private async scanHeld(live: ReadonlySet<string>, cutoff: number, report: GcReport): Promise<HeldScan> {
    const scan: HeldScan = { held: new Map(), perOwnerPool: new Map(), candidates: [] };
    for await (const item of this.store.scanItems({
      ConsistentRead: true,
      FilterExpression: 'attribute_exists(#ownerUid) AND attribute_exists(#address)',
      ExpressionAttributeNames: names('ownerUid', 'address'),
    })) {
      if (!item.ownerUid?.S || !item.address?.S) continue;
      const a = toAllocation(item);
      report.scanned++;
      const poolKey = `${a.subnet}|${a.family}`;
      scan.held.set(poolKey, (scan.held.get(poolKey) ?? 0) + 1);
      const opk = `${a.owner.uid}|${poolKey}`;
      scan.perOwnerPool.set(opk, [...(scan.perOwnerPool.get(opk) ?? []), a]);
      if (live.has(a.owner.uid)) continue;
      if (Number(item.claimedAt?.N ?? '0') >= cutoff) {
        report.tooYoung++;
        continue;
      }
      scan.candidates.push({ item, allocation: a });
    }
    return scan;
  }

  /** Each candidate is an orphan; released (unless `confirm` keeps it or this is a dry run) on its exact claim. */
  private async releaseOrphans(
    candidates: HeldScan['candidates'],
    options: GcOptions,
    report: GcReport,
  ): Promise<void> {
    for (const { item, allocation } of candidates) {
      report.orphans.push(allocation);
      if (options.confirm && !(await options.confirm(allocation))) {
        report.confirmedLive++;
        continue;
      }
      if (options.dryRun) continue;
      const ok = await this.releaseItem(
        item.pk!.S!,
        item.sk!.S!,
        allocation.owner.uid,
        item.claimId?.S,
        allocation.subnet,
      );
      if (ok) report.released.push(allocation);
    }
  }

  /** Held / capacity of one pool, also emitted as IpamSubnetUtilisation. */
  private utilisationOf(pool: Pool, held: ReadonlyMap<string, number>): GcReport['utilisation'][number] {
    const n = held.get(`${pool.subnet}|${pool.family}`) ?? 0;
    const cap = Number(capacity(pool));
    const percent = cap === 0 ? 100 : Math.round((n / cap) * 1000) / 10;
    this.metrics?.count('IpamSubnetUtilisation', percent, {
      subnet: pool.subnet,
      family: `v${pool.family}`,
    });
    return { subnet: pool.subnet, family: pool.family, held: n, capacity: cap, percent };
  }
}

/** Owners holding more than one address in one pool. */
function surplusOf(perOwnerPool: ReadonlyMap<string, Allocation[]>): GcReport['surplus'] {
  const out: GcReport['surplus'] = [];
  for (const list of perOwnerPool.values()) {
    if (list.length > 1) {
      const first = list[0]!;
      out.push({
        ownerUid: first.owner.uid,
        subnet: first.subnet,
        family: first.family,
        addresses: list.map((a) => a.address),
      });
    }
  }
  return out;
}
