/**
 * The functions' IAM roles (infra/iam.yml) against the DynamoDB requests the functions really send. The operations
 * run on the real DynamoDB adapters (in-process dynalite; the cluster and gateway in memory) through a lifecycle that
 * reaches every IPAM and lease path: a new EIP, a static one, a gateway pod re-created with its own address, a
 * redo, a reset, a deletion, a force-deleted EIP, and the gc function's work: the garbage collector (which also
 * reserves the gateway pods' own addresses), then the drift check of the gateways with its repairs. Every request is recorded with its
 * index; each must be allowed by the role of the function that sent it, and each role grants nothing its function
 * never uses (the four handlers share their paths, so their roles are judged against their union).
 */

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { memoryInspector } from '../../local/memory/inspect.js';
import { createDynamoAuditStore } from '../../shared/adapters/dynamo/audit.js';
import {
  createDynamoHolds,
  createDynamoIpam,
  createDynamoLeases,
} from '../../shared/adapters/dynamo/index.js';
import type { AuditDeps } from '../../shared/audit/audit.js';
import { auditAndRepair } from '../../shared/audit/live.js';
import { collectGarbage } from '../../shared/core/gc.js';
import type { Deps } from '../../shared/ports.js';
import { type CountingClient, useDynamo } from '../support/dynamo.js';
import { world } from '../support/world.js';

const root = join(import.meta.dirname, '../..');
const TABLE = 'iam-test-ipam';
type Fn = 'add' | 'update' | 'reset' | 'delete' | 'gc';
const used: Record<Fn, Set<string>> = {
  add: new Set(),
  update: new Set(),
  reset: new Set(),
  delete: new Set(),
  gc: new Set(),
};
let current: Fn | undefined;
const dynamo = useDynamo();
let client: CountingClient;

/** `dynamodb:Action table` or `dynamodb:Action index/<name>`. */
const permission = (action: string, index?: string) =>
  `dynamodb:${action} ${index ? `index/${index}` : 'table'}`;

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
function grants(role: string): Set<string> {
  // biome-ignore lint/suspicious/noExplicitAny: CloudFormation YAML
  const doc = parse(readFileSync(join(root, 'infra/iam.yml'), 'utf8')) as any;
  const out = new Set<string>();
  for (const policy of doc.Resources[role].Properties.Policies)
    for (const s of policy.PolicyDocument.Statement) {
      const resources = [s.Resource].flat();
      for (const action of s.Action as string[]) {
        if (!action.startsWith('dynamodb:')) continue;
        for (const r of resources) {
          const text = JSON.stringify(r);
          if (text === JSON.stringify({ 'Fn::GetAtt': ['IpamTable', 'Arn'] })) out.add(`${action} table`);
          else {
            const m = /^\{"Fn::Sub":"\$\{IpamTable\.Arn\}\/index\/(\w+)"\}$/.exec(text);
            expect(m, `${role}: unexpected DynamoDB resource ${text}`).not.toBeNull();
            out.add(`${action} index/${m![1]}`);
          }
        }
      }
    }
  return out;
}

