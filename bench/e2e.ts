/**
 * `npm run bench -- e2e [--n=1000] [--gateways=1] [--quick] [--cache-ms=5000] [--concurrency=64] [--restart] [--qos]
 *   [--exec-latency=0,150] [--exec-commands=none|measured,…] [--kube-ovn-version=1.16] [--handlers=16]
 *   [--lambda-containers=10] [--event-batch-max=8]`
 *
 * The whole product on the local stack (local/stack.ts: local Kubernetes API with the kube-ovn stand-ins and the
 * simulated gateways, dynalite, the bridge with the in-process sink, the handlers on the real adapters): N
 * IptablesEIPs created at once through the Kubernetes API, as kubectl would (POSTs with a bearer token, at most
 * `--concurrency` in flight), spread round-robin over `--gateways` NAT gateways; then all deleted. One watch on
 * the EIPs records when each became Ready (status.ready) and when each was gone.
 *
 * Reported: wall time until all Ready and until all gone; per-EIP time to Ready / to gone (p50, p90, p99, from its
 * create / delete request); Kubernetes API requests per add and per delete by verb and resource, from the local
 * API's request log, for the handlers (User-Agent eip-lambdas; exec counted apart) and for the bridge and stand-ins
 * together (the rest, this benchmark's own requests excluded); DynamoDB requests per add and per delete by
 * operation (a counter on the handlers' client); CPU time of the process per EIP (product, local API, dynalite
 * and simulator together: they share the process, so the product's own share is not separable here — see
 * `npm run bench -- lambda` for one add on the real adapters); duplicates (two EIPs with one address) and EIPs
 * not Ready, which must both be 0. `--quick` is 40 EIPs on one gateway (CI runs it: test/e2e/bench-e2e.test.ts).
 * `--cache-ms` is the handlers' read cache (ADR 0028; 5000 as in Lambda, 0 to turn it off). JSON: bench/results/.
 *
 * `--restart` adds a phase after the adds: `kill 1` on every gateway container, then until every EIP's address (and
 * QoS filters, with `--qos`) is back on its gateway, with the execs it took. `--exec-latency=0,150` runs the whole
 * benchmark once per value with the lab's exec cost model (ADR 0100: a start latency per exec; `--exec-commands`
 * adds the measured per-command costs, one value for all runs or one per latency), after an unreported warm-up run,
 * and prints the runs side by side, ratios first with their absolute figures beside them, then the exec goals
 * (bench/lib/e2e-exec.ts); JSON: bench/results/e2e-exec-<n>-<g>gw[-qos][-<release>][-h<handlers>].json (quick
 * instead of <n>-<g>gw with --quick). `--kube-ovn-version` is the release the lab's gateways play; `--handlers` how many EIPs
 * the local stack's bridge hands to its in-process handlers at once (its CONCURRENCY): they share one container,
 * so their gateway calls are batched together (ADR 0110). `--lambda-containers` runs the handlers as on AWS instead
 * (local/lambda-model.ts): the bridge's lambda sink invoking functions whose containers run one invocation at a time,
 * at most that many per function, with `--event-batch-max` events of one gateway per invocation (ADR 0112; default 8,
 * 1 = one event an invocation); JSON name suffix -lambda<containers>-b<max>.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { demoObjects } from '../local/demo.js';
import type { RequestRecord } from '../local/kube-api/index.js';
import { kubeConfigFromFile } from '../local/kubeconfig.js';
import { memoryLogger } from '../local/memory/logger.js';
import { KUBE_OVN_RELEASES, type KubeOvnRelease, parseRelease } from '../local/natgw/releases.js';
import { type LocalStack, NAMESPACE, startLocalStack } from '../local/stack.js';
import { endpointOfKubeConfig, KubeRest, USER_AGENT } from '../shared/adapters/k8s/rest.js';
import { compareRuns, comparisonOf, execGoalsOf } from './lib/e2e-exec.js';
import { verbAndResource } from './lib/kube-requests.js';
import type { Suite } from './run.js';

const BENCH_AGENT = 'eip-bench';
/** EIPs of the unreported warm-up run before runs that are compared. */
const WARM_UP_N = 20;
const QOS = 'qos-demo';
const USAGE =
  'usage: npm run bench -- e2e [--n=1000] [--gateways=1] [--quick] [--concurrency=64] [--cache-ms=5000] [--timeout-s=600] [--restart] [--qos] [--exec-latency=0,150] [--exec-commands=none|measured,…] [--kube-ovn-version=1.16] [--handlers=16] [--lambda-containers=10] [--event-batch-max=8]';

