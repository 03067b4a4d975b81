/**
 * Gateway drift on the running local stack, injected from outside as an operator (or an accident) would: kubectl exec
 * into the gateway to delete an address or add a stray one, an allocation item deleted in dynalite. The stack's own
 * drift check (beside the bridge's resync) repairs what is safe by itself; `npm run audit` (scripts/audit.ts as a
 * child process, target from the stack file) reports, explains and repairs on demand, with its exit codes.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteItemCommand, type DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDynamoClient } from '../../local/dynamo.js';
import { kubectl } from '../../local/kube-api/testing.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import { heldAddressItem } from '../../local/table.js';
import { createDynamoIpam } from '../../shared/adapters/dynamo/index.js';
import { addressSk, poolPk } from '../../shared/adapters/dynamo/layout.js';
import { parseAddress } from '../../shared/domain/addressing.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { unusedAddresses } from '../support/addresses.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';

const { skip } = kubectlOrSkip();
const root = join(import.meta.dirname, '../..');
const tsx = join(root, 'node_modules/tsx/dist/cli.mjs');
const NS = 'kube-system';
const POD = 'vpc-nat-gw-gw1-0';
const SUBNET = 'ovn-vpc-external-network';

let stack: LocalStack;
let dir: string;
let stackFile: string;
let client: DynamoDBClient;
let custom: CustomObjectsApi;

/** Runs `npm run audit -- args` against the stack file; never rejects. */
function audit(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '', HOME: dir };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [tsx, join(root, 'scripts/audit.ts'), '--stack', stackFile, ...args],
      { cwd: root, env, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const gw = (...argv: string[]) =>
  kubectl(stack.api, 'exec', '-n', NS, POD, '-c', 'vpc-nat-gw', '--', ...argv);
const net1 = async () => (await gw('ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout;
const net1Addresses = async () => [...(await net1()).matchAll(/inet (\S+)/g)].map((m) => m[1]!);
const demo = async () =>
  (await custom.getClusterCustomObject({
    group: 'kubeovn.io',
    version: 'v1',
    plural: 'iptables-eips',
    name: 'demo-eip',
  })) as IptablesEip;

describe.skipIf(skip)('gateway drift on the local stack, and npm run audit', () => {
  let ip: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'eip-drift-'));
    stackFile = join(dir, 'stack.json');
    stack = await startLocalStack({
      kubeconfig: join(dir, 'kubeconfig'),
      stackFile,
      log: memoryLogger('warn'),
      say: () => {},
      driftRepairMs: 1000,
      gcMs: 1000,
      // The stray address below is the operator's to remove (npm run audit --repair), not the stack's.
      orphanGraceMs: 30 * 60_000,
    });
    const kc = new KubeConfig();
    kc.loadFromFile(stack.kubeconfig);
    custom = kc.makeApiClient(CustomObjectsApi);
    client = localDynamoClient(stack.dynamodbEndpoint);
    ip = await eventuallyValue(
      async () => {
        const e = await demo().catch(() => undefined);
        return e?.status?.ready ? e.status.ip : undefined;
      },
      { timeoutMs: 60_000 },
    );
  }, 90_000);

  afterAll(async () => {
    client?.destroy();
    await stack?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a clean stack audits clean (exit 0); --help exits 0; bad usage exits 2', async () => {
    const clean = await audit();
    expect(clean.code, clean.stderr).toBe(0);
    expect(clean.stdout).toMatch(
      // One allocation: the demo EIP's (the gateway pod's own address is reserved by a garbage collection, which
      // the local stack does not run, ADR 0042).
      // The demo EIP's, and the gateway pod's own address, reserved by the stack's collection before `ready:`.
      /^clean: 1 EIPs, 2 allocations, \d+ leases, 1 gateways read \(gw1: 2 addresses, 2 tc filters\); no drift/,
    );
    expect(clean.stderr).toMatch(/read gateway gw1/);
    const help = await audit('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/exit status: 0 no drift/);
    const bad = await audit('--dry-run');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--dry-run only goes with --repair/);
    const noStack = await audit('--stack', join(dir, 'missing.json'));
    expect(noStack.code).toBe(2);
    expect(noStack.stderr).toMatch(/no such file/);
  }, 120_000);

  it('an address deleted inside the gateway is put back by the stack itself', async () => {
    expect(await net1()).toContain(`inet ${ip}/24`);
    const del = await gw('ip', 'addr', 'del', `${ip}/24`, 'dev', 'net1');
    expect(del.code, del.stderr).toBe(0);
    expect(await net1()).not.toContain(`inet ${ip}/24`);
    // Nothing in Kubernetes changed, so no event reaches a handler: only the drift check can notice.
    await eventuallyValue(async () => (await net1()).includes(`inet ${ip}/24`), {
      timeoutMs: 30_000,
      stepMs: 200,
    });
    expect((await demo()).status?.ready).toBe(true);
  }, 60_000);

  it('an allocation deleted in dynalite is taken back for its EIP by the stack itself', async () => {
    const p = parseAddress(ip)!;
    await client.send(
      new DeleteItemCommand({
        TableName: stack.tableName,
        Key: { pk: { S: poolPk(SUBNET, 4) }, sk: { S: addressSk(4, p.value) } },
      }),
    );
    const ipam = createDynamoIpam({ client, tableName: stack.tableName });
    const uid = (await demo()).metadata.uid;
    expect(await ipam.findByOwner(uid)).toEqual([]);
    const back = await eventuallyValue(async () => (await ipam.findByOwner(uid))[0], {
      timeoutMs: 30_000,
      stepMs: 200,
    });
    expect(back.address).toBe(ip);
  }, 60_000);

  it('collects garbage as the gc function does: the gateway pod address reserved, a leaked allocation released', async () => {
    const ipam = createDynamoIpam({ client, tableName: stack.tableName });
    const podUid = (await kubectl(stack.api, 'get', 'pod', '-n', NS, POD, '-o', 'jsonpath={.metadata.uid}'))
      .stdout;
    const [reserved] = await ipam.findByOwner(`pod:${podUid}`);
    expect(reserved?.address).toMatch(/^172\.18\.0\.\d+$/);
    expect(await net1()).toContain(`inet ${reserved!.address}/24`);
    // An allocation whose owner never existed, claimed long ago (older than the collector's grace period).
    const [address] = unusedAddresses(await net1Addresses(), { from: 150 }) as [string];
    const value = parseAddress(address)!.value;
    await client.send(
      new PutItemCommand({
        TableName: stack.tableName,
        Item: heldAddressItem({
          pk: poolPk(SUBNET, 4),
          sk: addressSk(4, value),
          subnet: SUBNET,
          address,
          uid: 'owner-that-is-gone',
          claimedAt: 0,
        }),
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    expect((await ipam.findByOwner('owner-that-is-gone')).map((a) => a.address)).toEqual([address]);
    await eventuallyValue(async () => (await ipam.findByOwner('owner-that-is-gone')).length === 0, {
      timeoutMs: 30_000,
      stepMs: 200,
    });
  }, 60_000);

  it('a status.ip written by hand is set back to the allocation by the stack itself', async () => {
    const [wrong] = unusedAddresses(await net1Addresses(), { from: 60 }) as [string];
    const patch = await kubectl(
      stack.api,
      'patch',
      'iptables-eip',
      'demo-eip',
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { ip: wrong } }),
    );
    expect(patch.code, patch.stderr).toBe(0);
    await eventuallyValue(
      async () => {
        const e = await demo();
        return e.status?.ip === ip && e.status.ready === true;
      },
      { timeoutMs: 30_000, stepMs: 200 },
    );
    expect(await net1()).toContain(`inet ${ip}/24`);
    expect(await net1()).not.toContain(`inet ${wrong}/`);
  }, 60_000);

  it('a stray address: reported (exit 1, --json), kept by a dry run and inside the grace period, removed with --grace 0s', async () => {
    // An address no EIP has: every allocated address of this stack is on net1 (the allocator spreads them out).
    const [stray] = unusedAddresses(await net1Addresses(), { from: 150 }) as [string];
    const re = stray.replaceAll('.', '\\.');
    const add = await gw('ip', 'addr', 'add', `${stray}/24`, 'dev', 'net1');
    expect(add.code, add.stderr).toBe(0);

    const found = await audit('--json');
    expect(found.code, found.stderr).toBe(1);
    const { report } = JSON.parse(found.stdout) as {
      report: { drift: { kind: string; address?: string }[] };
    };
    expect(report.drift).toEqual([
      expect.objectContaining({
        kind: 'orphan-address',
        address: stray,
        gateway: 'gw1',
        prefix: 24,
      }),
    ]);

    // A grace longer than this test: the stray may be an address an earlier step's EIP released, and "released so
    // long ago" would otherwise pass the default 25 s on a slow run.
    const text = await audit('--repair', '--dry-run', '--grace', '1h');
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(
      new RegExp(
        `orphan-address: ${re}/24 is on gateway gw1 \\(pod ${NS}/${POD}\\) but no allocation claims it`,
      ),
    );
    expect(text.stdout).toMatch(
      /means: an address is configured on a gateway net1 but no allocation claims it/,
    );
    expect(text.stdout).toMatch(new RegExp(`waiting: remove — orphan-address ${re}/24 on gw1`));
    expect(await net1()).toContain(`inet ${stray}/24`);

    const fixed = await audit('--repair', '--grace', '0s');
    expect(fixed.code, fixed.stdout + fixed.stderr).toBe(0);
    expect(fixed.stdout).toMatch(
      new RegExp(`done: remove \\(eip-del, QoS deletions\\) — orphan-address ${re}/24 on gw1`),
    );
    expect(fixed.stdout).toMatch(/after repair:\nclean: /);
    expect(await net1()).not.toContain(`inet ${stray}/`);
    expect(await net1()).toContain(`inet ${ip}/24`);
  }, 180_000);
});
