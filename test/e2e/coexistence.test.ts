/**
 * Beside an unmodified kube-ovn, end to end on the local lab (docs/adr/0095-kube-ovn-fenced-by-admission-policies.md):
 * the local Kubernetes API enforcing RBAC and ValidatingAdmissionPolicies, each component as its own identity
 * (local/identities.ts), the fence of infra/kube-ovn-fence applied, dynalite, the product (bridge with the in-process
 * sink, the real handlers and adapters) and the lab's model of an unmodified kube-ovn-controller
 * (local/controllers/kube-ovn-eip.ts, ADR 0097) running as kube-ovn's ServiceAccount.
 *
 * 1. The burst, per kube-ovn release (1.12, 1.16 and master, 100 EIPs each, by default; every release and 200 EIPs
 *    with EIP_LONG=1; COEXIST_BURST sets the number): EIPs created at once (the 20 static ones a moment before the
 *    random ones; some with QoS), kube-ovn restarted mid-burst, FIPs on some of them, a QoS change, a gateway
 *    container restart, a gateway pod re-created, everything deleted. Nothing configured by kube-ovn, nothing removed
 *    wrongly, no field flapping, kube-ovn's FIP work done, the audit clean, and kube-ovn's cost measured (printed at
 *    the end).
 * 2. The bridge refuses to start when the dedicated range is not in the subnet's excludeIps (ADR 0096).
 * 3. Migration both ways, per release as in 1: kube-ovn alone made EIPs Ready; fence, range, `npm run adopt`,
 *    bridge; then hand-back: bridge stopped, fence removed, kube-ovn restarted — it takes over from status.
 *
 * How long, on a shared two-core machine under load: the defaults 1 to 3 minutes, EIP_LONG=1 8 to 10 (the numbers
 * it measures: ADR 0095, "Costs and limits").
 *
 * The gateway pods run the model's release, as in a cluster (what the fence sees differs per release: command form,
 * eip-add rule, finalizer, start-up migration; what the product sends to the gateway too, shared/domain/dialect).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import {
  CoreV1Api,
  CustomObjectsApi,
  Exec,
  type KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { startStandIns } from '../../local/controllers/index.js';
import type { RequestRecord } from '../../local/controllers/kube-ovn-client.js';
import { type KubeOvnEipModel, startKubeOvnEipModel } from '../../local/controllers/kube-ovn-eip.js';
import { Watched } from '../../local/controllers/runtime.js';
import { demoObjects } from '../../local/demo.js';
import { type KubeApi, type KubeApiOptions, startKubeApi } from '../../local/kube-api/index.js';
import { kubeConfigFor } from '../../local/kube-api/testing.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { DEFAULT_RELEASE, KUBE_OVN_RELEASES, type KubeOvnRelease } from '../../local/natgw/releases.js';
import { buildDeps } from '../../shared/adapters/live.js';
import { runAudit } from '../../shared/audit/audit.js';
import { auditDepsOf } from '../../shared/audit/live.js';
import { type Bridge, inProcessSink, startBridge } from '../../shared/bridge/index.js';
import { loadConfig } from '../../shared/config/config.js';
import type { Outcome } from '../../shared/core/outcome.js';
import { GROUP, type IptablesEip, Plural, VERSION } from '../../shared/domain/kube-ovn.js';
import type { Deps } from '../../shared/ports.js';
import { PRODUCT_RETRIES, startDynamoFixture } from '../support/dynamo.js';
import { eventually, eventuallyValue } from '../support/eventually.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const NS = 'kube-system';
const POD = 'vpc-nat-gw-gw1-0';
const SUBNET = 'ovn-vpc-external-network';
// The burst's subnet: 172.18.0.0/23, the product's range 172.18.0.100–172.18.1.99 (256 addresses) in excludeIps from
// the start; kube-ovn's part is .11–.99 and 172.18.1.100–.253 (the gateway pod's own address is the highest).
const WIDE = { cidr: '172.18.0.0/23', range: '172.18.0.100..172.18.1.99' };
// The migration's: the demo's 172.18.0.0/24, a range set only at the switch, below the gateway pod's .254.
const RANGE = '172.18.0.100..172.18.0.200';
const EIPS = { group: GROUP, version: VERSION, plural: Plural.eip } as const;
const FIPS = { group: GROUP, version: VERSION, plural: Plural.fip } as const;
const LONG = process.env.EIP_LONG === '1';
const RELEASES: readonly KubeOvnRelease[] = LONG ? KUBE_OVN_RELEASES : ['1.12', '1.16', 'master'];
const BURST = Number(process.env.COEXIST_BURST ?? (LONG ? 200 : 100));
if (!LONG)
  console.log(
    `coexistence.test.ts: kube-ovn ${RELEASES.join(', ')}, ${BURST} EIPs each (EIP_LONG=1: all six releases, 200 EIPs each)`,
  );

/**
 * The fence needs a local API that authenticates each component and evaluates ValidatingAdmissionPolicies, and the
 * lab's identities (local/identities.ts, local/kube-api/admission.ts). Without them the fenced tests are skipped.
 */
