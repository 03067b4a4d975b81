/** The esbuild options the bench and the bundle tests use are serverless.yml's (scripts/function-bundle.ts). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { FUNCTION_BUNDLE } from '../../scripts/function-bundle.js';

describe('FUNCTION_BUNDLE', () => {
  it("says what serverless.yml's custom.esbuild says, option by option", () => {
    const sls = parse(readFileSync(join(import.meta.dirname, '../../serverless.yml'), 'utf8')) as {
      custom: { esbuild: Record<string, unknown> };
    };
    const deployed = sls.custom.esbuild;
    for (const [key, value] of Object.entries(FUNCTION_BUNDLE)) expect(deployed[key], key).toEqual(value);
  });
});