export interface E2eOptions {
  n: number;
  /** Also measure an update of every EIP (spec.qosPolicy set; done when status.qosPolicy says so). */
  update?: boolean;
  /** Create the EIPs with the demo QoS policy (so a restart has QoS to restore too). */
  qos?: boolean;
  /** Then `kill 1` on every gateway container, and measure until every address and QoS filter is back. */
  restart?: boolean;
  /** What an exec into a gateway pod costs (local/natgw/exec-model.ts): start latency and per-command costs. */
  exec?: { latencyMs: number; commands: 'none' | 'measured' };
  gateways: number;
  concurrency: number;
  cacheMs: number;
  /** Give up waiting after this long (the run then reports what it saw). */
  timeoutMs: number;
  /** The kube-ovn release the simulated gateways play (default: the lab's). */
  kubeOvnRelease?: KubeOvnRelease;
  /** EIPs the local stack's bridge hands to its in-process handlers at once (default: the bridge's 16). */
  handlers?: number;
  /** Handlers as on AWS (local/lambda-model.ts): containers per function, events per invocation (ADR 0112). */
  lambda?: { containers: number; groupEvents: number };
}

export interface Phase {
  /** Wall clock from the first request to the last EIP seen Ready (or gone). */
  seconds: number;
  /** Per EIP, from its own request to Ready (or gone), in ms. */
  perEip: { p50: number; p90: number; p99: number; max: number };
  /** How many reached the state (all of them, unless the run timed out). */
  done: number;
  cpuMsPerEip: number;
  kube: {
    perEip: number;
    exec: number;
    /** The handlers' execs in the phase, counted (exec is per EIP, rounded to 0.01). */
    execs: number;
    byVerbAndResource: Record<string, number>;
  };
  /** Requests of the bridge and the stand-ins per EIP (list/watch, pod and rule controllers). */
  kubeOthersPerEip: number;
  dynamo: {
    perEip: number;
    byOperation: Record<string, number>;
    /** Capacity units per EIP as DynamoDB reports them (ReturnConsumedCapacity), a failed conditional write as 1 WCU. */
    readUnits: number;
    writeUnits: number;
  };
  /** Handler invocations per EIP (events the bridge handed to the sink: one EventBridge event and one Lambda run each). */
  invocations: { perEip: number; byHandler: Record<string, number> };
  /**
   * Time the execs into gateway containers took during the phase, per EIP, each from its arrival at the local API's
   * exec seam to its answer (local/natgw/exec-model.ts): what the callers, mostly the handlers, waited for.
   */
  execMsPerEip: number;
}

export interface E2eResult {
  options: E2eOptions;
  /** The kube-ovn release the simulated gateways play (local/natgw/releases.ts). */
  kubeOvnRelease: string;
  add: Phase;
  update?: Phase;
  /** After `kill 1` on every gateway: until each EIP's address and QoS filters are on its gateway again. */
  restart?: Phase & {
    /** Execs into gateway containers the model counted during the phase (the handlers' and everyone else's). */
    gatewayExecs: number;
    /** Addresses and QoS filters compared (all of them back when done = n). */
    addresses: number;
    qosFilters: number;
  };
  delete: Phase;
  duplicates: number;
  notReady: number;
  deadLetters: number;
  /** Resident set of the whole one-process stack, sampled every 500 ms from its start to its stop, in MB. */
  rssMb: { start: number; peak: number; end: number };
}

const progress = (line: string): void => void process.stderr.write(`\r${line}\u001b[K`);

function percentiles(xs: number[]): Phase['perEip'] {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]! : 0);
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: s[s.length - 1] ?? 0 };
}

export type ExecCost = NonNullable<E2eOptions['exec']>;

/**
 * The command line: the run's options and the exec costs to run it with, one run each (`--exec-latency=0,150`;
 * `--exec-commands` one value for all or one per latency). Without either, one run with the instant simulator.
 * @throws UsageError
 */
