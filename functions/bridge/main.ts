/**
 * The bridge's container entry point: wiring only. Reads and validates its configuration from the environment,
 * starts the bridge with the configured sink, serves /healthz, /readyz and /metrics, and on SIGTERM (or SIGINT)
 * drains — stops the watches, lets queued events reach the sink until DRAIN_SECONDS — and exits 0.
 *
 *   npx tsx functions/bridge/main.ts --help
 */
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { KubeConfig } from '@kubernetes/client-node';
import { buildDeps } from '../../shared/adapters/live.js';
import { type BridgeConfig, loadBridgeConfig } from '../../shared/bridge/config.js';
import {
  BridgeMetrics,
  cloudWatchPublisher,
  emfPublisher,
  eventBridgeSink,
  inProcessSink,
  lambdaSink,
  type Sink,
  startBridge,
} from '../../shared/bridge/index.js';
import { ConfigError, loadConfig } from '../../shared/config/config.js';
import { jsonLogger } from '../../shared/observability/log.js';
import type { Logger } from '../../shared/ports.js';

const HELP = `eip-lambdas bridge: watches IptablesEIPs, their NAT rules, QoS policies and the NAT gateway pods, and
forwards small events to the add, update, reset and delete handlers.

usage: bridge [--help]

environment:
  KUBECONFIG                 kubeconfig file (default: the pod's ServiceAccount)
  EIP_NAMESPACE              namespace of the NAT gateway pods (default kube-system)
  BRIDGE_SINK                eventbridge | lambda | in-process (default eventbridge)
  EVENT_BUS_NAME             EventBridge bus name or ARN (default: the account's default bus)
  ADD_FUNCTION, UPDATE_FUNCTION, RESET_FUNCTION, DELETE_FUNCTION
                             Lambda function name or ARN per handler (lambda sink)
  RESYNC_SECONDS             re-send every EIP to update this often; 0 = never (default 600)
  RESYNC_RATE                at most this many EIPs per second, spread over the period (default 20)
  CONCURRENCY                EIPs handled at once (default 16)
  HEALTH_PORT, HEALTH_HOST   /healthz /readyz /metrics (default 8080 on 0.0.0.0; port 0 = any free port)
  DRAIN_SECONDS              on SIGTERM, wait this long for queued events (default 25)
  STATS_SECONDS              log the counters this often; 0 = never (default 60)
  LOG_LEVEL                  debug | info | warn | error (default info)
  QUEUE_LIMIT                waiting events at which the watches pause (default 10000)
  BRIDGE_METRICS             cloudwatch | emf | none: where BridgeHeartbeat, BridgeEventsFailed, BridgeQueueDepth
                             and ForeignWriter go (namespace EipLambdas/<STAGE>, dimension service=eip-bridge;
                             default cloudwatch, none with the in-process sink)
  STAGE                      the stack's stage, whose alarms watch these metrics (required unless
                             BRIDGE_METRICS=none)
  HEARTBEAT_SECONDS          heartbeat and metrics period; 0 = off (default 60)
  BRIDGE_COEXISTENCE_CHECK   refuse | warn | off: at start, check that kube-ovn's IPAM stays out of the
                             dedicated EIP range of each external subnet (default refuse: exit 1 on a conflict)
  AWS_REGION, AWS_*          the AWS SDK's usual settings (endpoints, credentials); the region falls back to
                             AWS_DEFAULT_REGION, then the AWS profile's
  The in-process sink runs the handlers here and needs their settings too (TABLE_NAME, ...).

Logs are JSON lines on stdout. Exit status: 0 after a drain, 1 when the bridge cannot start, 2 on bad
configuration.
`;

function kubeConfigOf(config: BridgeConfig): KubeConfig {
  const kc = new KubeConfig();
  if (config.kubeconfig) kc.loadFromFile(config.kubeconfig);
  else kc.loadFromCluster();
  return kc;
}

