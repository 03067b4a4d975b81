/**
 * `npm run bench -- e2e --exec-latency=0,150 --restart`: the runs side by side, each ratio first with the absolute
 * figures it is made of beside it, and the goals for exec costs (bench/README.md, "Exec costs"): a restart recovered
 * with ≤ 10 execs in ≤ 25 % of the time the EIPs took to become Ready; at 150 ms an exec, every EIP Ready with ≤ 100
 * execs in ≤ 2× the time of the 0 ms run (the one with the same per-command costs).
 */
import type { E2eResult } from '../e2e.js';

const label = (r: E2eResult): string =>
  r.options.exec
    ? `${r.options.exec.latencyMs} ms${r.options.exec.commands === 'measured' ? ' + commands' : ''}`
    : 'instant';

const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;

export interface Comparison {
  run: string;
  ratios: {
    restartOverReady?: number;
    execsPerEipAdd: number;
    execsPerEipRestart?: number;
    /** This run's time to all Ready over the 0 ms run's (same per-command costs; else the instant run's). */
    readyOverZeroMs?: number;
  };
  absolute: {
    readySeconds: number;
    ready: number;
    execsAdd: number;
    apiRequestsPerAdd: number;
    dynamoRequestsPerAdd: number;
    restartSeconds?: number;
    back?: number;
    /** The handlers' execs during the restart. */
    execsRestart?: number;
    /** Every exec into a gateway container during the restart (the stand-ins' init included, the kill 1 not). */
    gatewayExecsRestart?: number;
    /** The run the time ratio divides by. */
    zeroMsReadySeconds?: number;
    deleteSeconds: number;
    gone: number;
  };
}

const commandsOf = (r: E2eResult) => r.options.exec?.commands ?? 'none';

/** The handlers' execs of a phase: counted when the run recorded the count, else from the rounded rate. */
const execsOf = (p: { kube: { exec: number; execs?: number } }, n: number): number =>
  p.kube.execs ?? Math.round(p.kube.exec * n);

/** The run a run's time to Ready is compared with: 0 ms with the same per-command costs, else the instant one. */
function zeroMsRunOf(results: readonly E2eResult[], r: E2eResult): E2eResult | undefined {
  const zero = (x: E2eResult) => (x.options.exec?.latencyMs ?? 0) === 0;
  return (
    results.find((x) => zero(x) && commandsOf(x) === commandsOf(r)) ??
    results.find((x) => zero(x) && commandsOf(x) === 'none')
  );
}

export function comparisonOf(results: readonly E2eResult[]): Comparison[] {
  return results.map((r) => {
    const n = r.options.n;
    const zero = zeroMsRunOf(results, r);
    return {
      run: label(r),
      ratios: {
        ...(r.restart && { restartOverReady: round(r.restart.seconds / r.add.seconds) }),
        execsPerEipAdd: r.add.kube.exec,
        ...(r.restart && { execsPerEipRestart: r.restart.kube.exec }),
        ...(zero && { readyOverZeroMs: round(r.add.seconds / zero.add.seconds) }),
      },
      absolute: {
        readySeconds: r.add.seconds,
        ready: r.add.done,
        execsAdd: execsOf(r.add, n),
        apiRequestsPerAdd: r.add.kube.perEip,
        dynamoRequestsPerAdd: r.add.dynamo.perEip,
        ...(r.restart && {
          restartSeconds: r.restart.seconds,
          back: r.restart.done,
          execsRestart: execsOf(r.restart, n),
          gatewayExecsRestart: r.restart.gatewayExecs,
        }),
        ...(zero && { zeroMsReadySeconds: zero.add.seconds }),
        deleteSeconds: r.delete.seconds,
        gone: r.delete.done,
      },
    };
  });
}

export interface ExecGoal {
  run: string;
  goal: string;
  met: boolean;
  actual: string;
}

