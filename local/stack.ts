/**
 * The local stack: everything the product needs, in one process, on loopback — dynalite, the local Kubernetes API
 * with the kube-ovn stand-ins, the bridge with the in-process sink, and the four handlers on the real adapters.
 * Each component talks to the API as its own identity (local/identities.ts), under the RBAC and admission policy
 * infra/ deploys; the kubeconfig the stack prints is the administrator's. `npm start` (scripts/start.ts) runs it;
 * the end-to-end tests start it in-process.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  ApiException,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
} from '@kubernetes/client-node';
import { buildDeps } from '../shared/adapters/live.js';
import type { AuditDeps } from '../shared/audit/audit.js';
import { auditDepsOf, collect, startDriftRepair } from '../shared/audit/live.js';
import { DEFAULT_DRIFT_PERIOD_MS } from '../shared/audit/schedule.js';
import { type Bridge, inProcessSink, startBridge } from '../shared/bridge/index.js';
import { BRIDGE_SERVICE } from '../shared/bridge/metrics.js';
import { loadConfig } from '../shared/config/config.js';
import type { Outcome } from '../shared/core/outcome.js';
import type { EipEvent } from '../shared/events.js';
import { jsonLogger, type Level } from '../shared/observability/log.js';
import type { Deps, Logger } from '../shared/ports.js';
import { startStandIns } from './controllers/index.js';
import { startKubeOvnEipModel } from './controllers/kube-ovn-eip.js';
import { MetricRecorder } from './dashboard/recorder.js';
import { type Dashboard, type DriftCheck, OutcomeLog, startDashboard } from './dashboard/server.js';
import { demoObjects } from './demo.js';
import { localDynamoClient, startLocalDynamo } from './dynamo.js';
import { type Component, componentTokens, kubeOvnFence, labManifests, type Manifest } from './identities.js';
import { type KubeApi, startKubeApi } from './kube-api/index.js';
import { kubeConfigFromFile } from './kubeconfig.js';
import { type LambdaModelOptions, lambdaModelSink } from './lambda-model.js';
import { breakPredecessorLeases, stackInstance } from './leases.js';
import type { ExecModelOptions } from './natgw/exec-model.js';
import { DEFAULT_RELEASE, type KubeOvnRelease } from './natgw/releases.js';
import { type NetnsBackendOptions, startNetnsBackend } from './netns/backend.js';
import { ensureTable } from './table.js';

export const TABLE_NAME = 'eip-lambdas-local-ipam';
export const NAMESPACE = 'kube-system';

export interface LocalStackOptions {
  /** Port of the Kubernetes API (0 = ephemeral). */
  port?: number;
  /** Where the kubeconfig is written. */
  kubeconfig?: string;
  /** Keep the Kubernetes objects and DynamoDB data across restarts. */
  dataDir?: string;
  /** Seed the demo objects (default true). */
  demo?: boolean;
  /** Where .local/stack.json (read by `npm run invoke`) is written; default next to the kubeconfig. */
  stackFile?: string;
  /** In-process sink retries: attempts after the first, and the first backoff. */
  retries?: number;
  retryBackoffMs?: number;
  /** In-process sink: keep retrying at least this long before parking a dead letter (default: the longest lease). */
  retryForMs?: number;
  /**
   * Serve the local dashboard (local/dashboard) on 127.0.0.1 at this port (0 = a free one); undefined = none.
   * With it, the metrics the handlers and the bridge emit are kept in memory for the page.
   */
  dashboardPort?: number;
  /** Bridge resync period. */
  resyncMs?: number;
  /** EIPs the bridge hands to the in-process handlers at once (its CONCURRENCY; default 16). */
  concurrency?: number;
  /**
   * Period of the drift pass over every gateway and its repair (shared/audit, ADR 0088): default 30 s, as the gc
   * function on AWS; 0 = off (garbage collection too, unless gcMs is given).
   */
  driftRepairMs?: number;
  /** Period of the garbage collection (ADR 0046); default the resync period (10 min); 0 = off. */
  gcMs?: number;
  /** An orphan address is removed once seen this long (two passes); default DEFAULT_ORPHAN_GRACE_MS. */
  orphanGraceMs?: number;
  /** Health server port of the bridge (0 = ephemeral, undefined = none). */
  healthPort?: number;
  logLevel?: Level;
  /** Structured logs (handlers, bridge); default: JSON lines on stderr. */
  log?: Logger;
  /**
   * Run a model of an unmodified kube-ovn-controller's IptablesEIP path beside the product
   * (local/controllers/kube-ovn-eip.ts, ADR 0097). Default: off.
   */
  kubeOvnEipController?: boolean;
  /** Human progress lines; default: stdout. */
  say?: (line: string) => void;
  /**
   * Back gateway pods with Linux network namespaces running kube-ovn's own nat-gateway.sh (local/netns/) instead of
   * the simulator. Throws NetnsRefused (local/netns/backend.ts) when the machine cannot (not Linux, not root, tools
   * or scripts missing).
   */
  netnsGateway?: Omit<NetnsBackendOptions, 'log' | 'warn'>;
  /** The kube-ovn release the lab plays: gateway pods, their nat-gateway.sh, the EIP model (default: releases.ts). */
  kubeOvnRelease?: KubeOvnRelease;
  /**
   * What an exec into a gateway pod costs (local/natgw/exec-model.ts: start latency, per-command costs, the xtables
   * lock). Default: nothing, the simulator answers at once; `npm start` asks for a real pod's costs.
   */
  execModel?: ExecModelOptions;
  /**
   * The handlers' read cache in ms (ADR 0028), as a warm Lambda container keeps it. Default: EIP_READ_CACHE_MS when
   * set, else 5000 as in Lambda; 0 turns it off.
   */
  readCacheMs?: number;
  /**
   * Run the handlers as on AWS instead of in the bridge's process: the lambda sink (with its grouping of one
   * gateway's events, ADR 0112) invoking functions whose containers run one invocation at a time
   * (local/lambda-model.ts). Default: the in-process sink, all handlers in one container.
   */
  lambda?: LambdaModelOptions;
}

