/**
 * The audit on the real adapters: the local Kubernetes API (pods/exec into the simulated gateways), dynalite and the
 * kube-ovn stand-ins, with the handlers making EIPs Ready. Drift of every kind is injected the way it happens —
 * addresses deleted and added inside a gateway and a filter lost (kubectl exec), a label and a status written by
 * hand (kubectl label, kubectl patch --subresource=status), an allocation and a lease left behind by an owner that
 * died hours ago (written to dynalite) — then found, and repaired where that is safe.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DynamoDBClient, paginateScan } from '@aws-sdk/client-dynamodb';
import { type KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { kubectl } from '../../local/kube-api/testing.js';
import { kubeConfigFromFile } from '../../local/kubeconfig.js';
import { memoryLogger } from '../../local/memory/logger.js';
import type { NatGatewaySim } from '../../local/natgw/sim.js';
import { createDynamoIpam, createDynamoLeases } from '../../shared/adapters/dynamo/index.js';
import { buildDeps } from '../../shared/adapters/live.js';
import { type AuditDeps, repairDrift, runAudit } from '../../shared/audit/audit.js';
import { INSPECTION_ARGV } from '../../shared/audit/inspect.js';
import { auditDepsOf, gcHandler } from '../../shared/audit/live.js';
import type { DriftKind } from '../../shared/audit/model.js';
import { loadConfig } from '../../shared/config/config.js';
import { poolsOf } from '../../shared/domain/addressing.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { eipHandler } from '../../shared/lambda/eip-handler.js';
import { unusedAddresses } from '../support/addresses.js';
import { type DynamoFixture, PRODUCT_RETRIES, startDynamoFixture } from '../support/dynamo.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';

const TABLE = 'audit-it-ipam';
const NS = 'kube-system';
const MIN = 60_000;

let api: KubeApi;
let dynamo: DynamoFixture;
let client: DynamoDBClient;
let stop: () => Promise<void>;
let deps: AuditDeps;
let dir: string;
/** The audit's clock runs this far ahead of the wall clock (to pass a grace period without waiting). */
let offset = 0;