export function parseE2eArgs(args: readonly string[]): {
  options: E2eOptions;
  execs: ExecCost[] | undefined;
} {
  const get = (k: string) => args.find((a) => a.startsWith(`--${k}=`))?.split('=')[1];
  const quick = args.includes('--quick');
  const num = (k: string, d: number, min: number, max: number): number => {
    const v = Number(get(k) ?? d);
    if (!Number.isInteger(v) || v < min || v > max)
      throw new UsageError(`--${k} must be an integer from ${min} to ${max}, got "${get(k)}"\n${USAGE}`);
    return v;
  };
  const options: E2eOptions = {
    n: num('n', quick ? 40 : 1000, 1, 60_000),
    gateways: num('gateways', 1, 1, 100),
    concurrency: num('concurrency', 64, 1, 1000),
    cacheMs: num('cache-ms', 5000, 0, 60_000),
    timeoutMs: num('timeout-s', quick ? 120 : 600, 1, 3600) * 1000,
    ...(args.includes('--restart') && { restart: true }),
    ...(args.includes('--qos') && { qos: true }),
    ...releaseOption(get('kube-ovn-version')),
    ...(get('handlers') !== undefined && { handlers: num('handlers', 16, 1, 1000) }),
    ...(get('lambda-containers') !== undefined && {
      lambda: {
        containers: num('lambda-containers', 10, 1, 1000),
        groupEvents: num('event-batch-max', 8, 1, 32),
      },
    }),
  };
  const latencies = get('exec-latency')?.split(',');
  const commands = get('exec-commands')?.split(',');
  if (!latencies && !commands) return { options, execs: undefined };
  const ms = (latencies ?? ['0']).map((v) => {
    const x = Number(v);
    if (v === '' || !Number.isInteger(x) || x < 0 || x > 60_000)
      throw new UsageError(
        `--exec-latency must be whole numbers of ms from 0 to 60000, got "${v}"\n${USAGE}`,
      );
    return x;
  });
  const cs = commands ?? ['none'];
  if (cs.length !== 1 && cs.length !== ms.length)
    throw new UsageError(
      `--exec-commands takes one value, or one per --exec-latency (${ms.length}), got ${cs.length}\n${USAGE}`,
    );
  return {
    options,
    execs: ms.map((latencyMs, i) => {
      const c = cs.length === 1 ? cs[0] : cs[i];
      if (c !== 'none' && c !== 'measured')
        throw new UsageError(`--exec-commands must be none or measured, got "${c}"\n${USAGE}`);
      return { latencyMs, commands: c };
    }),
  };
}

const lambdaSuffix = (o: E2eOptions): string =>
  o.lambda ? `-lambda${o.lambda.containers}-b${o.lambda.groupEvents}` : '';

function releaseOption(text: string | undefined): { kubeOvnRelease?: KubeOvnRelease } {
  if (text === undefined) return {};
  const release = parseRelease(text);
  if (!release)
    throw new UsageError(
      `--kube-ovn-version must be one of ${KUBE_OVN_RELEASES.join(', ')}, got "${text}"\n${USAGE}`,
    );
  return { kubeOvnRelease: release };
}

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A watch on the EIPs: when each was first seen Ready, and when each was deleted. */
function watchEips(server: URL, token: string, onEvent: () => void) {
  const ready = new Map<string, number>();
  const gone = new Map<string, number>();
  const qos = new Map<string, number>();
  const ips = new Map<string, string>();
  const req = httpRequest(
    new URL('/apis/kubeovn.io/v1/iptables-eips?watch=true&allowWatchBookmarks=false', server),
    { headers: { Authorization: `Bearer ${token}`, 'User-Agent': BENCH_AGENT } },
    (res) => {
      let buf = '';
      res.setEncoding('utf8');
      // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a benchmark's measurement loop kept in one piece so that what is timed stays visible; not product code
      res.on('data', (chunk: string) => {
        buf += chunk;
        let i = buf.indexOf('\n');
        while (i >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          i = buf.indexOf('\n');
          if (!line.trim()) continue;
          const ev = JSON.parse(line) as {
            type: string;
            object: {
              metadata: { name: string };
              status?: { ready?: boolean; ip?: string; qosPolicy?: string };
            };
          };
          const name = ev.object.metadata.name;
          const status = ev.object.status;
          if (ev.type === 'DELETED') gone.set(name, performance.now());
          else {
            // One status write may say both (an EIP created with a QoS policy becomes Ready with it applied).
            if (status?.qosPolicy === QOS && !qos.has(name)) qos.set(name, performance.now());
            if (status?.ready && !ready.has(name)) {
              ready.set(name, performance.now());
              if (status.ip) ips.set(name, status.ip);
            }
          }
          onEvent();
        }
      });
    },
  );
  req.on('error', () => undefined);
  req.end();
  return { ready, gone, qos, ips, close: () => req.destroy() };
}

