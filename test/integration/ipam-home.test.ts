/**
 * Where a new EIP's claim goes (ADR 0043): the allocator proposes a home block it remembers free addresses in, the
 * add records it on the EIP in the write that adds the finalizer, claims there as a first attempt (no read), and
 * removes the record in the write that sets spec.v4ip. A retry reads the record and meets its own claim. Runs the
 * add of the in-memory world with the DynamoDB IPAM on dynalite, on a /22 (16 home blocks) half used: homes are
 * proposed only once an allocator has seen that its pool is not sparse (in a sparse one, a blind write at the
 * owner's own block is one request without any memory).
 */
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { heldAddressItem, putItems } from '../../local/table.js';
import type { DynamoIpam } from '../../shared/adapters/dynamo/index.js';
import { blockRange, geometryOf, homeOfHint } from '../../shared/adapters/dynamo/layout.js';
import { IPAM_HOME_ANNOTATION, parseAddress } from '../../shared/domain/addressing.js';
import { DEFAULT_EXTERNAL_SUBNET } from '../../shared/domain/kube-ovn.js';
import type { Pool } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';
import { FIRST, type FreshTable, useDynamo } from '../support/dynamo.js';
import { world } from '../support/world.js';

const fx = useDynamo();

const wide: Pool = { subnet: 'wide', family: 4, cidr: '172.20.0.0/16', gateway: '172.20.0.1', exclude: [] };

/** The world's external subnet as the core computes its pool. */
const dense: Pool = {
  subnet: DEFAULT_EXTERNAL_SUBNET,
  family: 4,
  cidr: '10.40.0.0/22',
  gateway: '10.40.0.1',
  exclude: [],
};

/** Marks about `share` of the pool's addresses held by others, spread at random, straight into the table. */
async function prefill(t: FreshTable, pool: Pool, share: number): Promise<void> {
  const g = geometryOf(pool);
  const items = [];
  for (let s = 0n; s < g.capacity; s++)
    if (Math.random() < share)
      items.push(
        heldAddressItem({
          pk: g.pk,
          sk: g.skOf(s),
          subnet: pool.subnet,
          address: g.addressOf(s),
          uid: `pre-${s}`,
          claimedAt: 0,
        }),
      );
  await putItems(t.client, t.tableName, items);
}

/** Claims for throwaway owners until the allocator has seen the pool is used and proposes homes. */
async function warm(ipam: DynamoIpam, pool: Pool): Promise<void> {
  for (let i = 0; i < 20 && !ipam.suggestHome(pool); i++)
    await ipam.claimAny(pool, { uid: `warm-${i}`, name: `warm-${i}` }, undefined, { firstAttempt: true });
  expect(ipam.suggestHome(pool)).toBeDefined();
}

async function denseWorld() {
  const w = world({ cidrBlock: dense.cidr, gateway: dense.gateway, excludeIps: [] });
  const t = await fx.freshTable({ clock: w.clock });
  await prefill(t, dense, 0.5);
  await warm(t.ipam, dense);
  w.deps.ipam = t.ipam;
  return { w, t };
}

/** The home the add wrote with the finalizer, if any. */
function homeWritten(w: ReturnType<typeof world>, name: string): string | null | undefined {
  const first = w.cluster.writes.find(
    (x) => x.method === 'updateEip' && x.name === name && (x.body as { finalizers?: unknown }).finalizers,
  );
  return (first?.body as { annotations?: Record<string, string | null> } | undefined)?.annotations?.[
    IPAM_HOME_ANNOTATION
  ];
}

const inBlock = (address: string, start: string) => {
  const a = parseAddress(address)!.value;
  const s = parseAddress(start)!.value;
  return a >= s && a < s + 64n;
};

