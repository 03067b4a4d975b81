/**
 * A crash between an index write and its item write, on the real adapters (dynalite + the local Kubernetes API with
 * its simulated gateway, test/fault/lab.ts). dynalite writes a global secondary index entry before the item it
 * indexes (db.updateIndexes, then the item's put), so a process killed between the two leaves them apart: after a
 * release, the `byOwner` entry is gone while the item still holds the address. The hook below is that crash: it
 * lets dynalite write the index, fails the item write, and from then on every DynamoDB request of the "process"
 * fails, until the test restarts it (the faults cleared, the dead invocation's lease expired on the clock) and the
 * event is delivered again, as Lambda would.
 *
 * Each case ends with no leaked allocation (a consistent Scan of the table: every held address belongs to a live EIP
 * or gateway pod), its address off net1, and a clean audit — no repair. A first check shows the crash does what it
 * models: the owner index no longer shows an address the table holds (so a lookup through the index alone leaks).
 */
import { createRequire } from 'node:module';
import { type AttributeValue, ScanCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoAuditStore } from '../../shared/adapters/dynamo/audit.js';
import { createK8sInspector } from '../../shared/adapters/k8s/inspect.js';
import { type AuditDeps, repairDrift, runAudit } from '../../shared/audit/audit.js';
import { collectGarbage, isGarbageCollector } from '../../shared/core/gc.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { type Lab, startLab } from '../fault/lab.js';

type Item = Record<string, AttributeValue>;
type Callback = (err?: Error | null) => void;
interface DynaliteDb {
  updateIndexes(
    store: unknown,
    table: unknown,
    existing: Item | undefined,
    item: Item | null,
    cb: Callback,
  ): void;
}

/** dynalite's own db module, the one its actions call (resolved from dynalite's location). */
const db = createRequire(createRequire(import.meta.url).resolve('dynalite'))('./db') as DynaliteDb;
const original = db.updateIndexes;
let armed: ((existing: Item | undefined, item: Item | null) => boolean) | undefined;
let crashes = 0;

let lab: Lab;
let audit: AuditDeps;
const LEASE_EXPIRY_MS = 121_000;
const rows: { case: string; leaks: number; onNet1: boolean; drift: number }[] = [];

/** The next write matching `when` has its index entries written and its item write failed; then the process dies. */
function crashBetweenIndexAndItem(when: (existing: Item | undefined, item: Item | null) => boolean): void {
  armed = when;
}
const isRelease = (existing: Item | undefined, item: Item | null) => !!existing?.ownerUid && !item?.ownerUid;
const isClaim = (existing: Item | undefined, item: Item | null) => !existing?.ownerUid && !!item?.ownerUid;

/** The process comes back: DynamoDB answers again, and the dead invocation's lease has expired. */
function restart(): void {
  for (const f of lab.dynamoFaults) f.times = f.hits;
  lab.clock.advance(LEASE_EXPIRY_MS);
}

beforeAll(async () => {
  db.updateIndexes = function (store, table, existing, item, cb) {
    if (!armed?.(existing, item)) return original.call(this, store, table, existing, item, cb);
    armed = undefined;
    crashes++;
    // Dead from here on: the SDK's own retry of this request and everything after it fails.
    lab.failDynamo('*', 'server-error', 1_000_000);
    // Answered as a server error (dynalite's API error shape), the item never written.
    const killed = Object.assign(new Error('killed between the index write and the item write'), {
      statusCode: 500,
      body: { __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: 'killed' },
    });
    return original.call(this, store, table, existing, item, () => cb(killed));
  };
  lab = await startLab('crash-index-item');
  audit = {
    ...lab.deps,
    inspector: createK8sInspector({ kubeConfig: lab.kc, timeoutMs: 5_000 }),
    store: createDynamoAuditStore({ client: lab.dynamo.client, tableName: lab.dynamo.table }),
  };
}, 60_000);

afterAll(async () => {
  db.updateIndexes = original;
  console.table(rows);
  await lab?.close();
});

/** Every held address item of the table, read with a consistent Scan (not the index). */
async function heldItems(): Promise<{ address: string; owner: string }[]> {
  const out: { address: string; owner: string }[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const r = await lab.dynamo.client.send(
      new ScanCommand({ TableName: lab.dynamo.table, ConsistentRead: true, ExclusiveStartKey: start }),
    );
    for (const it of r.Items ?? [])
      if (it.ownerUid?.S && it.address?.S) out.push({ address: it.address.S, owner: it.ownerUid.S });
    start = r.LastEvaluatedKey;
  } while (start);
  return out;
}

/** Held addresses whose owner is neither a live EIP nor a gateway pod. */
async function leaks(): Promise<string[]> {
  const eips = (
    (await lab.custom.listClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-eips',
    })) as {
      items: IptablesEip[];
    }
  ).items;
  const live = new Set(eips.map((e) => e.metadata.uid));
  for (const p of await lab.deps.cluster.listGatewayPods()) live.add(`pod:${p.uid}`);
  return (await heldItems()).filter((h) => !live.has(h.owner)).map((h) => `${h.address} (${h.owner})`);
}

const onNet1 = (ip: string) =>
  lab
    .sim()
    .net1Addresses()
    .some((c) => c.startsWith(`${ip}/`));

async function configured(name: string, spec: Record<string, unknown> = { natGwDp: 'gw1' }) {
  await lab.createEip(name, spec);
  expect(await lab.deliver(await lab.event('add', name, 'added'))).toMatchObject({ status: 'applied' });
  return (await lab.getEip(name))!;
}