const ENFORCED =
  existsSync(join(root, 'local/identities.ts')) && existsSync(join(root, 'local/kube-api/admission.ts'));
if (!ENFORCED)
  console.log(
    'coexistence: the fenced tests are skipped: this local API does not authenticate components or evaluate admission policies (local/identities.ts, local/kube-api/admission.ts missing)',
  );
type Manifest = { apiVersion: string; kind: string; metadata: { name: string } } & Record<string, unknown>;
interface Identities {
  componentTokens(): Record<'handlers' | 'bridge' | 'kube-ovn', { token: string }>;
  labManifests(): { docs: Manifest[] };
  renderKustomization(dir: string): { docs: Manifest[] };
}
const identities = async (): Promise<Identities> =>
  import(join(root, 'local/identities.ts')) as Promise<Identities>;
/** kubeConfigFor(api, token) where the local API knows tokens; the administrator's otherwise. */
const configFor = kubeConfigFor as (api: KubeApi, token?: string) => KubeConfig;
const JSON_PATCH = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

type Fields = { ready: string; ip: string; nat: string; qos: string; labels: string; finalizers: string };

/** Every value each EIP's fields took, in order, as an administrator's watch saw them. */
class History {
  readonly seen = new Map<string, Fields[]>();
  record(e: IptablesEip): void {
    const f: Fields = {
      ready: String(e.status?.ready ?? false),
      ip: e.status?.ip ?? '',
      nat: e.status?.nat ?? '',
      qos: e.status?.qosPolicy ?? '',
      labels: JSON.stringify(Object.entries(e.metadata.labels ?? {}).sort()),
      finalizers: JSON.stringify([...(e.metadata.finalizers ?? [])].sort()),
    };
    const list = this.seen.get(e.metadata.name) ?? [];
    const last = list.at(-1);
    if (!last || (Object.keys(f) as (keyof Fields)[]).some((k) => last[k] !== f[k])) list.push(f);
    this.seen.set(e.metadata.name, list);
  }
  /** How often a field came back to a value it had left (A → B → A): flapping. */
  returns(name: string, k: keyof Fields): number {
    const values = (this.seen.get(name) ?? [])
      .map((f) => f[k])
      .filter((v, i, a) => i === 0 || v !== a[i - 1]);
    return values.filter((v, i) => values.indexOf(v) < i).length;
  }
  changes(name: string, k: keyof Fields): number {
    const values = (this.seen.get(name) ?? []).map((f) => f[k]);
    return values.filter((v, i) => i > 0 && v !== values[i - 1]).length;
  }
}

interface Lab {
  api: KubeApi;
  admin: KubeConfig;
  kubeOvn: KubeConfig;
  kubeconfig: string;
  endpoint: string;
  table: string;
  deps: Deps;
  custom: CustomObjectsApi;
  history: History;
  eip(name: string): Promise<IptablesEip | undefined>;
  net1(): string[];
  model(release: KubeOvnRelease): Promise<KubeOvnEipModel>;
  stopModel(): Promise<void>;
  bridge(check?: 'refuse' | 'warn'): Promise<{ bridge: Bridge; outcomes: Outcome[] }>;
  stopBridge(): Promise<void>;
  fence(on: boolean): Promise<void>;
  range(): Promise<void>;
  close(): Promise<void>;
}

async function applyDocs(kc: KubeConfig, docs: readonly Manifest[]): Promise<void> {
  const client = KubernetesObjectApi.makeApiClient(kc);
  for (const d of docs) await client.create(d as never);
}

