/**
 * claimAny's idempotency must not depend on a global secondary index: on AWS an index answers a moment after the
 * write (ADR 0026). A seam on the client models that lag — every `byOwner` / `byFree` Query result hides the items
 * claimed or released in the last LAG_MS — and a retry that comes within the lag must still get the owner's own
 * address back, on every path the allocator takes (blind first write, home block, pointer).
 */
import { describe, expect, it } from 'vitest';
import { createDynamoIpam, type DynamoIpam } from '../../shared/adapters/dynamo/index.js';
import type { Pool } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';
import { useDynamo } from '../support/dynamo.js';

const LAG_MS = 60_000;

const fx = useDynamo();

/** An adapter whose client sees the indexes LAG_MS behind the table (the clock never moves in these tests). */
async function laggingIpam(clock: ManualClock): Promise<{ ipam: DynamoIpam; hidden: () => number }> {
  const { tableName } = await fx.freshTable({ clock });
  const client = fx.client();
  let hidden = 0;
  client.middlewareStack.add(
    (next) => async (args) => {
      const out = await next(args);
      const input = args.input as { IndexName?: string };
      if (input.IndexName) {
        const o = out.output as { Items?: Record<string, { N?: string }>[] };
        const before = o.Items?.length ?? 0;
        o.Items = o.Items?.filter((it) => {
          const at = Number(it.claimedAt?.N ?? it.releasedAt?.N ?? '0');
          return at <= clock.now() - LAG_MS;
        });
        hidden += before - (o.Items?.length ?? 0);
      }
      return out;
    },
    { step: 'initialize', name: 'indexLag' },
  );
  return { ipam: createDynamoIpam({ client, tableName, clock }), hidden: () => hidden };
}

describe('DynamoDB IPAM with a lagging index', () => {
  it('the seam hides fresh allocations from the owner index (so the test below can fail)', async () => {
    const clock = new ManualClock();
    const { ipam, hidden } = await laggingIpam(clock);
    const pool: Pool = { subnet: 's', family: 4, cidr: '10.1.0.0/24', gateway: '10.1.0.1', exclude: [] };
    await ipam.claimAny(pool, { uid: 'u', name: 'e' });
    expect(await ipam.findByOwner('u')).toEqual([]);
    expect(hidden()).toBe(1);
  });

  it('findByOwner with where the EIP records its claims finds them within the lag (ADR 0085), as the twin models', async () => {
    const clock = new ManualClock();
    const { ipam } = await laggingIpam(clock);
    const pool: Pool = { subnet: 's', family: 4, cidr: '10.1.0.0/22', gateway: '10.1.0.1', exclude: [] };
    const any = await ipam.claimAny(pool, { uid: 'u-any', name: 'a' }, undefined, { firstAttempt: true });
    const fixed = await ipam.claimAddress(pool, '10.1.3.7', { uid: 'u-static', name: 's' });
    // The index shows neither yet.
    expect(await ipam.findByOwner('u-any')).toEqual([]);
    expect(await ipam.findByOwner('u-static')).toEqual([]);
    // Read where they are: the owner's home block in its pool, the address its spec names.
    expect(await ipam.findByOwner('u-any', [{ subnet: 's', addresses: [], pools: [pool] }])).toEqual([any]);
    expect(
      await ipam.findByOwner('u-static', [{ subnet: 's', addresses: ['10.1.3.7'], pools: [pool] }]),
    ).toEqual([fixed]);
    // Someone else's address named on an EIP is not reported as its own.
    expect(await ipam.findByOwner('u-any', [{ subnet: 's', addresses: ['10.1.3.7'] }])).toEqual([]);
  });

  it('the collector reads the table, not the lagging index: an orphan claimed long ago is found and released', async () => {
    const clock = new ManualClock();
    const { ipam } = await laggingIpam(clock);
    const pool: Pool = { subnet: 's', family: 4, cidr: '10.1.0.0/24', gateway: '10.1.0.1', exclude: [] };
    const gone = await ipam.claimAny(pool, { uid: 'gone', name: 'g' });
    clock.advance(40_000); // older than the grace below, still younger than the index's lag
    const report = await ipam.collectGarbage(new Set(), { liveAsOf: clock.now(), graceMs: 30_000 });
    expect(report.released.map((a) => a.address)).toEqual([gone.address]);
  });

  it('a retry within the lag gets the same address back, on every claim path, and nobody holds two', async () => {
    const clock = new ManualClock();
    const { ipam } = await laggingIpam(clock);
    // A /23 with its middle excluded: eight home blocks of 64 addresses, six of them with nothing eligible, so
    // owners homed there take the pointer path; the others fill their block, then reuse released addresses.
    const pool: Pool = {
      subnet: 'lag',
      family: 4,
      cidr: '10.2.0.0/23',
      gateway: '10.2.0.1',
      exclude: ['10.2.0.41..10.2.1.199'],
    };
    const holder = new Map<string, string>();
    const paths = new Set<string>();
    for (let i = 0; i < 140; i++) {
      const owner = { uid: `o${i}`, name: `eip-${i}` };
      let a: Awaited<ReturnType<DynamoIpam['claimAny']>>;
      try {
        // Mostly first attempts, as the add makes them right after writing the EIP's finalizer (ADR 0043); every
        // fifth owner's first claim comes from a retry whose earlier attempt never got to claim (it reads first).
        a = await ipam.claimAny(pool, owner, undefined, { firstAttempt: i % 5 !== 4 });
      } catch (e) {
        expect((e as Error).name).toBe('NoAvailableAddressError');
        break;
      }
      paths.add(ipam.lastClaim!.path);
      // The retry, at once (not a first attempt: the finalizer is there now): the index shows nothing yet.
      const again = await ipam.claimAny(pool, owner);
      expect(again.address).toBe(a.address);
      expect(ipam.lastClaim!.source).toBe('existing');
      expect(holder.has(a.address)).toBe(false);
      holder.set(a.address, owner.uid);
      if (i % 10 === 9) {
        // Release an earlier owner's address: the pool now has released addresses to reuse.
        const [addr, uid] = [...holder.entries()][i % 7]!;
        expect(await ipam.release('lag', addr, uid)).toBe(true);
        holder.delete(addr);
      }
    }
    // Blind writes stop once pointer claims have filled the eligible blocks past a quarter, which can come first:
    // a sparse /16 next to it has them for sure.
    const sparse: Pool = {
      subnet: 'lag-wide',
      family: 4,
      cidr: '10.3.0.0/16',
      gateway: '10.3.0.1',
      exclude: [],
    };
    for (let i = 0; i < 5; i++) {
      const owner = { uid: `s${i}`, name: `eip-s${i}` };
      const a = await ipam.claimAny(sparse, owner, undefined, { firstAttempt: true });
      paths.add(ipam.lastClaim!.path);
      const again = await ipam.claimAny(sparse, owner);
      expect(again.address).toBe(a.address);
      expect(ipam.lastClaim!.source).toBe('existing');
    }
    expect([...paths].sort()).toEqual(['blind', 'block', 'memory', 'pointer']);
  });
});
