/**
 * The local stack's dynalite must not keep anything per request: every Query and Scan (including one stopped
 * early by Limit) closes the storage iterator it opened. Before local/dynamo.ts gave abstract-level's iterators
 * the `return()` dynalite's streams call, each request left its iterator open and `npm start` grew through its
 * resyncs. Counted at the seam: iterators opened (first next()) against iterators closed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutItemCommand, QueryCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { localDynamoClient, startLocalDynamo } from '../../local/dynamo.js';
import { ensureTable } from '../../local/table.js';

interface IteratorProto {
  next(this: object): Promise<unknown>;
  close(this: object): Promise<void>;
}

/** The iterator prototype dynalite's abstract-level uses, with next() and close() counted. */
function countIterators(): { opened: () => number; closed: () => number; restore: () => void } {
  const level = createRequire(createRequire(import.meta.url).resolve('dynalite'))('abstract-level') as {
    AbstractValueIterator: { prototype: object };
  };
  const proto = Object.getPrototypeOf(level.AbstractValueIterator.prototype) as IteratorProto;
  const { next, close } = proto;
  const seen = new WeakSet<object>();
  const done = new WeakSet<object>();
  let opened = 0;
  let closed = 0;
  proto.next = function (this: object) {
    if (!seen.has(this)) {
      seen.add(this);
      opened++;
    }
    return next.call(this);
  };
  proto.close = function (this: object) {
    if (seen.has(this) && !done.has(this)) {
      done.add(this);
      closed++;
    }
    return close.call(this);
  };
  return {
    opened: () => opened,
    closed: () => closed,
    restore: () => {
      proto.next = next;
      proto.close = close;
    },
  };
}

describe.each([
  ['in memory', false],
  ['on disk', true],
])('local dynalite %s', (_label, onDisk) => {
  const dir = mkdtempSync(join(tmpdir(), 'local-dynamo-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('closes every iterator a Query or Scan opens, also when Limit stops it early', async () => {
    const dynamo = await startLocalDynamo(onDisk ? { dataDir: dir } : {});
    const client = localDynamoClient(dynamo.endpoint);
    const counts = countIterators();
    try {
      await ensureTable(client, 'iterators');
      for (let i = 0; i < 30; i++)
        await client.send(
          new PutItemCommand({ TableName: 'iterators', Item: { pk: { S: 'p' }, sk: { S: `s${i}` } } }),
        );
      const query = (limit?: number) =>
        client.send(
          new QueryCommand({
            TableName: 'iterators',
            KeyConditionExpression: 'pk = :p',
            ExpressionAttributeValues: { ':p': { S: 'p' } },
            ...(limit ? { Limit: limit } : {}),
          }),
        );
      const before = counts.opened();
      for (let i = 0; i < 20; i++) {
        expect((await query(5)).Items).toHaveLength(5);
        expect((await query()).Items).toHaveLength(30);
        expect((await client.send(new ScanCommand({ TableName: 'iterators', Limit: 7 }))).Items).toHaveLength(
          7,
        );
      }
      // Closing happens when each response's stream is destroyed, just after the answer.
      await new Promise((r) => setTimeout(r, 50));
      expect(counts.opened() - before).toBeGreaterThanOrEqual(60);
      expect(counts.closed()).toBe(counts.opened());
    } finally {
      counts.restore();
      client.destroy();
      await dynamo.close();
    }
  });
});