async function lab(name: string, release: KubeOvnRelease, wide = false): Promise<Lab> {
  const stops: (() => Promise<unknown>)[] = [];
  const dir = mkdtempSync(join(tmpdir(), `coexistence-${name}-`));
  stops.push(async () => rmSync(dir, { recursive: true, force: true }));
  const dynamo = await startDynamoFixture();
  stops.push(() => dynamo.close());
  const table = `coexistence-${name}`;
  const client = await dynamo.table(table, PRODUCT_RETRIES);
  const ids = ENFORCED ? await identities() : undefined;
  const tokens = ids?.componentTokens();
  // The component tokens as local/identities.ts gives them (the local API's StaticToken), where it exists.
  const api = await startKubeApi({
    kubeOvnRelease: release,
    ...({ tokens: Object.values(tokens ?? {}) } as unknown as KubeApiOptions),
  });
  stops.push(() => api.close());
  const admin = kubeConfigFor(api);
  const as = (c: 'handlers' | 'bridge' | 'kube-ovn') => (tokens ? configFor(api, tokens[c].token) : admin);
  if (ids) await applyDocs(admin, ids.labManifests().docs);
  const objects = KubernetesObjectApi.makeApiClient(admin);
  for (const o of demoObjects(NS, release).filter((x) => x.kind !== 'IptablesEIP')) {
    if (wide && o.kind === 'Subnet' && o.metadata.name === SUBNET)
      Object.assign(o, {
        metadata: { ...o.metadata, annotations: { 'eip-lambdas.io/eip-range': WIDE.range } },
        spec: { ...o.spec, cidrBlock: WIDE.cidr, excludeIps: ['172.18.0.1..172.18.0.10', WIDE.range] },
      });
    await objects.create(o);
  }
  const kubeOvn = as('kube-ovn');
  const standIns = await startStandIns({ kubeConfig: kubeOvn, namespace: NS, featureSwitch: true, release });
  stops.push(() => standIns.stop());
  const kubeconfig = join(dir, 'kubeconfig');
  await api.writeKubeconfig(kubeconfig);
  const handlersConfig = join(dir, 'kubeconfig-handlers');
  await (api.writeKubeconfig as (p: string, token?: string) => Promise<void>)(
    handlersConfig,
    tokens?.handlers.token,
  );
  const deps = buildDeps(
    loadConfig({ KUBECONFIG: handlersConfig, TABLE_NAME: table, DYNAMODB_ENDPOINT: dynamo.endpoint }),
    { kubeConfig: as('handlers'), dynamo: client, log: memoryLogger('warn') },
  );
  const custom = admin.makeApiClient(CustomObjectsApi);
  const history = new History();
  const watch = new Watched<IptablesEip>({
    kubeConfig: admin,
    path: `/apis/${GROUP}/${VERSION}/${Plural.eip}`,
    list: () => custom.listClusterCustomObject(EIPS) as never,
    onChange: (e, kind) => kind !== 'delete' && history.record(e),
    log: () => {},
    name: 'coexistence history',
  });
  await watch.start();
  stops.push(() => watch.stop());
  const sim = () => {
    const s = api.gateways.get(NS, POD);
    if (!s) throw new Error('no gateway pod yet');
    return s;
  };
  await eventuallyValue(() => sim().initialised);
  let model: KubeOvnEipModel | undefined;
  let bridge: Bridge | undefined;
  const fenceDocs = ids?.renderKustomization(join(root, 'infra/kube-ovn-fence')).docs ?? [];
  const l: Lab = {
    api,
    admin,
    kubeOvn,
    kubeconfig,
    endpoint: dynamo.endpoint,
    table,
    deps,
    custom,
    history,
    eip: async (n) =>
      (await custom.getClusterCustomObject({ ...EIPS, name: n }).catch(() => undefined)) as
        | IptablesEip
        | undefined,
    net1: () => sim().net1Addresses(),
    model: async (release) => {
      model = await startKubeOvnEipModel({ kubeConfig: kubeOvn, namespace: NS, release, log: () => {} });
      return model;
    },
    stopModel: async () => {
      await model?.stop();
      model = undefined;
    },
    bridge: async (check = 'refuse') => {
      const outcomes: Outcome[] = [];
      const log = memoryLogger('warn');
      const sink = inProcessSink({
        getDeps: async () => deps,
        retries: 2,
        backoffMs: 100,
        retryForMs: 0,
        log,
        onOutcome: (_e, o) => outcomes.push(o),
      });
      bridge = await startBridge({
        kubeConfig: as('bridge'),
        namespace: NS,
        sink,
        log,
        resyncMs: 0,
        statsIntervalMs: 0,
        heartbeatMs: 0,
        requeueBackoffMs: 200,
        maxRequeueBackoffMs: 400,
        coexistenceCheck: check,
      });
      await bridge.ready();
      return { bridge, outcomes };
    },
    stopBridge: async () => {
      await bridge?.drain(5_000);
      bridge = undefined;
    },
    fence: async (on) => {
      const client = KubernetesObjectApi.makeApiClient(admin);
      for (const d of fenceDocs) {
        if (on) await client.create(d as never);
        else await client.delete(d as never);
      }
    },
    range: async () => {
      await custom.patchClusterCustomObject(
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
        JSON_PATCH,
      );
    },
    close: async () => {
      await bridge?.drain(5_000).catch(() => undefined);
      await model?.stop().catch(() => undefined);
      for (const s of stops.reverse()) await s().catch(() => undefined);
    },
  };
  return l;
}

