/**
 * Running beside kube-ovn, end to end on the local lab (docs/adr/0030-coexistence-with-kube-ovn-controller.md): the
 * local Kubernetes API with the gateway and QoS stand-ins, dynalite, the product (bridge with the in-process sink,
 * the real handlers and adapters) and the lab's model of kube-ovn's own IptablesEIP controller
 * (local/controllers/kube-ovn-eip.ts).
 *
 * 1. Unmodified kube-ovn beside the product: both configure the same EIP, and the product says so.
 * 2. The supported migration: kube-ovn made EIPs Ready; its EIP workers go off; a dedicated range is set; `npm run
 *    adopt` imports the EIPs; the bridge starts and its first list sends every EIP to the handlers — and nothing runs
 *    in the gateway. A new EIP then gets an address from the range and is configured once; a re-created gateway pod
 *    (kube-ovn's re-initialisation asks for a redo) gets every address back.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { startStandIns } from '../../local/controllers/index.js';
import { startKubeOvnEipModel } from '../../local/controllers/kube-ovn-eip.js';
import { demoObjects } from '../../local/demo.js';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { kubeConfigFor } from '../../local/kube-api/testing.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { buildDeps } from '../../shared/adapters/live.js';
import { type Bridge, inProcessSink, startBridge } from '../../shared/bridge/index.js';
import { loadConfig } from '../../shared/config/config.js';
import type { Outcome } from '../../shared/core/outcome.js';
import { GROUP, type IptablesEip, Plural, VERSION } from '../../shared/domain/kube-ovn.js';
import type { EipEvent } from '../../shared/events.js';
import { TallyMetrics } from '../../shared/observability/metrics.js';
import type { Deps } from '../../shared/ports.js';
import { PRODUCT_RETRIES, startDynamoFixture } from '../support/dynamo.js';
import { eventually, eventuallyValue } from '../support/eventually.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const NS = 'kube-system';
const POD = 'vpc-nat-gw-gw1-0';
const SUBNET = 'ovn-vpc-external-network';
const RANGE = '172.18.0.200..172.18.0.250';
const EIPS = { group: GROUP, version: VERSION, plural: Plural.eip } as const;

interface Lab {
  api: KubeApi;
  kc: KubeConfig;
  kubeconfig: string;
  endpoint: string;
  table: string;
  deps: Deps;
  custom: CustomObjectsApi;
  /** Every command the gateway pod of gw1 ran, in order (the simulator records each exec). */
  execs(): string[];
  net1(): string[];
  eip(name: string): Promise<IptablesEip | undefined>;
  create(name: string): Promise<void>;
  model(mode: 'workers-on' | 'workers-off'): Promise<void>;
  stopModel(): Promise<void>;
  bridge(): Promise<{
    bridge: Bridge;
    metrics: TallyMetrics;
    log: ReturnType<typeof memoryLogger>;
    outcomes: Outcome[];
  }>;
  close(): Promise<void>;
}