export interface LocalStack {
  api: KubeApi;
  /** The kube-ovn release the lab plays. */
  kubeOvnRelease: KubeOvnRelease;
  bridge: Bridge;
  /** The administrator's kubeconfig. */
  kubeconfig: string;
  /** Each component's kubeconfig, beside the administrator's (kubeconfig-handlers, -bridge, -kube-ovn). */
  kubeconfigs: Record<Component, string>;
  dynamodbEndpoint: string;
  tableName: string;
  /** The handlers' DynamoDB client (benchmarks count its requests with a middleware). */
  dynamo: DynamoDBClient;
  deadLetters(): ReturnType<ReturnType<typeof inProcessSink>['deadLetters']>;
  /** The local dashboard's URL, when it was asked for (dashboardPort). */
  dashboardUrl?: string;
  /** Resolves when the in-process sink has nothing queued or running. */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local stack's start-up in its documented order (ADR 0046), pinned by test/e2e; lab code, not shipped
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const say = options.say ?? ((line: string) => process.stdout.write(`${line}\n`));
  const log =
    options.log ??
    jsonLogger({
      level: options.logLevel ?? 'info',
      write: (l) => process.stderr.write(`${l}\n`),
      fields: { service: 'local-stack' },
    });
  const kubeconfig = resolve(options.kubeconfig ?? '.local/kubeconfig');
  const release = options.kubeOvnRelease ?? DEFAULT_RELEASE;
  const stackFile = resolve(options.stackFile ?? join(dirname(kubeconfig), 'stack.json'));
  const dataDir = options.dataDir ? resolve(options.dataDir) : undefined;
  const stops: (() => Promise<void>)[] = [];
  const stop = async (): Promise<void> => {
    for (const s of stops.reverse())
      await s().catch((e: unknown) => log.warn('stop step failed', { error: String(e) }));
    stops.length = 0;
  };

