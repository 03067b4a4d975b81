/**
 * Which cluster and table a command-line tool talks to: flags, then the environment (KUBECONFIG or the EKS
 * variables, TABLE_NAME, DYNAMODB_ENDPOINT), then the running local stack: the stack.json npm start wrote beside the
 * kubeconfig named (`npm start -- --kubeconfig FILE` writes it next to FILE), else .local/stack.json.
 *
 * A target that is named is never silently replaced or completed with another one: the local stack fills in only
 * when nothing is named, or when what is named is the local stack's own kubeconfig. A real cluster is never paired
 * with the local table (that would allocate real EIPs from a throw-away IPAM). Problems are TargetErrors, which
 * the tools report as usage errors (exit 2).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { type Config, ConfigError, loadConfig } from '../shared/config/config.js';

export const TARGET_OPTIONS = {
  kubeconfig: { type: 'string' },
  table: { type: 'string' },
  'dynamodb-endpoint': { type: 'string' },
  stack: { type: 'string' },
} as const;

export const TARGET_USAGE = `  --kubeconfig FILE          Kubernetes API to use (default: $KUBECONFIG, else the local stack's)
  --table NAME               DynamoDB table (default: $TABLE_NAME, else the local stack's)
  --dynamodb-endpoint URL    DynamoDB endpoint (default: $DYNAMODB_ENDPOINT, else the local stack's, else AWS)
  --stack FILE               local stack description (default: stack.json beside the kubeconfig named, when
                             npm start wrote one there; else .local/stack.json)
                             The local stack completes a target only when none is named, or when the kubeconfig
                             named is the stack's own: a real cluster is never paired with the local table.`;

/** A target that cannot be used as given: a usage error (exit 2). */
export class TargetError extends Error {
  override readonly name = 'TargetError';
}

interface StackFile {
  kubeconfig: string;
  dynamodbEndpoint: string;
  tableName: string;
  namespace?: string;
}

/**
 * The stack.json npm start wrote beside `kubeconfig` (it writes it next to the kubeconfig it writes), when that file
 * exists and names this very kubeconfig; undefined otherwise.
 */
function stackBeside(kubeconfig: string | undefined): string | undefined {
  if (!kubeconfig?.trim()) return undefined;
  const path = resolve(kubeconfig.trim());
  const candidate = join(dirname(path), 'stack.json');
  if (!existsSync(candidate)) return undefined;
  try {
    const stack = JSON.parse(readFileSync(candidate, 'utf8')) as Partial<StackFile>;
    return typeof stack.kubeconfig === 'string' && resolve(stack.kubeconfig) === path ? candidate : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The validated configuration of the target, or undefined when nothing is named and no local stack is running.
 * @throws TargetError when a target is named but incomplete, mixes a real cluster with the local table, or names a
 *   kubeconfig file that does not exist, or when the configuration is invalid
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the target rules (a named target is never completed with another) read top to bottom as docs/configuration.md states them; pinned by test/unit/infra-target.test.ts
export function resolveTarget(
  values: Record<string, unknown>,
  environment: NodeJS.ProcessEnv = process.env,
): { config: Config; where: string } | undefined {
  const env = { ...environment };
  const from: Record<string, string> = {};
  const named = (key: string, flag: string, value: unknown) => {
    if (typeof value === 'string') {
      env[key] = value;
      from[key] = flag;
    } else if (env[key]?.trim()) from[key] = `$${key}`;
  };
  named('KUBECONFIG', '--kubeconfig', values.kubeconfig);
  named('TABLE_NAME', '--table', values.table);
  named('DYNAMODB_ENDPOINT', '--dynamodb-endpoint', values['dynamodb-endpoint']);
  if (env.EKS_CLUSTER_NAME?.trim()) from.EKS_CLUSTER_NAME = '$EKS_CLUSTER_NAME';

  const stackPath = resolve(
    typeof values.stack === 'string' ? values.stack : (stackBeside(env.KUBECONFIG) ?? '.local/stack.json'),
  );
  if (typeof values.stack === 'string' && !existsSync(stackPath))
    throw new TargetError(`--stack ${values.stack}: no such file (is npm start running?)`);
  const stack = existsSync(stackPath)
    ? (JSON.parse(readFileSync(stackPath, 'utf8')) as StackFile)
    : undefined;

  const cluster = from.EKS_CLUSTER_NAME ?? from.KUBECONFIG;
  const isStackCluster =
    !from.EKS_CLUSTER_NAME &&
    !!stack &&
    (!from.KUBECONFIG || resolve(env.KUBECONFIG!.trim()) === resolve(stack.kubeconfig));
  if (stack && isStackCluster) {
    // Nothing named, or the stack's own kubeconfig: the stack completes what is missing.
    env.KUBECONFIG ||= stack.kubeconfig;
    env.TABLE_NAME ||= stack.tableName;
    env.DYNAMODB_ENDPOINT ||= stack.dynamodbEndpoint;
    if (stack.namespace) env.EIP_NAMESPACE ||= stack.namespace;
  } else if (stack && cluster && !from.TABLE_NAME) {
    throw new TargetError(
      `${cluster} names a cluster other than the local stack's, and no table is named: the local table ` +
        `(${stack.tableName} at ${stack.dynamodbEndpoint}) is never paired with another cluster. ` +
        `Name the cluster's table (--table, $TABLE_NAME), or use --kubeconfig ${stack.kubeconfig}, or unset ${cluster}.`,
    );
  } else if (
    stack &&
    cluster &&
    env.DYNAMODB_ENDPOINT?.trim() &&
    env.DYNAMODB_ENDPOINT.trim() === stack.dynamodbEndpoint
  ) {
    throw new TargetError(
      `${cluster} names a cluster other than the local stack's, with the local stack's DynamoDB ` +
        `(${stack.dynamodbEndpoint}): a real cluster is never paired with the local table.`,
    );
  }

  const anyNamed = Object.keys(from).length > 0;
  if (!anyNamed && !stack) return undefined;
  if (!(env.KUBECONFIG?.trim() || env.EKS_CLUSTER_NAME?.trim()))
    throw new TargetError(
      `${Object.values(from).join(', ')} given, but no cluster: name one with --kubeconfig ($KUBECONFIG) or the EKS variables`,
    );
  if (!env.TABLE_NAME?.trim())
    throw new TargetError(
      `${cluster ?? 'a cluster'} given, but no table: name it with --table ($TABLE_NAME), or start the local stack`,
    );
  if (!env.EKS_CLUSTER_NAME?.trim() && !existsSync(env.KUBECONFIG!.trim()))
    throw new TargetError(
      `kubeconfig ${env.KUBECONFIG!.trim()} (${from.KUBECONFIG ?? 'local stack'}) does not exist`,
    );
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) throw new TargetError(e.message);
    throw e;
  }
  const api = config.kube.kind === 'eks' ? config.kube.endpoint : config.kube.path;
  const table = `${config.dynamo.tableName}${config.dynamo.endpoint ? ` at ${config.dynamo.endpoint}` : ''}`;
  return { config, where: `${api} and table ${table}` };
}
