/**
 * Whole-stack kill: `npm start --data-dir D` (scripts/start.ts as a child process) is killed with SIGKILL in the
 * middle of a burst of creates and deletes, then started again with the same --data-dir. With no manual step the
 * stack must converge: every remaining EIP Ready with its own address on the gateway's net1, every deleted one gone,
 * DynamoDB holding exactly their allocations, and no lease left behind. The leases the killed process held are broken
 * by the restart (they carry its instance id), so nothing waits for them to expire.
 * CI runs 20 creates + 5 deletes; EIP_LONG=1 runs the 80 + 20 of the original report. The convergence time after the
 * restart is printed. A second test runs `kill 1` in the gateway container during a burst of creates (the container
 * restarts with its state lost) and waits until every address is back on net1.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { CoreV1Api, CustomObjectsApi, Exec, KubeConfig } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { localDynamoClient } from '../../local/dynamo.js';
import { eventuallyValue, type Polling } from '../support/eventually.js';

const LONG = process.env.EIP_LONG === '1';
const CREATES = LONG ? 80 : 20;
const DELETES = LONG ? 20 : 5;
const root = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'eip-kill-'));
const kubeconfig = join(dir, 'kubeconfig');
const dataDir = join(dir, 'data');
const children: ChildProcess[] = [];
const EIPS = { group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips' } as const;

if (!LONG) console.log(`[stack-kill] ${CREATES} creates + ${DELETES} deletes (EIP_LONG=1 runs 80 + 20)`);

interface Started {
  child: ChildProcess;
  ready: Promise<{ dynamodb: string; table: string }>;
}

function start(data = dataDir): Started {
  const child = spawn(
    process.execPath,
    // One process (tsx as a loader, not its CLI, which would run the stack in a child that SIGKILL misses).
    ['--import', 'tsx', join(root, 'scripts/start.ts'), '--kubeconfig', kubeconfig, '--data-dir', data],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let out = '';
  const ready = new Promise<{ dynamodb: string; table: string }>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = out.match(/^ready: .* dynamodb=(\S+) table=(\S+)/m);
      if (m) resolve({ dynamodb: m[1]!, table: m[2]! });
    });
    child.once('exit', (code) => reject(new Error(`npm start exited ${code} before ready:\n${out}`)));
  });
  let err = '';
  child.stderr!.on('data', (c: Buffer) => {
    err = (err + c.toString()).slice(-4000);
  });
  child.once('exit', (code) => {
    if (code) console.log(`[stack-kill] npm start exited ${code}; stderr:\n${err}`);
  });
  return { child, ready };
}

interface Eip {
  metadata: { name: string; deletionTimestamp?: string };
  status?: { ready?: boolean; ip?: string };
}

function clients() {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return { kc, co: kc.makeApiClient(CustomObjectsApi), core: kc.makeApiClient(CoreV1Api) };
}

async function eips(co: CustomObjectsApi): Promise<Eip[]> {
  return ((await co.listClusterCustomObject(EIPS)) as { items: Eip[] }).items;
}

/** Creates an EIP on gw1 per name, `batch` at a time, as kubectl would. */
async function createEips(co: CustomObjectsApi, names: readonly string[], batch: number): Promise<void> {
  for (let i = 0; i < names.length; i += batch)
    await Promise.all(
      names.slice(i, i + batch).map((name) =>
        co.createClusterCustomObject({
          ...EIPS,
          body: {
            apiVersion: 'kubeovn.io/v1',
            kind: 'IptablesEIP',
            metadata: { name },
            spec: { natGwDp: 'gw1' },
          },
        }),
      ),
    );
}

async function gatewayExec(kc: KubeConfig, argv: string[]): Promise<{ stdout: string; status: string }> {
  let out = '';
  const stdout = new PassThrough();
  stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  const status = await new Promise<string>((resolve, reject) => {
    new Exec(kc)
      .exec('kube-system', 'vpc-nat-gw-gw1-0', 'vpc-nat-gw', argv, stdout, null, null, false, (st) =>
        resolve(st.status ?? ''),
      )
      .catch(reject);
  });
  return { stdout: out, status };
}

async function net1(kc: KubeConfig): Promise<string> {
  const r = await gatewayExec(kc, ['ip', '-o', 'addr', 'show', 'dev', 'net1']);
  if (r.status !== 'Success') throw new Error(`ip addr show: ${r.status}`);
  return r.stdout;
}

async function tableItems(
  endpoint: string,
  table: string,
): Promise<Record<string, { S?: string; N?: string }>[]> {
  const client = localDynamoClient(endpoint);
  try {
    const items: Record<string, { S?: string; N?: string }>[] = [];
    let start: Record<string, never> | undefined;
    do {
      const r = await client.send(
        new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey: start }),
      );
      items.push(...((r.Items ?? []) as Record<string, { S?: string; N?: string }>[]));
      start = r.LastEvaluatedKey as Record<string, never> | undefined;
    } while (start);
    return items;
  } finally {
    client.destroy();
  }
}