  try {
    // The gateway backend starts first (it refuses early when the machine cannot run it) and stops last
    // (stops run in reverse): the API's pods go first, then their namespaces.
    const gatewayBackend = options.netnsGateway
      ? await startNetnsBackend({
          ...options.netnsGateway,
          log: (l) => log.info(l),
          warn: (l) => log.warn(l),
        })
      : undefined;
    if (gatewayBackend) {
      stops.push(() => gatewayBackend.close());
      say(
        `gateway: kube-ovn's nat-gateway.sh in network namespaces ${gatewayBackend.base}-* (scripts from ${options.netnsGateway?.scripts})`,
      );
    }
    if (dataDir) await mkdir(dataDir, { recursive: true });
    const dynamo = await startLocalDynamo({ ...(dataDir && { dataDir: join(dataDir, 'dynamodb') }) });
    stops.push(() => dynamo.close());
    const client = localDynamoClient(dynamo.endpoint);
    stops.push(async () => client.destroy());
    await ensureTable(client, TABLE_NAME);
    say(
      `dynamodb: dynalite at ${dynamo.endpoint}, table ${TABLE_NAME}${dataDir ? ` (data in ${dataDir}/dynamodb)` : ' (in memory)'}`,
    );

    const tokens = componentTokens();
    const api = await startKubeApi({
      kubeOvnRelease: release,
      ...(options.port !== undefined && { port: options.port }),
      ...(dataDir && { dataDir: join(dataDir, 'kube') }),
      ...(gatewayBackend && { gatewayBackend }),
      tokens: Object.values(tokens),
      ...(options.execModel && { execModel: options.execModel }),
    });
    stops.push(() => api.close());
    await mkdir(dirname(kubeconfig), { recursive: true });
    await api.writeKubeconfig(kubeconfig);
    const kubeconfigs = {} as Record<Component, string>;
    for (const [c, t] of Object.entries(tokens) as [Component, { token: string }][]) {
      kubeconfigs[c] = `${kubeconfig}-${c}`;
      await api.writeKubeconfig(kubeconfigs[c], t.token);
    }
    say(
      `kubernetes: local API at ${api.tlsUrl}, kubeconfig ${kubeconfig} (administrator); gateways play kube-ovn ${release}`,
    );

    const kubeConfig = kubeConfigFromFile(kubeconfig);
    const { docs, notes } = labManifests();
    await applyManifests(kubeConfig, docs);
    say(
      `rbac: applied ${docs.length} objects (${notes.join('; ')}, kube-ovn's local/rbac/kube-ovn.yaml); components run as ${Object.values(
        tokens,
      )
        .map((t) => t.user)
        .join(', ')}, kubeconfigs ${Object.values(kubeconfigs).join(', ')}`,
    );
    const as = (c: Component) => kubeConfigFromFile(kubeconfigs[c]);
    const kubeOvnConfig = as('kube-ovn');
    const standIns = await startStandIns({
      kubeConfig: kubeOvnConfig,
      namespace: NAMESPACE,
      log: (l) => log.debug(l),
      featureSwitch: true,
      release,
    });
    stops.push(() => standIns.stop());
    if (options.kubeOvnEipController) {
      // As docs/deploy-eks.md step 2 sets it up: the fence, and (with the demo) a dedicated range in excludeIps.
      const fence = kubeOvnFence();
      await applyManifests(kubeConfig, fence.docs);
      say(
        `kube-ovn: the fence infra/kube-ovn-fence applied (${fence.how}; kubectl delete -k infra/kube-ovn-fence to see kube-ovn unfenced)`,
      );
      const model = await startKubeOvnEipModel({
        kubeConfig: kubeOvnConfig,
        namespace: NAMESPACE,
        log: (l) => log.info(l),
        release,
      });
      stops.push(() => model.stop());
      say(
        `kube-ovn: a MODEL of an unmodified kube-ovn-controller ${model.release} (its IptablesEIP, gateway-redo and FIP workers) runs beside the product`,
      );
    }

    const handlersConfig = as('handlers');
    const config = loadConfig({
      KUBECONFIG: kubeconfigs.handlers,
      TABLE_NAME,
      DYNAMODB_ENDPOINT: dynamo.endpoint,
      EIP_NAMESPACE: NAMESPACE,
      LOG_LEVEL: options.logLevel ?? 'info',
      // As a warm Lambda container keeps it (ADR 0028): 5 s unless asked otherwise (EIP_READ_CACHE_MS=0: off).
      EIP_READ_CACHE_MS: String(options.readCacheMs ?? (process.env.EIP_READ_CACHE_MS?.trim() || 5_000)),
    });
    const instance = stackInstance();
    if (dataDir) {
      const broken = await breakPredecessorLeases(client, TABLE_NAME, instance.id);
      if (broken.length > 0)
        say(`leases: broke ${broken.length} lease(s) the previous run of this stack held when it stopped`);
    }
    // With the dashboard, every metric point is kept for it (the Metrics port seam), as CloudWatch would get it.
    const recorder = options.dashboardPort !== undefined ? new MetricRecorder() : undefined;
    const outcomes = recorder ? new OutcomeLog() : undefined;
    const deps = {
      ...buildDeps(config, {
        kubeConfig: handlersConfig,
        dynamo: client,
        log,
        ...(recorder && { metrics: recorder.forService(config.service) }),
      }),
      newId: instance.holderId,
    };
    const onOutcome = outcomes && ((event: EipEvent, outcome: Outcome) => outcomes.add(event, outcome));
    const sink = options.lambda
      ? lambdaModelSink({
          ...options.lambda,
          getDeps: async () => deps,
          log,
          ...(onOutcome && { onOutcome }),
        })
      : inProcessSink({
          getDeps: async () => deps,
          retries: options.retries ?? 5,
          backoffMs: options.retryBackoffMs ?? 500,
          ...(options.retryForMs !== undefined && { retryForMs: options.retryForMs }),
          log,
          ...(onOutcome && { onOutcome }),
        });
    const bridge = await startBridge({
      kubeConfig: as('bridge'),
      namespace: NAMESPACE,
      sink,
      log,
      ...(options.resyncMs !== undefined && { resyncMs: options.resyncMs }),
      ...(options.concurrency !== undefined && { concurrency: options.concurrency }),
      ...(options.healthPort !== undefined && { healthPort: options.healthPort }),
      // The bridge's heartbeat, failures, queue depth and foreign writers, once per local dashboard period.
      ...(recorder && { metrics: recorder.forService(BRIDGE_SERVICE), heartbeatMs: 10_000 }),
    });
    stops.push(() => bridge.drain(10_000));
    await bridge.ready();
    // The drift passes and collection of the gc function (startMaintenance, below); its role is mapped to the
    // handlers' group too (docs/deploy-eks.md).
    const auditDeps = auditDepsOf(config, deps, { kubeConfig: handlersConfig, dynamo: client });
    const maintenance = startMaintenance(deps, auditDeps, log, options);
    stops.push(() => maintenance.stop());
    say(
      `bridge: watching kubeovn.io/v1 EIPs, NAT rules, QoS policies and gateway pods in ${NAMESPACE}${bridge.healthUrl ? `; health at ${bridge.healthUrl}` : ''}`,
    );

    let dashboard: Dashboard | undefined;
    if (recorder && outcomes) {
      dashboard = await startDashboard({
        recorder,
        kubeConfig,
        dynamo: client,
        tableName: TABLE_NAME,
        deadLetters: () => sink.deadLetters(),
        outcomes: () => outcomes.list(),
        drift: () => maintenance.last(),
        gatewayPods: () => deps.cluster.listGatewayPods(),
        port: options.dashboardPort,
        kubeOvnRelease: release,
      });
      stops.push(() => dashboard!.close());
      say(`dashboard: ${dashboard.url} (read-only, loopback only)`);
    }

    if (options.demo !== false)
      await seedDemo(kubeConfig, release, say, options.kubeOvnEipController === true);
    if (maintenance.on) {
      // The demo's gateway pod comes from the stand-in a moment after its VpcNatGateway: the first run waits for it
      // (5 s at most), so that it reserves the pod's own address as the gc function would.
      for (let t = Date.now(); options.demo !== false && Date.now() - t < 5_000; ) {
        if ((await deps.cluster.listGatewayPods()).some((p) => Object.keys(p.addresses ?? {}).length > 0))
          break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await maintenance.first();
    }

    await mkdir(dirname(stackFile), { recursive: true });
    await writeFile(
      stackFile,
      `${JSON.stringify({ kubeconfig, kubeconfigs, dynamodbEndpoint: dynamo.endpoint, tableName: TABLE_NAME, namespace: NAMESPACE, api: api.tlsUrl }, null, 2)}\n`,
    );
    stops.push(async () => {
      await rm(stackFile, { force: true });
    });

    return {
      api,
      kubeOvnRelease: release,
      bridge,
      kubeconfig,
      kubeconfigs,
      dynamodbEndpoint: dynamo.endpoint,
      tableName: TABLE_NAME,
      dynamo: client,
      deadLetters: () => sink.deadLetters(),
      ...(dashboard && { dashboardUrl: dashboard.url }),
      idle: () => sink.idle(),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Creates each manifest, or replaces it when it exists (a restart with --data-dir), as the administrator. */
async function applyManifests(kubeConfig: KubeConfig, docs: readonly Manifest[]): Promise<void> {
  const client = KubernetesObjectApi.makeApiClient(kubeConfig);
  for (const doc of docs) {
    const obj = doc as KubernetesObject & { metadata: { name: string } };
    try {
      const existing = await client.read(obj);
      await client.replace({
        ...obj,
        metadata: { ...obj.metadata, resourceVersion: existing.metadata?.resourceVersion ?? '' },
      });
    } catch (e) {
      if (!(e instanceof ApiException && e.code === 404)) throw e;
      await client.create(obj);
    }
  }
}

/** The demo's dedicated EIP range beside the model of kube-ovn-controller (in excludeIps too, ADR 0096). */
const DEMO_EIP_RANGE = '172.18.0.100..172.18.0.200';

/** Creates the demo objects that are missing (an existing one, e.g. from --data-dir, is left as it is). */
async function seedDemo(
  kubeConfig: Parameters<typeof KubernetesObjectApi.makeApiClient>[0],
  release: KubeOvnRelease,
  say: (l: string) => void,
  besideKubeOvn: boolean,
) {
  const client = KubernetesObjectApi.makeApiClient(kubeConfig);
  for (const obj of demoObjects(NAMESPACE, release, besideKubeOvn ? DEMO_EIP_RANGE : undefined)) {
    const what = `${obj.kind} ${obj.metadata?.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata?.name}`;
    try {
      await client.create(obj as KubernetesObject);
      say(`demo: created ${what}`);
    } catch (e) {
      if (e instanceof ApiException && e.code === 409) say(`demo: ${what} already exists`);
      else throw e;
    }
  }
}

/**
 * What the gc function does on AWS (ADR 0088): a drift pass over every gateway and its repair every
 * `driftRepairMs` (30 s), and garbage collection (the gateway pods' own addresses reserved) every `gcMs` (the resync
 * period, unless the passes are off), never two of a kind at once; `first` runs both once, collection first
 * (ADR 0046). Its own timers (not startDriftRepair's) so the dashboard gets each pass's summary (`last`).
 */
function startMaintenance(
  deps: Deps,
  auditDeps: AuditDeps,
  log: Logger,
  options: Pick<LocalStackOptions, 'driftRepairMs' | 'gcMs' | 'resyncMs' | 'orphanGraceMs'>,
): { on: boolean; first(): Promise<void>; last(): DriftCheck | undefined; stop(): Promise<void> } {
  const driftMs = options.driftRepairMs ?? DEFAULT_DRIFT_PERIOD_MS;
  const gcMs = options.gcMs ?? (driftMs > 0 ? (options.resyncMs ?? 600_000) : 0);
  const drift = startDriftRepair(auditDeps, 0, {
    ...(options.orphanGraceMs !== undefined && { orphanGraceMs: options.orphanGraceMs }),
  });
  let last: DriftCheck | undefined;
  const pass = async (): Promise<void> => {
    const summary = await drift.runNow();
    last = { at: new Date().toISOString(), ...(summary ?? { failed: true }) };
  };
  let collecting: Promise<void> | undefined;
  const gc = (): Promise<void> =>
    (collecting ??= collect(deps)
      .then(() => undefined)
      .catch((e: unknown) => log.warn('garbage collection failed', { error: String(e) }))
      .finally(() => {
        collecting = undefined;
      }));
  const timers = [
    driftMs > 0 ? setInterval(() => void pass(), driftMs) : undefined,
    gcMs > 0 ? setInterval(() => void gc(), gcMs) : undefined,
  ];
  for (const t of timers) t?.unref();
  return {
    on: driftMs > 0 || gcMs > 0,
    async first() {
      if (gcMs > 0) await gc();
      if (driftMs > 0) await pass();
    },
    last: () => last,
    async stop() {
      for (const t of timers) clearInterval(t);
      await drift.stop();
      await collecting;
    },
  };
}