async function lab(name: string): Promise<Lab> {
  const stops: (() => Promise<unknown>)[] = [];
  const dir = mkdtempSync(join(tmpdir(), `coexistence-${name}-`));
  stops.push(async () => rmSync(dir, { recursive: true, force: true }));
  const dynamo = await startDynamoFixture();
  stops.push(() => dynamo.close());
  const table = `coexistence-${name}`;
  const client = await dynamo.table(table, PRODUCT_RETRIES);
  const api = await startKubeApi();
  stops.push(() => api.close());
  const kubeconfig = join(dir, 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  const kc = kubeConfigFor(api);
  const objects = KubernetesObjectApi.makeApiClient(kc);
  for (const o of demoObjects(NS).filter((x) => x.kind !== 'IptablesEIP')) await objects.create(o);
  const standIns = await startStandIns({ kubeConfig: kc, namespace: NS });
  stops.push(() => standIns.stop());
  const deps = buildDeps(
    loadConfig({ KUBECONFIG: kubeconfig, TABLE_NAME: table, DYNAMODB_ENDPOINT: dynamo.endpoint }),
    {
      kubeConfig: kc,
      dynamo: client,
      log: memoryLogger('warn'),
    },
  );
  const custom = kc.makeApiClient(CustomObjectsApi);
  // Every gateway pod of gw1 the lab ever had (a re-created pod gets a fresh simulator).
  const sims: NonNullable<ReturnType<KubeApi['gateways']['get']>>[] = [];
  const sim = () => {
    const s = api.gateways.get(NS, POD);
    if (s && !sims.includes(s)) sims.push(s);
    if (!s) throw new Error('no gateway pod yet');
    return s;
  };
  await eventuallyValue(() => sim().initialised);
  let model: { stop(): Promise<void> } | undefined;
  const l: Lab = {
    api,
    kc,
    kubeconfig,
    endpoint: dynamo.endpoint,
    table,
    deps,
    custom,
    execs: () => {
      sim();
      return sims.flatMap((s) => s.history().map((r) => r.argv.join(' ')));
    },
    net1: () => sim().net1Addresses(),
    eip: async (n) =>
      (await custom.getClusterCustomObject({ ...EIPS, name: n }).catch(() => undefined)) as
        | IptablesEip
        | undefined,
    create: async (n) => {
      await custom.createClusterCustomObject({
        ...EIPS,
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'IptablesEIP',
          metadata: { name: n },
          spec: { natGwDp: 'gw1' },
        },
      });
    },
    model: async (mode) => {
      model = await startKubeOvnEipModel({ kubeConfig: kc, namespace: NS, mode, log: () => {} });
    },
    stopModel: async () => {
      await model?.stop();
      model = undefined;
    },
    bridge: async () => {
      const log = memoryLogger('info');
      const metrics = new TallyMetrics();
      const outcomes: Outcome[] = [];
      const sink = inProcessSink({
        getDeps: async () => deps,
        retries: 2,
        backoffMs: 100,
        retryForMs: 0,
        log,
        onOutcome: (_e: EipEvent, o: Outcome) => outcomes.push(o),
      });
      const bridge = await startBridge({
        kubeConfig: kc,
        namespace: NS,
        sink,
        log,
        metrics,
        resyncMs: 0,
        statsIntervalMs: 0,
        heartbeatMs: 0,
        requeueBackoffMs: 200,
        maxRequeueBackoffMs: 400,
      });
      stops.push(() => bridge.drain(5_000));
      await bridge.ready();
      return { bridge, metrics, log, outcomes };
    },
    close: async () => {
      await model?.stop().catch(() => undefined);
      for (const s of stops.reverse()) await s().catch(() => undefined);
    },
  };
  return l;
}

const readyWith = (l: Lab, n: string, ip?: RegExp) =>
  eventuallyValue(
    async () => {
      const e = await l.eip(n);
      return e?.status?.ready && e.status.ip && (!ip || ip.test(e.status.ip)) ? e : undefined;
    },
    { timeoutMs: 30_000 },
  );