export function execGoalsOf(results: readonly E2eResult[]): ExecGoal[] {
  const goals: ExecGoal[] = [];
  for (const r of results) {
    const run = label(r);
    const n = r.options.n;
    if (r.restart) {
      const execs = execsOf(r.restart, n);
      const share = r.restart.seconds / r.add.seconds;
      goals.push({
        run,
        goal: `restart with ${n} EIPs recovered with <= 10 execs in <= 25 % of the time to Ready`,
        met: r.restart.done === n && execs <= 10 && share <= 0.25,
        actual: `${r.restart.done}/${n} back with ${execs} execs in ${r.restart.seconds} s = ${Math.round(share * 100)} % of ${r.add.seconds} s`,
      });
    }
    const zero = zeroMsRunOf(results, r);
    if (r.options.exec?.latencyMs === 150 && zero) {
      const execs = execsOf(r.add, n);
      const times = r.add.seconds / zero.add.seconds;
      goals.push({
        run,
        goal: `${n} EIPs at 150 ms an exec all Ready with <= 100 execs in <= 2x the 0 ms run's time`,
        met: r.add.done === n && execs <= 100 && times <= 2,
        actual: `${r.add.done}/${n} Ready with ${execs} execs in ${r.add.seconds} s = ${round(times, 1)}x ${zero.add.seconds} s`,
      });
    }
  }
  return goals;
}

/** The table: one column per run; each row a ratio, the absolute figures it is made of beside it. */
export function compareRuns(results: readonly E2eResult[]): string {
  const rows = comparisonOf(results);
  const w = 30;
  const line = (name: string, cells: (string | undefined)[]) =>
    `  ${name.padEnd(38)}${cells.map((c) => (c ?? '-').padStart(w)).join('')}`;
  const cell = <T>(f: (c: Comparison) => T | undefined, show: (x: T, c: Comparison) => string) =>
    rows.map((c) => {
      const x = f(c);
      return x === undefined ? undefined : show(x, c);
    });
  const n = results[0]?.options.n ?? 0;
  return [
    `exec costs compared: ${n} EIPs on ${results[0]?.options.gateways ?? 1} gateway(s); ratio (absolute figures)`,
    line(
      'exec per run',
      rows.map((r) => r.run),
    ),
    line(
      'restart / time to all Ready',
      cell(
        (c) => c.ratios.restartOverReady,
        (x, c) => `${x} (${c.absolute.restartSeconds} s / ${c.absolute.readySeconds} s)`,
      ),
    ),
    line(
      'execs per EIP, restart',
      cell(
        (c) => c.ratios.execsPerEipRestart,
        (x, c) => `${x} (${c.absolute.execsRestart}; all: ${c.absolute.gatewayExecsRestart})`,
      ),
    ),
    line(
      'time to all Ready / the 0 ms run',
      cell(
        (c) => c.ratios.readyOverZeroMs,
        (x, c) => `${x} (${c.absolute.readySeconds} s / ${c.absolute.zeroMsReadySeconds} s)`,
      ),
    ),
    line(
      'execs per EIP, create',
      cell(
        (c) => c.ratios.execsPerEipAdd,
        (x, c) => `${x} (${c.absolute.execsAdd})`,
      ),
    ),
    line(
      'API requests per add (exec apart)',
      cell(
        (c) => c.absolute.apiRequestsPerAdd,
        (x) => String(x),
      ),
    ),
    line(
      'DynamoDB requests per add',
      cell(
        (c) => c.absolute.dynamoRequestsPerAdd,
        (x) => String(x),
      ),
    ),
    line(
      `Ready / back / gone (of ${n})`,
      cell(
        (c) => c.absolute.ready,
        (x, c) => `${x} / ${c.absolute.back ?? '-'} / ${c.absolute.gone}`,
      ),
    ),
    line(
      'all deleted (s)',
      cell(
        (c) => c.absolute.deleteSeconds,
        (x) => String(x),
      ),
    ),
    '',
    ...execGoalsOf(results).map((g) => `${g.met ? 'met    ' : 'NOT met'}  [${g.run}] ${g.goal}: ${g.actual}`),
  ].join('\n');
}