async function record(name: string, ip: string): Promise<void> {
  const found = await leaks();
  const drift = (await runAudit(audit)).drift;
  rows.push({ case: name, leaks: found.length, onNet1: onNet1(ip), drift: drift.length });
  expect(found).toEqual([]);
  expect(onNet1(ip)).toBe(false);
  expect(drift).toEqual([]);
}

/** The lease a dead invocation left behind, when nothing redelivers its event: stale drift, deleted by its repair. */
async function staleLeaseRepaired(name: string): Promise<void> {
  lab.clock.advance(LEASE_EXPIRY_MS);
  const report = await runAudit(audit);
  // The EIP's lease, and the gateway pod's when the process died holding it for an exec (ADR 0110).
  const stale = report.drift.map((d) => [d.kind, d.eip ?? d.lease?.key.split('#')[0]]);
  expect(stale).toContainEqual(['stale-lease', name]);
  expect(stale.filter(([, who]) => who !== name)).toEqual(stale.length === 2 ? [['stale-lease', 'pod']] : []);
  expect((await repairDrift(audit, report)).map((a) => a.result)).toEqual(stale.map(() => 'done'));
}

describe('a crash between an index write and its item write (dynalite)', () => {
  it('finalize: the release index-written, the item still held; redelivered, nothing leaks', async () => {
    const eip = await configured('ii-final', { natGwDp: 'gw1', qosPolicy: 'qos-demo' });
    const ip = eip.status!.ip!;
    await lab.deleteEip('ii-final');
    const event = await lab.event('update', 'ii-final', 'deletion-requested');
    crashBetweenIndexAndItem(isRelease);
    await expect(lab.invoke(event)).rejects.toThrow();
    expect(crashes).toBe(1);
    restart();
    // What the crash left: the table holds the address, the owner index does not show it.
    expect(await heldItems()).toContainEqual({ address: ip, owner: eip.metadata.uid });
    expect(await lab.deps.ipam.findByOwner(eip.metadata.uid)).toEqual([]);
    expect(await lab.deliver(event)).toMatchObject({ status: 'applied' });
    expect(await lab.getEip('ii-final')).toBeUndefined();
    await record('finalize: release crashed between index and item', ip);
  }, 60_000);

  it('the delete safety net, for an EIP force-deleted after such a crash', async () => {
    const eip = await configured('ii-net');
    const ip = eip.status!.ip!;
    // A release crashed the same way (an earlier finalize that died), then the finalizer was removed by hand.
    await lab.deleteEip('ii-net');
    crashBetweenIndexAndItem(isRelease);
    await expect(lab.invoke(await lab.event('update', 'ii-net', 'deletion-requested'))).rejects.toThrow();
    restart();
    await lab.custom.patchClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-eips',
      name: 'ii-net',
      body: [{ op: 'remove', path: '/metadata/finalizers' }],
    });
    expect(await lab.getEip('ii-net')).toBeUndefined();
    const event = {
      ...(await lab.event('delete', 'ii-net', 'deleted', eip.metadata.uid)),
      old: {
        metadata: { name: 'ii-net', uid: eip.metadata.uid, labels: eip.metadata.labels },
        spec: eip.spec,
        status: eip.status,
      },
    };
    expect(await lab.deliver(event)).toMatchObject({ status: 'applied' });
    await record('delete safety net after a crashed release', ip);
  }, 60_000);

  it('the collector: an allocation its index lost, whose owner is gone and no handler will see again', async () => {
    const eip = await configured('ii-gc');
    const ip = eip.status!.ip!;
    await lab.deleteEip('ii-gc');
    crashBetweenIndexAndItem(isRelease);
    await expect(lab.invoke(await lab.event('update', 'ii-gc', 'deletion-requested'))).rejects.toThrow();
    restart();
    // Gone by hand, and its delete event lost: only the collector can find it, without the index.
    await lab.custom.patchClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-eips',
      name: 'ii-gc',
      body: [{ op: 'remove', path: '/metadata/finalizers' }],
    });
    // The audit calls it leaked, and what the audit calls leaked the collector frees.
    expect((await runAudit(audit)).drift).toContainEqual(
      expect.objectContaining({ kind: 'leaked-allocation', address: ip, uid: eip.metadata.uid }),
    );
    if (!isGarbageCollector(lab.deps.ipam)) throw new Error('the DynamoDB IPAM collects garbage');
    const report = await collectGarbage(lab.deps, lab.deps.ipam);
    expect(report.released.map((a) => a.address)).toContain(ip);
    // Its address went off net1 before the crashed release (finalize's order: the gateway, then IPAM).
    await staleLeaseRepaired('ii-gc');
    await record('collector: index entry lost, owner gone', ip);
  }, 60_000);

  it('add: the claim index-written, the item never written; redelivered, one allocation', async () => {
    await lab.createEip('ii-add');
    const event = await lab.event('add', 'ii-add', 'added');
    crashBetweenIndexAndItem(isClaim);
    await expect(lab.invoke(event)).rejects.toThrow();
    restart();
    expect(await lab.deliver(event)).toMatchObject({ status: 'applied' });
    const eip = (await lab.getEip('ii-add'))!;
    const mine = (await heldItems()).filter((h) => h.owner === eip.metadata.uid);
    expect(mine.map((h) => h.address)).toEqual([eip.status!.ip]);
    expect((await runAudit(audit)).drift).toEqual([]);
    rows.push({ case: 'add: claim crashed between index and item', leaks: 0, onNet1: true, drift: 0 });
    // And its deletion still releases it.
    await lab.deleteEip('ii-add');
    expect(await lab.deliver(await lab.event('update', 'ii-add', 'deletion-requested'))).toMatchObject({
      status: 'applied',
    });
    await record('add, then delete', eip.status!.ip!);
  }, 60_000);
});
