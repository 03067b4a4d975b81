import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { importSpecifiers, layoutViolations } from '../support/imports.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('layout: what ships never imports the local lab, tests, benchmarks or scripts', () => {
  it('functions/ and shared/ import nothing from local/, test/, bench/ or scripts/', () => {
    expect(layoutViolations(ROOT)).toEqual([]);
  });

  describe('the rule catches a violation', () => {
    const copy = mkdtempSync(join(tmpdir(), 'layout-'));
    afterAll(() => rmSync(copy, { recursive: true, force: true }));
    cpSync(join(ROOT, 'functions'), join(copy, 'functions'), { recursive: true });
    cpSync(join(ROOT, 'shared'), join(copy, 'shared'), { recursive: true });

    it.each([
      ['shared/core/bad.ts', "import { NatGatewaySim } from '../../local/natgw/sim.js';", 'local'],
      ['shared/bad.ts', "export { eventually } from '../test/support/eventually.js';", 'test'],
      ['functions/add/bad.ts', "const m = await import('../../bench/run.js');", 'bench'],
      ['shared/lambda/bad.ts', "import '../../scripts/target.js';", 'scripts'],
    ])('%s importing %s', (file, line, reaches) => {
      const path = join(copy, file);
      writeFileSync(path, `${line}\n`);
      try {
        expect(layoutViolations(copy)).toEqual([expect.objectContaining({ file, reaches })]);
      } finally {
        rmSync(path);
      }
    });
  });

  it('reads static, side-effect, re-export and dynamic imports, and ignores packages', () => {
    const src = [
      "import a from './a.js';",
      "import type { B } from '../b.js';",
      "import './c.js';",
      "export * from './d.js';",
      "const e = await import('./e.js');",
      "import x from 'node:fs';",
      "import y from '@kubernetes/client-node';",
    ].join('\n');
    expect(importSpecifiers(src)).toEqual(['./a.js', '../b.js', './c.js', './d.js', './e.js']);
  });
});
