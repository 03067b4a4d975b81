/**
 * Adoption end to end on the local API, the simulated gateway and dynalite. kube-ovn's own controller is played by
 * kubectl: it creates the EIPs with kube-ovn's labels and finalizer, configures the gateway with nat-gateway.sh
 * through `kubectl exec`, and writes status.ready/ip the way kube-ovn does. Then `npm run adopt` (the CLI, as a
 * process) imports them, and the handlers run update and reset on every EIP: the simulated gateway records every
 * exec, and there must be none.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { kubectl, kubectlWith } from '../../local/kube-api/testing.js';
import { kubeConfigFromFile } from '../../local/kubeconfig.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { buildDeps } from '../../shared/adapters/live.js';
import { loadConfig } from '../../shared/config/config.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import type { EipEvent } from '../../shared/events.js';
import { eipHandler } from '../../shared/lambda/eip-handler.js';
import type { Deps } from '../../shared/ports.js';
import { type DynamoFixture, PRODUCT_RETRIES, startDynamoFixture } from '../support/dynamo.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const TABLE = 'adopt-it-ipam';
const NS = 'kube-system';
const POD = 'vpc-nat-gw-gw1-0';
const SUBNET = 'ovn-vpc-external-network';
const { skip } = kubectlOrSkip();

let api: KubeApi;
let dynamo: DynamoFixture;
let deps: Deps;
let dir: string;
let kubeconfig: string;
let stop: () => Promise<void>;

const adopt = (...args: string[]) =>
  run(
    process.execPath,
    [
      join(root, 'node_modules/tsx/dist/cli.mjs'),
      join(root, 'scripts/adopt.ts'),
      '--kubeconfig',
      kubeconfig,
      '--table',
      TABLE,
      '--dynamodb-endpoint',
      dynamo.endpoint,
      ...args,
    ],
    { cwd: root, env: { ...process.env, KUBECONFIG: '', TABLE_NAME: '', DYNAMODB_ENDPOINT: '' } },
  ).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );

const sim = () => api.gateways.get(NS, POD)!;
const execCount = () => sim().history().length;
const k = async (...args: string[]) => {
  const r = await kubectl(api, ...args);
  expect(r.code, `kubectl ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout;
};
const getEip = async (name: string) =>
  JSON.parse(await k('get', 'iptables-eips', name, '-o', 'json')) as IptablesEip;

/** What kube-ovn's controller leaves behind for a Ready EIP: labels, finalizer, the gateway configured, status. */
async function kubeOvnMade(
  name: string,
  ip: string,
  opts: { qos?: string; redo?: string } = {},
): Promise<void> {
  const eip = {
    apiVersion: 'kubeovn.io/v1',
    kind: 'IptablesEIP',
    metadata: {
      name,
      finalizers: ['kubeovn.io/kube-ovn-controller'],
      labels: {
        'ovn.kubernetes.io/subnet': SUBNET,
        'ovn.kubernetes.io/vpc-nat-gw-name': 'gw1',
        'ovn.kubernetes.io/eip_v4_ip': ip,
        'ovn.kubernetes.io/qos': opts.qos ?? '',
      },
    },
    spec: {
      natGwDp: 'gw1',
      v4ip: ip,
      macAddress: '00:00:00:AA:BB:CC',
      ...(opts.qos && { qosPolicy: opts.qos }),
    },
  };
  const { code, stderr } = await kubectlWith(api, { stdin: JSON.stringify(eip) }, 'apply', '-f', '-');
  expect(code, stderr).toBe(0);
  const script = ['exec', '-n', NS, POD, '-c', 'vpc-nat-gw', '--', 'bash', '/kube-ovn/nat-gateway.sh'];
  await k(...script, 'eip-add', `${ip}/24,172.18.0.1`);
  if (opts.qos) {
    await k(...script, 'eip-ingress-qos-add', `${ip},1,20,20`);
    await k(...script, 'eip-egress-qos-add', `${ip},2,10,10`);
  }
  const status = { ready: true, ip, redo: opts.redo ?? '', nat: '', qosPolicy: opts.qos ?? '' };
  await k(
    'patch',
    'iptables-eips',
    name,
    '--subresource=status',
    '--type=merge',
    '-p',
    JSON.stringify({ status }),
  );
}

const event = (handler: 'update' | 'reset', name: string, reason: string): EipEvent =>
  ({
    version: 1,
    id: `-:-:${reason}:${name}`,
    handler,
    reason,
    object: { kind: 'IptablesEIP', name },
  }) as EipEvent;

