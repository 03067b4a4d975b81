/**
 * Garbage collection and release races against dynalite: the collector frees what belongs to owners that are
 * gone, and never an allocation that is live, in flight, or re-claimed under its feet.
 */
import { describe, expect, it } from 'vitest';
import { TallyMetrics } from '../../shared/observability/metrics.js';
import type { Allocation, Pool } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';
import { useDynamo } from '../support/dynamo.js';

const fx = useDynamo();

const pool: Pool = { subnet: 'ext', family: 4, cidr: '10.20.0.0/24', gateway: '10.20.0.1', exclude: [] };
const v6: Pool = { subnet: 'ext', family: 6, cidr: 'fd20::/120', gateway: 'fd20::1', exclude: [] };
const who = (n: string) => ({ uid: `uid-${n}`, name: `eip-${n}` });

describe('collectGarbage', () => {
  it('releases the allocations of owners that no longer exist and keeps the live ones', async () => {
    const clock = new ManualClock();
    const metrics = new TallyMetrics();
    const t = await fx.freshTable({ clock, metrics });
    const live = await t.ipam.claimAny(pool, who('live'));
    const gone4 = await t.ipam.claimAny(pool, who('gone'));
    const gone6 = await t.ipam.claimAny(v6, who('gone'));
    clock.advance(10 * 60_000);

    const report = await t.ipam.collectGarbage(new Set(['uid-live']), { pools: [pool, v6] });
    expect(report.scanned).toBe(3);
    expect(report.released.map((a) => a.address).sort()).toEqual([gone4.address, gone6.address].sort());
    expect(await t.ipam.findByOwner('uid-gone')).toEqual([]);
    expect(await t.ipam.findByOwner('uid-live')).toEqual([live]);
    expect(report.utilisation).toContainEqual({
      subnet: 'ext',
      family: 4,
      held: 2,
      capacity: 253,
      percent: 0.8,
    });
    expect(metrics.total('IpamGcReleased')).toBe(2);
    // The freed addresses are ordinary released addresses again.
    expect(await t.ipam.claimAddress(pool, gone4.address, who('next'))).toMatchObject({ owner: who('next') });
  });

  it('leaves an allocation claimed after the live set was read alone (an EIP created meanwhile)', async () => {
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const liveAsOf = clock.now(); // the caller lists the EIPs now …
    const live = new Set<string>();
    clock.advance(5); // … and an EIP created right after the list claims its address
    const fresh = await t.ipam.claimAny(pool, who('new'));
    clock.advance(60 * 60_000); // however late the collector runs
    const report = await t.ipam.collectGarbage(live, { liveAsOf, graceMs: 0 });
    expect(report.released).toEqual([]);
    expect(report.tooYoung).toBe(1);
    expect(await t.ipam.findByOwner('uid-new')).toEqual([fresh]);
  });

  it('keeps an orphan-looking allocation when the owner re-check says the owner exists', async () => {
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const a = await t.ipam.claimAny(pool, who('x'));
    clock.advance(10 * 60_000);
    const seen: Allocation[] = [];
    const report = await t.ipam.collectGarbage(new Set(), {
      confirm: async (c) => {
        seen.push(c);
        return false;
      },
    });
    expect(seen).toEqual([a]);
    expect(report.confirmedLive).toBe(1);
    expect(report.released).toEqual([]);
    expect(await t.ipam.findByOwner('uid-x')).toEqual([a]);
  });

  it('does not free an address that was released and re-claimed between its scan and its release', async () => {
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const a = await t.ipam.claimAddress(pool, '10.20.0.9', who('old'));
    clock.advance(10 * 60_000);
    const report = await t.ipam.collectGarbage(new Set(['uid-new']), {
      // Between the collector's scan and its release: the old owner's delete handler frees the address and a
      // new EIP takes it.
      confirm: async () => {
        expect(await t.another().release('ext', a.address, 'uid-old')).toBe(true);
        await t.another().claimAddress(pool, a.address, who('new'));
        return true;
      },
    });
    expect(report.orphans).toEqual([a]);
    expect(report.released).toEqual([]);
    expect((await t.ipam.findByOwner('uid-new')).map((x) => x.address)).toEqual(['10.20.0.9']);
  });

  it('does not free an address its owner released and claimed again meanwhile (a new claim, not the one it saw)', async () => {
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const a = await t.ipam.claimAddress(pool, '10.20.0.9', who('same'));
    clock.advance(10 * 60_000);
    const report = await t.ipam.collectGarbage(new Set(), {
      confirm: async () => {
        await t.another().release('ext', a.address, 'uid-same');
        await t.another().claimAddress(pool, a.address, who('same'));
        return true;
      },
    });
    expect(report.released).toEqual([]);
    expect(await t.ipam.findByOwner('uid-same')).toEqual([a]);
  });

  it('changes nothing in a dry run', async () => {
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const a = await t.ipam.claimAny(pool, who('gone'));
    clock.advance(10 * 60_000);
    const report = await t.ipam.collectGarbage(new Set(), { dryRun: true });
    expect(report.orphans).toEqual([a]);
    expect(report.released).toEqual([]);
    expect(await t.ipam.findByOwner('uid-gone')).toEqual([a]);
  });

  it('never frees a live allocation while allocators, deleters and collectors run at once', async () => {
    const t = await fx.freshTable();
    const live = new Map<string, Allocation>(); // uid → allocation, for owners that exist
    const deleted = new Set<string>();
    let stop = false;
    let collections = 0;
    let freedByGc = 0;
    const allocator = async (w: number) => {
      const ipam = t.another();
      for (let i = 0; i < 30; i++) {
        const uid = `w${w}-${i}`;
        live.set(uid, { subnet: '', family: 4, address: '', owner: { uid, name: uid } }); // the EIP exists first
        const a = await ipam.claimAny(pool, { uid, name: uid });
        live.set(uid, a);
        if (i % 3 === 0) {
          // deleted: sometimes cleanly, sometimes force-deleted (finalizer removed), leaving an orphan
          live.delete(uid);
          deleted.add(uid);
          if (i % 2 === 0) await ipam.release(a.subnet, a.address, uid);
        }
      }
    };
    const collector = async () => {
      const ipam = t.another();
      while (!stop) {
        const liveAsOf = Date.now();
        const snapshot = new Set(live.keys());
        const r = await ipam.collectGarbage(snapshot, { liveAsOf, graceMs: 0 });
        collections++;
        freedByGc += r.released.length;
        for (const a of r.released) expect(deleted.has(a.owner.uid), `freed live ${a.owner.uid}`).toBe(true);
      }
    };
    const gc = [collector(), collector()];
    await Promise.all(Array.from({ length: 8 }, (_, w) => allocator(w)));
    stop = true;
    await Promise.all(gc);
    const final = await t
      .another()
      .collectGarbage(new Set(live.keys()), { graceMs: 0, liveAsOf: Date.now() });
    freedByGc += final.released.length;
    expect(collections).toBeGreaterThan(0);
    expect(freedByGc).toBeGreaterThan(0);
    // Every live owner still holds exactly what it was given; every deleted owner holds nothing.
    for (const [uid, a] of live) expect(await t.ipam.findByOwner(uid)).toEqual([a]);
    for (const uid of deleted) expect(await t.ipam.findByOwner(uid)).toEqual([]);
  }, 120_000);
});
