/**
 * `npm run bench`'s command line (bench/run.ts): `--help` on every suite, and options a suite does not name in its
 * usage refused with exit 2 before anything runs.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type E2eResult, type ExecCost, type Phase, parseE2eArgs } from '../../bench/e2e.js';
import { compareRuns, comparisonOf, execGoalsOf } from '../../bench/lib/e2e-exec.js';

const root = join(import.meta.dirname, '../..');
const tsx = join(root, 'node_modules/tsx/dist/cli.mjs');

/** Runs a TypeScript entry point of the repository as npm would (tsx); never rejects. */
function script(path: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [tsx, path, ...args], { cwd: root, timeout: 60_000 }, (e, stdout, stderr) =>
      resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const bench = (...args: string[]) => script('bench/run.ts', args);

describe('npm run bench', { timeout: 60_000 }, () => {
  it.each(['ipam', 'lambda', 'e2e', 'cost', 'memory', 'exec-cost'])(
    '%s --help prints its usage and exits 0',
    async (suite) => {
      const r = await bench(suite, '--help');
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`usage: npm run bench -- ${suite}`);
    },
  );

  it('refuses an option the suite does not know (a typo), naming it, with exit 2', async () => {
    const r = await bench('ipam', '--concurency=8');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown option: --concurency=8');
    expect(r.stderr).toContain('usage: npm run bench -- ipam');
  });

  it('refuses a bad value before starting anything', async () => {
    const bad = await bench('ipam', '--allocators=ours,fast');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--allocators: unknown fast');
    const sub = await bench('ipam', '--subnets=20');
    expect(sub.code).toBe(2);
    expect(sub.stderr).toContain('--subnets must be 24 and/or 16');
  });

  it('lists the suites without one, and exits 2 for an unknown one', async () => {
    const list = await bench();
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/suites:[\s\S]*ipam[\s\S]*memory/);
    const unknown = await bench('nope');
    expect(unknown.code).toBe(2);
  });
});

