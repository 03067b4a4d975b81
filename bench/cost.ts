/**
 * `npm run bench -- cost [--n=200] [--gateways=2] [--lambda-ms=N] [--memory-mb=512] [--exec-latency=60]
 *  [--exec-commands=measured|none] [--price-rru=0.125] [--price-wru=0.625] [--price-invoke=0.20]
 *  [--price-gbs=0.0000166667] [--price-events=1.00]`
 *
 * What a million EIP operations cost, from counts measured in this run: the end-to-end benchmark (bench/e2e.ts) adds,
 * updates (spec.qosPolicy) and deletes `--n` EIPs on the local stack and counts, per operation, the DynamoDB
 * capacity units (as DynamoDB reports them; a failed conditional write as one write unit), the handler invocations
 * (one EventBridge event and one Lambda run each) and the Kubernetes API requests of the handlers. Lambda duration
 * is not measurable in-process: `--lambda-ms` (default: the median add on the real adapters in
 * bench/results/lambda.json, else 100 ms) is the handler's own time; to it each invocation adds the time it waited
 * for its execs, which the run measures with the lab's exec cost model (ADR 0100: `--exec-latency`, default 60 ms as
 * `npm start`; `--exec-commands`, default the measured per-command costs, so an add on the lab's kube-ovn 1.12 waits
 * some 6 s for arping; `--exec-latency=0 --exec-commands=none` is the instant gateway); that duration times
 * `--memory-mb` (serverless.yml: 512) gives the GB-seconds. Unit prices
 * are parameters, in USD per million (per GB-second for `--price-gbs`); the defaults are on-demand list prices
 * (us-east-1) at the time of writing — check them. Kubernetes API requests have no price: they are the API server's
 * budget (docs/scale.md).
 */
import { existsSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { DEFAULT_EXEC_LATENCY_MS } from '../local/natgw/exec-model.js';
import { type E2eResult, type Phase, runE2e, UsageError } from './e2e.js';
import type { Suite } from './run.js';

const USAGE =
  'usage: npm run bench -- cost [--n=200] [--gateways=2] [--lambda-ms=N] [--memory-mb=512] [--exec-latency=60] [--exec-commands=measured|none] [--price-rru=0.125] [--price-wru=0.625] [--price-invoke=0.20] [--price-gbs=0.0000166667] [--price-events=1.00]';

interface Prices {
  rru: number;
  wru: number;
  invoke: number;
  gbs: number;
  events: number;
}

export interface CostRow {
  operation: 'add' | 'update' | 'delete';
  perMillion: {
    readUnits: number;
    writeUnits: number;
    invocations: number;
    gbSeconds: number;
    eventBridgeEvents: number;
    kubeRequests: number;
    execs: number;
  };
  /** One invocation's billed duration: the handler's own time plus the time it waited for its execs. */
  lambdaMsPerInvocation: number;
  /** Of which waiting for execs (measured with the exec cost model). */
  execWaitMsPerInvocation: number;
  usd: { dynamodb: number; lambda: number; eventbridge: number; total: number };
}

function parse(args: readonly string[]) {
  const get = (k: string) => args.find((a) => a.startsWith(`--${k}=`))?.split('=')[1];
  const num = (k: string, d: number): number => {
    const v = Number(get(k) ?? d);
    if (!Number.isFinite(v) || v < 0)
      throw new UsageError(`--${k} must be a number >= 0, got "${get(k)}"\n${USAGE}`);
    return v;
  };
  const lambdaJson = new URL('./results/lambda.json', import.meta.url);
  let measuredMs = 100;
  if (existsSync(lambdaJson)) {
    const j = JSON.parse(readFileSync(lambdaJson, 'utf8')) as { add?: { real?: { medianMs?: number } } };
    measuredMs = j.add?.real?.medianMs ?? measuredMs;
  }
  const commands = get('exec-commands') ?? 'measured';
  if (commands !== 'measured' && commands !== 'none')
    throw new UsageError(`--exec-commands must be measured or none, got "${commands}"\n${USAGE}`);
  return {
    exec: { latencyMs: Math.round(num('exec-latency', DEFAULT_EXEC_LATENCY_MS)), commands } as const,
    n: Math.max(1, Math.round(num('n', 200))),
    gateways: Math.max(1, Math.round(num('gateways', 2))),
    lambdaMs: num('lambda-ms', Math.round(measuredMs)),
    memoryMb: num('memory-mb', 512),
    prices: {
      rru: num('price-rru', 0.125),
      wru: num('price-wru', 0.625),
      invoke: num('price-invoke', 0.2),
      gbs: num('price-gbs', 0.0000166667),
      events: num('price-events', 1.0),
    } satisfies Prices,
  };
}

export function costOf(
  operation: CostRow['operation'],
  p: Phase,
  lambdaMs: number,
  memoryMb: number,
  prices: Prices,
): CostRow {
  const M = 1_000_000;
  const invocations = p.invocations.perEip * M;
  // The handlers wait for their execs: Lambda bills that time too.
  const execWaitMs = p.invocations.perEip > 0 ? p.execMsPerEip / p.invocations.perEip : 0;
  const durationMs = lambdaMs + execWaitMs;
  const gbSeconds = invocations * (durationMs / 1000) * (memoryMb / 1024);
  const perMillion = {
    readUnits: p.dynamo.readUnits * M,
    writeUnits: p.dynamo.writeUnits * M,
    invocations,
    gbSeconds,
    eventBridgeEvents: invocations,
    kubeRequests: p.kube.perEip * M,
    execs: p.kube.exec * M,
  };
  const dynamodb = (perMillion.readUnits / M) * prices.rru + (perMillion.writeUnits / M) * prices.wru;
  const lambda = (invocations / M) * prices.invoke + gbSeconds * prices.gbs;
  const eventbridge = (invocations / M) * prices.events;
  const r2 = (x: number) => Math.round(x * 100) / 100;
  return {
    operation,
    perMillion,
    lambdaMsPerInvocation: Math.round(durationMs),
    execWaitMsPerInvocation: Math.round(execWaitMs),
    usd: {
      dynamodb: r2(dynamodb),
      lambda: r2(lambda),
      eventbridge: r2(eventbridge),
      total: r2(dynamodb + lambda + eventbridge),
    },
  };
}

function render(rows: CostRow[], opt: ReturnType<typeof parse>, r: E2eResult): string {
  const fmt = (x: number) => (x >= 1e6 ? `${(x / 1e6).toFixed(2)} M` : x.toFixed(0));
  const head = [
    'per 1 M',
    'RCU',
    'WCU',
    'invocations',
    'ms/inv',
    'GB-s',
    'EB events',
    'kube req',
    'execs',
    'DDB $',
    'Lambda $',
    'EB $',
    'total $',
  ];
  const lines = rows.map((c) => [
    c.operation,
    fmt(c.perMillion.readUnits),
    fmt(c.perMillion.writeUnits),
    fmt(c.perMillion.invocations),
    `${c.lambdaMsPerInvocation}`,
    fmt(c.perMillion.gbSeconds),
    fmt(c.perMillion.eventBridgeEvents),
    fmt(c.perMillion.kubeRequests),
    fmt(c.perMillion.execs),
    c.usd.dynamodb.toFixed(2),
    c.usd.lambda.toFixed(2),
    c.usd.eventbridge.toFixed(2),
    c.usd.total.toFixed(2),
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const row = (cells: string[]) => cells.map((c, i) => c.padStart(w[i]!)).join('  ');
  return [
    `counts from ${opt.n} EIPs on ${opt.gateways} gateway(s) (duplicates ${r.duplicates}, not Ready ${r.notReady}); Lambda ${opt.lambdaMs} ms x ${opt.memoryMb} MB per invocation, plus its wait for its execs (ms/inv; ${rows.map((c) => `${c.operation} ${c.execWaitMsPerInvocation} ms`).join(', ')})`,
    `exec costs (ADR 0100): ${opt.exec.latencyMs} ms to start, ${opt.exec.commands === 'measured' ? 'the measured per-command costs' : 'no per-command costs'}; gateways play kube-ovn ${r.kubeOvnRelease}`,
    `prices (USD): ${opt.prices.rru}/M read units, ${opt.prices.wru}/M write units, ${opt.prices.invoke}/M invocations, ${opt.prices.gbs}/GB-s, ${opt.prices.events}/M events`,
    '',
    row(head),
    row(w.map((x) => '-'.repeat(x))),
    ...lines.map(row),
  ].join('\n');
}

export const suite: Suite = {
  description:
    'DynamoDB units, Lambda invocations and GB-s, EventBridge events, API requests per million EIP operations',
  usage: USAGE,
  async run(args) {
    const opt = parse(args);
    const r = await runE2e({
      n: opt.n,
      gateways: opt.gateways,
      concurrency: 64,
      cacheMs: 5000,
      timeoutMs: 900_000,
      update: true,
      exec: opt.exec,
    });
    const rows = [
      costOf('add', r.add, opt.lambdaMs, opt.memoryMb, opt.prices),
      ...(r.update ? [costOf('update', r.update, opt.lambdaMs, opt.memoryMb, opt.prices)] : []),
      costOf('delete', r.delete, opt.lambdaMs, opt.memoryMb, opt.prices),
    ];
    return {
      table: render(rows, opt, r),
      json: {
        suite: 'cost',
        date: new Date().toISOString(),
        node: process.version,
        cpus: cpus().length,
        loadAverageAtEnd: loadavg().map((x) => Math.round(x * 100) / 100),
        options: opt,
        rows,
        measured: r,
      },
    };
  },
};
