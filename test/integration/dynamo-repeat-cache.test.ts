/**
 * The per-container answer cache of claimAddress for gateway pods' own addresses (ADR 0028): a pod's reservation is
 * claimed again on every add; within `repeatCacheMs` the adapter answers from memory. EIP owners always read.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoIpam } from '../../shared/adapters/dynamo/index.js';
import type { Pool } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';
import { type DynamoFixture, startDynamoFixture } from './dynamo-fixture.js';

let fx: DynamoFixture;
beforeAll(async () => {
  fx = await startDynamoFixture();
});
afterAll(async () => {
  await fx?.close();
});

const pool: Pool = { subnet: 'ext', family: 4, cidr: '10.40.0.0/24', gateway: '10.40.0.1', exclude: [] };

describe('claimAddress repeat cache', () => {
  it('answers a pod reservation from memory within the cache age, reads again after it and after a release', async () => {
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const ipam = createDynamoIpam({
      client: t.client,
      tableName: t.tableName,
      clock,
      tuning: { repeatCacheMs: 5000 },
    });
    const pod = { uid: 'pod:1234', name: 'vpc-nat-gw-gw1-0' };
    const first = await ipam.claimAddress(pool, '10.40.0.20', pod); // read + write
    const n0 = t.client.total();
    expect(await ipam.claimAddress(pool, '10.40.0.20', pod)).toEqual(first); // read: confirmed, remembered
    expect(t.client.total() - n0).toBe(1);
    clock.advance(4000);
    expect(await ipam.claimAddress(pool, '10.40.0.20', pod)).toEqual(first); // from memory
    expect(t.client.total() - n0).toBe(1);
    clock.advance(2000);
    await ipam.claimAddress(pool, '10.40.0.20', pod); // aged out: read again
    expect(t.client.total() - n0).toBe(2);
    expect(await ipam.release('ext', '10.40.0.20', pod.uid)).toBe(true);
    const n1 = t.client.total();
    await ipam.claimAddress(pool, '10.40.0.20', pod); // released: read and claim again, not the old answer
    expect(t.client.total() - n1).toBe(2);
  });

  it('always reads for an EIP owner, whose allocation carries its placement', async () => {
    const clock = new ManualClock();
    const t = await fx.freshTable({ clock });
    const ipam = createDynamoIpam({
      client: t.client,
      tableName: t.tableName,
      clock,
      tuning: { repeatCacheMs: 5000 },
    });
    const eip = { uid: 'uid-eip', name: 'eip-1' };
    await ipam.claimAddress(pool, '10.40.0.30', eip);
    await ipam.claimAddress(pool, '10.40.0.30', eip);
    const n0 = t.client.total();
    expect(await ipam.place('ext', '10.40.0.30', eip.uid, { gateway: 'gw1', prefix: 24 })).toBe(true);
    const again = await ipam.claimAddress(pool, '10.40.0.30', eip);
    expect(again.placement).toEqual({ gateway: 'gw1', prefix: 24 });
    expect(t.client.total() - n0).toBe(2);
  });
});
