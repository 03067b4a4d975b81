/**
 * `npm test` runs every test file; `test:unit`, `test:integration` and `test:e2e` split those same files into three
 * parts (test/README.md says which directory is which). Vitest itself is asked which files each script selects
 * (`vitest list --filesOnly` with the script's own arguments), so a new directory or a filter that no longer matches
 * shows here rather than as tests that silently stop running in the narrower scripts.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const scripts = (
  JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
).scripts;
const PARTS = ['test:unit', 'test:integration', 'test:e2e'] as const;
const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'test-scripts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The arguments after `vitest run` in a script, split as sh would split them (single quotes only). */
function vitestArgs(script: string): string[] {
  const m = /^vitest run(?:\s+(.*))?$/.exec(script);
  if (!m) throw new Error(`not a plain "vitest run …" script: ${script}`);
  return [...(m[1] ?? '').matchAll(/'([^']*)'|(\S+)/g)].map((t) => t[1] ?? t[2]!);
}

/** The test files vitest selects with these arguments, relative to the repository. */
async function selected(name: string, args: string[]): Promise<string[]> {
  const out = join(dir, `${name.replace(/\W/g, '-')}.json`);
  // The child must not inherit this run's reporter settings (VITEST_JSON would have it overwrite the run's report).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^VITEST|^TEST$/.test(k)));
  await run(
    process.execPath,
    [join(root, 'node_modules/vitest/vitest.mjs'), 'list', '--filesOnly', `--json=${out}`, ...args],
    { cwd: root, env },
  );
  const files = JSON.parse(readFileSync(out, 'utf8')) as { file: string }[];
  return files.map((f) => relative(root, f.file)).sort();
}

describe('the test scripts', () => {
  it('npm test is plain `vitest run`: every test file', () => {
    expect(vitestArgs(scripts.test!)).toEqual([]);
  });

  it('test:unit, test:integration and test:e2e together select exactly what npm test runs, each file once', async () => {
    const [all, ...parts] = await Promise.all([
      selected('test', vitestArgs(scripts.test!)),
      ...PARTS.map((p) => selected(p, vitestArgs(scripts[p] ?? `vitest run --missing-script-${p}`))),
    ]);
    const [unit, integration, e2e] = parts as [string[], string[], string[]];
    expect(all.length).toBeGreaterThan(50);
    // Each part is what its name says.
    expect(unit.length).toBeGreaterThan(0);
    expect(unit.filter((f) => !f.startsWith('test/unit/'))).toEqual([]);
    expect(e2e.length).toBeGreaterThan(0);
    expect(e2e.filter((f) => !f.startsWith('test/e2e/'))).toEqual([]);
    expect(integration.filter((f) => /^test\/(unit|e2e)\//.test(f))).toEqual([]);
    expect(integration).toContain('test/integration/dynamo-leases-contract.test.ts');
    // Together: every file npm test runs, none twice, nothing npm test would not run.
    const joined = [...unit, ...integration, ...e2e].sort();
    expect(joined).toEqual(all);
    expect(new Set(joined).size).toBe(joined.length);
  });
});
