/**
 * How a deploy bundles each function: serverless.yml's `custom.esbuild` (what serverless-esbuild hands to esbuild),
 * in esbuild's own terms, for the tools that must bundle a function the same way — the Lambda benchmark and the
 * bundle tests. `test/unit/function-bundle.test.ts` fails when the two drift apart.
 */
import type { BuildOptions } from 'esbuild';

export const FUNCTION_BUNDLE = {
  bundle: true,
  minify: true,
  format: 'cjs',
  platform: 'node',
  target: 'node22',
  mainFields: ['module', 'main'],
  // client-node's dependency chain requires Node's deprecated built-in `punycode`; the userland package stands in.
  alias: { punycode: 'punycode/' },
} as const satisfies BuildOptions;