const sim = (gw: string): NatGatewaySim => {
  const s = api.gateways.get(NS, `vpc-nat-gw-${gw}-0`);
  if (!s) throw new Error(`no simulated gateway for ${gw}`);
  return s;
};
const { skip: noKubectl } = kubectlOrSkip();
/** A command in a gateway, as an operator runs it: kubectl exec (the simulator directly only where kubectl is missing). */
async function sh(gw: string, ...argv: string[]): Promise<void> {
  if (!noKubectl) {
    const r = await kubectl(api, 'exec', '-n', NS, `vpc-nat-gw-${gw}-0`, '-c', 'vpc-nat-gw', '--', ...argv);
    if (r.code !== 0) throw new Error(`kubectl exec ${argv.join(' ')}: ${r.stderr}`);
    return;
  }
  const r = sim(gw).exec(argv);
  if (r.exitCode !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr}`);
}
/** kubectl as a person at a shell (the API directly only where kubectl is missing). */
async function byHand(args: string[], fallback: () => Promise<unknown>): Promise<void> {
  if (noKubectl) {
    await fallback();
    return;
  }
  const r = await kubectl(api, ...args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
}
const has = (gw: string, ip: string) =>
  sim(gw)
    .net1Addresses()
    .some((a) => a.startsWith(`${ip}/`));
const eip = async (name: string) => (await deps.cluster.getEip(name)) as IptablesEip;
const kindsOf = (d: { kind: DriftKind }[]) => d.map((x) => x.kind).sort();

async function add(name: string, spec: Record<string, string>): Promise<string> {
  const objects = KubernetesObjectApi.makeApiClient(kubeConfigFromFile(join(dir, 'kubeconfig')));
  await objects.create({
    apiVersion: 'kubeovn.io/v1',
    kind: 'IptablesEIP',
    metadata: { name },
    spec,
  } as KubernetesObject);
  const outcome = await eipHandler('add', async () => deps)(
    { version: 1, id: `${name}:add`, handler: 'add', reason: 'added', object: { name } },
    {} as Context,
  );
  if (outcome.status !== 'applied') throw new Error(`add ${name}: ${JSON.stringify(outcome)}`);
  return outcome.ip!;
}

const ips: Record<string, string> = {};
/** Addresses this suite plants by hand, chosen free when planted (the allocator spreads EIPs over the pool). */
const stray = { orphan: '', label: '', ghost: '', forE: '', returning: '' };

/** Addresses from 172.18.0.200 up that no allocation in the table holds now, as many as asked. */
async function freeAddresses(count: number): Promise<string[]> {
  const held: string[] = [];
  for await (const page of paginateScan({ client }, { TableName: TABLE }))
    for (const it of page.Items ?? []) if (it.ownerUid?.S && it.address?.S) held.push(it.address.S);
  return unusedAddresses(held, { count });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'eip-audit-'));
  // kube-ovn 1.12: its three reads per gateway are counted below; the other releases' reads: test/e2e/dialects.test.ts.
  api = await startKubeApi({ kubeOvnRelease: '1.12' });
  await api.writeKubeconfig(join(dir, 'kubeconfig'));
  dynamo = await startDynamoFixture();
  client = await dynamo.table(TABLE, PRODUCT_RETRIES);
  const kc = kubeConfigFromFile(join(dir, 'kubeconfig'));
  const standIns = await startStandIns({ kubeConfig: kc, release: '1.12' });
  const objects = KubernetesObjectApi.makeApiClient(kc);
  for (const o of demoObjects(NS, '1.12'))
    if (o.kind !== 'IptablesEIP') await objects.create(o as KubernetesObject);
  await objects.create({
    apiVersion: 'kubeovn.io/v1',
    kind: 'VpcNatGateway',
    metadata: { name: 'gw2' },
    spec: {
      vpc: 'vpc1',
      subnet: 'vpc1-subnet1',
      lanIp: '10.0.1.253',
      externalSubnets: ['ovn-vpc-external-network'],
    },
  } as KubernetesObject);
  const config = loadConfig({
    KUBECONFIG: join(dir, 'kubeconfig'),
    TABLE_NAME: TABLE,
    DYNAMODB_ENDPOINT: dynamo.endpoint,
  });
  const base = buildDeps(config, { kubeConfig: kc, dynamo: client, log: memoryLogger('warn') });
  deps = {
    ...auditDepsOf(config, base, { kubeConfig: kc, dynamo: client }),
    clock: { now: () => Date.now() + offset },
  };
  await eventuallyValue(
    () => api.gateways.get(NS, 'vpc-nat-gw-gw1-0') && api.gateways.get(NS, 'vpc-nat-gw-gw2-0'),
  );
  await eventuallyValue(
    async () => (await deps.cluster.listGatewayPods()).every((p) => p.phase === 'Running') || undefined,
  );
  ips.a = await add('a', { natGwDp: 'gw1', qosPolicy: 'qos-demo' });
  for (const n of ['b', 'd', 'f']) ips[n] = await add(n, { natGwDp: 'gw1' });
  ips.g = await add('g', { natGwDp: 'gw2' });
  stop = async () => {
    await standIns.stop();
    await api.close();
    await dynamo.close();
  };
}, 90_000);

afterAll(async () => {
  await stop?.();
  rmSync(dir, { recursive: true, force: true });
});

describe('npm run audit, on the real adapters', () => {
  it('a consistent world is clean, read with three read-only execs per gateway', async () => {
    const before = sim('gw1').history().length;
    const report = await runAudit(deps);
    expect(report.drift).toEqual([]);
    expect(report.gateways.map((g) => g.gateway)).toEqual(['gw1', 'gw2']);
    expect(report.eips).toBe(5);
    // 5 EIPs. The 2 gateway pods' own addresses are not in the table until a collection reserves them (ADR 0042),
    // and that is not drift.
    expect(report.allocations).toBe(5);
    expect(
      sim('gw1')
        .history()
        .slice(before)
        .map((h) => h.argv),
    ).toEqual([INSPECTION_ARGV.addresses, INSPECTION_ARGV.ingress, INSPECTION_ARGV.egress]);
  });

  it('finds drift of every kind, and repairs the safe subset', async () => {
    [stray.orphan, stray.label, stray.ghost, stray.forE] = (await freeAddresses(4)) as [
      string,
      string,
      string,
      string,
    ];
    // Inside the gateways.
    await sh('gw1', 'ip', 'addr', 'del', `${ips.d}/24`, 'dev', 'net1'); // missing
    await sh('gw1', 'ip', 'addr', 'add', `${stray.orphan}/24`, 'dev', 'net1'); // orphan
    await sh('gw2', 'ip', 'addr', 'add', `${ips.b}/24`, 'dev', 'net1'); // on two gateways
    await sh('gw1', 'ip', 'addr', 'del', `${ips.f}/24`, 'dev', 'net1'); // moved to the wrong gateway
    await sh('gw2', 'ip', 'addr', 'add', `${ips.f}/24`, 'dev', 'net1');
    await sh('gw1', 'bash', '/kube-ovn/nat-gateway.sh', 'eip-egress-qos-del', ips.a!); // QoS lost
    // In the cluster.
    const g = await eip('g');
    await byHand(
      ['label', 'iptables-eip', 'g', `ovn.kubernetes.io/eip_v4_ip=${stray.label}`, '--overwrite'],
      () =>
        deps.cluster.updateEip('g', g.metadata.resourceVersion, {
          labels: { 'ovn.kubernetes.io/eip_v4_ip': stray.label },
        }),
    );
    const objects = KubernetesObjectApi.makeApiClient(kubeConfigFromFile(join(dir, 'kubeconfig')));
    await objects.create({
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: { name: 'e' },
      // A static address: its repair provisions it, and a random pick could take the planted orphan's address.
      spec: { natGwDp: 'gw1', v4ip: stray.forE },
    } as KubernetesObject);
    // Ready, no address.
    await byHand(
      [
        'patch',
        'iptables-eip',
        'e',
        '--subresource=status',
        '--type=merge',
        '-p',
        '{"status":{"ready":true}}',
      ],
      () => deps.cluster.patchEipStatus('e', { ready: true }),
    );
    // In the table: an owner that died hours ago left an allocation and a lease.
    const past = { now: () => Date.now() - 3 * 3_600_000 };
    const subnet = (await deps.cluster.getSubnet('ovn-vpc-external-network'))!;
    const pool = poolsOf(subnet).find((p) => p.family === 4)!;
    const leaked = await createDynamoIpam({ client, tableName: TABLE, clock: past }).claimAddress(
      pool,
      stray.ghost,
      {
        uid: 'ghost-uid',
        name: 'ghost',
      },
    );
    await createDynamoLeases({ client, tableName: TABLE, clock: past }).acquire(
      'eip#ghost',
      'dead-invocation',
      past.now() + MIN,
    );

    const report = await runAudit(deps);
    expect(kindsOf(report.drift)).toEqual([
      'duplicate-address',
      'label-mismatch',
      'leaked-allocation',
      'misplaced-address',
      'missing-address',
      'missing-address',
      'orphan-address',
      'qos-drift',
      'stale-lease',
      'status-mismatch',
    ]);
    const find = (kind: DriftKind) => report.drift.filter((d) => d.kind === kind);
    expect(
      find('missing-address')
        .map((d) => d.eip)
        .sort(),
    ).toEqual(['d', 'f']);
    expect(find('orphan-address')[0]).toMatchObject({
      gateway: 'gw1',
      address: stray.orphan,
      repair: 'remove-orphan',
    });
    expect(find('duplicate-address')[0]).toMatchObject({ address: ips.b, eip: 'b' });
    expect(find('misplaced-address')[0]).toMatchObject({ gateway: 'gw2', address: ips.f, eip: 'f' });
    expect(find('qos-drift')[0]).toMatchObject({ eip: 'a', repair: 'redo' });
    expect(find('label-mismatch')[0]).toMatchObject({ eip: 'g', repair: 'resync' });
    expect(find('status-mismatch')[0]).toMatchObject({ eip: 'e', repair: 'resync' });
    expect(find('leaked-allocation')[0]).toMatchObject({ address: leaked.address, uid: 'ghost-uid' });
    expect(find('stale-lease')[0]).toMatchObject({ eip: 'ghost' });

    // A dry run changes nothing.
    const planned = await repairDrift(deps, report, { dryRun: true });
    expect(new Set(planned.map((a) => a.result))).toEqual(new Set(['planned', 'waiting']));
    expect(has('gw1', ips.d!)).toBe(false);

    const actions = await repairDrift(deps, report, { orphanGraceMs: 10 * MIN });
    const result = (kind: DriftKind, target: string) =>
      actions.find((a) => a.kind === kind && a.target.startsWith(target))?.result;
    expect(result('missing-address', 'd')).toBe('done');
    // f's copy on gw2 answers the re-add's duplicate address detection (kube-ovn 1.12's arping -D): a refusal that
    // may clear, so f says so and is not Ready until the copy is gone (then its retry configures it, below).
    const fRepair = actions.find((a) => a.kind === 'missing-address' && a.target === 'f');
    expect(fRepair).toMatchObject({
      result: 'failed',
      detail: expect.stringMatching(/GatewayBlocked.*address-in-use/),
    });
    expect((await eip('f')).status).toMatchObject({ ready: false });
    expect(result('qos-drift', 'a')).toBe('done');
    expect(result('label-mismatch', 'g')).toBe('done');
    expect(result('status-mismatch', 'e')).toBe('done');
    expect(result('leaked-allocation', leaked.address)).toBe('done');
    expect(result('stale-lease', 'eip#ghost')).toBe('done');
    expect(result('orphan-address', stray.orphan)).toBe('waiting');
    expect(has('gw1', ips.d!)).toBe(true);
    expect(has('gw1', ips.f!)).toBe(true);
    expect(
      sim('gw1')
        .tcFilters()
        .filter((f) => f.ip === ips.a)
        .map((f) => f.direction)
        .sort(),
    ).toEqual(['egress', 'ingress']);
    expect((await eip('g')).metadata.labels?.['ovn.kubernetes.io/eip_v4_ip']).toBe(ips.g);
    const e = await eip('e');
    expect(e.status).toMatchObject({ ready: true });
    expect(has('gw1', e.status!.ip!)).toBe(true);
    expect(await deps.ipam.findByOwner('ghost-uid')).toEqual([]);

    // What is left: the orphan inside its grace period, and the copies on gw2 that are reported only.
    const after = await runAudit(deps);
    expect(kindsOf(after.drift)).toEqual(['duplicate-address', 'duplicate-address', 'orphan-address']);
    // An operator removes the stray copies on gw2; the orphan, seen again after the grace period, is removed.
    await sh('gw2', 'ip', 'addr', 'del', `${ips.b}/24`, 'dev', 'net1');
    await sh('gw2', 'ip', 'addr', 'del', `${ips.f}/24`, 'dev', 'net1');
    // f's retry (GatewayBlocked is retried with a backoff) now configures it.
    const retried = await eipHandler('update', async () => deps)(
      { version: 1, id: 'f:retry', handler: 'update', reason: 'manual', object: { name: 'f' } },
      {} as Context,
    );
    expect(retried.status).toBe('applied');
    expect((await eip('f')).status).toMatchObject({ ready: true });
    offset = 11 * MIN;
    const later = await runAudit(deps);
    expect(kindsOf(later.drift)).toEqual(['orphan-address']);
    const removal = await repairDrift(deps, later, { orphanGraceMs: 10 * MIN });
    expect(removal).toEqual([
      expect.objectContaining({
        kind: 'orphan-address',
        result: 'done',
        detail: expect.stringMatching(/first seen 1\dm ago/),
      }),
    ]);
    expect(has('gw1', stray.orphan)).toBe(false);
    expect((await runAudit(deps)).drift).toEqual([]);
  }, 60_000);

  it('an orphan that returns after it was gone starts a new grace period', async () => {
    offset = 0;
    [stray.returning] = (await freeAddresses(1)) as [string];
    await sh('gw2', 'ip', 'addr', 'add', `${stray.returning}/24`, 'dev', 'net1');
    const first = await runAudit(deps);
    expect((await repairDrift(deps, first, { orphanGraceMs: 10 * MIN }))[0]?.result).toBe('waiting');
    await sh('gw2', 'ip', 'addr', 'del', `${stray.returning}/24`, 'dev', 'net1');
    offset = 5 * MIN;
    await repairDrift(deps, await runAudit(deps), { orphanGraceMs: 10 * MIN }); // clean: the sighting is forgotten
    await sh('gw2', 'ip', 'addr', 'add', `${stray.returning}/24`, 'dev', 'net1');
    offset = 11 * MIN;
    const back = await runAudit(deps);
    expect((await repairDrift(deps, back, { orphanGraceMs: 10 * MIN }))[0]?.result).toBe('waiting');
    expect(has('gw2', stray.returning)).toBe(true);
    offset = 22 * MIN;
    await repairDrift(deps, await runAudit(deps), { orphanGraceMs: 10 * MIN });
    expect(has('gw2', stray.returning)).toBe(false);
    offset = 0;
  }, 30_000);

  it('Ready without its address, when it cannot be re-added: ready=false with a condition', async () => {
    await sh('gw1', 'ip', 'addr', 'del', `${ips.d}/24`, 'dev', 'net1');
    const fault = api.faults.failExec({
      command: 'eip-add',
      times: Number.POSITIVE_INFINITY,
      exitCode: 2,
      stderr: 'RTNETLINK answers: No buffer space available',
    });
    try {
      const report = await runAudit(deps);
      expect(kindsOf(report.drift)).toEqual(['missing-address']);
      const actions = await repairDrift(deps, report);
      expect(actions).toEqual([
        expect.objectContaining({
          kind: 'missing-address',
          target: 'd',
          action: 'mark not ready',
          result: 'done',
        }),
      ]);
      const d = await eip('d');
      expect(d.status?.ready).toBe(false);
      expect(d.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
        status: 'False',
        reason: 'AddressMissing',
      });
      // Not Ready any more: no longer claimed to be configured, so no longer drift; the core's redo takes over.
      expect((await runAudit(deps)).drift).toEqual([]);
    } finally {
      fault.cancel();
    }
    const redo = await eipHandler('update', async () => deps)(
      { version: 1, id: 'd:redo', handler: 'update', reason: 'redo-changed', object: { name: 'd' } },
      {} as Context,
    );
    expect(redo.status).toBe('applied');
    expect(has('gw1', ips.d!)).toBe(true);
    expect((await runAudit(deps)).drift).toEqual([]);
  }, 30_000);

  it('the hourly gc function collects garbage, then checks every gateway and repairs the drift', async () => {
    await sh('gw2', 'ip', 'addr', 'del', `${ips.g}/24`, 'dev', 'net1');
    // The gc function's handler with the wiring of functions/gc/handler.ts, on this test's kubeconfig and table
    // (a Lambda reaches its cluster through EKS access, which cannot run here; the bundle test loads the real file).
    const handler = gcHandler({ deps: async () => deps, auditDeps: (d) => ({ ...deps, ...d }) });
    const result = await handler();
    expect(result).toMatchObject({ released: 0, drift: 1, repaired: 1 });
    expect(has('gw2', ips.g!)).toBe(true);
    expect((await runAudit(deps)).drift).toEqual([]);
    expect(await gcHandler({ deps: async () => deps, auditDeps: () => undefined })()).toMatchObject({
      drift: 'off',
      repaired: 0,
    });
  }, 30_000);

  it('a gateway that cannot be read is reported, not judged', async () => {
    const fault = api.faults.failExec({
      pod: 'vpc-nat-gw-gw2-0',
      command: 'ip -o addr',
      stderr: 'container not running',
    });
    try {
      const report = await runAudit(deps);
      expect(report.drift).toEqual([expect.objectContaining({ kind: 'gateway-unreadable', gateway: 'gw2' })]);
      expect(report.gateways.map((g) => g.gateway)).toEqual(['gw1']);
    } finally {
      fault.cancel();
    }
  });
});