describe('beside kube-ovn (local lab with the model of its EIP controller)', { timeout: 180_000 }, () => {
  it('unmodified kube-ovn and the product both configure an EIP; the product reports the other writer', async () => {
    const l = await lab('conflict');
    try {
      await l.model('workers-on');
      const { bridge, metrics, log } = await l.bridge();
      const before = l.execs().filter((c) => c.includes(' eip-add ')).length;
      await l.create('contested');
      await eventually(() => expect(bridge.stats().foreignWrites['kube-ovn-controller']).toBeGreaterThan(0), {
        timeoutMs: 30_000,
      });
      expect(metrics.total('ForeignWriter')).toBeGreaterThan(0);
      expect(
        log.lines.some(
          (x) =>
            x.message === 'another controller writes this EIP; leaving it alone' &&
            x.manager === 'kube-ovn-controller',
        ),
      ).toBe(true);
      // The conflict itself: two controllers, two eip-add runs in one gateway for one EIP.
      await eventually(
        () =>
          expect(l.execs().filter((c) => c.includes(' eip-add ')).length - before).toBeGreaterThanOrEqual(2),
        { timeoutMs: 30_000 },
      );
    } finally {
      await l.close();
    }
  });

  it('migration: workers off, dedicated range, adopt, then the product runs nothing in the gateway for adopted EIPs', async () => {
    const l = await lab('migration');
    try {
      // kube-ovn alone made these Ready (its own IPAM and eip-add).
      await l.model('workers-on');
      for (const n of ['ko-a', 'ko-b']) await l.create(n);
      const made = await Promise.all(['ko-a', 'ko-b'].map((n) => readyWith(l, n)));
      const addresses = made.map((e) => e.status!.ip!);
      for (const a of addresses) expect(l.net1()).toContainEqual(expect.stringMatching(new RegExp(`^${a}/`)));

      // The switch: kube-ovn-controller restarted with its EIP workers off; the subnet gets its dedicated range.
      await l.stopModel();
      await l.model('workers-off');
      await l.custom.patchClusterCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: Plural.subnet,
          name: SUBNET,
          body: [
            { op: 'add', path: '/metadata/annotations', value: { 'eip-lambdas.io/eip-range': RANGE } },
            { op: 'add', path: '/spec/excludeIps/-', value: RANGE },
          ],
        },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );

      const execsBefore = l.execs().length;
      const adopt = await run(
        process.execPath,
        [
          join(root, 'node_modules/tsx/dist/cli.mjs'),
          join(root, 'scripts/adopt.ts'),
          '--kubeconfig',
          l.kubeconfig,
          '--table',
          l.table,
          '--dynamodb-endpoint',
          l.endpoint,
        ],
        { cwd: root, env: { ...process.env, KUBECONFIG: '', TABLE_NAME: '', DYNAMODB_ENDPOINT: '' } },
      );
      expect(adopt.stdout).toMatch(/2 imported, 0 already imported, 0 skipped, 0 in conflict, 0 failed/);

      // The product starts: the bridge's first list sends every EIP to the handlers.
      const { bridge, outcomes } = await l.bridge();
      await eventually(() => expect(outcomes.length).toBeGreaterThanOrEqual(2), { timeoutMs: 30_000 });
      await bridge.idle();
      expect(l.execs().slice(execsBefore)).toEqual([]);
      for (const [i, n] of ['ko-a', 'ko-b'].entries()) {
        const e = (await l.eip(n))!;
        expect(e.status).toMatchObject({ ready: true, ip: addresses[i] });
        expect((await l.deps.ipam.findByOwner(e.metadata.uid)).map((a) => [a.address, a.placement])).toEqual([
          // The placement records the QoS the address was configured with (none here), as every placement does.
          [addresses[i], { gateway: 'gw1', prefix: 24, qos: '' }],
        ]);
      }

      // A new EIP: the product alone configures it, from the dedicated range, with one eip-add.
      await l.create('new');
      const fresh = await readyWith(l, 'new', /^172\.18\.0\.(2[0-4]\d|250)$/);
      const added = l
        .execs()
        .slice(execsBefore)
        .filter((c) => c.includes(' eip-add '));
      // The lab's release's form (1.12: `<ip>/<len>,<gw>`; 1.13+: `<ip>/<len>`).
      expect(added).toEqual([expect.stringMatching(new RegExp(` eip-add ${fresh.status!.ip}/24(,|$)`))]);
      const writers = (fresh.metadata as { managedFields?: { manager: string }[] }).managedFields ?? [];
      expect(writers.map((m) => m.manager)).not.toContain('kube-ovn-controller');

      // kube-ovn re-initialises a re-created gateway pod and asks for a redo; the product puts every address back.
      await l.kc.makeApiClient(CoreV1Api).deleteNamespacedPod({ namespace: NS, name: POD });
      const all = [...addresses, fresh.status!.ip!];
      await eventually(
        () => {
          const net1 = l.net1();
          for (const a of all)
            expect(net1).toContainEqual(expect.stringMatching(new RegExp(`^${a.replaceAll('.', '\\.')}/`)));
        },
        { timeoutMs: 60_000 },
      );
    } finally {
      await l.close();
    }
  });
});

describe('npm run adopt against the running local stack (its EIP workers off)', { timeout: 120_000 }, () => {
  it('finds the stack by its stack file, and reports what the product configured itself as already imported', async () => {
    const { startLocalStack } = await import('../../local/stack.js');
    const dir = mkdtempSync(join(tmpdir(), 'coexistence-stack-'));
    const stack = await startLocalStack({
      kubeconfig: join(dir, 'kubeconfig'),
      stackFile: join(dir, 'stack.json'),
      kubeOvnEipController: 'workers-off',
      log: memoryLogger('error'),
      say: () => {},
    });
    try {
      const kc = kubeConfigFor(stack.api);
      const custom = kc.makeApiClient(CustomObjectsApi);
      await eventuallyValue(
        async () => {
          const e = (await custom.getClusterCustomObject({ ...EIPS, name: 'demo-eip' })) as IptablesEip;
          return e.status?.ready;
        },
        { timeoutMs: 30_000 },
      );
      const r = await run(
        process.execPath,
        [
          join(root, 'node_modules/tsx/dist/cli.mjs'),
          join(root, 'scripts/adopt.ts'),
          '--dry-run',
          '--stack',
          join(dir, 'stack.json'),
        ],
        { cwd: root, env: { ...process.env, KUBECONFIG: '', TABLE_NAME: '', DYNAMODB_ENDPOINT: '' } },
      );
      expect(r.stderr).toContain(`dry run against ${join(dir, 'kubeconfig')}`);
      expect(r.stdout).toMatch(/^already +demo-eip 172\.18\.0\.\d+\/24 on gw1/m);
      expect(r.stdout).toMatch(/dry run: 0 would import, 1 already imported/);
    } finally {
      await stack.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
