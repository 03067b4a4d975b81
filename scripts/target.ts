/**
 * Which cluster and table a command-line tool talks to: flags, then the environment (KUBECONFIG or the EKS
 * variables, TABLE_NAME, DYNAMODB_ENDPOINT), then the running local stack (.local/stack.json, written by npm start).
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Config, loadConfig } from '../shared/config/config.js';

export const TARGET_OPTIONS = {
  kubeconfig: { type: 'string' },
  table: { type: 'string' },
  'dynamodb-endpoint': { type: 'string' },
  stack: { type: 'string' },
} as const;

export const TARGET_USAGE = `  --kubeconfig FILE          Kubernetes API to use (default: $KUBECONFIG, else the local stack's)
  --table NAME               DynamoDB table (default: $TABLE_NAME, else the local stack's)
  --dynamodb-endpoint URL    DynamoDB endpoint (default: $DYNAMODB_ENDPOINT, else the local stack's, else AWS)
  --stack FILE               local stack description (default: .local/stack.json, written by npm start)`;

interface StackFile {
  kubeconfig: string;
  dynamodbEndpoint: string;
  tableName: string;
  namespace?: string;
}

/** The validated configuration of the target, or undefined when nothing is configured and no stack is running. */
export function resolveTarget(
  values: Record<string, unknown>,
): { config: Config; where: string } | undefined {
  const env = { ...process.env };
  if (typeof values.kubeconfig === 'string') env.KUBECONFIG = values.kubeconfig;
  if (typeof values.table === 'string') env.TABLE_NAME = values.table;
  if (typeof values['dynamodb-endpoint'] === 'string') env.DYNAMODB_ENDPOINT = values['dynamodb-endpoint'];
  const stackPath = resolve(typeof values.stack === 'string' ? values.stack : '.local/stack.json');
  const configured = !!(env.KUBECONFIG || env.EKS_CLUSTER_NAME) && !!env.TABLE_NAME;
  if (!configured && existsSync(stackPath)) {
    const stack = JSON.parse(readFileSync(stackPath, 'utf8')) as StackFile;
    env.KUBECONFIG ||= stack.kubeconfig;
    env.TABLE_NAME ||= stack.tableName;
    env.DYNAMODB_ENDPOINT ||= stack.dynamodbEndpoint;
    if (stack.namespace) env.EIP_NAMESPACE ||= stack.namespace;
  }
  if (!((env.KUBECONFIG || env.EKS_CLUSTER_NAME) && env.TABLE_NAME)) return undefined;
  const config = loadConfig(env);
  const api = config.kube.kind === 'eks' ? config.kube.endpoint : config.kube.path;
  const table = `${config.dynamo.tableName}${config.dynamo.endpoint ? ` at ${config.dynamo.endpoint}` : ''}`;
  return { config, where: `${api} and table ${table}` };
}
