/**
 * Records the watch fixtures in events/watch/ from the local Kubernetes API: for each scenario it opens raw watches
 * on everything the bridge watches, makes the scenario's writes (as a user, kubectl, kube-ovn's stand-in
 * controllers and our own handlers would make them), and saves every watch line exactly as it arrived, merged
 * across the watches in resourceVersion order (resourceVersions are global). The routing test replays them.
 *
 *   npx tsx local/record-watch.ts [scenario…]     # all scenarios when none is named
 *
 * Recording is a development step, not part of the tests: uids and timestamps change on every run, the routing
 * does not.
 */
import { writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { PassThrough, Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import {
  CoreV1Api,
  CustomObjectsApi,
  Exec,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { watchPaths } from '../shared/bridge/source.js';
import {
  DEFAULT_EXTERNAL_SUBNET,
  FINALIZER,
  GATEWAY_CONTAINER,
  GROUP,
  gatewayPodName,
  Label,
  Plural,
  VERSION,
} from '../shared/domain/kube-ovn.js';
import { ADMIN_TOKEN } from './kube-api/index.js';

const OUT = fileURLToPath(new URL('../events/watch/', import.meta.url));
const NS = 'kube-system';
const EXT_CIDR = '172.18.0.0/24';

interface Ctx {
  kc: KubeConfig;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  /** Creates a kubeovn.io object; finalizers optional. */
  create(plural: string, name: string, spec: Record<string, unknown>, finalizers?: string[]): Promise<void>;
  /** Merge-patches the object (or its /status). */
  patch(plural: string, name: string, body: Record<string, unknown>, status?: boolean): Promise<void>;
  remove(plural: string, name: string): Promise<void>;
  /** kubectl exec <gateway pod> -c vpc-nat-gw -- <argv> */
  exec(pod: string, argv: string[]): Promise<void>;
  until(what: string, check: () => Promise<boolean>): Promise<void>;
  podUp(pod: string): Promise<boolean>;
}

interface Scenario {
  /** Writes made before the watches open (they appear as ADDED lines of a watch that starts without a resourceVersion). */
  setup?(ctx: Ctx): Promise<void>;
  /** true: watches start from "now" and see only the run's changes; false: from scratch (synthetic ADDEDs). */
  fromNow: boolean;
  /** Run the kube-ovn stand-ins (gateway pods, QoSPolicy status) during the scenario. */
  standIns?: boolean;
  run(ctx: Ctx): Promise<void>;
}

const handlerLabels = (ip?: string, qos?: string) => ({
  [Label.subnet]: DEFAULT_EXTERNAL_SUBNET,
  [Label.natGwName]: 'gw1',
  ...(ip && { [Label.eipV4Ip]: ip }),
  ...(qos && { [Label.qos]: qos }),
});

/** The writes our add handler makes, in its order: finalizer+labels, spec+labels, status. */
async function provisionLikeTheHandler(c: Ctx, name: string, ip: string, mac: string): Promise<void> {
  await c.patch(Plural.eip, name, { metadata: { finalizers: [FINALIZER], labels: handlerLabels() } });
  await c.patch(Plural.eip, name, {
    metadata: { labels: handlerLabels(ip) },
    spec: { v4ip: ip, macAddress: mac },
  });
  await c.patch(
    Plural.eip,
    name,
    { status: { ready: true, ip, redo: '2026-11-29T10:00:00', nat: '', qosPolicy: '' } },
    true,
  );
}

const scenarios: Record<string, Scenario> = {
  /** One EIP from creation to deletion, with the echoes of the handler's own writes in between. */
  'eip-lifecycle': {
    fromNow: true,
    async run(c) {
      await c.create(Plural.eip, 'eip-a', { natGwDp: 'gw1' });
      await provisionLikeTheHandler(c, 'eip-a', '172.18.0.2', '00:00:00:0A:0B:0C');
      await c.patch(Plural.eip, 'eip-a', { spec: { qosPolicy: 'qos-a' } }); // user binds a policy
      await c.patch(Plural.eip, 'eip-a', { metadata: { labels: handlerLabels('172.18.0.2', 'qos-a') } });
      await c.patch(Plural.eip, 'eip-a', { status: { qosPolicy: 'qos-a' } }, true);
      // kube-ovn's redo request (ready=false with a new token), then our handler's answer (ready=true).
      await c.patch(Plural.eip, 'eip-a', { status: { ready: false, redo: '2026-11-29T11:00:00' } }, true);
      await c.patch(Plural.eip, 'eip-a', { status: { ready: true, redo: '2026-11-29T11:00:05' } }, true);
      await c.patch(Plural.eip, 'eip-a', { spec: { v4ip: '172.18.0.9' } }); // refused change
      await c.patch(Plural.eip, 'eip-a', { spec: { natGwDp: 'gw2' } });
      await c.patch(Plural.eip, 'eip-a', { spec: { externalSubnet: 'other-external' } });
      await c.patch(Plural.eip, 'eip-a', { metadata: { labels: { team: 'blue' } } }); // label only
      await c.patch(Plural.eip, 'eip-a', { spec: { qosPolicy: null } }); // user unbinds
      await c.remove(Plural.eip, 'eip-a'); // kubectl delete: the finalizer holds it (MODIFIED)
      await c.patch(Plural.eip, 'eip-a', { status: { ready: false } }, true); // a write while terminating
      await c.patch(Plural.eip, 'eip-a', { metadata: { finalizers: null } }); // handler done (DELETED)
      // Without a finalizer: straight to DELETED.
      await c.create(Plural.eip, 'eip-b', { natGwDp: 'gw1', v4ip: '172.18.0.3' });
      await c.remove(Plural.eip, 'eip-b');
    },
  },

  /** A watch that starts from scratch after a restart: a terminating EIP shows up as ADDED. */
  'eip-relist-terminating': {
    fromNow: false,
    async setup(c) {
      await c.create(Plural.eip, 'eip-ready', { natGwDp: 'gw1' });
      await provisionLikeTheHandler(c, 'eip-ready', '172.18.0.2', '00:00:00:0A:0B:0C');
      await c.create(Plural.eip, 'eip-going', { natGwDp: 'gw1', v4ip: '172.18.0.3' }, [FINALIZER]);
      await c.remove(Plural.eip, 'eip-going');
    },
    async run(c) {
      await c.patch(Plural.eip, 'eip-going', { metadata: { finalizers: null } });
    },
  },

  /** FIP/DNAT/SNAT rules coming, moving between EIPs, terminating and going. */
  'nat-rules': {
    fromNow: true,
    async run(c) {
      await c.create(Plural.eip, 'eip-a', { natGwDp: 'gw1' });
      await c.create(Plural.eip, 'eip-b', { natGwDp: 'gw1' });
      await c.create(Plural.fip, 'fip-1', { eip: 'eip-a', internalIp: '10.0.1.10' });
      await c.patch(
        Plural.fip,
        'fip-1',
        { status: { ready: true, v4ip: '172.18.0.2', natGwDp: 'gw1' } },
        true,
      );
      await c.patch(Plural.fip, 'fip-1', { metadata: { labels: { [Label.eipV4Ip]: '172.18.0.2' } } });
      await c.patch(Plural.fip, 'fip-1', { spec: { eip: 'eip-b' } }); // moved
      await c.create(
        Plural.dnat,
        'dnat-1',
        { eip: 'eip-b', externalPort: '8080', internalIp: '10.0.1.11', internalPort: '80', protocol: 'tcp' },
        ['kubeovn.io/kube-ovn-controller'],
      );
      await c.remove(Plural.dnat, 'dnat-1'); // newly terminating
      await c.patch(Plural.dnat, 'dnat-1', { status: { ready: false } }, true); // still terminating
      await c.patch(Plural.dnat, 'dnat-1', { metadata: { finalizers: null } }); // gone
      await c.create(Plural.snat, 'snat-1', { eip: 'eip-a', internalCIDR: '10.0.1.0/24' });
      await c.remove(Plural.snat, 'snat-1');
      await c.create(Plural.fip, 'fip-orphan', { internalIp: '10.0.1.12' }); // names no EIP
      await c.remove(Plural.fip, 'fip-1');
    },
  },

  /** A gateway pod coming up, its container restarting, and the pod being re-created. */
  'gateway-pod': {
    fromNow: true,
    standIns: true,
    async run(c) {
      await c.create(Plural.eip, 'eip-ready', { natGwDp: 'gw1' });
      await c.patch(Plural.eip, 'eip-ready', { status: { ready: true, ip: '172.18.0.20' } }, true);
      await c.create(Plural.eip, 'eip-waiting', { natGwDp: 'gw1' });
      await c.create(Plural.eip, 'eip-other-gw', { natGwDp: 'gw2' });
      await c.patch(Plural.eip, 'eip-other-gw', { status: { ready: true, ip: '172.18.0.21' } }, true);
      await c.create(Plural.eip, 'eip-leaving', { natGwDp: 'gw1' }, [FINALIZER]);
      await c.remove(Plural.eip, 'eip-leaving');
      const pod = gatewayPodName('gw1');
      await c.create(Plural.gateway, 'gw1', {
        vpc: 'vpc1',
        subnet: 'vpc1-subnet1',
        lanIp: '10.0.1.254',
        externalSubnets: [DEFAULT_EXTERNAL_SUBNET],
      });
      await c.until('gateway pod up', () => c.podUp(pod));
      await c.exec(pod, ['kill', '1']); // container restart: same pod, restartCount+1
      await c.until('gateway pod back', async () => (await c.podUp(pod)) && (await restarts(c, pod)) >= 1);
      await c.core.deleteNamespacedPod({ name: pod, namespace: NS, gracePeriodSeconds: 0 });
      await c.until(
        'gateway pod re-created',
        async () => (await c.podUp(pod)) && (await restarts(c, pod)) === 0,
      );
    },
  },

  /** A QoS policy created, its status filled in by the QoS stand-in, edited, and deleted. */
  'qos-policy': {
    fromNow: true,
    standIns: true,
    async run(c) {
      await c.create(Plural.eip, 'eip-a', { natGwDp: 'gw1', qosPolicy: 'qos-1' });
      await c.create(Plural.eip, 'eip-b', { natGwDp: 'gw1', qosPolicy: 'qos-1' });
      await c.create(Plural.eip, 'eip-c', { natGwDp: 'gw1', qosPolicy: 'qos-2' });
      const rule = { name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '10' };
      await c.create(Plural.qos, 'qos-1', { shared: true, bindingType: 'EIP', bandwidthLimitRules: [rule] });
      await c.until('qos-1 status', () => hasQosStatus(c, 'qos-1', '10'));
      await c.patch(Plural.qos, 'qos-1', { spec: { bandwidthLimitRules: [{ ...rule, rateMax: '20' }] } });
      await c.until('qos-1 status updated', () => hasQosStatus(c, 'qos-1', '20'));
      await c.patch(Plural.qos, 'qos-1', { metadata: { labels: { team: 'blue' } } }); // no status change
      await c.remove(Plural.qos, 'qos-1');
    },
  },
};

async function restarts(c: Ctx, pod: string): Promise<number> {
  const p = await c.core.readNamespacedPod({ name: pod, namespace: NS });
  return p.status?.containerStatuses?.find((s) => s.name === GATEWAY_CONTAINER)?.restartCount ?? 0;
}

async function hasQosStatus(c: Ctx, name: string, rate: string): Promise<boolean> {
  const q = (await c.custom.getClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: Plural.qos,
    name,
  })) as {
    status?: { bandwidthLimitRules?: { rateMax?: string }[] };
  };
  return q.status?.bandwidthLimitRules?.[0]?.rateMax === rate;
}

async function baseWorld(c: Ctx): Promise<void> {
  await c.create(Plural.subnet, DEFAULT_EXTERNAL_SUBNET, {
    cidrBlock: EXT_CIDR,
    gateway: '172.18.0.1',
    excludeIps: ['172.18.0.1'],
    protocol: 'IPv4',
    provider: `${DEFAULT_EXTERNAL_SUBNET}.${NS}`,
  });
  await c.create(Plural.subnet, 'vpc1-subnet1', {
    cidrBlock: '10.0.1.0/24',
    gateway: '10.0.1.1',
    protocol: 'IPv4',
    vpc: 'vpc1',
  });
}

function context(kc: KubeConfig): Ctx {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const kindOf: Record<string, string> = {
    [Plural.eip]: 'IptablesEIP',
    [Plural.fip]: 'IptablesFIPRule',
    [Plural.dnat]: 'IptablesDnatRule',
    [Plural.snat]: 'IptablesSnatRule',
    [Plural.qos]: 'QoSPolicy',
    [Plural.subnet]: 'Subnet',
    [Plural.gateway]: 'VpcNatGateway',
  };
  const c: Ctx = {
    kc,
    custom,
    core,
    async create(plural, name, spec, finalizers) {
      await custom.createClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural,
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: kindOf[plural],
          metadata: { name, ...(finalizers && { finalizers }) },
          spec,
        },
      });
    },
    async patch(plural, name, body, status) {
      const req = { group: GROUP, version: VERSION, plural, name, body };
      if (status) await custom.patchClusterCustomObjectStatus(req, merge);
      else await custom.patchClusterCustomObject(req, merge);
    },
    async remove(plural, name) {
      await custom.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural, name });
    },
    async exec(pod, argv) {
      const out = new PassThrough();
      out.resume();
      await new Promise<void>((resolve, reject) => {
        new Exec(kc)
          .exec(NS, pod, GATEWAY_CONTAINER, argv, out, out, null, false, () => resolve())
          .catch(reject);
      });
    },
    async until(what, check) {
      const deadline = Date.now() + 10_000;
      while (!(await check())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async podUp(pod) {
      try {
        const p = await core.readNamespacedPod({ name: pod, namespace: NS });
        return (
          p.status?.phase === 'Running' &&
          p.status.containerStatuses?.find((s) => s.name === GATEWAY_CONTAINER)?.ready === true &&
          !p.metadata?.deletionTimestamp
        );
      } catch {
        return false;
      }
    },
  };
  return c;
}

