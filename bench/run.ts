/**
 * `npm run bench -- <suite> [options]`: runs one benchmark suite, prints its table and writes its JSON under
 * bench/results/. Suites register below; each is a module exporting `run(args): Promise<SuiteResult>`.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

export interface SuiteResult {
  /** Printed as is (a table). */
  table: string;
  /** Written to bench/results/<file>, by default <suite>.json. */
  json: unknown;
  file?: string;
}

export interface Suite {
  description: string;
  /**
   * `usage: npm run bench -- <suite> [--option=…] [--flag]`: printed by `--help` and with a usage error. The options
   * it names are the ones the suite accepts: run.ts refuses any other before the suite starts.
   */
  usage: string;
  run(args: readonly string[]): Promise<SuiteResult>;
}

/** The registry: name → lazy module (a suite's dependencies load only when it runs). */
const suites: Record<string, () => Promise<Suite>> = {
  ipam: async () => (await import('./ipam.js')).suite,
  lambda: async () => (await import('./lambda.js')).suite,
  e2e: async () => (await import('./e2e.js')).suite,
  cost: async () => (await import('./cost.js')).suite,
  memory: async () => (await import('./memory.js')).suite,
  gc: async () => (await import('./gc.js')).suite,
  'exec-cost': async () => (await import('./exec-cost.js')).suite,
};

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === '--help' || !suites[name]) {
    const list = await Promise.all(
      Object.entries(suites).map(async ([n, load]) => `  ${n}  ${(await load()).description}`),
    );
    console.log(`usage: npm run bench -- <suite> [options]\n\nsuites:\n${list.join('\n')}`);
    return name && name !== '--help' ? 2 : 0;
  }
  const suite = await suites[name]!();
  if (args.includes('--help') || args.includes('-h')) {
    console.log(`${suite.usage}\n\n${suite.description}; details in bench/README.md`);
    return 0;
  }
  const known = new Set([...suite.usage.matchAll(/--([a-z0-9-]+)/g)].map((m) => m[1]));
  const unknown = args.filter((a) => !known.has(/^--([a-z0-9-]+)(=|$)/.exec(a)?.[1] ?? ''));
  if (unknown.length > 0) {
    console.error(`unknown option${unknown.length > 1 ? 's' : ''}: ${unknown.join(' ')}\n${suite.usage}`);
    return 2;
  }
  let result: SuiteResult;
  try {
    result = await suite.run(args);
  } catch (e) {
    if ((e as Error).name !== 'UsageError') throw e;
    console.error((e as Error).message);
    return 2;
  }
  console.log(result.table);
  const dir = fileURLToPath(new URL('./results/', import.meta.url));
  await mkdir(dir, { recursive: true });
  const file = `${dir}${result.file ?? `${name}.json`}`;
  await writeFile(file, `${JSON.stringify(result.json, null, 2)}\n`);
  console.log(`\nwrote ${file}`);
  return 0;
}

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