beforeAll(async () => {
  client = await dynamo.table(TABLE);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { TableName?: string; IndexName?: string; RequestItems?: object };
      if (current) {
        // A batch read names its table in RequestItems (Ipam.heldAt's BatchGetItem).
        expect(input.TableName ?? Object.keys(input.RequestItems ?? {})).toEqual(
          input.TableName ? TABLE : [TABLE],
        );
        used[current].add(permission(String(context.commandName).replace(/Command$/, ''), input.IndexName));
      }
      return next(args);
    },
    { step: 'initialize', name: 'recordRequests' },
  );

  // A /29: four addresses an EIP can get (.2 .3 .4 .6; .1 is the gateway, .5 the pod's own), so the lifecycle
  // below also runs out of never-used addresses and reuses a released one (the byFree index).
  const w = world({ cidrBlock: '172.18.0.0/29', excludeIps: [] });
  const deps: Deps = {
    ...w.deps,
    ipam: createDynamoIpam({ client, tableName: TABLE, clock: w.clock }),
    holds: createDynamoHolds({ client, tableName: TABLE }),
    leases: createDynamoLeases({ client, tableName: TABLE, clock: w.clock }),
  };
  const run = async (fn: Exclude<Fn, 'gc'>, name: string, reason = 'manual', extra = {}) => {
    current = fn;
    try {
      return await (await import('../../shared/core/operations.js')).operations[fn](
        {
          event: w.event(fn, name, reason as never, extra),
          signal: new AbortController().signal,
          deadline: w.clock.now() + 60_000,
          log: w.deps.log,
        },
        deps,
      );
    } finally {
      current = undefined;
    }
  };

  // The gateway pod with its own external address (avoided by every add, reserved for the pod by gc).
  w.createPod(w.clock.now(), { 'ovn-vpc-external-network': '172.18.0.5' });
  // The static one first, so that no random pick takes its address.
  w.eip('b', { v4ip: '172.18.0.4' });
  expect(await run('add', 'b', 'added')).toMatchObject({ status: 'applied' });
  // With an unshared QoS policy: its hold is taken (and given back by the deletion below, ADR 0087).
  w.qos('own', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '10' }]);
  w.eip('a', { qosPolicy: 'own' });
  expect(await run('add', 'a', 'added')).toMatchObject({ status: 'applied' });
  // gc reserves the pod's address; then the pod is re-created (new uid): the next gc moves the reservation over.
  current = 'gc';
  const { collectGarbage: gc, isGarbageCollector: collects } = await import('../../shared/core/gc.js');
  if (!collects(deps.ipam)) throw new Error('the DynamoDB IPAM collects garbage');
  expect((await gc(deps, deps.ipam)).gatewayPods.map((p) => p.status)).toEqual(['reserved']);
  current = undefined;
  w.createPod(w.clock.now() + 1000, { 'ovn-vpc-external-network': '172.18.0.5' });
  w.eip('c');
  expect(await run('add', 'c', 'added')).toMatchObject({ status: 'applied' });
  await run('update', 'a', 'resync');
  w.restartContainer();
  expect(await run('update', 'a', 'gateway-restarted')).toMatchObject({ status: 'applied' });
  await run('reset', 'b', 'nat-rule-changed');
  // Deletion through update (finalizer), through reset (terminating), and a force-deleted EIP through delete.
  w.cluster.deleteEip('a');
  expect(await run('update', 'a', 'deletion-requested')).toMatchObject({ status: 'applied' });
  w.cluster.deleteEip('b');
  expect(await run('reset', 'b', 'nat-rule-changed')).toMatchObject({ status: 'applied' });
  const c = w.get('c')!;
  w.cluster.eips.delete('c');
  expect(
    await run('delete', 'c', 'deleted', { object: { name: 'c', uid: c.metadata.uid }, old: c }),
  ).toMatchObject({ status: 'applied' });
  // The last never-used address, then a released one (the pool is full after that).
  w.eip('d');
  expect(await run('add', 'd', 'added')).toMatchObject({ status: 'applied' });
  w.eip('e');
  expect(await run('add', 'e', 'added')).toMatchObject({ status: 'applied' });
  // An orphan for the collector: an allocation whose EIP vanished without any handler seeing it.
  w.cluster.eips.delete('e');
  w.clock.advance(10 * 60_000);
  current = 'gc';
  const { isGarbageCollector } = await import('../../shared/core/gc.js');
  if (!isGarbageCollector(deps.ipam)) throw new Error('the DynamoDB IPAM collects garbage');
  const report = await collectGarbage(deps, deps.ipam);
  expect(report.released.map((a) => a.address)).toHaveLength(1);
  expect(report.gatewayPods).toMatchObject([
    { status: 'reserved', takenOverFrom: expect.stringMatching(/^pod:/) },
  ]);
  // Then, as the gc function does, the drift check and its repairs: an address lost from net1 (re-added under the
  // EIP's lease), a stray address on net1 (seen twice across the grace period, then removed), a stale lease.
  const audit: AuditDeps = {
    ...deps,
    inspector: memoryInspector(w.gateway),
    store: createDynamoAuditStore({ client, tableName: TABLE }),
  };
  const gw = (...argv: string[]) => expect(w.gateway.sim(w.pod()).exec(argv).exitCode).toBe(0);
  const dIp = w.get('d')!.status!.ip!;
  const stray = ['172.18.0.2', '172.18.0.3', '172.18.0.4', '172.18.0.6'].find(
    (a) => a !== dIp && !w.net1().some((n) => n.startsWith(`${a}/`)),
  )!;
  gw('ip', 'addr', 'del', `${dIp}/29`, 'dev', 'net1');
  gw('ip', 'addr', 'add', `${stray}/29`, 'dev', 'net1');
  await deps.leases.acquire('eip#gone', 'crashed-invocation', w.clock.now() + 1000);
  w.clock.advance(60_000);
  const first = await auditAndRepair(audit);
  w.clock.advance(15 * 60_000);
  const second = await auditAndRepair(audit);
  // A gateway restart no EIP's own update has seen yet: the repair's redo sweeps the gateway (Ipam.heldAt, a
  // BatchGetItem; ADR 0111).
  w.restartContainer();
  const third = await auditAndRepair(audit);
  current = undefined;
  const done = [...first.actions, ...second.actions, ...third.actions]
    .filter((a) => a.result === 'done')
    .map((a) => a.kind);
  expect(done).toEqual(expect.arrayContaining(['missing-address', 'stale-lease']));
  expect(third.actions.filter((a) => a.kind === 'missing-address' && a.result === 'done')).not.toEqual([]);
}, 60_000);

