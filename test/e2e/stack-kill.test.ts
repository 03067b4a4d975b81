/**
 * Whole-stack kill: `npm start --data-dir D` (scripts/start.ts as a child process) is killed with SIGKILL in the
 * middle of a burst of creates and deletes, then started again with the same --data-dir. With no manual step the
 * stack must converge: every remaining EIP Ready with its own address on the gateway's net1, every deleted one gone,
 * DynamoDB holding exactly their allocations, and no lease left behind. The leases the killed process held are broken
 * by the restart (they carry its instance id), so nothing waits for them to expire.
 * CI runs 20 creates + 5 deletes; EIP_LONG=1 runs the 80 + 20 of the original report. The convergence time after the
 * restart is printed. A second test runs `kill 1` in the gateway container during a burst of creates (the container
 * restarts with its state lost) and waits until every address is back on net1.
 *
 * A third kills the stack's whole process group with SIGKILL in round after round of creates plus deletes of
 * existing EIPs, restarting it on the same --data-dir each time (CI: 2 rounds of 20 + 5; EIP_LONG=1: 8 rounds of
 * 100 + 30), with the stack's own drift passes and garbage collection off, so that only the handlers can converge
 * it: after every round no acknowledged write is lost, no allocation is held by an owner that is gone (a consistent
 * Scan of the table, not the index), no address is doubled (on two EIPs, twice for one owner, or twice on net1),
 * and `npm run audit -- --kubeconfig FILE` (the stack found from the kubeconfig it wrote) exits 0 without a repair.
 * It prints rounds × leaks as a table (docs/audit.md records the figures).
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

function start(data = dataDir, extra: string[] = [], detached = false): Started {
  const child = spawn(
    process.execPath,
    // One process (tsx as a loader, not its CLI, which would run the stack in a child that SIGKILL misses).
    [
      '--import',
      'tsx',
      join(root, 'scripts/start.ts'),
      '--kubeconfig',
      kubeconfig,
      '--data-dir',
      data,
      ...extra,
    ],
    // detached: its own process group, which the rounds below kill as a whole.
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], detached },
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

/** SIGKILL to the child's whole process group (it was started detached, as its group's leader). */
async function killGroup(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  process.kill(-child.pid!, 'SIGKILL');
  await exited;
}

/** `npm run audit` against the stack found from the kubeconfig it wrote (stack.json beside it). */
function auditCli(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(root, 'scripts/audit.ts'), '--kubeconfig', kubeconfig],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'error' } },
    );
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * What a converged stack must not have: an allocation whose owner is gone, an address on two EIPs or held twice by
 * one owner, an address twice on net1 or on net1 with no EIP, an EIP Ready without its address on net1.
 */
