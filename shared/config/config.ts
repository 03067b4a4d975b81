/**
 * Configuration, read once at cold start from the environment and validated; every problem is reported at once.
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `EIP_NAMESPACE` | namespace of the NAT gateway pods and the nat-gw ConfigMaps (kube-ovn's controller namespace) | `kube-system` |
 * | `KUBECONFIG` | kubeconfig file (local runs, the local stack) | — |
 * | `EKS_CLUSTER_NAME`, `EKS_ENDPOINT`, `EKS_CA_DATA` | EKS API server, base64 CA; the handler mints a `k8s-aws-v1.` token from its IAM role | — |
 * | `TABLE_NAME` | DynamoDB table (IPAM, leases) | — |
 * | `DYNAMODB_ENDPOINT` | DynamoDB endpoint (dynalite locally); `AWS_ENDPOINT_URL_DYNAMODB` works too | AWS |
 * | `EXEC_TIMEOUT_MS` | hard timeout of one nat-gateway.sh exec | `20000` |
 * | `GATEWAY_EXEC_LANES` | execs of one op one container runs into one gateway pod at once for long work | `8` |
 * | `EIP_READ_CACHE_MS` | how long a warm container reuses the nat-gw ConfigMaps, Subnets and VpcNatGateways it read (0: off; ADR 0028) | `5000` in Lambda, else `0` |
 * | `LOG_LEVEL` | `debug`, `info`, `warn`, `error` (`AWS_LAMBDA_LOG_LEVEL`, set by the function's logging configuration, wins) | `info` |
 * | `KUBE_OVN_RELEASE` | the kube-ovn release a gateway speaks when its pod does not tell (`1.12`, `1.13`, `1.14`, `1.15`, `1.16`, `master`); `auto` or empty: none (docs/compatibility.md) | `auto` |
 * | `DRIFT_REPAIR` | `gc` only: `off` skips the drift passes over the gateways (collection still runs) | `on` |
 * | `DRIFT_PERIOD_SECONDS` | `gc` only: seconds between two drift passes, a divisor of the minute: 10, 12, 15, 20, 30, 60 (ADR 0088) | `30` |
 * | `GC_EVERY_MINUTES` | `gc` only: garbage collection in every n-th minute's invocation, 1–1440 | `60` |
 * | `AWS_LAMBDA_FUNCTION_NAME` | set by Lambda: the service name in logs, EMF metrics instead of counters, the Events' reporting instance | — |
 * | `AWS_ACCESS_KEY_ID` | with `DYNAMODB_ENDPOINT` and no key, placeholder credentials are used (dynalite accepts any) | — |
 * | `STAGE` | the stack's stage: metrics go to the namespace `EipLambdas/<STAGE>` (ADR 0080) | none: `EipLambdas` |
 * | `AWS_REGION`, `AWS_DEFAULT_REGION` | region of DynamoDB and of the EKS token; else the AWS profile's (`AWS_PROFILE`, `AWS_CONFIG_FILE`; region.ts) | required, but for a local `DYNAMODB_ENDPOINT` |
 *
 * Nothing in functions/ or shared/ reads the environment but this loader and the bridge's (shared/bridge/config.ts),
 * except the logger's per-invocation trace header (observability/log.ts; ADR 0053).
 */
import { parseRelease } from '../domain/dialect/dialects.js';
import { type Level, levelFromEnv } from '../observability/log.js';
import { metricsNamespace, STAGE_NAME } from '../observability/metrics.js';
import { REGION_NAME, resolveRegion } from './region.js';

export type KubeAccess =
  | { kind: 'kubeconfig'; path: string }
  | { kind: 'eks'; clusterName: string; endpoint: string; caData: string; region: string };