describe('IAM roles (infra/iam.yml) against the requests the functions send', () => {
  it('the lifecycle reached the table, its byOwner index, and the paths that write', () => {
    const all = new Set(Object.values(used).flatMap((s) => [...s]));
    expect([...all].sort()).toEqual(
      expect.arrayContaining([
        permission('Query', 'byOwner'),
        permission('Query'),
        permission('Scan'),
        permission('UpdateItem'),
        permission('GetItem'),
      ]),
    );
  });

  it.each([
    ['add', 'AddRole'],
    ['update', 'UpdateRole'],
    ['reset', 'ResetRole'],
    ['delete', 'DeleteRole'],
    ['gc', 'GcRole'],
  ] as const)('%s: every request is allowed by %s', (fn, role) => {
    const granted = grants(role);
    for (const p of used[fn]) expect([...granted], `${fn} sends ${p}`).toContain(p);
  });

  it('the handlers never Scan, and their roles grant nothing none of them uses', () => {
    const handlersUse = new Set([...used.add, ...used.update, ...used.reset, ...used.delete]);
    expect([...handlersUse].filter((p) => p.startsWith('dynamodb:Scan'))).toEqual([]);
    // Query on byFree is the pool-wide reuse phase, reached only when an owner's home block has nothing free, which a
    // small lifecycle cannot arrange; the adapter's source shows it (and its own tests exercise it).
    const adapter = readdirSync(join(root, 'shared/adapters/dynamo'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => readFileSync(join(root, 'shared/adapters/dynamo', f), 'utf8'))
      .join('\n');
    expect(adapter).toMatch(/IndexName: INDEX\.byFree/);
    const exempt = new Set([permission('Query', 'byFree')]);
    for (const role of ['AddRole', 'UpdateRole', 'ResetRole', 'DeleteRole'])
      expect(
        [...grants(role)].filter((g) => !handlersUse.has(g) && !exempt.has(g)),
        role,
      ).toEqual([]);
  });

  it('gc is granted exactly what it uses', () => {
    expect([...grants('GcRole')].sort()).toEqual([...used.gc].sort());
  });
});