function problemsOf(
  live: { metadata: { name: string; uid: string }; status?: { ready?: boolean; ip?: string } }[],
  items: Record<string, { S?: string; N?: string }>[],
  onGateway: string,
  ownAddresses: ReadonlySet<string>,
): { leaks: string[]; duplicates: string[] } {
  const uids = new Set(live.map((e) => e.metadata.uid));
  const held = items.filter((i) => i.ownerUid?.S && i.address?.S && !i.ownerUid.S.startsWith('pod:'));
  const leaks = held
    .filter((i) => !uids.has(i.ownerUid!.S!))
    .map((i) => `${i.address!.S} (${i.ownerUid!.S})`);
  const net1 = [...onGateway.matchAll(/inet (\d+\.\d+\.\d+\.\d+)\//g)].map((m) => m[1]!);
  const duplicates = [
    ...twice(
      live.map((e) => e.status?.ip).filter((x): x is string => !!x),
      (ip, n) => `${ip} is the status.ip of ${n} EIPs`,
    ),
    ...twice(
      held.map((i) => i.ownerUid!.S!),
      (uid, n) => `${uid} holds ${n} addresses`,
    ),
    ...twice(net1, (ip, n) => `${ip} is on net1 ${n} times`),
    ...gatewayMismatches(live, net1, ownAddresses),
  ];
  return { leaks, duplicates };
}

/** One line for each value that occurs more than once. */
function twice(xs: readonly string[], say: (x: string, n: number) => string): string[] {
  const count = xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<string, number>());
  return [...count].filter(([, n]) => n > 1).map(([x, n]) => say(x, n));
}

/** An address on net1 that no EIP shows (nor a gateway pod owns), and an EIP Ready without its address on net1. */
function gatewayMismatches(
  live: { metadata: { name: string }; status?: { ready?: boolean; ip?: string } }[],
  net1: readonly string[],
  ownAddresses: ReadonlySet<string>,
): string[] {
  const shown = new Set(live.map((e) => e.status?.ip));
  return [
    ...net1
      .filter((ip) => !shown.has(ip) && !ownAddresses.has(ip))
      .map((ip) => `${ip} is on net1 with no EIP`),
    ...live
      .filter((e) => e.status?.ready && !net1.includes(e.status.ip ?? ''))
      .map((e) => `${e.metadata.name} is Ready but ${e.status!.ip} is not on net1`),
  ];
}

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

const ROUNDS = LONG ? 8 : 2;
const ROUND_CREATES = LONG ? 100 : 20;
const ROUND_DELETES = LONG ? 30 : 5;

if (!LONG)
  console.log(
    `[stack-kill] rounds: ${ROUNDS} × (${ROUND_CREATES} creates + ${ROUND_DELETES} deletes of existing EIPs) (EIP_LONG=1 runs 8 × (100 + 30))`,
  );

interface Listed {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  status?: { ready?: boolean; ip?: string };
}

describe('npm start killed with SIGKILL, round after round, during creates and deletes of existing EIPs', () => {
  it(`${ROUNDS} rounds of ${ROUND_CREATES} creates + ${ROUND_DELETES} deletes: 0 leaks, 0 duplicates, audit clean without a repair`, async () => {
    const data = join(dir, 'data-rounds');
    // The stack's own maintenance off: only the handlers converge it, so whatever they leave is seen.
    const flags = ['--drift-period', '0', '--gc-period', '0', '--no-dashboard'];
    let stack = start(data, flags, true);
    await stack.ready;
    let { co, core } = clients();
    const list = async () => ((await co.listClusterCustomObject(EIPS)) as { items: Listed[] }).items;
    const rows: Record<string, string | number>[] = [];
    // The existing EIPs the first round deletes.
    let existing = Array.from({ length: ROUND_DELETES }, (_, i) => `base-${i}`);
    await createEips(co, existing, 10);
    await eventuallyValue(
      async () => {
        const now = await list();
        return existing.every((n) => now.some((e) => e.metadata.name === n && e.status?.ready));
      },
      { ...polling, what: 'the first existing EIPs Ready', timeoutMs: 180_000 },
    );

    for (let round = 1; round <= ROUNDS; round++) {
      const names = Array.from({ length: ROUND_CREATES }, (_, i) => `r${round}-${i}`);
      const acknowledged = { created: new Set<string>(), deleted: new Set<string>() };
      const t0 = Date.now();
      // Creates (10 at a time) and the deletes of existing EIPs, all at once; killed once a third is Ready.
      const creating = (async () => {
        for (let i = 0; i < names.length; i += 10)
          await Promise.all(
            names.slice(i, i + 10).map((name) =>
              co
                .createClusterCustomObject({
                  ...EIPS,
                  body: {
                    apiVersion: 'kubeovn.io/v1',
                    kind: 'IptablesEIP',
                    metadata: { name },
                    spec: { natGwDp: 'gw1' },
                  },
                })
                .then(() => acknowledged.created.add(name))
                .catch(() => undefined),
            ),
          );
      })();
      const deleting = Promise.all(
        existing.map((name) =>
          co
            .deleteClusterCustomObject({ ...EIPS, name })
            .then(() => acknowledged.deleted.add(name))
            .catch(() => undefined),
        ),
      );
      await eventuallyValue(
        async () =>
          (await list()).filter((e) => names.includes(e.metadata.name) && e.status?.ready).length >=
          Math.ceil(ROUND_CREATES / 3),
        { ...polling, what: `round ${round}: a third of the creates Ready`, timeoutMs: 180_000 },
      );
      const before = await list();
      await killGroup(stack.child);
      await Promise.all([creating, deleting]);
      const killedAt = (Date.now() - t0) / 1000;

      stack = start(data, flags, true);
      const { dynamodb, table } = await stack.ready;
      const restarted = Date.now();
      ({ co, core } = clients());
      // What the API never acknowledged may or may not have happened: the deletes are asked again.
      await Promise.all(
        existing.map((name) => co.deleteClusterCustomObject({ ...EIPS, name }).catch(() => undefined)),
      );
      const created = (await list())
        .filter((e) => names.includes(e.metadata.name))
        .map((e) => e.metadata.name);
      // No acknowledged create lost.
      for (const n of acknowledged.created)
        expect(created, `round ${round}: ${n} was acknowledged`).toContain(n);
      const kept = ['demo-eip', ...created];
      const items = await eventuallyValue(
        async () => {
          const now = await list();
          if (existing.some((n) => now.some((e) => e.metadata.name === n))) return undefined;
          if (!kept.every((n) => now.some((e) => e.metadata.name === n && e.status?.ready))) return undefined;
          const all = await tableItems(dynamodb, table);
          if (all.some((i) => i.pk?.S?.startsWith('LEASE#'))) return undefined;
          return all;
        },
        { ...polling, what: `round ${round}: convergence`, timeoutMs: LONG ? 600_000 : 300_000 },
      );
      const converged = (Date.now() - restarted) / 1000;
      const live = await list();
      // The gateway pod's own external address (its `…kubernetes.io/ip_address` annotations) is on net1 too.
      const pods = await core.listNamespacedPod({ namespace: 'kube-system' });
      const own = new Set(
        pods.items.flatMap((p) =>
          Object.entries(p.metadata?.annotations ?? {})
            .filter(([k]) => k.endsWith('.kubernetes.io/ip_address'))
            .flatMap(([, v]) => v.split(',').map((x) => x.trim())),
        ),
      );
      const { kc } = clients();
      const { leaks, duplicates } = problemsOf(live, items, await net1(kc), own);
      const audit = await auditCli();
      rows.push({
        round,
        'killed after s': killedAt.toFixed(1),
        'Ready at kill': before.filter((e) => e.status?.ready).length,
        'converged after s': converged.toFixed(1),
        leaks: leaks.length,
        duplicates: duplicates.length,
        'audit exit': audit.code ?? -1,
      });
      expect(leaks, `round ${round}`).toEqual([]);
      expect(
        duplicates.filter((d) => !d.endsWith('with no EIP')),
        `round ${round}`,
      ).toEqual([]);
      expect(audit.code, `round ${round}: ${audit.stdout}${audit.stderr}`).toBe(0);

      // The next round deletes some of these; the rest go now (cleanly), so the pool never runs out.
      existing = created.slice(0, ROUND_DELETES);
      const rest = created.slice(ROUND_DELETES);
      await Promise.all(
        rest.map((name) => co.deleteClusterCustomObject({ ...EIPS, name }).catch(() => undefined)),
      );
      await eventuallyValue(
        async () => {
          const now = await list();
          return !rest.some((n) => now.some((e) => e.metadata.name === n));
        },
        { ...polling, what: `round ${round}: clean-up`, timeoutMs: 300_000 },
      );
    }
    console.table(rows);
    await killGroup(stack.child);
  }, 3_600_000);
});