async function inPool<T>(items: T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a benchmark's measurement loop kept in one piece so that what is timed stays visible; not product code
export async function runE2e(options: E2eOptions): Promise<E2eResult> {
  const dir = mkdtempSync(join(tmpdir(), 'eip-e2e-'));
  const previousCache = process.env.EIP_READ_CACHE_MS;
  process.env.EIP_READ_CACHE_MS = String(options.cacheMs);
  let stack: LocalStack | undefined;
  let watch: ReturnType<typeof watchEips> | undefined;
  const rss = rssSampler();
  try {
    stack = await startLocalStack({
      kubeconfig: join(dir, 'kubeconfig'),
      demo: false,
      log: memoryLogger('error'),
      say: (l) => process.stderr.write(`e2e: ${l}\n`),
      resyncMs: 3_600_000,
      driftRepairMs: 0,
      readCacheMs: options.cacheMs,
      ...(options.kubeOvnRelease && { kubeOvnRelease: options.kubeOvnRelease }),
      ...(options.handlers !== undefined && { concurrency: options.handlers }),
      ...(options.lambda && { lambda: options.lambda }),
      ...(options.exec && {
        execModel: { startMs: options.exec.latencyMs, commands: options.exec.commands },
      }),
    });
    const kc = kubeConfigFromFile(stack.kubeconfig);
    const endpoint = await endpointOfKubeConfig(kc);
    const base = endpoint.headers;
    const auth = base ? await base() : {};
    const token = (auth.Authorization ?? '').replace(/^Bearer /, '');
    // This benchmark's own client: the same thin client, under its own User-Agent (kept out of the counts).
    const rest = new KubeRest({
      ...endpoint,
      headers: async () => ({ ...(base ? await base() : {}), 'User-Agent': BENCH_AGENT }),
    });

    // The cluster: the demo's ConfigMaps, external subnet (a /16, room for every EIP) and VPC subnet, and G gateways.
    const create = (path: string, body: unknown) => rest.request('POST', path, { body });
    for (const o of demoObjects(NAMESPACE)) {
      if (o.kind === 'IptablesEIP') continue;
      if (o.kind === 'QoSPolicy') await create('/apis/kubeovn.io/v1/qos-policies', o);
      if (o.kind === 'ConfigMap') await create(`/api/v1/namespaces/${NAMESPACE}/configmaps`, o);
      else if (o.kind === 'Subnet')
        await create(
          '/apis/kubeovn.io/v1/subnets',
          o.metadata.name === 'ovn-vpc-external-network'
            ? {
                ...o,
                spec: { ...o.spec, cidrBlock: '172.18.0.0/16', excludeIps: ['172.18.0.1..172.18.0.10'] },
              }
            : o,
        );
      else if (o.kind === 'VpcNatGateway')
        for (let g = 1; g <= options.gateways; g++)
          await create('/apis/kubeovn.io/v1/vpc-nat-gateways', {
            ...o,
            metadata: { name: `gw${g}` },
            spec: { ...o.spec, lanIp: `10.0.1.${254 - g + 1}` },
          });
    }
    for (let g = 1; g <= options.gateways; g++) {
      while (!stack.api.gateways.get(NAMESPACE, `vpc-nat-gw-gw${g}-0`)) await sleep(50);
    }
    await stack.idle();

    let tick: () => void = () => undefined;
    watch = watchEips(stack.api.url ? new URL(stack.api.url) : new URL(endpoint.server), token, () => tick());
    await sleep(200);
    const names = Array.from({ length: options.n }, (_, i) => `bench-${String(i).padStart(5, '0')}`);

    // DynamoDB requests of the handlers, by operation.
    const dynamoOps = new Map<string, number>();
    const units = { read: 0, write: 0 };
    stack.dynamo.middlewareStack.add(
      (next, context) => async (args) => {
        const op = String(context.commandName ?? '').replace(/Command$/, '');
        dynamoOps.set(op, (dynamoOps.get(op) ?? 0) + 1);
        const write = ['PutItem', 'UpdateItem', 'DeleteItem'].includes(op);
        (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity = 'TOTAL';
        try {
          const out = await next(args);
          const used = (out.output as { ConsumedCapacity?: { CapacityUnits?: number } }).ConsumedCapacity;
          if (write) units.write += used?.CapacityUnits ?? 1;
          else units.read += used?.CapacityUnits ?? 0.5;
          return out;
        } catch (e) {
          if (write) units.write += 1; // a failed conditional write is charged too
          throw e;
        }
      },
      { step: 'initialize', name: 'benchCountRequests' },
    );

    const phase = async (
      kind: 'add' | 'update' | 'restart' | 'delete',
      send: (name: string) => Promise<void>,
      seen: Map<string, number>,
      /** Instead of one request per EIP: one start for all (their clock starts then), and a check run while waiting. */
      custom?: { start(): Promise<void>; poll(): void },
    ): Promise<Phase> => {
      // Every request of the phase, as the local API logs it (its own log keeps only the last 5,000).
      const log: RequestRecord[] = [];
      const unsubscribe = stack!.api.requests.subscribe((r) => log.push(r));
      dynamoOps.clear();
      units.read = 0;
      units.write = 0;
      const out0 = { ...stack!.bridge.stats().eventsOut };
      const execMs0 = stack!.api.execModel.stats().execMs;
      const sentAt = new Map<string, number>();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const done = () => names.filter((n) => seen.has(n)).length;
      let last = 0;
      tick = () => {
        const now = performance.now();
        if (now - last < 250) return;
        last = now;
        progress(
          `e2e ${kind}: ${sentAt.size}/${options.n} sent, ${done()}/${options.n} ${{ add: 'Ready', update: 'updated', restart: 'back', delete: 'gone' }[kind]}, ${((now - t0) / 1000).toFixed(1)} s`,
        );
      };
      if (custom) {
        for (const name of names) sentAt.set(name, t0);
        await custom.start();
      } else {
        await inPool(names, options.concurrency, async (name) => {
          sentAt.set(name, performance.now());
          await send(name);
          tick();
        });
      }
      const deadline = t0 + options.timeoutMs;
      while (done() < options.n && performance.now() < deadline) {
        custom?.poll();
        tick();
        await sleep(50);
      }
      const finished = done() === options.n ? Math.max(...names.map((n) => seen.get(n)!)) : performance.now();
      const cpu = process.cpuUsage(cpu0);
      await stack!.idle();
      unsubscribe();
      progress('');
      process.stderr.write(
        `e2e ${kind}: ${done()}/${options.n} in ${((finished - t0) / 1000).toFixed(1)} s\n`,
      );
      const handlers = log.filter((r) => r.headers['user-agent'] === USER_AGENT);
      const others = log.filter(
        (r) => r.headers['user-agent'] !== USER_AGENT && r.headers['user-agent'] !== BENCH_AGENT,
      );
      const by: Record<string, number> = {};
      for (const r of handlers) {
        const k = verbAndResource(r.method, r.path, r.query);
        by[k] = (by[k] ?? 0) + 1;
      }
      const per = (x: number) => Math.round((x / options.n) * 100) / 100;
      const out1 = stack!.bridge.stats().eventsOut;
      const byHandler = Object.fromEntries(
        Object.entries(out1)
          .map(([h, k]) => [h, per(k - ((out0 as Record<string, number>)[h] ?? 0))] as const)
          .filter(([, v]) => v > 0),
      );
      const exec = handlers.filter((r) => r.path.endsWith('/exec')).length;
      return {
        seconds: Math.round((finished - t0) / 100) / 10,
        perEip: percentiles(
          names.filter((n) => seen.has(n)).map((n) => Math.round(seen.get(n)! - sentAt.get(n)!)),
        ),
        done: done(),
        cpuMsPerEip: Math.round(((cpu.user + cpu.system) / 1000 / options.n) * 100) / 100,
        kube: {
          perEip: per(handlers.length - exec),
          exec: per(exec),
          execs: exec,
          byVerbAndResource: Object.fromEntries(
            Object.entries(by)
              .sort((a, b) => b[1] - a[1])
              .map(([k, v]) => [k, per(v)]),
          ),
        },
        kubeOthersPerEip: per(others.length),
        dynamo: {
          perEip: per([...dynamoOps.values()].reduce((a, b) => a + b, 0)),
          byOperation: Object.fromEntries([...dynamoOps].map(([k, v]) => [k, per(v)])),
          readUnits: per(units.read),
          writeUnits: per(units.write),
        },
        invocations: {
          perEip: Math.round(Object.values(byHandler).reduce((a, b) => a + b, 0) * 100) / 100,
          byHandler,
        },
        execMsPerEip: per(stack!.api.execModel.stats().execMs - execMs0),
      };
    };

    const add = await phase(
      'add',
      async (name) => {
        const i = Number(name.slice(6));
        await create('/apis/kubeovn.io/v1/iptables-eips', {
          apiVersion: 'kubeovn.io/v1',
          kind: 'IptablesEIP',
          metadata: { name },
          spec: { natGwDp: `gw${(i % options.gateways) + 1}`, ...(options.qos && { qosPolicy: QOS }) },
        });
      },
      watch.ready,
    );
    const byIp = new Map<string, number>();
    for (const ip of watch.ips.values()) byIp.set(ip, (byIp.get(ip) ?? 0) + 1);
    const duplicates = [...byIp.values()].filter((k) => k > 1).reduce((a, k) => a + k - 1, 0);
    const notReady = options.n - add.done;

    const update = options.update
      ? await phase(
          'update',
          async (name) => {
            await rest.request('PATCH', `/apis/kubeovn.io/v1/iptables-eips/${name}`, {
              body: { spec: { qosPolicy: QOS } },
              contentType: 'application/merge-patch+json',
            });
          },
          watch.qos,
        )
      : undefined;

    const restart = options.restart
      ? await restartPhase(stack, rest, names, watch.ips, options.gateways, phase)
      : undefined;

    const del = await phase(
      'delete',
      async (name) => {
        // After a long quiet phase (a restart) the kept-alive socket may be one the server closed while idle: the
        // client refuses to resend a write on its own, and this one was never received, so send it again.
        const del = () => rest.request('DELETE', `/apis/kubeovn.io/v1/iptables-eips/${name}`);
        await del().catch((e: { staleSocket?: boolean }) => {
          if (e.staleSocket) return del();
          throw e;
        });
      },
      watch.gone,
    );
    return {
      options,
      kubeOvnRelease: stack.kubeOvnRelease,
      add,
      ...(update && { update }),
      ...(restart && { restart }),
      delete: del,
      duplicates,
      notReady,
      deadLetters: stack.deadLetters().length,
      rssMb: rss.read(),
    };
  } finally {
    rss.stop();
    watch?.close();
    await stack?.stop();
    if (previousCache === undefined) delete process.env.EIP_READ_CACHE_MS;
    else process.env.EIP_READ_CACHE_MS = previousCache;
    rmSync(dir, { recursive: true, force: true });
  }
}

type PhaseRunner = (
  kind: 'restart',
  send: (name: string) => Promise<void>,
  seen: Map<string, number>,
  custom: { start(): Promise<void>; poll(): void },
) => Promise<Phase>;

/**
 * `kill 1` on every gateway container (through pods/exec, as `kubectl exec … -- kill 1`), then until every EIP's
 * address is on its gateway's net1 again with the QoS filters it had before.
 */
async function restartPhase(
  stack: LocalStack,
  rest: KubeRest,
  names: string[],
  ips: Map<string, string>,
  gatewayCount: number,
  phase: PhaseRunner,
): Promise<NonNullable<E2eResult['restart']>> {
  const pods = Array.from({ length: gatewayCount }, (_, g) => `vpc-nat-gw-gw${g + 1}-0`);
  // EIP name → its gateway's pod: the EIPs were spread round-robin over the gateways.
  const gateways = new Map(names.map((n, i) => [n, pods[i % pods.length]!]));
  const simOf = (pod: string) => stack.api.gateways.get(NAMESPACE, pod);
  const filtersOf = (pod: string) => {
    const byIp = new Map<string, string[]>();
    for (const f of simOf(pod)?.tcFilters() ?? [])
      byIp.set(f.ip, [...(byIp.get(f.ip) ?? []), `${f.direction} ${f.rate} ${f.burst}`].sort());
    return byIp;
  };
  const want = new Map<string, { ip: string; address: string; filters: string }>();
  const beforeFilters = new Map(pods.map((p) => [p, filtersOf(p)]));
  let qosFilters = 0;
  for (const name of names) {
    const ip = ips.get(name);
    if (!ip) continue;
    const f = beforeFilters.get(gateways.get(name)!)?.get(ip) ?? [];
    qosFilters += f.length;
    want.set(name, { ip, address: `${ip}/16`, filters: f.join(',') });
  }
  const restarts0 = new Map(pods.map((p) => [p, simOf(p)?.restarts ?? 0]));
  const seen = new Map<string, number>();
  /** Marks the EIPs of `pod` whose address and QoS filters are back, once its container restarted and ran init. */
  const markBack = (pod: string, now: number) => {
    const sim = simOf(pod);
    if (!sim || sim.restarts === restarts0.get(pod) || !sim.initialised) return;
    const addresses = new Set(sim.net1Addresses());
    const filters = filtersOf(pod);
    for (const [name, w] of want) {
      if (seen.has(name) || gateways.get(name) !== pod) continue;
      if (addresses.has(w.address) && (filters.get(w.ip) ?? []).join(',') === w.filters) seen.set(name, now);
    }
  };
  const execs0 = stack.api.execModel.stats().execs;
  const result = await phase('restart', async () => undefined, seen, {
    start: async () => {
      await Promise.all(pods.map((p) => execIn(rest, p, ['kill', '1'])));
    },
    poll: () => {
      const now = performance.now();
      for (const pod of pods) markBack(pod, now);
    },
  });
  return {
    ...result,
    gatewayExecs: stack.api.execModel.stats().execs - execs0 - pods.length,
    addresses: want.size,
    qosFilters,
  };
}

/** One exec through the local API as this benchmark's own client; resolves when it ends (kill 1: exit 137). */
function execIn(rest: KubeRest, pod: string, argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    rest
      .exec(NAMESPACE, pod, 'vpc-nat-gw', argv, { stdout: () => {}, stderr: () => {}, status: () => {} })
      .then((ws) => {
        ws.on('close', () => resolve());
        ws.on('error', reject);
      }, reject);
  });
}

