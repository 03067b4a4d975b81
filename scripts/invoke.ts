/**
 * npm run invoke -- <add|update|reset|delete> <event.json> [options]
 *
 * Runs one handler with an event outside Lambda, through the same middy chain, and prints its outcome JSON.
 * Where it runs, in this order:
 *   1. --memory: a fresh in-memory demo world (no cluster, no DynamoDB needed);
 *   2. a cluster and table from flags or the environment (KUBECONFIG, TABLE_NAME, DYNAMODB_ENDPOINT, ...);
 *   3. the running local stack (`npm start` writes .local/stack.json with its kubeconfig and DynamoDB endpoint);
 *   4. otherwise the in-memory demo world, with a note on stderr.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Context } from 'aws-lambda';
import { loadConfig } from '../shared/config/config.js';
import { HANDLERS, type HandlerName } from '../shared/events.js';
import { eipHandler } from '../shared/lambda/eip-handler.js';
import { world } from '../shared/memory/world.js';
import type { Deps } from '../shared/ports.js';

const USAGE = `usage: npm run invoke -- <${HANDLERS.join('|')}> <event.json> [options]

Runs one handler with an event (a sample from events/, or your own) and prints its outcome.

options:
  --kubeconfig FILE          Kubernetes API to use (default: $KUBECONFIG, else the local stack's)
  --table NAME               DynamoDB table (default: $TABLE_NAME, else the local stack's)
  --dynamodb-endpoint URL    DynamoDB endpoint (default: $DYNAMODB_ENDPOINT, else the local stack's, else AWS)
  --stack FILE               local stack description (default: .local/stack.json, written by npm start)
  --memory                   run against a fresh in-memory demo world instead
  --timeout-ms N             budget for the invocation (default 60000)
  -h, --help                 show this help

exit status: 0 the handler resolved (applied, unchanged, skipped or rejected), 1 it threw (Lambda would retry),
2 bad usage.`;

interface StackFile {
  kubeconfig: string;
  dynamodbEndpoint: string;
  tableName: string;
  namespace?: string;
}

function fail(message: string): never {
  process.stderr.write(`invoke: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  // AWS SDK v3 warns once on Node 20 that later releases will need Node 22; the pinned versions run on both.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  let parsed: ReturnType<typeof parse>;
  function parse() {
    return parseArgs({
      allowPositionals: true,
      options: {
        kubeconfig: { type: 'string' },
        table: { type: 'string' },
        'dynamodb-endpoint': { type: 'string' },
        stack: { type: 'string' },
        memory: { type: 'boolean' },
        'timeout-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  }
  try {
    parsed = parse();
  } catch (e) {
    fail((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const [handler, file, ...extra] = positionals;
  if (!handler || !file) fail('a handler and an event file are required');
  if (extra.length) fail(`unexpected arguments: ${extra.join(' ')}`);
  if (!HANDLERS.includes(handler as HandlerName)) fail(`unknown handler "${handler}"`);
  if (!existsSync(file)) fail(`no such event file: ${file}`);
  let event: unknown;
  try {
    event = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    fail(`${file} is not JSON: ${(e as Error).message}`);
  }
  const budget = Number(values['timeout-ms'] ?? 60_000);
  if (!Number.isInteger(budget) || budget <= 0) fail('--timeout-ms must be a positive integer');

  const { deps, where, after } = await choose(values);
  process.stderr.write(`invoke: ${handler} ${file} against ${where}\n`);
  const run = eipHandler(handler as HandlerName, async () => deps, { defaultBudgetMs: budget });
  try {
    const outcome = await run(event as never, { awsRequestId: `local-${Date.now()}` } as Context);
    process.stdout.write(`${JSON.stringify(outcome, null, 2)}\n`);
    after?.();
  } catch (e) {
    const err = e as Error & { code?: string; retryable?: boolean };
    process.stdout.write(
      `${JSON.stringify({ error: err.message, code: err.code ?? err.name, retryable: err.retryable ?? true }, null, 2)}\n`,
    );
    process.exitCode = 1;
  }
}

async function choose(values: Record<string, string | boolean | undefined>): Promise<{
  deps: Deps;
  where: string;
  after?: () => void;
}> {
  const env = { ...process.env };
  if (typeof values.kubeconfig === 'string') env.KUBECONFIG = values.kubeconfig;
  if (typeof values.table === 'string') env.TABLE_NAME = values.table;
  if (typeof values['dynamodb-endpoint'] === 'string') env.DYNAMODB_ENDPOINT = values['dynamodb-endpoint'];
  const stackPath = resolve(typeof values.stack === 'string' ? values.stack : '.local/stack.json');
  const configured = !!(env.KUBECONFIG || env.EKS_CLUSTER_NAME) && !!env.TABLE_NAME;
  if (!values.memory && !configured && existsSync(stackPath)) {
    const stack = JSON.parse(readFileSync(stackPath, 'utf8')) as StackFile;
    env.KUBECONFIG ||= stack.kubeconfig;
    env.TABLE_NAME ||= stack.tableName;
    env.DYNAMODB_ENDPOINT ||= stack.dynamodbEndpoint;
    if (stack.namespace) env.EIP_NAMESPACE ||= stack.namespace;
  }
  if (!values.memory && (env.KUBECONFIG || env.EKS_CLUSTER_NAME) && env.TABLE_NAME) {
    const { buildDeps } = await import('../shared/adapters/live.js');
    const config = loadConfig(env);
    const deps = buildDeps(config);
    return {
      deps,
      where: `${config.kube.kind === 'eks' ? config.kube.endpoint : config.kube.path} and table ${config.dynamo.tableName}${config.dynamo.endpoint ? ` at ${config.dynamo.endpoint}` : ''}`,
    };
  }
  if (!values.memory)
    process.stderr.write(
      'invoke: no cluster configured (KUBECONFIG + TABLE_NAME, or a running `npm start`); using a fresh in-memory demo world\n',
    );
  const w = world();
  w.qos('qos-demo', [{ name: 'ingress', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '10' }], {
    shared: true,
  });
  w.eip('demo-eip');
  return {
    deps: w.deps,
    where: 'an in-memory demo world (gateway gw1, subnet 172.18.0.0/24, EIP demo-eip)',
    after: () => {
      const eip = w.get('demo-eip');
      process.stderr.write(
        `invoke: demo-eip now: ${JSON.stringify({ spec: eip?.spec, status: eip?.status && { ...eip.status, conditions: undefined } })}\n` +
          `invoke: gateway net1: ${w.net1().join(' ')}\n`,
      );
    },
  };
}

main().catch((e: unknown) => {
  process.stderr.write(`invoke: ${(e as Error).message}\n`);
  process.exit(1);
});
