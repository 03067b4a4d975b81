/**
 * npm run invoke -- <add|update|reset|delete> <event.json> [options]
 *
 * Runs one handler with an event outside Lambda, through the same middy chain, and prints its outcome JSON.
 * Where it runs, in this order:
 *   1. --memory: a fresh in-memory demo world (no cluster, no DynamoDB needed);
 *   2. a cluster and table from flags or the environment (KUBECONFIG, TABLE_NAME, DYNAMODB_ENDPOINT, ...);
 *   3. the running local stack (`npm start` writes .local/stack.json with its kubeconfig and DynamoDB endpoint);
 *   4. only when nothing at all is named and no stack runs: the in-memory demo world, with a note on stderr.
 * A named target that is incomplete, missing, or pairs a real cluster with the local table is a usage error (exit 2,
 * scripts/target.ts). The outcome JSON is the only thing on stdout; the handler's logs go to stderr.
 */
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Context } from 'aws-lambda';
import { world } from '../local/memory/world.js';
import { HANDLERS, type HandlerName } from '../shared/events.js';
import { eipHandler } from '../shared/lambda/eip-handler.js';
import { jsonLogger, levelFromEnv } from '../shared/observability/log.js';
import type { Deps } from '../shared/ports.js';
import { resolveTarget, TARGET_OPTIONS, TARGET_USAGE, TargetError } from './target.js';

const USAGE = `usage: npm run invoke -- <${HANDLERS.join('|')}> <event.json> [options]

Runs one handler with an event (a sample from events/, or your own) and prints its outcome.

options:
${TARGET_USAGE}
  --memory                   run against a fresh in-memory demo world instead
  --timeout-ms N             budget for the invocation (default 60000)
  -h, --help                 show this help

Without --memory, a target named by a flag or the environment is used as named, or refused: a missing kubeconfig
file, a cluster without a table, or a real cluster with the local stack's table is a usage error. The in-memory demo
world is used only when nothing is named and no local stack is running.

stdout carries only the outcome JSON; logs go to stderr.

exit status: 0 the handler resolved (applied, unchanged, skipped or rejected), 1 it threw (Lambda would retry),
2 bad usage.`;

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
        ...TARGET_OPTIONS,
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
  if (values.memory) {
    const named = Object.keys(TARGET_OPTIONS).filter((k) => values[k] !== undefined);
    if (named.length) fail(`--memory cannot be combined with ${named.map((k) => `--${k}`).join(', ')}`);
  }
  let target: ReturnType<typeof resolveTarget>;
  try {
    target = values.memory ? undefined : resolveTarget(values);
  } catch (e) {
    if (e instanceof TargetError) fail(e.message);
    throw e;
  }
  if (target) {
    const { buildDeps } = await import('../shared/adapters/live.js');
    const { kubeConfigOfConfig } = await import('../local/kubeconfig.js');
    const log = jsonLogger({
      level: levelFromEnv(process.env.LOG_LEVEL),
      write: (line) => process.stderr.write(`${line}\n`),
    });
    return {
      deps: buildDeps(target.config, { log, kubeConfig: kubeConfigOfConfig(target.config) }),
      where: target.where,
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