/** Opens a raw watch and collects its lines verbatim. */
function rawWatch(url: string, path: string, resourceVersion: string | undefined, signal: AbortSignal) {
  const lines: string[] = [];
  const u = new URL(url + path);
  u.searchParams.set('watch', 'true');
  if (resourceVersion) u.searchParams.set('resourceVersion', resourceVersion);
  const done = (async () => {
    const res = await fetch(u, { signal, headers: { authorization: `Bearer ${ADMIN_TOKEN.token}` } });
    if (!res.ok || !res.body) throw new Error(`watch ${path}: HTTP ${res.status}`);
    const rl = createInterface({ input: Readable.fromWeb(res.body as never) });
    try {
      for await (const line of rl) if (line.trim()) lines.push(line);
    } catch (e) {
      if (!signal.aborted) throw e;
    }
  })();
  return { lines, done };
}

const rvOfLine = (line: string): number =>
  Number(
    (JSON.parse(line) as { object?: { metadata?: { resourceVersion?: string } } }).object?.metadata
      ?.resourceVersion,
  );

export async function record(name: string): Promise<string[]> {
  const scenario = scenarios[name];
  if (!scenario) throw new Error(`no scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`);
  const { startKubeApi } = await import('./kube-api/index.js');
  const { startStandIns } = await import('./controllers/index.js');
  const api = await startKubeApi({ restartDelayMs: 100 });
  const kc = new KubeConfig();
  kc.loadFromString(api.kubeconfigYaml());
  const c = context(kc);
  const stop = new AbortController();
  let standIns: { stop(): Promise<void> } | undefined;
  try {
    await baseWorld(c);
    await scenario.setup?.(c);
    const from = scenario.fromNow ? String(api.resourceVersion()) : undefined;
    const watches = watchPaths(NS).map((w) => rawWatch(api.url, w.watchPath, from, stop.signal));
    await new Promise((r) => setTimeout(r, 100));
    if (scenario.standIns) standIns = await startStandIns({ kubeConfig: kc, namespace: NS });
    await scenario.run(c);
    await new Promise((r) => setTimeout(r, 500));
    stop.abort();
    await Promise.allSettled(watches.map((w) => w.done));
    // Stable merge: synthetic ADDEDs of a from-scratch watch share no global order, so keep each watch's
    // order and interleave by resourceVersion.
    return watches
      .flatMap((w, i) => w.lines.map((line, j) => ({ line, i, j, rv: rvOfLine(line) })))
      .sort((a, b) => a.rv - b.rv || a.i - b.i || a.j - b.j)
      .map((x) => x.line);
  } finally {
    stop.abort();
    await standIns?.stop();
    await api.close();
  }
}

async function main(names: string[]): Promise<void> {
  for (const name of names.length ? names : Object.keys(scenarios)) {
    const lines = await record(name);
    const file = `${OUT}${name}.jsonl`;
    await writeFile(file, `${lines.join('\n')}\n`);
    console.log(`${file}: ${lines.length} watch lines`);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).catch((e) => {
    console.error(e);
    process.exitCode = 1;
  });
}
