/**
 * The never-used cursor's items on the table (cursor.ts says what they mean, ADR 0012): the pool's high-water mark
 * (`META`, a conditional max-update), the full-segment markers (`F#…`), and the consistent read of one segment's
 * keys. The mark and the markers are hints written after the facts they record: a failure to write one is logged,
 * never an allocation's failure.
 */
import { PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import type { Logger } from '../../ports.js';
import type { CursorIo } from './cursor.js';
import { getItem, key, names } from './items.js';
import { fullSk, META_SK, type PoolGeometry, segmentOfFullSk, valueOfSk } from './layout.js';
import type { Store } from './store.js';

/** The cursor's reads and writes for the pool of `g`. */
export function tableCursorIo(store: Store, g: PoolGeometry, log?: Logger): CursorIo {
  return {
    readHwm: () => readHwm(store, g),
    publishHwm: (hwm) => publishHwm(store, g, hwm, log),
    fullMarkers: (from, to) => fullMarkers(store, g, from, to),
    markFull: (seg) => markFull(store, g, seg, log),
    usedSlots: (seg) => usedSlots(store, g, seg),
  };
}

async function readHwm(store: Store, g: PoolGeometry): Promise<bigint> {
  const it = await getItem(store, g.pk, META_SK, false);
  if (!it || it.fingerprint?.S !== g.fingerprint) return 0n;
  return BigInt(it.hwmSegment?.N ?? '0');
}

async function publishHwm(store: Store, g: PoolGeometry, hwm: bigint, log?: Logger): Promise<void> {
  // A max-update: never lowers the mark. Another fingerprint (the subnet changed) is simply replaced.
  try {
    await store.sendConditional(
      new UpdateItemCommand({
        TableName: store.tableName,
        Key: key(g.pk, META_SK),
        UpdateExpression:
          'SET #fingerprint = :fp, #hwmSegment = :hwm, #segmentSize = :size, #capacity = :cap, #subnet = :subnet, #family = :family',
        ConditionExpression: 'attribute_not_exists(pk) OR #fingerprint <> :fp OR #hwmSegment < :hwm',
        ExpressionAttributeNames: names(
          'fingerprint',
          'hwmSegment',
          'segmentSize',
          'capacity',
          'subnet',
          'family',
        ),
        ExpressionAttributeValues: {
          ':fp': { S: g.fingerprint },
          ':hwm': { N: hwm.toString() },
          ':size': { N: g.segmentSize.toString() },
          ':cap': { N: g.capacity.toString() },
          ':subnet': { S: g.pool.subnet },
          ':family': { N: String(g.pool.family) },
        },
      }),
    );
  } catch (e) {
    // Only an optimisation for other allocators: never fail an allocation over it.
    log?.warn('could not publish the pool cursor', { pool: g.pk, error: String(e) });
  }
}

async function fullMarkers(store: Store, g: PoolGeometry, from: bigint, to: bigint): Promise<Set<bigint>> {
  const out = new Set<bigint>();
  for await (const it of store.queryItems({
    KeyConditionExpression: 'pk = :pk AND sk BETWEEN :a AND :b',
    ExpressionAttributeValues: { ':pk': { S: g.pk }, ':a': { S: fullSk(from) }, ':b': { S: fullSk(to) } },
    ProjectionExpression: 'sk, #fingerprint',
    ExpressionAttributeNames: names('fingerprint'),
  })) {
    const seg = segmentOfFullSk(it.sk?.S ?? '');
    // A marker written for another shape of the pool (excludeIps changed) says nothing about this one.
    if (seg !== undefined && it.fingerprint?.S === g.fingerprint) out.add(seg);
  }
  return out;
}

async function markFull(store: Store, g: PoolGeometry, seg: bigint, log?: Logger): Promise<void> {
  try {
    await store.send(
      new PutItemCommand({
        TableName: store.tableName,
        Item: { pk: { S: g.pk }, sk: { S: fullSk(seg) }, fingerprint: { S: g.fingerprint } },
      }),
    );
  } catch (e) {
    log?.warn('could not record a full segment', {
      pool: g.pk,
      segment: seg.toString(),
      error: String(e),
    });
  }
}

async function usedSlots(store: Store, g: PoolGeometry, seg: bigint): Promise<Set<bigint>> {
  const { first, last } = g.segment(seg);
  const used = new Set<bigint>();
  for await (const it of store.queryItems({
    KeyConditionExpression: 'pk = :pk AND sk BETWEEN :a AND :b',
    ExpressionAttributeValues: {
      ':pk': { S: g.pk },
      ':a': { S: g.skOf(first) },
      ':b': { S: g.skOf(last) },
    },
    ProjectionExpression: 'sk',
    ConsistentRead: true,
  })) {
    const v = valueOfSk(it.sk?.S ?? '');
    const slot = v === undefined ? undefined : g.slotOf(v);
    if (slot !== undefined) used.add(slot);
  }
  return used;
}
