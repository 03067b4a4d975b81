/**
 * Garbage collection as the scheduled function runs it: the live set from the cluster (EIPs and gateway pods), the
 * DynamoDB IPAM on dynalite.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalDynamo } from '../../local/dynamo.js';
import { ensureTable } from '../../local/table.js';
import { createDynamoIpam } from '../../shared/adapters/dynamo/index.js';
import { collectGarbage } from '../../shared/core/gc.js';
import { world } from '../support/world.js';

let dynamo: Awaited<ReturnType<typeof startLocalDynamo>>;
let client: DynamoDBClient;

beforeAll(async () => {
  dynamo = await startLocalDynamo();
  client = new DynamoDBClient({
    endpoint: dynamo.endpoint,
    region: 'local',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
});

afterAll(async () => {
  client.destroy();
  await dynamo.close();
});

describe('garbage collection', () => {
  it('releases what a vanished EIP held, keeps live EIPs and gateway pod reservations, and never touches fresh claims', async () => {
    await ensureTable(client, 'gc-test');
    const w = world();
    const ipam = createDynamoIpam({ client, tableName: 'gc-test', clock: w.clock });
    w.deps.ipam = ipam;
    const pod = w.createPod(undefined, { 'ovn-vpc-external-network': '172.18.0.249' });
    w.eip('kept');
    w.eip('gone');
    await w.run('add', 'kept');
    await w.run('add', 'gone');
    const goneUid = w.get('gone')!.metadata.uid;
    const goneIp = w.get('gone')!.status!.ip!;
    // Force-deleted behind the controller's back: no finalizer path ran, the delete event was lost.
    w.cluster.eips.delete('gone');

    // Run right away, the claims are too young to judge: nothing is released.
    const early = await collectGarbage(w.deps, ipam);
    expect(early.released).toEqual([]);

    w.clock.advance(10 * 60_000);
    w.eip('fresh');
    await w.run('add', 'fresh'); // claimed after the collector's live set would be read: never judged
    const dry = await collectGarbage(w.deps, ipam, { dryRun: true });
    expect(dry.orphans.map((a) => a.owner.uid)).toEqual([goneUid]);
    expect(dry.released).toEqual([]);

    const report = await collectGarbage(w.deps, ipam);
    expect(report.released.map((a) => a.address)).toEqual([goneIp]);
    expect(await ipam.findByOwner(goneUid)).toEqual([]);
    expect((await ipam.findByOwner(w.get('kept')!.metadata.uid)).length).toBe(1);
    expect((await ipam.findByOwner(`pod:${pod.uid}`)).map((a) => a.address)).toEqual(['172.18.0.249']);
    expect((await ipam.findByOwner(w.get('fresh')!.metadata.uid)).length).toBe(1);
  });
});