const value = (ip: string | undefined) => {
  const [a = 0, b = 0, c = 0, d = 0] = (ip ?? '').split('.').map(Number);
  return ((a * 256 + b) * 256 + c) * 256 + d;
};
const between = (ip: string | undefined, range: string) => {
  const [lo, hi] = range.split('..');
  return !!ip && value(ip) >= value(lo) && value(ip) <= value(hi);
};
const inRange = (ip: string | undefined) => between(ip, RANGE);
const inWide = (ip: string | undefined) => between(ip, WIDE.range);

async function createEip(l: Lab, name: string, spec: Record<string, string>): Promise<void> {
  await l.custom.createClusterCustomObject({
    ...EIPS,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'IptablesEIP',
      metadata: { name },
      spec: { natGwDp: 'gw1', ...spec },
    },
  });
}

async function allReady(l: Lab, names: readonly string[], timeoutMs: number): Promise<IptablesEip[]> {
  return eventuallyValue(
    async () => {
      const list = (await l.custom.listClusterCustomObject(EIPS)) as { items: IptablesEip[] };
      const by = new Map(list.items.map((e) => [e.metadata.name, e]));
      const ready = names.map((n) => by.get(n)).filter((e) => e?.status?.ready && e.status.ip);
      return ready.length === names.length ? (ready as IptablesEip[]) : undefined;
    },
    { timeoutMs },
  );
}

async function execAsAdmin(l: Lab, argv: string[]): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    new Exec(l.admin)
      .exec(NS, POD, 'vpc-nat-gw', argv, new PassThrough(), new PassThrough(), null, false, () => resolve())
      .catch(reject);
  });
}

/** kube-ovn's requests about the burst's EIPs, per EIP and outcome. */
function costOf(requests: readonly RequestRecord[], names: ReadonlySet<string>) {
  const per = new Map<string, { sent: number; denied: number; ok: number }>();
  for (const r of requests) {
    if (!names.has(r.object)) continue;
    const c = per.get(r.object) ?? { sent: 0, denied: 0, ok: 0 };
    c.sent++;
    if (r.outcome === 'denied') c.denied++;
    if (r.outcome === 'ok') c.ok++;
    per.set(r.object, c);
  }
  const values = [...per.values()];
  const max = (k: 'sent' | 'denied') => Math.max(0, ...values.map((v) => v[k]));
  const sum = (k: 'sent' | 'denied') => values.reduce((n, v) => n + v[k], 0);
  return {
    eips: per.size,
    sent: sum('sent'),
    denied: sum('denied'),
    maxSent: max('sent'),
    maxDenied: max('denied'),
  };
}

/** kube-ovn's error lines by kind (names, addresses and times left out): count and a first example of each. */
function errorKinds(lines: readonly string[]): string {
  const kinds = new Map<string, { n: number; example: string }>();
  for (const l of lines) {
    const kind = l
      .replace(/\b[bf]-?\d+\b|\bfip-\d+\b/g, '<name>')
      .replace(/\d+\.\d+\.\d+\.\d+(\/\d+)?/g, '<ip>')
      .replace(/\d{4}-\d\d-\d\dT[\d:]+Z?/g, '<time>');
    const k = kinds.get(kind) ?? { n: 0, example: l.slice(0, 300) };
    k.n++;
    kinds.set(kind, k);
  }
  return [...kinds.values()]
    .sort((a, b) => b.n - a.n)
    .map((k) => `\n      ${k.n}× ${k.example}`)
    .join('');
}

const measured: string[] = [];
afterAll(() => {
  if (measured.length) console.log(`kube-ovn's cost beside the fenced product:\n${measured.join('\n')}`);
});

