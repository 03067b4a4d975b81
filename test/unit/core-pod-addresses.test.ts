/**
 * The gateway pods' own addresses (shared/core/pod-addresses.ts, ADR 0042): the refusal the add and the adoption path
 * use, and the reservation that the garbage collector and `npm run adopt` share — here through adoptEips on the
 * in-memory world (the collector's side runs on DynamoDB in test/integration/gc.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { adoptEips } from '../../scripts/adoption.js';
import { podAddressesOn, refuseGatewayPodAddress } from '../../shared/core/pod-addresses.js';
import { AddressConflictError } from '../../shared/domain/errors.js';
import type { GatewayPod, Pool } from '../../shared/ports.js';
import { world } from '../support/world.js';

const SUBNET = 'ovn-vpc-external-network';
const pool: Pool = { subnet: SUBNET, family: 4, cidr: '172.18.0.0/24', gateway: '172.18.0.1', exclude: [] };
const pod = (addresses: Record<string, string>): GatewayPod =>
  ({ namespace: 'kube-system', name: 'vpc-nat-gw-gw1-0', uid: 'u1', addresses }) as unknown as GatewayPod;

describe('refuseGatewayPodAddress', () => {
  it("refuses a pod's own address in the pool, naming the pod, and lets anything else through", () => {
    const pods = [pod({ [SUBNET]: '172.18.0.254', other: '172.18.0.9' })];
    expect(() => refuseGatewayPodAddress(pods, pool, '172.18.0.254')).toThrow(
      new AddressConflictError(
        `address 172.18.0.254 in subnet ${SUBNET} is already allocated to kube-system/vpc-nat-gw-gw1-0`,
        'pod:u1',
      ),
    );
    expect(() => refuseGatewayPodAddress(pods, pool, '172.18.0.9')).not.toThrow(); // another network's
    expect(() => refuseGatewayPodAddress(pods, pool, '172.18.0.253')).not.toThrow();
    expect(podAddressesOn(pods, SUBNET)).toEqual(['172.18.0.254']);
  });

  it('leaves an address the pool never hands out to the range check', () => {
    const pods = [pod({ [SUBNET]: '172.18.0.5' })];
    const excluded: Pool = { ...pool, exclude: ['172.18.0.2..172.18.0.10'] };
    expect(() => refuseGatewayPodAddress(pods, excluded, '172.18.0.5')).not.toThrow();
    expect(() => refuseGatewayPodAddress(pods, pool, '172.18.0.5')).toThrow(AddressConflictError);
  });
});

describe("npm run adopt reserves the gateway pods with the collector's code", () => {
  it('reports a dry run without writing, reserves, finds it held the next time, and takes a predecessor over', async () => {
    const w = world();
    const first = w.createPod(undefined, { [SUBNET]: '172.18.0.249' });
    // An EIP kube-ovn configured: Ready with an address, nothing in this product's IPAM.
    w.cluster.putEip({
      metadata: { name: 'old' },
      spec: { natGwDp: 'gw1' },
      status: { ready: true, ip: '172.18.0.50' },
    });
    const mine = `kube-system/${first.name}`;
    const podHeld = () =>
      [...w.ipam.allocations.values()].filter((a) => a.owner.uid.startsWith('pod:')).map((a) => a.owner.uid);

    const dry = await adoptEips(w.deps, { dryRun: true });
    expect(dry.gatewayPods).toEqual([
      { pod: mine, subnet: SUBNET, address: '172.18.0.249', status: 'reserved' },
    ]);
    expect(podHeld()).toEqual([]);

    expect((await adoptEips(w.deps)).gatewayPods.map((p) => p.status)).toEqual(['reserved']);
    expect(podHeld()).toEqual([`pod:${first.uid}`]);
    expect((await adoptEips(w.deps)).gatewayPods.map((p) => p.status)).toEqual(['already']);

    const second = w.createPod(undefined, { [SUBNET]: '172.18.0.249' });
    expect((await adoptEips(w.deps)).gatewayPods).toEqual([
      {
        pod: mine,
        subnet: SUBNET,
        address: '172.18.0.249',
        status: 'reserved',
        takenOverFrom: `pod:${first.uid}`,
      },
    ]);
    expect(podHeld()).toEqual([`pod:${second.uid}`]);
  });
});