beforeAll(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'eip-adopt-'));
  kubeconfig = join(dir, 'kubeconfig');
  // What kube-ovn 1.12 configured is adopted: the test execs 1.12's eip-add form itself.
  api = await startKubeApi({ kubeOvnRelease: '1.12' });
  await api.writeKubeconfig(kubeconfig);
  dynamo = await startDynamoFixture();
  const client = await dynamo.table(TABLE, PRODUCT_RETRIES);
  const kc = kubeConfigFromFile(kubeconfig);
  const standIns = await startStandIns({ kubeConfig: kc, release: '1.12' });
  const objects = KubernetesObjectApi.makeApiClient(kc);
  // The demo's objects without its EIP; the external subnet gets the recommended dedicated range, which the
  // addresses kube-ovn gave out earlier lie outside of.
  for (const o of demoObjects(NS, '1.12')) {
    if (o.kind === 'IptablesEIP') continue;
    if (o.kind === 'Subnet' && o.metadata.name === SUBNET) {
      const s = o as { metadata: Record<string, unknown>; spec: { excludeIps: string[] } };
      s.metadata.annotations = { 'eip-lambdas.io/eip-range': '172.18.0.200..172.18.0.250' };
      s.spec.excludeIps = [...s.spec.excludeIps, '172.18.0.200..172.18.0.250'];
    }
    await objects.create(o as KubernetesObject);
  }
  deps = buildDeps(
    loadConfig({ KUBECONFIG: kubeconfig, TABLE_NAME: TABLE, DYNAMODB_ENDPOINT: dynamo.endpoint }),
    {
      kubeConfig: kubeConfigFromFile(kubeconfig),
      dynamo: client,
      log: memoryLogger('warn'),
    },
  );
  await eventuallyValue(() => api.gateways.get(NS, POD), { what: 'the gateway pod' });
  stop = async () => {
    await standIns.stop();
    await api.close();
    await dynamo.close();
  };
}, 90_000);

