/**
 * The audit's store (shared/audit/ports.ts) on the IPAM table. Reads: one paginated Scan for every held address and
 * every lease (an audit runs hourly or on demand; the handlers never scan), one consistent GetItem per address it
 * is about to act on. Writes: a lease is deleted only if it is still the expired one that was read; orphan
 * sightings are their own items (`AUDIT#orphan#<gateway>` / `<address>`), with a TTL so that forgotten ones go away.
 */
import {
  type AttributeValue,
  DeleteItemCommand,
  GetItemCommand,
  type GetItemCommandOutput,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { AuditAllocation } from '../../audit/model.js';
import type { AddressRecord, AuditStore } from '../../audit/ports.js';
import { type Family, parseAddress } from '../../domain/addressing.js';
import type { Lease } from '../../ports.js';
import { addressSk, LEASE_SK, leasePk, poolPk } from './layout.js';
import { placementOfItem } from './placement.js';
import { Store, type StoreOptions } from './store.js';

type Item = Record<string, AttributeValue>;

/** An address item's sort key (not a marker, cursor or any other item kept in a pool's partition). */
const ADDRESS_SK = /^A#[0-9a-f]+$/;

/** Sighting items outlive their last write by this long, then the TTL sweep may take them. */
const SIGHTING_TTL_SEC = 7 * 24 * 3600;

export const sightingPk = (gateway: string): string => `AUDIT#orphan#${gateway}`;

export function createDynamoAuditStore(options: StoreOptions): AuditStore {
  const store = new Store(options);
  const table = store.tableName;
  return {
    async read() {
      const allocations: AuditAllocation[] = [];
      const leases: Lease[] = [];
      for await (const it of store.scanItems({
        // Consistent: what the audit calls leaked is what the table holds now (ADR 0085).
        ConsistentRead: true,
        FilterExpression: 'attribute_exists(#ownerUid) OR #sk = :lease',
        ExpressionAttributeNames: { '#ownerUid': 'ownerUid', '#sk': 'sk' },
        ExpressionAttributeValues: { ':lease': { S: LEASE_SK } },
      })) {
        if (it.sk?.S === LEASE_SK) {
          if (it.leaseKey?.S && it.holder?.S && it.expiresAt?.N)
            leases.push({ key: it.leaseKey.S, holder: it.holder.S, expiresAt: Number(it.expiresAt.N) });
        } else if (it.ownerUid?.S && it.address?.S && it.subnet?.S && ADDRESS_SK.test(it.sk?.S ?? '')) {
          allocations.push(toAllocation(it));
        }
      }
      return { allocations, leases };
    },

    async addressRecord(subnet, address): Promise<AddressRecord> {
      const p = parseAddress(address);
      if (!p) return { state: 'never-used' };
      const r = await store.send<GetItemCommandOutput>(
        new GetItemCommand({
          TableName: table,
          Key: { pk: { S: poolPk(subnet, p.family) }, sk: { S: addressSk(p.family, p.value) } },
          ConsistentRead: true,
        }),
      );
      const it = r.Item;
      if (!it) return { state: 'never-used' };
      if (it.ownerUid?.S) return { state: 'held', ownerUid: it.ownerUid.S };
      return { state: 'released', releasedAt: Number(it.releasedAt?.N ?? '0') };
    },

    async deleteLease(lease) {
      const r = await store.sendConditional(
        new DeleteItemCommand({
          TableName: table,
          Key: { pk: { S: leasePk(lease.key) }, sk: { S: LEASE_SK } },
          ConditionExpression: '#holder = :holder AND #expiresAt = :expiresAt',
          ExpressionAttributeNames: { '#holder': 'holder', '#expiresAt': 'expiresAt' },
          ExpressionAttributeValues: {
            ':holder': { S: lease.holder },
            ':expiresAt': { N: String(lease.expiresAt) },
          },
        }),
      );
      return r.ok;
    },

    async sightings(gateway) {
      const out = new Map<string, number>();
      for await (const it of store.queryItems({
        KeyConditionExpression: '#pk = :pk',
        ExpressionAttributeNames: { '#pk': 'pk' },
        ExpressionAttributeValues: { ':pk': { S: sightingPk(gateway) } },
        ConsistentRead: true,
      }))
        if (it.sk?.S && it.firstSeenAt?.N) out.set(it.sk.S, Number(it.firstSeenAt.N));
      return out;
    },

    async recordSighting(gateway, address, at) {
      await store.sendConditional(
        new PutItemCommand({
          TableName: table,
          Item: {
            pk: { S: sightingPk(gateway) },
            sk: { S: address },
            gateway: { S: gateway },
            firstSeenAt: { N: String(at) },
            expiresAtSec: { N: String(Math.ceil(at / 1000) + SIGHTING_TTL_SEC) },
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    },

    async forgetSighting(gateway, address) {
      await store.send(
        new DeleteItemCommand({
          TableName: table,
          Key: { pk: { S: sightingPk(gateway) }, sk: { S: address } },
        }),
      );
    },
  };
}

function toAllocation(it: Item): AuditAllocation {
  const placement = placementOfItem(it);
  return {
    subnet: it.subnet!.S!,
    family: Number(it.family?.N ?? '4') as Family,
    address: it.address!.S!,
    owner: { uid: it.ownerUid!.S!, name: it.ownerName?.S ?? '' },
    ...(it.claimedAt?.N && { claimedAt: Number(it.claimedAt.N) }),
    ...(placement && { placement }),
  };
}
