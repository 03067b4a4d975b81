/**
 * The IPAM's single conditional writes on a held address or a pointer (README.md next to this file, "Protocols"):
 * a never-used address claimed with `attribute_not_exists(pk)`, a released one with `attribute_exists(pk) AND
 * attribute_not_exists(ownerUid)`, the pointer item moved conditionally on the pointer as last seen, a static claim
 * (claimAddress) as one upsert, and the placement of a held address. claim.ts decides which to try.
 */
import { randomUUID } from 'node:crypto';
import {
  type AttributeValue,
  PutItemCommand,
  UpdateItemCommand,
  type UpdateItemCommandOutput,
} from '@aws-sdk/client-dynamodb';
import { assertClaimable, formatAddress, parseAddress } from '../../domain/addressing.js';
import { AddressConflictError, ConflictError, InvalidSpecError } from '../../domain/errors.js';
import type { Allocation, Clock, Metrics, Owner, Placement, Pool } from '../../ports.js';
import type { ClaimStats } from './ipam.js';
import { type Claimant, getItem, type Item, key, names, placementAttributes, toAllocation } from './items.js';
import { addressSk, type HomeBlock, type PoolGeometry, pointerSk, poolPk } from './layout.js';
import { claimedPlacement, PLACEMENT_ATTRIBUTES, PLACEMENT_REFS, podsValue, qosValue } from './placement.js';
import type { Store } from './store.js';