describe('home hints', () => {
  it('name an aligned block of a multi-block pool; anything else is not recognised', () => {
    const g = geometryOf(wide);
    expect(blockRange(g)).toEqual({
      first: parseAddress('172.20.0.0')!.value,
      last: parseAddress('172.20.255.192')!.value,
    });
    expect(homeOfHint(g, '172.20.37.64')).toBe(parseAddress('172.20.37.64')!.value);
    for (const bad of ['172.20.37.65', '172.21.0.0', 'fd00::', 'garbage', '', '172.20.37.64 ', undefined])
      expect(homeOfHint(g, bad), String(bad)).toBeUndefined();
    // A pool read whole has one block, everybody's: no hint applies.
    const small = geometryOf({ ...wide, cidr: '10.0.0.0/24', gateway: '10.0.0.1' });
    expect(blockRange(small)).toBeUndefined();
    expect(homeOfHint(small, '10.0.0.0')).toBeUndefined();
  });
});

describe('first attempts at a suggested home (the allocator alone)', () => {
  it('are not proposed in a sparse pool: a blind write at the owner block is one request there', async () => {
    const t = await fx.freshTable();
    for (let i = 0; i < 20; i++) {
      expect(t.ipam.suggestHome(wide)).toBeUndefined();
      const before = t.client.total();
      await t.ipam.claimAny(wide, { uid: `s${i}`, name: `s${i}` }, undefined, { firstAttempt: true });
      expect(t.client.total() - before).toBe(1);
      expect(t.ipam.lastClaim!.path).toBe('blind');
    }
  });

  it('cost one request each once the allocator has read its block, and move on when it is full', async () => {
    const t = await fx.freshTable();
    await prefill(t, dense, 0.5);
    const ipam = t.ipam;
    await warm(ipam, dense);
    const homes = new Set<string>();
    const requests: number[] = [];
    const paths: string[] = [];
    const got: { address: string; home: string }[] = [];
    for (let i = 0; i < 100; i++) {
      const home = ipam.suggestHome(dense)!;
      homes.add(home);
      const before = t.client.total();
      const a = await ipam.claimAny(dense, { uid: `n${i}`, name: `n${i}` }, undefined, {
        firstAttempt: true,
        home,
      });
      requests.push(t.client.total() - before);
      paths.push(ipam.lastClaim!.path);
      got.push({ address: a.address, home });
      // Inside the home, or behind a pointer there when the read found the block full.
      if (ipam.lastClaim!.path !== 'pointer')
        expect(inBlock(a.address, home), `${a.address} in ${home}`).toBe(true);
    }
    // The first claim in a block reads it (2 requests), the rest of the block is claimed from memory (1 each);
    // about 32 free addresses per block: a handful of blocks for 100 claims.
    const fromMemory = requests.filter((_, i) => paths[i] === 'memory');
    expect(fromMemory.every((r) => r === 1)).toBe(true);
    expect(fromMemory.length).toBeGreaterThanOrEqual(100 - 2 * homes.size);
    expect(homes.size).toBeGreaterThanOrEqual(2);
    expect(homes.size).toBeLessThanOrEqual(6);
    // A retry of any of them (not a first attempt) finds the claim at the same home.
    for (const i of [0, 61, 62, 99]) {
      const again = await t.another().claimAny(dense, { uid: `n${i}`, name: `n${i}` }, undefined, {
        home: got[i]!.home,
      });
      expect(again.address).toBe(got[i]!.address);
    }
  });
});

