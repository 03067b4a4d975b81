/**
 * `npm run bench -- memory [--cycles=25] [--per-cycle=200] [--data-dir] [--without-iterator-fix]`: the resident memory of `npm start` over
 * many EIP events. Starts the stack as its own process (the demo seeded, everything in memory unless --data-dir),
 * then in each cycle creates `per-cycle` IptablesEIPs, waits until all are Ready, deletes them and waits until they
 * are gone; after every cycle it reads the stack process's RSS from /proc. Events = creates + deletes, so the
 * defaults make 25 × 200 × 2 = 10,000. The table gives RSS at start and after each cycle, and the growth per 1,000
 * events over the second half (after warm-up).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { kubeConfigFromFile } from '../local/kubeconfig.js';
import type { Suite } from './run.js';

const root = new URL('..', import.meta.url).pathname;
const progress = (line: string): void => void process.stderr.write(`memory: ${line}\n`);
const EIPS = { group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips' } as const;

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1] ?? Number.NaN);
  return Math.round(kb / 1024);
}

/** Starts `npm start` as `node --import tsx scripts/start.ts`, so the child's pid is the stack's own. */
async function startStack(
  dir: string,
  dataDir: boolean,
  withoutFix: boolean,
): Promise<{ child: ChildProcess; kubeconfig: string }> {
  const kubeconfig = join(dir, 'kubeconfig');
  // The gateway answers at once, as when the figures in bench/README.md were taken: this bench is about memory, and a
  // real pod's exec costs (npm start's default) would only make each cycle take longer.
  const args = [
    '--import',
    'tsx',
    'scripts/start.ts',
    '--kubeconfig',
    kubeconfig,
    '--log-level',
    'error',
    '--exec-latency=0',
    '--exec-commands=none',
  ];
  if (dataDir) args.push('--data-dir', join(dir, 'data'));
  const env = { ...process.env, ...(withoutFix && { LOCAL_DYNALITE_ITERATOR_FIX: 'off' }) };
  const child = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('\nready: ') || out.startsWith('ready: ')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`npm start exited with ${code} before ready:\n${out}`)));
  });
  return { child, kubeconfig };
}

interface Eip {
  metadata?: { name?: string };
  status?: { ready?: boolean };
}

async function list(api: CustomObjectsApi): Promise<Eip[]> {
  return ((await api.listClusterCustomObject(EIPS)) as { items: Eip[] }).items;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function inBatches<T>(items: T[], width: number, fn: (t: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += width) await Promise.all(items.slice(i, i + width).map(fn));
}

export const suite: Suite = {
  description: 'resident memory of `npm start` over create/delete cycles of EIPs (default 10,000 events)',
  usage:
    'usage: npm run bench -- memory [--cycles=25] [--per-cycle=200] [--data-dir] [--without-iterator-fix]',
  async run(argv) {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        cycles: { type: 'string', default: '25' },
        'per-cycle': { type: 'string', default: '200' },
        'data-dir': { type: 'boolean', default: false },
        'without-iterator-fix': { type: 'boolean', default: false },
      },
    });
    const cycles = Number(values.cycles);
    const perCycle = Number(values['per-cycle']);
    if (!Number.isInteger(cycles) || cycles < 1) throw new Error(`--cycles must be a positive integer`);
    if (!Number.isInteger(perCycle) || perCycle < 1 || perCycle > 230)
      throw new Error('--per-cycle must be 1..230 (the demo external subnet has about 240 free addresses)');
    const dir = mkdtempSync(join(tmpdir(), 'bench-memory-'));
    const { child, kubeconfig } = await startStack(dir, values['data-dir'], values['without-iterator-fix']);
    const pid = child.pid as number;
    const api = kubeConfigFromFile(kubeconfig).makeApiClient(CustomObjectsApi);
    const samples: { cycle: number; events: number; rssMb: number; seconds: number }[] = [];
    const started = Date.now();
    try {
      await waitFor('the demo EIP', async () => (await list(api)).some((e) => e.status?.ready));
      samples.push({ cycle: 0, events: 0, rssMb: rssMb(pid), seconds: 0 });
      progress(`stack pid ${pid} ready, RSS ${samples[0]!.rssMb} MB`);
      for (let c = 1; c <= cycles; c++) {
        const names = Array.from({ length: perCycle }, (_, i) => `mem-${c}-${i}`);
        await inBatches(names, 20, (name) =>
          api.createClusterCustomObject({
            ...EIPS,
            body: {
              apiVersion: 'kubeovn.io/v1',
              kind: 'IptablesEIP',
              metadata: { name },
              spec: { natGwDp: 'gw1' },
            },
          }),
        );
        const wanted = new Set(names);
        await waitFor(`cycle ${c}: ${perCycle} EIPs Ready`, async () => {
          const ready = (await list(api)).filter(
            (e) => wanted.has(e.metadata?.name ?? '') && e.status?.ready,
          );
          return ready.length === perCycle;
        });
        await inBatches(names, 20, (name) => api.deleteClusterCustomObject({ ...EIPS, name }));
        await waitFor(`cycle ${c}: EIPs gone`, async () =>
          (await list(api)).every((e) => !wanted.has(e.metadata?.name ?? '')),
        );
        const sample = {
          cycle: c,
          events: c * perCycle * 2,
          rssMb: rssMb(pid),
          seconds: Math.round((Date.now() - started) / 1000),
        };
        samples.push(sample);
        progress(
          `cycle ${c}/${cycles}: ${sample.events} events, RSS ${sample.rssMb} MB, ${sample.seconds} s`,
        );
      }
    } finally {
      child.kill('SIGINT');
      await new Promise((r) => child.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    }
    const half = samples[Math.floor(samples.length / 2)]!;
    const last = samples.at(-1)!;
    const growthPer1k =
      last.events > half.events ? ((last.rssMb - half.rssMb) / (last.events - half.events)) * 1000 : 0;
    const peak = Math.max(...samples.map((s) => s.rssMb));
    const rows = samples.map((s) => `| ${s.cycle} | ${s.events} | ${s.rssMb} | ${s.seconds} |`);
    const table = [
      `npm start RSS over ${last.events} EIP events (${cycles} cycles of ${perCycle} creates + ${perCycle} deletes, ${values['data-dir'] ? 'with --data-dir' : 'in memory'}${values['without-iterator-fix'] ? ', dynalite iterators NOT closed' : ''})`,
      '',
      '| cycle | events | RSS MB | seconds |',
      '|---|---|---|---|',
      ...rows,
      '',
      `start ${samples[0]!.rssMb} MB, peak ${peak} MB, end ${last.rssMb} MB; growth over the second half: ${growthPer1k.toFixed(1)} MB per 1,000 events`,
    ].join('\n');
    return {
      table,
      json: {
        cycles,
        perCycle,
        dataDir: values['data-dir'],
        samples,
        peakMb: peak,
        growthMbPer1kEvents: growthPer1k,
      },
      file: `memory${values['data-dir'] ? '-data-dir' : ''}${values['without-iterator-fix'] ? '-without-iterator-fix' : ''}.json`,
    };
  },
};