describe.each(RELEASES)('beside a fenced, unmodified kube-ovn %s', (release) => {
  it.skipIf(!ENFORCED)(
    `${BURST} EIPs at once, kube-ovn restarted mid-burst, FIPs, a QoS change, a container restart, a re-created gateway pod, all deleted`,
    {
      timeout: 600_000,
    },
    // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: one scenario, its steps in the order they happen
    async () => {
      const l = await lab(`burst-${release}`, release, true);
      try {
        await l.fence(true);
        // A second shared policy to move EIPs to.
        await l.custom.createClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: Plural.qos,
          body: {
            apiVersion: `${GROUP}/${VERSION}`,
            kind: 'QoSPolicy',
            metadata: { name: 'qos-other' },
            spec: {
              shared: true,
              bindingType: 'EIP',
              bandwidthLimitRules: [
                { name: 'ingress', direction: 'ingress', priority: 1, rateMax: '5', burstMax: '5' },
              ],
            },
          },
        });
        let model = await l.model(release);
        await l.bridge();

        // The burst: static addresses from the top of the range, some EIPs with the shared QoS policy. The static ones
        // go first, all at once, and the random ones follow at once as soon as the static ones hold their addresses:
        // a random allocation may take an address that a static EIP created at the same moment asks for (first come,
        // first served, kube-ovn's rule too; that EIP then says AddressConflict), which is not what this is about.
        const names = Array.from({ length: BURST }, (_, i) => `b-${String(i).padStart(3, '0')}`);
        const statics = new Map(names.slice(0, 20).map((n, i) => [n, `172.18.1.${99 - i}`]));
        const withQos = new Set(names.filter((_, i) => i % 10 === 5));
        const t0 = Date.now();
        const marks: [string, number][] = [['create', t0]];
        const step = (what: string) => marks.push([what, Date.now()]);
        const create = (n: string) =>
          createEip(l, n, {
            ...(statics.has(n) && { v4ip: statics.get(n)! }),
            ...(withQos.has(n) && { qosPolicy: 'qos-demo' }),
          });
        await Promise.all([...statics.keys()].map(create));
        await allReady(l, [...statics.keys()], 120_000);
        await Promise.all(names.filter((n) => !statics.has(n)).map(create));
        // kube-ovn-controller restarts while the product is still at it: its IPAM is rebuilt from status.ip.
        await eventually(async () => {
          const list = (await l.custom.listClusterCustomObject(EIPS)) as { items: IptablesEip[] };
          expect(
            list.items.filter((e) => e.status?.ready && !statics.has(e.metadata.name)).length,
          ).toBeGreaterThan(20);
        });
        const beforeRestart = [...model.requests()];
        const errorsBeforeRestart = [...model.errors()];
        const heldBeforeRestart = (model.ipam()[SUBNET] ?? []).filter(
          (a) => !a.reserved && names.includes(a.owner),
        ).length;
        const readyAtRestart = (
          (await l.custom.listClusterCustomObject(EIPS)) as { items: IptablesEip[] }
        ).items.filter((e) => e.status?.ready).length;
        step('kube-ovn restarted');
        await l.stopModel();
        model = await l.model(release);
        const ready = await allReady(l, names, 240_000);
        const burstMs = Date.now() - t0;
        step('burst ready');
        for (const e of ready) {
          expect(inWide(e.status?.ip), `${e.metadata.name} ${e.status?.ip}`).toBe(true);
          if (statics.has(e.metadata.name)) expect(e.status?.ip).toBe(statics.get(e.metadata.name));
        }
        expect(new Set(ready.map((e) => e.status?.ip)).size).toBe(BURST);
        await eventually(() => {
          const net1 = l.net1();
          for (const e of ready) expect(net1).toContain(`${e.status?.ip}/23`);
        });

        // kube-ovn's NAT work on them: FIPs on five EIPs, configured by kube-ovn (the product does not do FIPs).
        const fipEips = names.slice(30, 35);
        for (const [i, eip] of fipEips.entries())
          await l.custom.createClusterCustomObject({
            ...FIPS,
            body: {
              apiVersion: `${GROUP}/${VERSION}`,
              kind: 'IptablesFIPRule',
              metadata: { name: `fip-${i}` },
              spec: { eip, internalIp: `10.0.1.${20 + i}` },
            },
          });
        const fipReady = async (redo?: string) =>
          eventuallyValue(
            async () => {
              const list = (await l.custom.listClusterCustomObject(FIPS)) as {
                items: {
                  metadata: { name: string };
                  status?: { ready?: boolean; v4ip?: string; redo?: string };
                }[];
              };
              const ok = list.items.filter(
                (f) => f.status?.ready && f.status.v4ip && (!redo || f.status.redo === redo),
              );
              return ok.length === fipEips.length ? ok : undefined;
            },
            { timeoutMs: 60_000 },
          );
        const fips = await fipReady();
        step('fips ready');
        for (const f of fips) expect(inWide(f.status?.v4ip)).toBe(true);
        // status.nat is the product's: every FIP's EIP says `fip`.
        await eventually(async () => {
          for (const n of fipEips) expect((await l.eip(n))?.status?.nat).toBe('fip');
        });

        // A QoS change: ten EIPs move from qos-demo to qos-other.
        const moved = [...withQos].slice(0, 10);
        for (const n of moved)
          await l.custom.patchClusterCustomObject(
            { ...EIPS, name: n, body: { spec: { qosPolicy: 'qos-other' } } },
            MERGE,
          );
        await eventually(
          async () => {
            for (const n of moved) expect((await l.eip(n))?.status?.qosPolicy).toBe('qos-other');
          },
          { timeoutMs: 60_000 },
        );

        // A container restart (state lost, same pod), then the pod deleted (a new pod: kube-ovn's redo request).
        const sim0 = l.api.gateways.get(NS, POD)!;
        const restarts = sim0.restarts;
        await execAsAdmin(l, ['kill', '1']);
        step('kill sent');
        await eventually(() => expect(l.api.gateways.get(NS, POD)?.restarts).toBeGreaterThan(restarts));
        await eventually(
          () => {
            const net1 = l.net1();
            for (const e of ready) expect(net1).toContain(`${e.status?.ip}/23`);
          },
          { timeoutMs: 120_000 },
        );
        const core = l.admin.makeApiClient(CoreV1Api);
        const oldUid = (await core.readNamespacedPod({ namespace: NS, name: POD })).metadata?.uid;
        await core.deleteNamespacedPod({ namespace: NS, name: POD });
        step('pod deleted');
        const pod = await eventuallyValue(async () => {
          const p = await core.readNamespacedPod({ namespace: NS, name: POD }).catch(() => undefined);
          return p && p.metadata?.uid !== oldUid && p.status?.phase === 'Running' ? p : undefined;
        });
        await eventually(
          () => {
            const net1 = l.net1();
            for (const e of ready) expect(net1).toContain(`${e.status?.ip}/23`);
          },
          { timeoutMs: 180_000 },
        );
        await allReady(l, names, 120_000);
        // kube-ovn redid its FIPs on the new pod (its token is the new pod's creation time).
        const token = new Date(pod.metadata!.creationTimestamp!).toISOString().slice(0, 19);
        await fipReady(token);
        const gwRuns = l.api.gateways
          .get(NS, POD)!
          .history()
          .map((r) => r.argv.join(' '));
        expect(gwRuns.filter((c) => c.includes(' floating-ip-add ')).length).toBeGreaterThanOrEqual(
          fipEips.length,
        );

        // The audit finds the gateway, the table and the cluster in agreement.
        const config = loadConfig({
          KUBECONFIG: l.kubeconfig,
          TABLE_NAME: l.table,
          DYNAMODB_ENDPOINT: l.endpoint,
        });
        const report = await runAudit(auditDepsOf(config, l.deps, { kubeConfig: l.admin }));
        step('audit');
        expect(report.drift).toEqual([]);

        // Everything deleted: FIPs first (an EIP's deletion waits for its rules), then the EIPs.
        step('delete');
        for (let i = 0; i < fipEips.length; i++)
          await l.custom.deleteClusterCustomObject({ ...FIPS, name: `fip-${i}` });
        await Promise.all(names.map((n) => l.custom.deleteClusterCustomObject({ ...EIPS, name: n })));
        await eventuallyValue(
          async () =>
            ((await l.custom.listClusterCustomObject(EIPS)) as { items: unknown[] }).items.length === 0,
          { timeoutMs: 240_000 },
        );
        await eventually(() => expect(l.net1().filter((a) => inWide(a.split('/')[0]))).toEqual([]), {
          timeoutMs: 60_000,
        });

        // Nothing kube-ovn sent to configure an EIP went through, before or after its restart.
        step('deleted');
        const all = [...beforeRestart, ...model.requests()];
        const eipOps = all.filter((r) => r.kind.startsWith('exec eip-'));
        expect(eipOps.filter((r) => r.outcome !== 'denied')).toEqual([]);
        // Its writes that were admitted: only redo requests, its legacy finalizer, and what it writes on FIPs.
        const admittedEipWrites = all.filter(
          (r) =>
            ['status', 'labels', 'spec'].includes(r.kind) && r.outcome === 'ok' && names.includes(r.object),
        );
        expect(admittedEipWrites.every((r) => r.kind === 'status')).toBe(true);
        for (const kind of ['fip-status', 'exec floating-ip-add'])
          expect(all.some((r) => r.kind === kind && r.outcome === 'ok')).toBe(true);

        // No flapping: an address is set once; no field went back to a value it had left, except `ready` and the
        // finalizers through the two gateway events and the deletion (false → true → false (redo) → true).
        for (const n of names) {
          expect(l.history.changes(n, 'ip'), n).toBeLessThanOrEqual(1);
          expect(l.history.returns(n, 'labels'), n).toBe(0);
          expect(l.history.returns(n, 'nat'), n).toBeLessThanOrEqual(fipEips.includes(n) ? 1 : 0);
          expect(l.history.returns(n, 'ready'), n).toBeLessThanOrEqual(2);
          expect(
            l.history.returns(n, 'finalizers'),
            `${n}: ${(l.history.seen.get(n) ?? []).map((f) => `${f.finalizers} ready=${f.ready}`).join(' → ')}`,
          ).toBeLessThanOrEqual(1);
        }

        // What it cost kube-ovn, and that it ends: no retry left once everything is gone.
        await eventually(() => expect(model.pendingRetries()).toBe(0), { timeoutMs: 60_000 });
        const cost = costOf(all, new Set(names));
        const at = (what: string) => marks.find(([w]) => w === what)?.[1] ?? 0;
        const phase = (from: string, to: string) => {
          const rs = all.filter(
            (r) => names.includes(r.object) && r.at >= at(from) && r.at < (to ? at(to) : Infinity),
          );
          return `${rs.length} sent, ${rs.filter((r) => r.outcome === 'denied').length} refused`;
        };
        const held = (model.ipam()[SUBNET] ?? []).filter((a) => !a.reserved).length;
        const errorLines = [...errorsBeforeRestart, ...model.errors()];
        measured.push(
          `  ${release}: ${BURST} EIPs Ready in ${burstMs} ms. kube-ovn sent ${cost.sent} requests about them ` +
            `(${(cost.sent / BURST).toFixed(1)} per EIP, at most ${cost.maxSent} for one), ${cost.denied} refused ` +
            `(${(cost.denied / BURST).toFixed(1)} per EIP, at most ${cost.maxDenied}); by phase: burst ` +
            `${phase('create', 'burst ready')}, FIPs and QoS change ${phase('burst ready', 'kill sent')}, container ` +
            `restart ${phase('kill sent', 'pod deleted')}, new gateway pod ${phase('pod deleted', 'audit')}, deletion ` +
            `${phase('delete', '')}. Its IPAM held ` +
            `${heldBeforeRestart} addresses of its own pool for product EIPs just before its restart (${readyAtRestart} ` +
            `of ${BURST} Ready then), ${held} after everything was deleted. Error lines in its log: ${errorLines.length}, by kind ` +
            `(count, first one):${errorKinds(errorLines)}`,
        );
        // Bounded: a few refusals per EIP over its whole life (ADR 0095, "Costs and limits"), none left pending. The
        // re-created gateway pod is a race: when the product redoes an EIP first, kube-ovn finds its redo token there
        // and does nothing (1.6 to 2.8 requests per EIP in all); when kube-ovn sees the new pod first, it writes its
        // token on every EIP and tries eip-add until the product's redo lands (2.3 more per EIP in that phase, 5.1 in
        // all, seen on master under CI's load). The bound covers both and still catches a retry loop.
        expect(cost.maxDenied).toBeLessThan(40);
        expect(cost.sent / BURST).toBeLessThan(8);
      } finally {
        await l.close();
      }
    },
  );
});

