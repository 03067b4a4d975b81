/**
 * The layout rule, as code: what ships (functions/ and shared/) never imports the local lab, the tests, the
 * benchmarks or the scripts. Both static and dynamic imports are read; a specifier is resolved against the file
 * that holds it, so `../../local/x.js` and `../local/x.js` are judged by where they land, not how they are spelt.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

export const SHIPPED = ['functions', 'shared'] as const;
export const NOT_SHIPPED = ['local', 'test', 'bench', 'scripts'] as const;

export interface Violation {
  file: string;
  specifier: string;
  reaches: string;
}

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)['"]([^'"]+)['"]/g;

/** Relative import specifiers of one source text (static, side-effect, dynamic and require). */
export function importSpecifiers(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(IMPORT)) if (m[1]?.startsWith('.')) out.push(m[1]);
  return out;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(c|m)?[jt]s$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Every import from a shipped file into a part of the repository that does not ship. */
export function layoutViolations(root: string): Violation[] {
  const violations: Violation[] = [];
  for (const top of SHIPPED) {
    for (const file of sourceFiles(join(root, top))) {
      for (const specifier of importSpecifiers(readFileSync(file, 'utf8'))) {
        const target = relative(root, resolve(dirname(file), specifier));
        const first = target.split(sep)[0] ?? '';
        if ((NOT_SHIPPED as readonly string[]).includes(first) || first === '..')
          violations.push({ file: relative(root, file), specifier, reaches: first });
      }
    }
  }
  return violations;
}