/** How this test polls the stacks: each try lists the EIPs through the API (and may scan the table). */
const polling: Polling = { stepMs: 250 };

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('npm start killed with SIGKILL mid-burst', () => {
  it(`converges after a restart with the same --data-dir (${CREATES} creates, ${DELETES} deletes)`, async () => {
    const first = start();
    await first.ready;
    const { co } = clients();
    await eventuallyValue(async () => (await eips(co)).some((e) => e.status?.ready), {
      ...polling,
      what: 'the demo EIP',
      timeoutMs: 60_000,
    });

    const burstStarted = Date.now();
    const names = Array.from({ length: CREATES }, (_, i) => `kill-${i}`);
    const deleted = names.slice(0, DELETES);
    const kept = ['demo-eip', ...names.slice(DELETES)];
    await createEips(co, names, 10);
    // Delete the first ones once they are being worked on, then kill while the rest is in flight.
    await eventuallyValue(
      async () => (await eips(co)).some((e) => e.metadata.name === deleted[0] && e.status?.ready),
      { ...polling, what: 'the first EIPs Ready', timeoutMs: 60_000 },
    );
    await Promise.all(deleted.map((name) => co.deleteClusterCustomObject({ ...EIPS, name })));
    const before = await eips(co);
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    const readyAtKill = before.filter((e) => e.status?.ready).length;
    console.log(
      `[stack-kill] killed ${((Date.now() - burstStarted) / 1000).toFixed(1)} s into the burst with ${readyAtKill}/${before.length} EIPs Ready, ${before.filter((e) => e.metadata.deletionTimestamp).length} terminating`,
    );

    const second = start();
    const restarted = Date.now();
    const { dynamodb, table } = await second.ready;
    console.log(
      `[stack-kill] restarted stack ready ${((Date.now() - restarted) / 1000).toFixed(1)} s after the restart`,
    );
    const { kc, co: co2 } = clients();
    await eventuallyValue(
      async () => {
        const now = await eips(co2);
        const byName = new Map(now.map((e) => [e.metadata.name, e]));
        if (deleted.some((n) => byName.has(n))) return undefined;
        if (!kept.every((n) => byName.get(n)?.status?.ready)) return undefined;
        const items = await tableItems(dynamodb, table);
        if (items.some((i) => i.pk?.S?.startsWith('LEASE#'))) return undefined;
        return true;
      },
      { ...polling, what: 'convergence', timeoutMs: LONG ? 300_000 : 180_000 },
    );
    const seconds = (Date.now() - restarted) / 1000;
    console.log(`[stack-kill] converged ${seconds.toFixed(1)} s after the restart`);

    const now = await eips(co2);
    const ips = now.map((e) => e.status?.ip ?? '');
    expect(new Set(ips).size).toBe(kept.length);
    expect(now.map((e) => e.metadata.name).sort()).toEqual([...kept].sort());
    const onGateway = await net1(kc);
    for (const ip of ips) expect(onGateway).toContain(`inet ${ip}/`);
    const items = await tableItems(dynamodb, table);
    // EIP owners only: the gateway pod's own address is reserved by the garbage collector, whether it ran yet or not.
    const heldBy = items
      .filter((i) => i.ownerUid?.S && !i.ownerUid.S.startsWith('pod:'))
      .map((i) => i.ownerUid!.S!);
    const uids = (await co2.listClusterCustomObject(EIPS)) as { items: { metadata: { uid: string } }[] };
    for (const e of uids.items) expect(heldBy).toContain(e.metadata.uid);
    // One allocation per EIP.
    expect(heldBy.length).toBe(kept.length);
    second.child.kill('SIGINT');
    await new Promise((r) => second.child.once('exit', r));
  }, 600_000);

  it(`puts every address back after kill 1 in the gateway container during a burst of ${CREATES} creates`, async () => {
    const s2 = start(join(dir, 'data-kill-1'));
    const { dynamodb, table } = await s2.ready;
    const { kc, co } = clients();
    const names = Array.from({ length: CREATES }, (_, i) => `pid1-${i}`);
    const creating = createEips(co, names, 5);
    await eventuallyValue(async () => (await eips(co)).filter((e) => e.status?.ready).length >= 3, {
      ...polling,
      what: 'some EIPs Ready',
      timeoutMs: 120_000,
    });
    const killed = await gatewayExec(kc, ['kill', '1']);
    expect(killed.status).toBe('Failure');
    const t = Date.now();
    await creating;
    await eventuallyValue(
      async () => {
        const now = await eips(co);
        if (now.length !== CREATES + 1 || !now.every((e) => e.status?.ready)) return undefined;
        const onGateway = await net1(kc);
        if (!now.every((e) => onGateway.includes(`inet ${e.status?.ip}/`))) return undefined;
        const items = await tableItems(dynamodb, table);
        if (items.some((i) => i.pk?.S?.startsWith('LEASE#'))) return undefined;
        return true;
      },
      { ...polling, what: 'every address back on the gateway', timeoutMs: 180_000 },
    );
    console.log(
      `[stack-kill] kill 1 during the burst: converged ${((Date.now() - t) / 1000).toFixed(1)} s after it`,
    );
    const ips = (await eips(co)).map((e) => e.status?.ip);
    expect(new Set(ips).size).toBe(CREATES + 1);
    s2.child.kill('SIGINT');
    await new Promise((r) => s2.child.once('exit', r));
  }, 600_000);
});