describe('the coexistence check at bridge start', { timeout: 120_000 }, () => {
  it('refuses to start while the dedicated range is not wholly in excludeIps, and starts once it is', async () => {
    const l = await lab('check', DEFAULT_RELEASE);
    try {
      await l.custom.patchClusterCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: Plural.subnet,
          name: SUBNET,
          body: { metadata: { annotations: { 'eip-lambdas.io/eip-range': RANGE } } },
        },
        MERGE,
      );
      await expect(l.bridge()).rejects.toThrow(
        /refusing to start beside kube-ovn: subnet ovn-vpc-external-network: 172\.18\.0\.100\.\.172\.18\.0\.200 of the dedicated EIP range .* is not in spec\.excludeIps/,
      );
      await l.custom.patchClusterCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: Plural.subnet,
          name: SUBNET,
          body: [{ op: 'add', path: '/spec/excludeIps/-', value: RANGE }],
        },
        JSON_PATCH,
      );
      await l.bridge();
    } finally {
      await l.close();
    }
  });
});

describe('migration both ways', { timeout: 300_000 }, () => {
  it.skipIf(!ENFORCED).each(RELEASES)(
    '%s: kube-ovn made them; fence, range, adopt, bridge; then handed back',
    // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: one scenario, its steps in the order they happen
    async (release) => {
      const l = await lab(`migration-${release}`, release);
      try {
        // kube-ovn alone, unfenced, as before the switch.
        let model = await l.model(release);
        for (const n of ['ko-a', 'ko-b']) await createEip(l, n, {});
        const made = await allReady(l, ['ko-a', 'ko-b'], 30_000);
        const addresses = made.map((e) => e.status!.ip!);
        for (const a of addresses) expect(l.net1()).toContain(`${a}/24`);

        // The switch: the fence, the range, adoption, the bridge. kube-ovn keeps running, unmodified.
        await l.fence(true);
        await l.range();
        const execsBefore = l.api.gateways.get(NS, POD)!.history().length;
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
        const { bridge, outcomes } = await l.bridge();
        await eventually(() => expect(outcomes.length).toBeGreaterThanOrEqual(2), { timeoutMs: 30_000 });
        await bridge.idle();
        expect(l.api.gateways.get(NS, POD)!.history().slice(execsBefore)).toEqual([]);

        // A new EIP: the product alone configures it, from the range; kube-ovn's add is refused.
        await createEip(l, 'new', {});
        const [fresh] = await allReady(l, ['new'], 30_000);
        expect(inRange(fresh!.status?.ip)).toBe(true);
        const added = l.api.gateways
          .get(NS, POD)!
          .history()
          .slice(execsBefore)
          .map((r) => r.argv.join(' '))
          .filter((c) => c.includes(' eip-add '));
        // The gateway's release's form (1.12: `<ip>/<len>,<gw>`; 1.13+: `<ip>/<len>` alone), sent by the product only.
        const form = release === '1.12' ? `${fresh!.status!.ip}/24,172.18.0.1` : `${fresh!.status!.ip}/24`;
        expect(added).toEqual([
          expect.stringMatching(new RegExp(` eip-add ${form.replaceAll('.', '\\.')}$`)),
        ]);
        await eventually(() =>
          expect(
            model
              .requests()
              .some((r) => r.object === 'new' && r.kind === 'exec eip-add' && r.outcome === 'denied'),
          ).toBe(true),
        );

        // Hand-back: the bridge stops, the fence goes, kube-ovn restarts and takes over from status.
        await l.stopBridge();
        await l.fence(false);
        if (release === '1.12')
          for (const n of ['ko-a', 'ko-b', 'new']) {
            const e = (await l.eip(n))!;
            const finalizers = [
              ...new Set(
                (e.metadata.finalizers ?? []).map((f) =>
                  f === 'kubeovn.io/kube-ovn-controller' ? 'kube-ovn-controller' : f,
                ),
              ),
            ];
            await l.custom.patchClusterCustomObject(
              { ...EIPS, name: n, body: { metadata: { finalizers } } },
              MERGE,
            );
          }
        await l.stopModel();
        model = await l.model(release);
        const held = (model.ipam()[SUBNET] ?? []).map((a) => a.address);
        for (const n of ['ko-a', 'ko-b', 'new']) expect(held).toContain((await l.eip(n))!.status!.ip);
        // A new EIP is kube-ovn's, from its own pool (outside the product's range), beside the product's addresses.
        await createEip(l, 'after', {});
        const [after] = await allReady(l, ['after'], 30_000);
        expect(inRange(after!.status?.ip)).toBe(false);
        expect([...addresses, fresh!.status!.ip]).not.toContain(after!.status?.ip);
        // The product's EIP is deleted by kube-ovn: eip-del, finalizer, gone.
        await l.custom.deleteClusterCustomObject({ ...EIPS, name: 'new' });
        await eventuallyValue(async () => (await l.eip('new')) === undefined, { timeoutMs: 30_000 });
        expect(l.net1()).not.toContain(`${fresh!.status!.ip}/24`);
        for (const a of addresses) expect(l.net1()).toContain(`${a}/24`);
      } finally {
        await l.close();
      }
    },
  );
});