/** process.memoryUsage().rss every 500 ms (and at each read): the peak of a run without keeping its samples. */
function rssSampler(): { read(): E2eResult['rssMb']; stop(): void } {
  const mb = () => Math.round(process.memoryUsage().rss / 2 ** 20);
  const start = mb();
  let peak = start;
  const timer = setInterval(() => {
    peak = Math.max(peak, mb());
  }, 500);
  timer.unref();
  return {
    read() {
      const end = mb();
      peak = Math.max(peak, end);
      return { start, peak, end };
    },
    stop: () => clearInterval(timer),
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function render(r: E2eResult): string {
  const p = (x: Phase, what: string) => [
    `${what}: ${x.done}/${r.options.n} in ${x.seconds} s; per EIP p50 ${(x.perEip.p50 / 1000).toFixed(1)} s, p90 ${(x.perEip.p90 / 1000).toFixed(1)} s, p99 ${(x.perEip.p99 / 1000).toFixed(1)} s; CPU ${x.cpuMsPerEip} ms per EIP (whole process)`,
    `  Kubernetes API requests per EIP by the handlers: ${x.kube.perEip} (+ ${x.kube.exec} exec); bridge and stand-ins: ${x.kubeOthersPerEip}`,
    ...Object.entries(x.kube.byVerbAndResource).map(([k, v]) => `    ${k.padEnd(32)} ${v}`),
    `  handler invocations per EIP: ${x.invocations.perEip} ${JSON.stringify(x.invocations.byHandler)}; exec time per EIP ${x.execMsPerEip} ms`,
    `  DynamoDB requests per EIP: ${x.dynamo.perEip} (${x.dynamo.readUnits} RCU, ${x.dynamo.writeUnits} WCU)`,
    ...Object.entries(x.dynamo.byOperation).map(([k, v]) => `    ${k.padEnd(32)} ${v}`),
  ];
  const goals = goalsOf(r);
  return [
    `${r.options.n} EIPs on ${r.options.gateways} gateway(s), ${r.options.concurrency} creates in flight, ${r.options.handlers ?? 16} handled at once, read cache ${r.options.cacheMs} ms${r.options.exec ? `, exec latency ${r.options.exec.latencyMs} ms with ${r.options.exec.commands === 'measured' ? 'the measured' : 'no'} per-command costs` : ''}${r.options.qos ? ', with QoS' : ''}${r.options.lambda ? `; as on Lambda: ${r.options.lambda.containers} one-invocation containers per function, ${r.options.lambda.groupEvents} events of a gateway per invocation` : ''}; gateways play kube-ovn ${r.kubeOvnRelease}; Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg()[0]!.toFixed(1)}`,
    '',
    ...p(r.add, 'add (until Ready)'),
    '',
    ...(r.update ? [...p(r.update, 'update (until status.qosPolicy)'), ''] : []),
    ...(r.restart
      ? [
          ...p(
            r.restart,
            `restart (kill 1 on every gateway, until ${r.restart.addresses} addresses and ${r.restart.qosFilters} QoS filters are back)`,
          ),
          `  execs into gateway containers during the restart, everyone's: ${r.restart.gatewayExecs}`,
          '',
        ]
      : []),
    ...p(r.delete, 'delete (until gone)'),
    '',
    `duplicates ${r.duplicates}, not Ready ${r.notReady}, dead letters ${r.deadLetters}`,
    `resident set of the whole stack: ${r.rssMb.start} MB at start, peak ${r.rssMb.peak} MB, ${r.rssMb.end} MB at the end`,
    '',
    ...goals.map((g) => `${g.met ? 'met    ' : 'NOT met'}  ${g.goal}: ${g.actual}`),
  ].join('\n');
}

export function goalsOf(r: E2eResult): { goal: string; met: boolean; actual: string }[] {
  return [
    { goal: '0 duplicates', met: r.duplicates === 0, actual: String(r.duplicates) },
    { goal: 'every EIP Ready', met: r.notReady === 0, actual: `${r.notReady} not Ready` },
    ...(r.options.n === 1000
      ? [
          { goal: '1,000 EIPs Ready in <= 20 s', met: r.add.seconds <= 20, actual: `${r.add.seconds} s` },
          { goal: '... and deleted as fast', met: r.delete.seconds <= 20, actual: `${r.delete.seconds} s` },
        ]
      : []),
    {
      goal: '<= 6 Kubernetes API requests per add (exec apart)',
      met: r.add.kube.perEip <= 6,
      actual: String(r.add.kube.perEip),
    },
    {
      goal: '<= 3 DynamoDB requests per add',
      met: r.add.dynamo.perEip <= 3,
      actual: String(r.add.dynamo.perEip),
    },
  ];
}

export const suite: Suite = {
  description:
    'N EIPs created and deleted at once on the local stack: time to Ready, requests per add, duplicates; with --restart a gateway restart, with --exec-latency real exec costs',
  usage: USAGE,
  async run(args) {
    const { options, execs } = parseE2eArgs(args);
    const results: E2eResult[] = [];
    if (execs && execs.length > 1) {
      // The first run in a process pays its cold start (module loading, JIT, dynalite's first table): a short run
      // first, not reported, so that the runs compared differ only in their exec costs.
      process.stderr.write(`e2e: warm-up run (${WARM_UP_N} EIPs, instant, not reported)\n`);
      await runE2e({ ...options, n: Math.min(options.n, WARM_UP_N), restart: false });
    }
    for (const exec of execs ?? [undefined]) {
      if (exec)
        process.stderr.write(`e2e: exec latency ${exec.latencyMs} ms, per-command costs ${exec.commands}\n`);
      results.push(await runE2e({ ...options, ...(exec && { exec }) }));
    }
    const meta = {
      suite: 'e2e',
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      loadAverageAtEnd: loadavg().map((x) => Math.round(x * 100) / 100),
    };
    if (!execs && !options.restart) {
      const result = results[0]!;
      return {
        table: render(result),
        file: `${args.includes('--quick') ? 'e2e-quick' : `e2e-${options.n}-${options.gateways}gw`}${lambdaSuffix(options)}.json`,
        json: { ...meta, ...result, goals: goalsOf(result) },
      };
    }
    return {
      table: [compareRuns(results), '', ...results.map(render)].join('\n\n'),
      // Named by what was run: a QoS run or another release does not overwrite the plain 1,000-EIP comparison.
      file: `e2e-exec-${args.includes('--quick') ? 'quick' : `${options.n}-${options.gateways}gw`}${options.qos ? '-qos' : ''}${options.kubeOvnRelease ? `-${options.kubeOvnRelease}` : ''}${options.handlers === undefined ? '' : `-h${options.handlers}`}${lambdaSuffix(options)}.json`,
      json: {
        ...meta,
        comparison: comparisonOf(results),
        execGoals: execGoalsOf(results),
        runs: results.map((r) => ({ ...r, goals: goalsOf(r) })),
      },
    };
  },
};