describe('npm run bench -- e2e: the exec-cost and restart options', () => {
  it('runs once with the instant simulator when no exec cost is asked for', () => {
    expect(parseE2eArgs(['--n=10'])).toEqual({
      options: { n: 10, gateways: 1, concurrency: 64, cacheMs: 5000, timeoutMs: 600_000 },
      execs: undefined,
    });
  });

  it('runs once per --exec-latency, each with the one --exec-commands given or its own', () => {
    expect(parseE2eArgs(['--exec-latency=0,150']).execs).toEqual([
      { latencyMs: 0, commands: 'none' },
      { latencyMs: 150, commands: 'none' },
    ]);
    expect(parseE2eArgs(['--exec-latency=0,150', '--exec-commands=measured']).execs).toEqual([
      { latencyMs: 0, commands: 'measured' },
      { latencyMs: 150, commands: 'measured' },
    ]);
    expect(parseE2eArgs(['--exec-latency=0,150,150', '--exec-commands=none,none,measured']).execs).toEqual([
      { latencyMs: 0, commands: 'none' },
      { latencyMs: 150, commands: 'none' },
      { latencyMs: 150, commands: 'measured' },
    ]);
    expect(parseE2eArgs(['--exec-commands=measured']).execs).toEqual([
      { latencyMs: 0, commands: 'measured' },
    ]);
  });

  it('takes --restart and --qos as flags', () => {
    expect(parseE2eArgs(['--quick', '--restart', '--qos']).options).toMatchObject({
      n: 40,
      restart: true,
      qos: true,
    });
  });

  it('takes the release the gateways play and how many EIPs the handlers run at once, and refuses others', () => {
    expect(parseE2eArgs(['--kube-ovn-version=v1.15.2', '--handlers=64']).options).toMatchObject({
      kubeOvnRelease: '1.15',
      handlers: 64,
    });
    expect(parseE2eArgs([]).options).not.toHaveProperty('handlers');
    expect(() => parseE2eArgs(['--kube-ovn-version=1.9'])).toThrow(/--kube-ovn-version must be one of/);
    expect(() => parseE2eArgs(['--handlers=0'])).toThrow(/--handlers must be an integer/);
  });

  it.each([
    [['--exec-latency=fast'], '--exec-latency must be whole numbers of ms from 0 to 60000, got "fast"'],
    [['--exec-latency=0,'], '--exec-latency must be whole numbers of ms from 0 to 60000, got ""'],
    [['--exec-latency=-5'], 'got "-5"'],
    [['--exec-latency=0,150', '--exec-commands=none,none,none'], 'one per --exec-latency (2), got 3'],
    [['--exec-commands=cheap'], '--exec-commands must be none or measured, got "cheap"'],
  ])('refuses %j', (args, message) => {
    expect(() => parseE2eArgs(args)).toThrow(message);
  });

  /** A run's result with only what the comparison reads. */
  const run = (
    exec: ExecCost | undefined,
    add: { seconds: number; exec: number },
    restart?: { seconds: number; exec: number; done?: number },
  ): E2eResult => {
    const phase = (seconds: number, exec: number, done = 1000) =>
      ({ seconds, done, kube: { perEip: 5.01, exec }, dynamo: { perEip: 3 } }) as unknown as Phase;
    return {
      options: { n: 1000, gateways: 1, concurrency: 64, cacheMs: 5000, timeoutMs: 1, ...(exec && { exec }) },
      add: phase(add.seconds, add.exec),
      ...(restart && {
        restart: {
          ...phase(restart.seconds, restart.exec, restart.done),
          gatewayExecs: 1001,
          addresses: 1000,
        },
      }),
      delete: phase(9, 1),
    } as E2eResult;
  };

  it('compares each run with the 0 ms run of the same per-command costs, and states the exec goals', () => {
    const results = [
      run({ latencyMs: 0, commands: 'none' }, { seconds: 10, exec: 1 }, { seconds: 2, exec: 0.01 }),
      run({ latencyMs: 0, commands: 'measured' }, { seconds: 40, exec: 1 }),
      run({ latencyMs: 150, commands: 'none' }, { seconds: 25, exec: 1 }, { seconds: 9, exec: 1 }),
      run({ latencyMs: 150, commands: 'measured' }, { seconds: 60, exec: 0.1 }),
    ];
    const c = comparisonOf(results);
    expect(c.map((x) => [x.run, x.ratios.readyOverZeroMs])).toEqual([
      ['0 ms', 1],
      ['0 ms + commands', 1],
      ['150 ms', 2.5],
      ['150 ms + commands', 1.5],
    ]);
    expect(c[2]!.ratios).toMatchObject({ restartOverReady: 0.36, execsPerEipRestart: 1 });
    expect(c[2]!.absolute).toMatchObject({
      execsRestart: 1000,
      gatewayExecsRestart: 1001,
      zeroMsReadySeconds: 10,
    });
    expect(execGoalsOf(results).map((g) => [g.run, g.met, g.actual])).toEqual([
      ['0 ms', true, '1000/1000 back with 10 execs in 2 s = 20 % of 10 s'],
      ['150 ms', false, '1000/1000 back with 1000 execs in 9 s = 36 % of 25 s'],
      ['150 ms', false, '1000/1000 Ready with 1000 execs in 25 s = 2.5x 10 s'],
      ['150 ms + commands', true, '1000/1000 Ready with 100 execs in 60 s = 1.5x 40 s'],
    ]);
    const table = compareRuns(results).split('\n');
    // The ratios come first, each with the figures it is made of beside it.
    expect(table[2]).toMatch(
      /^ {2}restart \/ time to all Ready +0\.2 \(2 s \/ 10 s\) +- +0\.36 \(9 s \/ 25 s\) +-$/,
    );
    expect(table.findIndex((l) => l.includes('time to all Ready / the 0 ms run'))).toBeLessThan(
      table.findIndex((l) => l.includes('API requests per add')),
    );
  });

  it('refuses a bad exec latency on the command line with exit 2 before starting anything', async () => {
    const r = await bench('e2e', '--restart', '--exec-latency=0,soon');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--exec-latency must be whole numbers of ms');
    expect(r.stderr).toContain('[--restart]');
  }, 60_000);
});

describe('scripts/build-bridge.ts', { timeout: 60_000 }, () => {
  const run = (...args: string[]) => script('scripts/build-bridge.ts', args);

  it('--help prints its usage instead of bundling into a file named "--help"; an option is a usage error', async () => {
    const help = await run('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('usage: npx tsx scripts/build-bridge.ts [outfile]');
    const bad = await run('--out', 'x');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unexpected arguments: --out x');
  });
});