/** The region found as the AWS CLI finds it (config.ts): the SDK alone would ignore AWS_DEFAULT_REGION. */
const awsOptions = (config: BridgeConfig) => (config.region ? { region: config.region } : {});

function metricsOf(config: BridgeConfig, log: Logger): BridgeMetrics | undefined {
  const onError = (error: string) => log.warn('metrics not published', { target: config.metrics, error });
  switch (config.metrics) {
    case 'cloudwatch':
      return new BridgeMetrics(
        cloudWatchPublisher(new CloudWatchClient(awsOptions(config)), config.metricsNamespace),
        onError,
      );
    case 'emf':
      return new BridgeMetrics(emfPublisher(undefined, config.metricsNamespace), onError);
    case 'none':
      return undefined;
  }
}

function sinkOf(config: BridgeConfig, kubeConfig: KubeConfig, log: Logger): Sink {
  switch (config.sink) {
    case 'eventbridge':
      return eventBridgeSink({
        client: new EventBridgeClient(awsOptions(config)),
        ...(config.eventBusName && { eventBusName: config.eventBusName }),
        verifyBus: true,
        groupEvents: config.eventBatchMax,
        lingerMs: config.eventBatchWindowMs,
        log,
      });
    case 'lambda':
      return lambdaSink({
        client: new LambdaClient(awsOptions(config)),
        functions: config.functions!,
        groupEvents: config.eventBatchMax,
        windowMs: config.eventBatchWindowMs,
        log,
      });
    case 'in-process': {
      const deps = buildDeps(loadConfig(process.env), { kubeConfig, log });
      return inProcessSink({ getDeps: async () => deps, log });
    }
  }
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(HELP);
    return;
  }
  const unknown = argv.filter((a) => a !== '--');
  if (unknown.length) {
    process.stderr.write(`unknown argument: ${unknown[0]}\n\n${HELP}`);
    process.exitCode = 2;
    return;
  }
  let config: Readonly<BridgeConfig>;
  let kubeConfig: KubeConfig;
  let sink: Sink;
  const boot = jsonLogger({ fields: { service: 'eip-bridge' } });
  let log: Logger = boot;
  try {
    config = loadBridgeConfig(process.env);
    log = jsonLogger({ level: config.logLevel, fields: { service: 'eip-bridge' } });
    kubeConfig = kubeConfigOf(config);
    sink = sinkOf(config, kubeConfig, log);
  } catch (e) {
    const problems = e instanceof ConfigError ? e.problems : [(e as Error).message];
    log.error('invalid configuration', { problems });
    process.exitCode = 2;
    return;
  }

  const metrics = metricsOf(config, log);
  const bridge = await startBridge({
    kubeConfig,
    namespace: config.namespace,
    sink,
    log,
    ...(metrics && { metrics }),
    heartbeatMs: config.heartbeatMs,
    queueLimit: config.queueLimit,
    resyncMs: config.resyncMs,
    resyncRate: config.resyncRate,
    concurrency: config.concurrency,
    healthPort: config.healthPort,
    healthHost: config.healthHost,
    statsIntervalMs: config.statsMs,
    coexistenceCheck: config.coexistenceCheck,
  });
  log.info('bridge started', {
    sink: config.sink,
    namespace: config.namespace,
    healthUrl: bridge.healthUrl,
    resyncSeconds: config.resyncMs / 1000,
    resyncRate: config.resyncRate,
    metrics: config.metrics,
  });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('stopping', { signal, drainSeconds: config.drainMs / 1000 });
    bridge
      .drain(config.drainMs)
      .catch((e) => log.error('drain failed', { error: String(e) }))
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main(process.argv.slice(2)).catch((e) => {
  process.stdout.write(
    `${JSON.stringify({ time: new Date().toISOString(), level: 'error', message: 'bridge failed to start', service: 'eip-bridge', error: String(e) })}\n`,
  );
  process.exit(1);
});