afterAll(async () => {
  await stop?.();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(skip)('npm run adopt', { timeout: 180_000 }, () => {
  it('--help exits 0, a bad flag or a missing kubeconfig exits 2', async () => {
    expect(await adopt('--help')).toMatchObject({ code: 0, stdout: expect.stringMatching(/--dry-run/) });
    expect(await adopt('--frobnicate')).toMatchObject({ code: 2 });
    const missing = await run(
      process.execPath,
      [
        join(root, 'node_modules/tsx/dist/cli.mjs'),
        join(root, 'scripts/adopt.ts'),
        '--kubeconfig',
        join(dir, 'nope'),
      ],
      { cwd: root, env: { ...process.env, KUBECONFIG: '', TABLE_NAME: 'x-table' } },
    ).catch((e: { code: number; stderr: string }) => e);
    expect(missing).toMatchObject({ code: 2, stderr: expect.stringMatching(/nope.*does not exist/) });
  });

  it('imports what kube-ovn made Ready without touching the gateway; then update and reset exec nothing', async () => {
    const pod = JSON.parse(await k('get', 'pod', '-n', NS, POD, '-o', 'json')) as {
      metadata: { creationTimestamp: string };
    };
    await kubeOvnMade('plain', '172.18.0.50');
    await kubeOvnMade('with-qos', '172.18.0.51', { qos: 'qos-demo' });
    // kube-ovn re-initialised this gateway once: it wrote the pod's creation time as the redo token.
    await kubeOvnMade('redone', '172.18.0.52', { redo: pod.metadata.creationTimestamp.slice(0, 19) });
    const pending = {
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: { name: 'pending' },
      spec: {},
    };
    await kubectlWith(
      api,
      { stdin: JSON.stringify({ ...pending, spec: { natGwDp: 'gw1' } }) },
      'apply',
      '-f',
      '-',
    );
    const before = execCount();
    const net1 = sim().net1Addresses();
    expect(net1).toEqual(expect.arrayContaining(['172.18.0.50/24', '172.18.0.51/24', '172.18.0.52/24']));

    // Dry run: says what it would do, writes nothing.
    const dry = await adopt('--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/^adopted +plain 172\.18\.0\.50\/24 on gw1 redo=/m);
    expect(dry.stdout).toMatch(/^skipped +pending .*not configured yet/m);
    expect(dry.stdout).toMatch(
      /^dry run: 3 would import, 0 already imported, 1 skipped, 0 in conflict, 0 failed/m,
    );
    for (const n of ['plain', 'with-qos', 'redone'])
      expect(await deps.ipam.findByOwner((await getEip(n)).metadata.uid)).toEqual([]);

    // For real.
    const real = await adopt('--json');
    expect(real.code, real.stderr).toBe(0);
    const report = JSON.parse(real.stdout) as { counts: Record<string, number> };
    expect(report.counts).toEqual({ adopted: 3, already: 0, skipped: 1, conflict: 0, failed: 0 });
    expect(execCount()).toBe(before);
    for (const [n, ip] of [
      ['plain', '172.18.0.50'],
      ['with-qos', '172.18.0.51'],
      ['redone', '172.18.0.52'],
    ] as const) {
      const eip = await getEip(n);
      expect(await deps.ipam.findByOwner(eip.metadata.uid)).toEqual([
        {
          subnet: SUBNET,
          family: 4,
          address: ip,
          owner: { uid: eip.metadata.uid, name: n },
          placement: { gateway: 'gw1', prefix: 24 },
        },
      ]);
      expect(eip.status).toMatchObject({ ready: true, ip });
    }

    // The first run of the handlers afterwards: update (a bridge resync) and reset on every EIP, no exec at all.
    for (const n of ['plain', 'with-qos', 'redone']) {
      const u = await eipHandler('update', async () => deps)(event('update', n, 'resync'), {} as Context);
      expect(u.status, JSON.stringify(u)).toMatch(/^(applied|unchanged)$/);
      // Status conditions and metadata only: no allocation, no adoption, no gateway op.
      const actions = 'actions' in u ? (u.actions as string[]) : [];
      expect(actions.filter((a) => /^(eip-|qos |allocate|adopt)/.test(a))).toEqual([]);
      const r = await eipHandler('reset', async () => deps)(
        event('reset', n, 'nat-rule-changed'),
        {} as Context,
      );
      expect(r.status).toMatch(/^(applied|unchanged)$/);
    }
    expect(sim().history().slice(before)).toEqual([]);
    expect(sim().net1Addresses()).toEqual(net1);
    // A second update has nothing at all to do.
    expect(
      await eipHandler('update', async () => deps)(event('update', 'with-qos', 'resync'), {} as Context),
    ).toEqual({ status: 'unchanged', eip: 'with-qos' });

    // Adopting again changes nothing.
    const again = await adopt();
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/0 imported, 3 already imported, 1 skipped/);
    expect(execCount()).toBe(before);
    // Three runs of npm run adopt, each a new Node process that compiles the adapters with tsx: 4 s each alone.
  }, 90_000);

  it('leaves an address another owner holds alone, and exits 1 naming it', async () => {
    await kubeOvnMade('clash', '172.18.0.60');
    const pool = {
      subnet: SUBNET,
      family: 4 as const,
      cidr: '172.18.0.0/24',
      gateway: '172.18.0.1',
      exclude: [],
    };
    await deps.ipam.claimAddress(pool, '172.18.0.60', { uid: 'someone-else', name: 'other' });
    const r = await adopt();
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^conflict +clash 172\.18\.0\.60.* already allocated to other/m);
    expect((await deps.ipam.findByOwner('someone-else')).map((a) => a.address)).toEqual(['172.18.0.60']);
    expect(await deps.ipam.findByOwner((await getEip('clash')).metadata.uid)).toEqual([]);
  });

  it('does not stamp the redo token when the gateway may have lost the address (kube-ovn never redid it)', async () => {
    // A token that is neither empty nor the current pod's creation time: the pod was re-created since.
    await kubeOvnMade('stale', '172.18.0.70', { redo: '2020-01-01T00:00:00' });
    const r = await adopt('--json');
    const stale = (
      JSON.parse(r.stdout) as { eips: { eip: string; status: string; redo?: string; reason?: string }[] }
    ).eips.find((e) => e.eip === 'stale');
    expect(stale).toMatchObject({
      status: 'adopted',
      reason: expect.stringMatching(/may have been re-created/),
    });
    expect(stale?.redo).toBeUndefined();
    expect((await getEip('stale')).status?.redo).toBe('2020-01-01T00:00:00');
    // So the first update re-adds it: one eip-add, for this EIP only.
    const before = execCount();
    const u = await eipHandler('update', async () => deps)(event('update', 'stale', 'resync'), {} as Context);
    expect(u).toMatchObject({ status: 'applied' });
    expect(
      sim()
        .history()
        .slice(before)
        .map((x) => x.argv.join(' ')),
    ).toEqual([expect.stringMatching(/eip-add 172\.18\.0\.70\/24,172\.18\.0\.1$/)]);
  });
});

describe.skipIf(skip)('npm run invoke on the adopted cluster', { timeout: 120_000 }, () => {
  it('prints the outcome JSON alone on stdout and the handler logs on stderr', async () => {
    const file = join(dir, 'update-plain.json');
    writeFileSync(file, JSON.stringify(event('update', 'plain', 'resync')));
    const r = await run(
      process.execPath,
      [
        join(root, 'node_modules/tsx/dist/cli.mjs'),
        join(root, 'scripts/invoke.ts'),
        'update',
        file,
        '--kubeconfig',
        kubeconfig,
        '--table',
        TABLE,
        '--dynamodb-endpoint',
        dynamo.endpoint,
      ],
      { cwd: root, env: { ...process.env, KUBECONFIG: '', TABLE_NAME: '', LOG_LEVEL: 'info' } },
    );
    expect(JSON.parse(r.stdout)).toMatchObject({
      eip: 'plain',
      status: expect.stringMatching(/applied|unchanged/),
    });
    const logLines = r.stderr.split('\n').filter((l) => l.startsWith('{'));
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.map((l) => JSON.parse(l).message)).toContain('outcome');
  });
});
