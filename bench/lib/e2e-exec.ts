/**
 * `npm run bench -- e2e --exec-latency=0,150 --restart`: the runs side by side, ratios first, and the goals for exec
 * costs (bench/README.md#goals): a restart recovered with ≤ 10 execs in ≤ 25 % of the time to Ready; at 150 ms an
 * exec, 1,000 EIPs Ready with ≤ 100 execs in ≤ 2× the 0 ms run's time, and a restart recovered in ≤ 10 s.
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
    /** This run's time to all Ready over the instant (0 ms, no command costs) run's. */
    readyOverInstant?: number;
  };
  absolute: {
    readySeconds: number;
    ready: number;
    execsAdd: number;
    apiRequestsPerAdd: number;
    restartSeconds?: number;
    back?: number;
    execsRestart?: number;
    deleteSeconds: number;
  };
}

const isInstant = (r: E2eResult): boolean =>
  !r.options.exec || (r.options.exec.latencyMs === 0 && r.options.exec.commands === 'none');

export function comparisonOf(results: readonly E2eResult[]): Comparison[] {
  const instant = results.find(isInstant);
  return results.map((r) => {
    const n = r.options.n;
    const execsAdd = Math.round(r.add.kube.exec * n);
    const execsRestart = r.restart ? Math.round(r.restart.kube.exec * n) : undefined;
    return {
      run: label(r),
      ratios: {
        ...(r.restart && { restartOverReady: round(r.restart.seconds / r.add.seconds) }),
        execsPerEipAdd: r.add.kube.exec,
        ...(r.restart && { execsPerEipRestart: r.restart.kube.exec }),
        ...(instant && { readyOverInstant: round(r.add.seconds / instant.add.seconds) }),
      },
      absolute: {
        readySeconds: r.add.seconds,
        ready: r.add.done,
        execsAdd,
        apiRequestsPerAdd: r.add.kube.perEip,
        ...(r.restart && { restartSeconds: r.restart.seconds, back: r.restart.done, execsRestart }),
        deleteSeconds: r.delete.seconds,
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
  const instant = results.find(isInstant);
  const goals: ExecGoal[] = [];
  for (const r of results) {
    const run = label(r);
    const n = r.options.n;
    if (r.restart) {
      const execs = Math.round(r.restart.kube.exec * n);
      const share = r.restart.seconds / r.add.seconds;
      goals.push({
        run,
        goal: `restart with ${n} EIPs recovered with <= 10 execs in <= 25 % of the time to Ready`,
        met: r.restart.done === n && execs <= 10 && share <= 0.25,
        actual: `${r.restart.done}/${n} back with ${execs} execs in ${r.restart.seconds} s = ${Math.round(share * 100)} % of ${r.add.seconds} s`,
      });
    }
    if (r.options.exec?.latencyMs === 150 && instant) {
      const execs = Math.round(r.add.kube.exec * n);
      const times = r.add.seconds / instant.add.seconds;
      goals.push({
        run,
        goal: `${n} EIPs at 150 ms an exec all Ready with <= 100 execs in <= 2x the 0 ms run's time`,
        met: r.add.done === n && execs <= 100 && times <= 2,
        actual: `${r.add.done}/${n} Ready with ${execs} execs in ${r.add.seconds} s = ${round(times, 1)}x ${instant.add.seconds} s`,
      });
      if (r.restart)
        goals.push({
          run,
          goal: 'at 150 ms an exec, a restart recovered in <= 10 s',
          met: r.restart.done === n && r.restart.seconds <= 10,
          actual: `${r.restart.done}/${n} back in ${r.restart.seconds} s`,
        });
    }
  }
  return goals;
}

export function compareRuns(results: readonly E2eResult[]): string {
  const rows = comparisonOf(results);
  const w = 18;
  const line = (name: string, cells: (string | number | undefined)[]) =>
    `  ${name.padEnd(40)}${cells.map((c) => String(c ?? '-').padStart(w)).join('')}`;
  const n = results[0]?.options.n ?? 0;
  return [
    `exec costs compared: ${n} EIPs on ${results[0]?.options.gateways ?? 1} gateway(s)`,
    line(
      'exec per run',
      rows.map((r) => r.run),
    ),
    'ratios',
    line(
      'restart time / time to all Ready',
      rows.map((r) => r.ratios.restartOverReady),
    ),
    line(
      'execs per EIP, create',
      rows.map((r) => r.ratios.execsPerEipAdd),
    ),
    line(
      'execs per EIP, restart',
      rows.map((r) => r.ratios.execsPerEipRestart),
    ),
    line(
      'time to all Ready / the instant run',
      rows.map((r) => r.ratios.readyOverInstant),
    ),
    'absolute',
    line(
      'all Ready (s)',
      rows.map((r) => `${r.absolute.readySeconds} (${r.absolute.ready})`),
    ),
    line(
      'restart: all back (s)',
      rows.map((r) =>
        r.absolute.restartSeconds === undefined
          ? undefined
          : `${r.absolute.restartSeconds} (${r.absolute.back})`,
      ),
    ),
    line(
      'execs, create / restart',
      rows.map((r) => `${r.absolute.execsAdd} / ${r.absolute.execsRestart ?? '-'}`),
    ),
    line(
      'API requests per add (exec apart)',
      rows.map((r) => r.absolute.apiRequestsPerAdd),
    ),
    line(
      'all deleted (s)',
      rows.map((r) => r.absolute.deleteSeconds),
    ),
    '',
    ...execGoalsOf(results).map((g) => `${g.met ? 'met    ' : 'NOT met'}  [${g.run}] ${g.goal}: ${g.actual}`),
  ].join('\n');
}