export class ClaimWrites {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** Conditional writes one claimAny may spend before giving up with a retryable ConflictError. */
    private readonly maxClaimAttempts: number,
    private readonly metrics?: Metrics,
  ) {}

  /** One never-used address (no item at all: a released marker does not qualify), one conditional PutItem. */
  async neverUsed(
    g: PoolGeometry,
    value: bigint,
    owner: Claimant,
    stats: ClaimStats,
    pointerKey?: string,
  ): Promise<Allocation | undefined> {
    this.spend(g, stats);
    const item = this.heldItem(g, value, owner, pointerKey);
    const r = await this.store.sendConditional(
      new PutItemCommand({
        TableName: this.store.tableName,
        Item: item,
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    if (r.ok) {
      stats.source = 'never-used';
      return toAllocation(item);
    }
    stats.conflicts++;
    return undefined;
  }

  /** One released address, if still free: `attribute_exists(pk) AND attribute_not_exists(ownerUid)`. */
  async released(
    g: PoolGeometry,
    value: bigint,
    owner: Claimant,
    stats: ClaimStats,
    pointerKey?: string,
  ): Promise<Allocation | undefined> {
    this.spend(g, stats);
    const values: Item = {
      ':uid': { S: owner.uid },
      ':name': { S: owner.name },
      ':cid': { S: randomUUID() },
      ':now': { N: String(this.clock.now()) },
    };
    if (pointerKey) values[':ptr'] = { S: pointerKey };
    const placed = owner.placement;
    const ns = placed?.namespace;
    if (placed) {
      values[':gw'] = { S: placed.gateway };
      values[':prefix'] = { N: String(placed.prefix) };
    }
    if (ns !== undefined) values[':ns'] = { S: ns };
    const r = await this.store.sendConditional<UpdateItemCommandOutput>(
      new UpdateItemCommand({
        TableName: this.store.tableName,
        Key: key(g.pk, addressSk(g.pool.family, value)),
        UpdateExpression:
          'SET #ownerUid = :uid, #ownerName = :name, #claimId = :cid, #claimedAt = :now' +
          (pointerKey ? ', #pointerSk = :ptr' : '') +
          (placed ? ', #placedGateway = :gw, #placedPrefix = :prefix' : '') +
          (ns !== undefined ? ', #placedNamespace = :ns' : '') +
          ' REMOVE #freePool, #releasedAt',
        ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(#ownerUid)',
        ExpressionAttributeNames: names(
          'ownerUid',
          'ownerName',
          'claimId',
          'claimedAt',
          'freePool',
          'releasedAt',
          ...(pointerKey ? ['pointerSk'] : []),
          ...(placed ? ['placedGateway', 'placedPrefix'] : []),
          ...(ns !== undefined ? ['placedNamespace'] : []),
        ),
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      }),
    );
    if (r.ok) {
      stats.source = 'released';
      return toAllocation(r.output.Attributes!);
    }
    stats.conflicts++;
    return undefined;
  }

  /**
   * Points the owner's pointer item in its home block at `value` before that address is claimed (ADR 0026),
   * conditionally on the pointer as last `seen`. Another claim of the same owner moved it: the lease should have
   * prevented that; a retryable ConflictError.
   */
  async point(
    g: PoolGeometry,
    home: HomeBlock,
    owner: Claimant,
    seen: string | undefined,
    value: bigint,
    stats: ClaimStats,
  ): Promise<string> {
    const target = addressSk(g.pool.family, value);
    this.spend(g, stats);
    const r = await this.store.sendConditional(
      new PutItemCommand({
        TableName: this.store.tableName,
        Item: {
          pk: { S: g.pk },
          sk: { S: pointerSk(g, home, owner.uid) },
          ptrOwner: { S: owner.uid },
          ptrSk: { S: target },
        },
        ConditionExpression: seen ? '#ptrSk = :seen' : 'attribute_not_exists(pk)',
        ...(seen && {
          ExpressionAttributeNames: names('ptrSk'),
          ExpressionAttributeValues: { ':seen': { S: seen } },
        }),
      }),
    );
    if (!r.ok)
      throw new ConflictError(`a concurrent claim for ${owner.name} in subnet ${g.pool.subnet}; retry later`);
    return target;
  }

  /**
   * claimAddress: a consistent read answers a repeat (already ours, or another owner's: AddressConflictError), else
   * one upsert `IF attribute_not_exists(ownerUid) OR ownerUid = :uid`.
   */
  async claimStatic(pool: Pool, address: string, owner: Owner, placement?: Placement): Promise<Allocation> {
    assertClaimable(pool, address);
    const value = parseAddress(address)!.value;
    const addr = formatAddress(pool.family, value);
    const now = this.clock.now();
    const pk = poolPk(pool.subnet, pool.family);
    const sk = addressSk(pool.family, value);
    // Repeated claims are common (retries, a maintained EIP, the collector's gateway pod reservations): a
    // consistent read answers them without a write.
    const current = await getItem(this.store, pk, sk);
    if (current?.ownerUid?.S === owner.uid) return toAllocation(current);
    if (current?.ownerUid?.S) {
      this.metrics?.count('IpamConflicts', 1, { subnet: pool.subnet });
      throw new AddressConflictError(
        `address ${addr} in subnet ${pool.subnet} is already allocated to ${current.ownerName?.S ?? 'another owner'}`,
        current.ownerUid.S,
      );
    }
    // One upsert: free (no item, or a released marker) or already ours. claimId/claimedAt survive a same-owner
    // repeat, so a GC that read the first claim still matches it.
    const placed = placementUpdate(placement);
    const r = await this.store.sendConditional<UpdateItemCommandOutput>(
      new UpdateItemCommand({
        TableName: this.store.tableName,
        Key: key(pk, sk),
        // A same-owner repeat keeps the placement it has (Ipam.place moves it); a new claim records the one given.
        UpdateExpression:
          'SET #subnet = :subnet, #family = :family, #address = :address, #ownerUid = :uid, #ownerName = :name, ' +
          `#claimId = if_not_exists(#claimId, :cid), #claimedAt = if_not_exists(#claimedAt, :now)${placed.set}` +
          ' REMOVE #freePool, #releasedAt',
        ConditionExpression: 'attribute_not_exists(#ownerUid) OR #ownerUid = :uid',
        ExpressionAttributeNames: names(
          'subnet',
          'family',
          'address',
          'ownerUid',
          'ownerName',
          'claimId',
          'claimedAt',
          'freePool',
          'releasedAt',
          ...placed.names,
        ),
        ExpressionAttributeValues: {
          ':subnet': { S: pool.subnet },
          ':family': { N: String(pool.family) },
          ':address': { S: addr },
          ':uid': { S: owner.uid },
          ':name': { S: owner.name },
          ':cid': { S: randomUUID() },
          ':now': { N: String(now) },
          ...placed.values,
        },
        ReturnValues: 'ALL_NEW',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      }),
    );
    if (r.ok) {
      this.metrics?.count('IpamAllocations', 1, { subnet: pool.subnet, source: 'static' });
      return toAllocation(r.output.Attributes!);
    }
    this.metrics?.count('IpamConflicts', 1, { subnet: pool.subnet });
    const holder = r.item ?? (await getItem(this.store, pk, sk));
    const holderName = holder?.ownerName?.S ?? 'another owner';
    throw new AddressConflictError(
      `address ${addr} in subnet ${pool.subnet} is already allocated to ${holderName}`,
      holder?.ownerUid?.S,
    );
  }

  /**
   * One conditional UpdateItem on the address item: the placement is written only while `ownerUid` holds it, and
   * replaces the one recorded (a placement without `qos`, `namespace` or `pods` removes what was recorded of it).
   */
  async place(subnet: string, address: string, ownerUid: string, placement: Placement): Promise<boolean> {
    const p = parseAddress(address);
    if (!p) throw new InvalidSpecError(`invalid IP address "${address}"`);
    if (!ownerUid) return false;
    const { qos, namespace, pods } = placement;
    const set = ['#placedGateway = :gw', '#placedPrefix = :prefix'];
    const remove: string[] = [];
    const values: Item = {
      ':gw': { S: placement.gateway },
      ':prefix': { N: String(placement.prefix) },
      ':uid': { S: ownerUid },
    };
    const optional: [string, string, AttributeValue | undefined][] = [
      ['placedQos', ':qos', qos === undefined ? undefined : qosValue(qos)],
      ['placedNamespace', ':ns', namespace === undefined ? undefined : { S: namespace }],
      ['placedPods', ':pods', pods === undefined ? undefined : podsValue(pods)],
    ];
    for (const [attr, ref, value] of optional) {
      if (value === undefined) remove.push(`#${attr}`);
      else {
        set.push(`#${attr} = ${ref}`);
        values[ref] = value;
      }
    }
    const r = await this.store.sendConditional<UpdateItemCommandOutput>(
      new UpdateItemCommand({
        TableName: this.store.tableName,
        Key: key(poolPk(subnet, p.family), addressSk(p.family, p.value)),
        UpdateExpression: `SET ${set.join(', ')}${remove.length ? ` REMOVE ${remove.join(', ')}` : ''}`,
        ConditionExpression: '#ownerUid = :uid',
        ExpressionAttributeNames: names(...PLACEMENT_ATTRIBUTES, 'ownerUid'),
        ExpressionAttributeValues: values,
      }),
    );
    return r.ok;
  }

  /**
   * One conditional UpdateItem `IF ownerUid = :from`: the address changes holder (a new claim id and time, so that a
   * collector that read the old claim cannot release the new one), and its placement and home pointer go.
   */
  async transfer(subnet: string, address: string, fromUid: string, to: Owner): Promise<boolean> {
    const p = parseAddress(address);
    if (!p) throw new InvalidSpecError(`invalid IP address "${address}"`);
    if (!fromUid || !to.uid) return false;
    const r = await this.store.sendConditional<UpdateItemCommandOutput>(
      new UpdateItemCommand({
        TableName: this.store.tableName,
        Key: key(poolPk(subnet, p.family), addressSk(p.family, p.value)),
        UpdateExpression:
          'SET #ownerUid = :to, #ownerName = :name, #claimId = :cid, #claimedAt = :now ' +
          `REMOVE ${PLACEMENT_REFS}, #pointerSk`,
        ConditionExpression: '#ownerUid = :from',
        ExpressionAttributeNames: names(
          'ownerUid',
          'ownerName',
          'claimId',
          'claimedAt',
          ...PLACEMENT_ATTRIBUTES,
          'pointerSk',
        ),
        ExpressionAttributeValues: {
          ':to': { S: to.uid },
          ':name': { S: to.name },
          ':cid': { S: randomUUID() },
          ':now': { N: String(this.clock.now()) },
          ':from': { S: fromUid },
        },
      }),
    );
    return r.ok;
  }

  private spend(g: PoolGeometry, stats: ClaimStats): void {
    if (stats.writes >= this.maxClaimAttempts)
      throw new ConflictError(
        `gave up allocating in subnet ${g.pool.subnet} after ${stats.writes} conflicting attempts; retry later`,
      );
    stats.writes++;
  }

  private heldItem(g: PoolGeometry, value: bigint, owner: Claimant, pointerKey?: string): Item {
    return {
      pk: { S: g.pk },
      sk: { S: addressSk(g.pool.family, value) },
      subnet: { S: g.pool.subnet },
      family: { N: String(g.pool.family) },
      address: { S: formatAddress(g.pool.family, value) },
      ownerUid: { S: owner.uid },
      ownerName: { S: owner.name },
      claimId: { S: randomUUID() },
      claimedAt: { N: String(this.clock.now()) },
      ...(pointerKey && { pointerSk: { S: pointerKey } }),
      ...placementAttributes(claimedPlacement(owner.placement)),
    };
  }
}

/** The SET clause, names and values a static claim's placement adds (kept as it is on a same-owner repeat). */
function placementUpdate(placement: Placement | undefined): {
  set: string;
  names: string[];
  values: Item;
} {
  if (!placement) return { set: '', names: [], values: {} };
  const { qos, namespace } = placement;
  return {
    set:
      ', #placedGateway = if_not_exists(#placedGateway, :gw), #placedPrefix = if_not_exists(#placedPrefix, :prefix)' +
      (qos === undefined ? '' : ', #placedQos = if_not_exists(#placedQos, :qos)') +
      (namespace === undefined ? '' : ', #placedNamespace = if_not_exists(#placedNamespace, :ns)'),
    names: [
      'placedGateway',
      'placedPrefix',
      ...(qos === undefined ? [] : ['placedQos']),
      ...(namespace === undefined ? [] : ['placedNamespace']),
    ],
    values: {
      ':gw': { S: placement.gateway },
      ':prefix': { N: String(placement.prefix) },
      ...(qos !== undefined && { ':qos': qosValue(qos) }),
      ...(namespace !== undefined && { ':ns': { S: namespace } }),
    },
  };
}