export interface Config {
  namespace: string;
  kube: KubeAccess;
  /** `placeholderCredentials`: a local endpoint and no AWS key in the environment (dynalite accepts any). */
  dynamo: { tableName: string; endpoint?: string; region: string; placeholderCredentials: boolean };
  execTimeoutMs: number;
  /** Execs of one op into one pod at once for long work (GATEWAY_EXEC_LANES, ADR 0125). */
  execLanes: number;
  /** Per-container cache of the slowly changing objects an add reads (ADR 0028); 0 turns it off. */
  readCacheMs: number;
  /**
   * The release a gateway is taken to speak when neither its VpcNatGateway's annotation, its image tag nor its
   * markers decide it (shared/domain/dialect/detect.ts); undefined: such a gateway is refused.
   */
  kubeOvnRelease?: string;
  logLevel: Level;
  /** The Lambda function's name (AWS_LAMBDA_FUNCTION_NAME), else `eip-lambdas`. */
  service: string;
  /** Running in Lambda: metrics go out as EMF lines, not into in-process counters. */
  inLambda: boolean;
  /** The gc function's drift passes (DRIFT_REPAIR, docs/adr/0039-drift-repair.md). */
  driftRepair: boolean;
  /** When the gc function's maintenance runs (ADR 0088; shared/audit/schedule.ts). */
  maintenance: {
    /** Time between two drift passes (DRIFT_PERIOD_SECONDS). */
    driftPeriodMs: number;
    /** Drift passes one scheduled (once-a-minute) invocation runs. */
    passesPerMinute: number;
    /** Garbage collection in the invocation of every n-th minute (GC_EVERY_MINUTES). */
    gcEveryMinutes: number;
  };
  /** CloudWatch namespace of the EMF metrics: `EipLambdas/<STAGE>` (the stack sets STAGE), else `EipLambdas`. */
  metricsNamespace: string;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/** Drift periods that divide the scheduled minute evenly (ADR 0088). */
const DRIFT_PERIODS_SECONDS = [10, 12, 15, 20, 30, 60];

/** DRIFT_PERIOD_SECONDS and GC_EVERY_MINUTES: the gc function's schedule within its once-a-minute invocation. */
function maintenanceOf(env: NodeJS.ProcessEnv, problems: string[]): Config['maintenance'] {
  const period = env.DRIFT_PERIOD_SECONDS?.trim() ? Number(env.DRIFT_PERIOD_SECONDS) : 30;
  const valid = DRIFT_PERIODS_SECONDS.includes(period);
  if (!valid)
    problems.push(
      `DRIFT_PERIOD_SECONDS must be one of ${DRIFT_PERIODS_SECONDS.join(', ')} (a divisor of the scheduled minute), got "${env.DRIFT_PERIOD_SECONDS}"`,
    );
  const gcEveryMinutes = intIn('GC_EVERY_MINUTES', env.GC_EVERY_MINUTES, 60, [1, 1440], problems);
  const seconds = valid ? period : 30;
  return { driftPeriodMs: seconds * 1000, passesPerMinute: 60 / seconds, gcEveryMinutes };
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The Kubernetes API access: EKS when any of its variables is set (then all must be), else a kubeconfig. */
function kubeAccessOf(env: NodeJS.ProcessEnv, region: string, problems: string[]): KubeAccess | undefined {
  const eksVars = ['EKS_CLUSTER_NAME', 'EKS_ENDPOINT', 'EKS_CA_DATA'] as const;
  const eksSet = eksVars.filter((k) => env[k]?.trim());
  if (eksSet.length === 0) {
    if (env.KUBECONFIG?.trim()) return { kind: 'kubeconfig', path: env.KUBECONFIG.trim() };
    problems.push(
      'no Kubernetes API configured: set KUBECONFIG, or EKS_CLUSTER_NAME, EKS_ENDPOINT and EKS_CA_DATA',
    );
    return undefined;
  }
  if (eksSet.length < eksVars.length) {
    problems.push(
      `EKS access needs all of ${eksVars.join(', ')}; missing ${eksVars.filter((k) => !eksSet.includes(k)).join(', ')}`,
    );
    return undefined;
  }
  if (!/^https:\/\//.test(env.EKS_ENDPOINT!.trim())) {
    problems.push('EKS_ENDPOINT must be an https:// URL');
    return undefined;
  }
  return {
    kind: 'eks',
    clusterName: env.EKS_CLUSTER_NAME!.trim(),
    endpoint: env.EKS_ENDPOINT!.trim(),
    caData: env.EKS_CA_DATA!.trim(),
    region,
  };
}

/** The table, its endpoint (dynalite locally) and whether placeholder credentials stand in for a local endpoint. */
function dynamoOf(env: NodeJS.ProcessEnv, region: string, problems: string[]): Config['dynamo'] {
  const tableName = env.TABLE_NAME?.trim() ?? '';
  if (!tableName) problems.push('TABLE_NAME is required (the DynamoDB table holding allocations and leases)');
  else if (!/^[A-Za-z0-9_.-]{3,255}$/.test(tableName))
    problems.push(`TABLE_NAME "${tableName}" is not a valid table name`);
  const endpoint = env.DYNAMODB_ENDPOINT?.trim() || env.AWS_ENDPOINT_URL_DYNAMODB?.trim() || undefined;
  if (endpoint && !/^https?:\/\//.test(endpoint))
    problems.push(`DYNAMODB_ENDPOINT "${endpoint}" must be an http(s) URL`);
  return {
    tableName,
    ...(endpoint && { endpoint }),
    region,
    placeholderCredentials: !!endpoint && !env.AWS_ACCESS_KEY_ID,
  };
}

/** `value` as an integer in [min, max], or `fallback` when unset; a problem naming `name` otherwise. */
function intIn(
  name: string,
  value: string | undefined,
  fallback: number,
  [min, max]: [number, number],
  problems: string[],
): number {
  const n = value?.trim() ? Number(value) : fallback;
  if (!Number.isInteger(n) || n < min || n > max)
    problems.push(`${name} must be an integer between ${min} and ${max}, got "${value}"`);
  return n;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  const problems: string[] = [];
  const namespace = env.EIP_NAMESPACE?.trim() || 'kube-system';
  if (!DNS_LABEL.test(namespace) || namespace.length > 63)
    problems.push(`EIP_NAMESPACE "${namespace}" is not a namespace name`);

  const region = regionOf(env, problems);
  const kube = kubeAccessOf(env, region ?? '', problems);
  const dynamo = dynamoOf(env, region ?? 'local', problems);
  requireRegion(region, kube, dynamo, problems);
  const execTimeoutMs = intIn('EXEC_TIMEOUT_MS', env.EXEC_TIMEOUT_MS, 20_000, [1_000, 300_000], problems);
  const execLanes = intIn('GATEWAY_EXEC_LANES', env.GATEWAY_EXEC_LANES, 8, [1, 64], problems);
  const inLambda = !!env.AWS_LAMBDA_FUNCTION_NAME;
  const readCacheMs = intIn(
    'EIP_READ_CACHE_MS',
    env.EIP_READ_CACHE_MS,
    inLambda ? 5_000 : 0,
    [0, 60_000],
    problems,
  );

  const kubeOvnRelease = releaseOf(env.KUBE_OVN_RELEASE, problems);
  const driftRepair = (env.DRIFT_REPAIR?.trim() || 'on').toLowerCase();
  if (driftRepair !== 'on' && driftRepair !== 'off')
    problems.push(`DRIFT_REPAIR must be on or off, got "${env.DRIFT_REPAIR}"`);

  const maintenance = maintenanceOf(env, problems);
  const stage = stageOf(env.STAGE, problems);

  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    namespace,
    kube: kube!,
    dynamo,
    execTimeoutMs,
    execLanes,
    readCacheMs,
    ...(kubeOvnRelease && { kubeOvnRelease }),
    logLevel: levelFromEnv(env.LOG_LEVEL, env.AWS_LAMBDA_LOG_LEVEL),
    service: env.AWS_LAMBDA_FUNCTION_NAME ?? 'eip-lambdas',
    inLambda,
    driftRepair: driftRepair === 'on',
    maintenance: Object.freeze(maintenance),
    metricsNamespace: metricsNamespace(stage),
  });
}

/**
 * Never a guessed region: without one, only a local DynamoDB endpoint with the kubeconfig path goes on (dynalite
 * ignores it); the EKS token and a real table need it.
 */
function requireRegion(
  region: string | undefined,
  kube: KubeAccess | undefined,
  dynamo: Config['dynamo'],
  problems: string[],
): void {
  if (region || (kube?.kind !== 'eks' && dynamo.endpoint)) return;
  problems.push(
    `no AWS region for ${kube?.kind === 'eks' ? 'the EKS token and DynamoDB' : 'DynamoDB'}: set AWS_REGION (or AWS_DEFAULT_REGION), or a region in the AWS profile (AWS_PROFILE, ~/.aws/config)`,
  );
}

/** STAGE: the metrics namespace's stage (ADR 0080), or undefined. */
function stageOf(value: string | undefined, problems: string[]): string | undefined {
  const stage = value?.trim() || undefined;
  if (stage && !STAGE_NAME.test(stage))
    problems.push(`STAGE "${stage}" is not a stage name (letters, digits, - and _, up to 64)`);
  return stage;
}

/** The region where the AWS CLI and SDKs find it (region.ts); undefined when nowhere. */
function regionOf(env: NodeJS.ProcessEnv, problems: string[]): string | undefined {
  const found = resolveRegion(env);
  if (found && !REGION_NAME.test(found.region))
    problems.push(`the AWS region "${found.region}" (from ${found.from}) is not a region name`);
  return found?.region;
}

/** KUBE_OVN_RELEASE: undefined for `auto` or empty; a problem for a release the product does not speak. */
function releaseOf(value: string | undefined, problems: string[]): string | undefined {
  const release = value?.trim() ?? '';
  if (release === '' || release === 'auto') return undefined;
  const r = parseRelease(release);
  if (!r.ok) problems.push(`KUBE_OVN_RELEASE: ${r.problem}; or auto`);
  return release;
}
