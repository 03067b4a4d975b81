/**
 * Garbage collection as the scheduled function runs it: the live set from the cluster (EIPs and gateway pods), the
 * DynamoDB IPAM on dynalite. The collector also records the live gateway pods' own addresses in IPAM (ADR 0042).
 */
import { describe, expect, it } from 'vitest';
import { createDynamoIpam } from '../../shared/adapters/dynamo/index.js';
import { collectGarbage } from '../../shared/core/gc.js';
import { useDynamo } from '../support/dynamo.js';
import { world } from '../support/world.js';

const dynamo = useDynamo();

describe('garbage collection', () => {
  it('releases what a vanished EIP held, keeps live EIPs and gateway pod reservations, and never touches fresh claims', async () => {
    const client = await dynamo.table('gc-test');
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

  it("reserves each live gateway pod's own address, hands a re-created pod its predecessor's, and leaves an EIP's alone", async () => {
    const client = await dynamo.table('gc-pods');
    const w = world();
    const ipam = createDynamoIpam({ client, tableName: 'gc-pods', clock: w.clock });
    w.deps.ipam = ipam;
    const SUBNET = 'ovn-vpc-external-network';
    const first = w.createPod(undefined, { [SUBNET]: '172.18.0.249' });
    w.eip('a');
    await w.run('add', 'a');
    const eipA = w.get('a')!;
    // The add writes no reservation: the table holds the EIP's address only.
    expect(await ipam.findByOwner(`pod:${first.uid}`)).toEqual([]);

    const dry = await collectGarbage(w.deps, ipam, { dryRun: true });
    expect(dry.gatewayPods).toEqual([
      { pod: `kube-system/${first.name}`, subnet: SUBNET, address: '172.18.0.249', status: 'reserved' },
    ]);
    expect(await ipam.findByOwner(`pod:${first.uid}`)).toEqual([]); // a dry run writes nothing

    const reserved = await collectGarbage(w.deps, ipam);
    expect(reserved.gatewayPods.map((p) => p.status)).toEqual(['reserved']);
    expect((await ipam.findByOwner(`pod:${first.uid}`)).map((a) => a.address)).toEqual(['172.18.0.249']);
    expect((await collectGarbage(w.deps, ipam)).gatewayPods.map((p) => p.status)).toEqual(['already']);

    // The StatefulSet's new pod, same address: the reservation moves over at once, whatever its age.
    const second = w.createPod(undefined, { [SUBNET]: '172.18.0.249' });
    const moved = await collectGarbage(w.deps, ipam);
    expect(moved.gatewayPods).toEqual([
      {
        pod: `kube-system/${second.name}`,
        subnet: SUBNET,
        address: '172.18.0.249',
        status: 'reserved',
        takenOverFrom: `pod:${first.uid}`,
      },
    ]);
    expect(await ipam.findByOwner(`pod:${first.uid}`)).toEqual([]);
    expect((await ipam.findByOwner(`pod:${second.uid}`)).map((a) => a.address)).toEqual(['172.18.0.249']);

    // A pod given an address an EIP holds (a collision made outside this product): reported, never taken.
    const third = w.createPod(undefined, { [SUBNET]: eipA.status!.ip! });
    const log = w.deps.log as typeof w.deps.log & { lines: Record<string, unknown>[] };
    const clash = await collectGarbage(w.deps, ipam);
    expect(clash.gatewayPods).toMatchObject([{ pod: `kube-system/${third.name}`, status: 'conflict' }]);
    expect((await ipam.findByOwner(eipA.metadata.uid)).map((a) => a.address)).toEqual([eipA.status!.ip]);
    expect(await ipam.findByOwner(`pod:${third.uid}`)).toEqual([]);
    expect(
      log.lines.filter((l) => l.message === 'a gateway pod address is allocated to someone else'),
    ).toHaveLength(1);
    expect(log.lines.filter((l) => l.message === 'garbage collection').at(-1)).toMatchObject({
      podAddressesReserved: 0,
      podAddressConflicts: 1,
    });
  });
});