describe('a pool filled block by block (what suggested homes leave behind)', () => {
  it('a new allocator meeting a full block moves to where the cursor found room, and claims there from memory', async () => {
    // The allocator's random choices (the suggested homes) from a seeded generator and its sense of time from a
    // manual clock, so the run is the same every time: with Math.random and the wall clock about one run in three
    // (more on a loaded machine) ended below the floor.
    let seed = 0x2f6e2b1;
    const random = vi.spyOn(Math, 'random').mockImplementation(() => {
      seed = (seed + 0x6d2b79f5) | 0;
      let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
      return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
    });
    onTestFinished(() => random.mockRestore());
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const pool: Pool = {
      subnet: 'blocks',
      family: 4,
      cidr: '10.30.0.0/23',
      gateway: '10.30.0.1',
      exclude: [],
    };
    const claim = async (ipam: typeof t.ipam, uid: string) => {
      const home = ipam.suggestHome(pool);
      return ipam.claimAny(pool, { uid, name: uid }, undefined, { firstAttempt: true, home });
    };
    // One allocator fills 384 of the 509 addresses: whole blocks, one after the other.
    const taken = new Set<string>();
    for (let i = 0; i < 384; i++) taken.add((await claim(t.ipam, `fill-${i}`)).address);
    expect(taken.size).toBe(384);
    // Another container: its first suggestions are likely full blocks (pointer path); after two in a row it follows
    // the cursor to the empty blocks and claims from memory.
    const later = t.another();
    const paths: string[] = [];
    for (let i = 0; i < 100; i++) {
      const before = t.client.total();
      const a = await claim(later, `late-${i}`);
      expect(taken.has(a.address), a.address).toBe(false);
      taken.add(a.address);
      paths.push(later.lastClaim!.path);
      if (later.lastClaim!.path === 'memory') expect(t.client.total() - before).toBe(1);
    }
    // A pointer claim (the cursor's reads in a new container) and a block read per block reached; the rest from
    // memory, one request each.
    expect(paths.filter((p) => p === 'pointer').length).toBeLessThanOrEqual(12);
    expect(paths.filter((p) => p === 'memory').length).toBeGreaterThanOrEqual(80);
  });
});

describe('a pool read whole (a /24), first attempts', () => {
  const small: Pool = { subnet: 'small', family: 4, cidr: '10.31.0.0/24', gateway: '10.31.0.1', exclude: [] };

  /** The key span (in addresses) of every Query `fn` sends on the table's client. */
  async function querySpans(t: FreshTable, fn: () => Promise<unknown>): Promise<number[]> {
    const spans: number[] = [];
    const name = `spans-${Math.random()}`;
    t.client.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { ExpressionAttributeValues?: Record<string, { S?: string }> };
        const a = input.ExpressionAttributeValues?.[':a']?.S;
        const b = input.ExpressionAttributeValues?.[':b']?.S;
        if (context.commandName === 'QueryCommand' && a?.startsWith('A#') && b?.startsWith('A#'))
          spans.push(Number.parseInt(b.slice(2, 10), 16) - Number.parseInt(a.slice(2, 10), 16) + 1);
        return next(args);
      },
      { step: 'initialize', name },
    );
    try {
      await fn();
    } finally {
      t.client.middlewareStack.remove(name);
    }
    return spans;
  }

  it('read a 64-address window while others claim there, and the whole pool when the allocator is alone', async () => {
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const mine = t.ipam;
    // Half the pool claimed by another container more than 10 s ago: not recent, so not a sign of others at work.
    const seed = t.another();
    for (let i = 0; i < 127; i++)
      await seed.claimAny(small, { uid: `seed-${i}`, name: 'x' }, undefined, FIRST);
    clock.advance(11_000);
    // Alone: a retry reads the whole pool and sees no one's recent claims; once that read is too old to claim from
    // (blockCacheMs), the next first attempt reads the whole pool again.
    await mine.claimAny(small, { uid: 'retry', name: 'r' });
    clock.advance(6_000);
    const alone = await querySpans(t, () =>
      mine.claimAny(small, { uid: 'alone-first', name: 'a' }, undefined, FIRST),
    );
    expect(alone.length).toBeGreaterThan(0);
    expect(Math.min(...alone)).toBeGreaterThan(64);

    // Busy: another container has just claimed here; once a read has seen that, a first attempt reads a window.
    const other = t.another();
    for (let i = 0; i < 16; i++)
      await other.claimAny(small, { uid: `other-${i}`, name: 'o' }, undefined, FIRST);
    await mine.claimAny(small, { uid: 'sees-others', name: 's' }); // a retry: reads the whole pool
    clock.advance(6_000);
    const busy = await querySpans(t, () =>
      mine.claimAny(small, { uid: 'first', name: 'f' }, undefined, FIRST),
    );
    expect(busy).toEqual([64]);
    expect(mine.lastClaim?.path).toBe('block');
    // The claim is inside the pool's one block, so a retry of that owner finds it with its whole read.
    const again = await mine.claimAny(small, { uid: 'first', name: 'f' });
    expect(mine.lastClaim?.source).toBe('existing');
    expect(again.address).toMatch(/^10\.31\.0\./);
  });
});

