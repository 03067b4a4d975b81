/**
 * `npm run bench -- gc [--allocations=100000] [--released=0.25] [--orphans=0.01]`: what one garbage collection
 * costs now that it reads the table, not the owner index (ADR 0085). Seeds in-process dynalite with `allocations`
 * held address items as the handlers write them (uid owners, names, claim ids, placements with a QoS policy), plus
 * `released` × as many released markers, then runs the DynamoDB IPAM's collectGarbage with every owner live except
 * `orphans` of them. Reports the Scan pages, the read request units DynamoDB would charge for them (dynalite's
 * ConsumedCapacity: 1 unit per 4 KB read, consistent), the bytes read, the wall time and what was released.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { localDynamoClient, startLocalDynamo } from '../local/dynamo.js';
import { ensureTable, putItems } from '../local/table.js';
import { createDynamoIpam } from '../shared/adapters/dynamo/index.js';
import { addressSk, poolPk } from '../shared/adapters/dynamo/layout.js';
import { formatAddress, parseAddress } from '../shared/domain/addressing.js';
import type { Suite } from './run.js';

const TABLE = 'bench-gc';
const SUBNET = 'ovn-vpc-external-network';
const progress = (line: string): void => void process.stderr.write(`gc: ${line}\n`);

export const suite: Suite = {
  description:
    'one garbage collection (a consistent Scan of the table) over 10^5 allocations: pages, read units, time',
  usage: 'usage: npm run bench -- gc [--allocations=100000] [--released=0.25] [--orphans=0.01]',
  async run(argv) {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        allocations: { type: 'string', default: '100000' },
        released: { type: 'string', default: '0.25' },
        orphans: { type: 'string', default: '0.01' },
      },
    });
    const n = Number(values.allocations);
    const releasedShare = Number(values.released);
    const orphanShare = Number(values.orphans);
    if (!Number.isInteger(n) || n < 1 || n > 1_000_000) throw new Error('--allocations must be 1..1000000');
    const dynamo = await startLocalDynamo();
    const client = localDynamoClient(dynamo.endpoint, { maxAttempts: 1 });
    try {
      await ensureTable(client, TABLE);
      const base = parseAddress('10.0.0.0')!.value;
      const pk = poolPk(SUBNET, 4);
      const owners: string[] = [];
      const items: Record<string, AttributeValue>[] = [];
      const claimedAt = Date.now() - 3_600_000;
      const released = Math.round(n * releasedShare);
      for (let i = 0; i < n + released; i++) {
        const value = base + BigInt(i + 1);
        const address = formatAddress(4, value);
        const key = {
          pk: { S: pk },
          sk: { S: addressSk(4, value) },
          subnet: { S: SUBNET },
          family: { N: '4' },
        };
        if (i < n) {
          const uid = randomUUID();
          owners.push(uid);
          items.push({
            ...key,
            address: { S: address },
            ownerUid: { S: uid },
            ownerName: { S: `eip-${i.toString().padStart(6, '0')}-frontend` },
            claimId: { S: randomUUID() },
            claimedAt: { N: String(claimedAt) },
            placedGateway: { S: 'gw1' },
            placedPrefix: { N: '16' },
            placedQos: { S: 'qos-demo' },
          });
        } else
          items.push({
            ...key,
            address: { S: address },
            freePool: { S: pk },
            releasedAt: { N: String(claimedAt) },
            lastOwnerUid: { S: randomUUID() },
          });
      }
      progress(`seeding ${n} held and ${released} released address items`);
      const seeder = localDynamoClient(dynamo.endpoint, { maxAttempts: 8 });
      try {
        await putItems(seeder, TABLE, items, 4);
      } finally {
        seeder.destroy();
      }

      let pages = 0;
      let units = 0;
      let bytes = 0;
      client.middlewareStack.add(
        (next, context) => async (args) => {
          if (context.commandName === 'ScanCommand')
            (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity = 'TOTAL';
          const out = await next(args);
          if (context.commandName === 'ScanCommand') {
            pages++;
            const o = out.output as { ConsumedCapacity?: { CapacityUnits?: number } };
            units += o.ConsumedCapacity?.CapacityUnits ?? 0;
            bytes += Number(
              (out.response as { headers?: Record<string, string> }).headers?.['content-length'] ?? 0,
            );
          }
          return out;
        },
        { step: 'initialize', name: 'countScans' },
      );
      const orphans = Math.round(n * orphanShare);
      const live = new Set(owners.slice(orphans));
      const ipam = createDynamoIpam({ client, tableName: TABLE });
      progress('collecting');
      const t0 = performance.now();
      const report = await ipam.collectGarbage(live, { liveAsOf: Date.now() });
      const ms = performance.now() - t0;
      const row = {
        allocations: n,
        releasedItems: released,
        scanned: report.scanned,
        orphans: report.orphans.length,
        released: report.released.length,
        scanPages: pages,
        readUnits: units,
        responseMB: Math.round((bytes / 1e6) * 10) / 10,
        seconds: Math.round(ms / 100) / 10,
      };
      const table = [
        '| allocations | released items | scanned | orphans released | Scan pages | read units (consistent) | response MB | s |',
        '|---:|---:|---:|---:|---:|---:|---:|---:|',
        `| ${n} | ${released} | ${row.scanned} | ${row.released} | ${pages} | ${units} | ${row.responseMB} | ${row.seconds} |`,
      ].join('\n');
      return { table, json: { ...row, at: new Date().toISOString() } };
    } finally {
      client.destroy();
      await dynamo.close();
    }
  },
};