describe('the add records where its claim goes', () => {
  it('writes the home with the finalizer, claims inside it, and removes it when spec.v4ip is set', async () => {
    const { w } = await denseWorld();
    const ips: string[] = [];
    for (const name of ['h1', 'h2', 'h3']) {
      w.eip(name);
      const out = await w.run('add', name, 'added');
      expect(out).toMatchObject({ status: 'applied' });
      const home = homeWritten(w, name);
      expect(home, name).toMatch(/^10\.40\.[0-3]\.(0|64|128|192)$/);
      const eip = w.cluster.eips.get(name)!;
      expect(inBlock(eip.status!.ip!, home!), `${eip.status!.ip} in ${home}`).toBe(true);
      expect(eip.metadata.annotations?.[IPAM_HOME_ANNOTATION]).toBeUndefined();
      ips.push(eip.status!.ip!);
    }
    // One allocator keeps filling the block it has read: the second and third add went to the same home.
    expect(new Set(['h1', 'h2', 'h3'].map((n) => homeWritten(w, n))).size).toBe(1);
    expect(new Set(ips).size).toBe(3);
  });

  it('a retry after a failed first attempt reads the home back and gets the same address, with one allocation', async () => {
    const { w, t } = await denseWorld();
    w.eip('retry');
    w.gateway.failNext(1, { op: 'eip-add', stderr: 'arping: DAD found a duplicate' });
    await expect(w.run('add', 'retry', 'added')).rejects.toMatchObject({ code: 'GatewayCommandFailed' });
    const mid = w.cluster.eips.get('retry')!;
    const home = mid.metadata.annotations?.[IPAM_HOME_ANNOTATION];
    expect(home).toBeDefined();
    const [first] = await t.ipam.findByOwner(mid.metadata.uid);
    expect(inBlock(first!.address, home!)).toBe(true);
    // Another container (nothing in memory) retries: not a first attempt, it reads the recorded home.
    w.deps.ipam = t.another();
    w.clock.advance(121_000);
    expect(await w.run('add', 'retry', 'added')).toMatchObject({ status: 'applied', ip: first!.address });
    expect((await t.ipam.findByOwner(mid.metadata.uid)).map((a) => a.address)).toEqual([first!.address]);
  });

  it('a home edited by hand between attempts: the retry still meets its claim (the owner index as a last resort)', async () => {
    const { w, t } = await denseWorld();
    w.eip('edited');
    w.gateway.failNext(1, { op: 'eip-add' });
    await expect(w.run('add', 'edited', 'added')).rejects.toMatchObject({ code: 'GatewayCommandFailed' });
    const mid = w.cluster.eips.get('edited')!;
    const [first] = await t.ipam.findByOwner(mid.metadata.uid);
    for (const scribble of ['10.40.0.65', '10.40.3.0']) {
      // Unrecognised (unaligned), then another valid block: neither holds the claim.
      mid.metadata.annotations = { [IPAM_HOME_ANNOTATION]: scribble };
      w.deps.ipam = t.another();
      w.gateway.failNext(1, { op: 'eip-add' });
      w.clock.advance(121_000);
      await expect(w.run('add', 'edited', 'added')).rejects.toMatchObject({ code: 'GatewayCommandFailed' });
      expect((await t.ipam.findByOwner(mid.metadata.uid)).map((a) => a.address)).toEqual([first!.address]);
    }
    w.clock.advance(121_000);
    expect(await w.run('add', 'edited', 'added')).toMatchObject({ status: 'applied', ip: first!.address });
  });
});
