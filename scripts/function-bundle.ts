/**
 * How a deploy bundles each function: serverless.yml's `custom.esbuild` (what serverless-esbuild hands to esbuild),
 * in esbuild's own terms, for the tools that must bundle a function the same way — the Lambda benchmark and the
 * bundle tests. `test/unit/function-bundle.test.ts` fails when the two drift apart.
 */
import type { BuildOptions } from 'esbuild';

export const FUNCTION_BUNDLE = {
  bundle: true,
  minify: true,
  // Class and function names survive minification: errors are told apart by `name` (EipError sets it from
  // new.target.name), which the logs, Lambda's errorType and the dead-letter records show. Cost: about 29 KB per
  // bundle (8 KB gzipped) and a few ms of cold import CPU time (bench/README.md).
  keepNames: true,
  format: 'cjs',
  platform: 'node',
  target: 'node22',
  mainFields: ['module', 'main'],
  // client-node's dependency chain requires Node's deprecated built-in `punycode`; the userland package stands in.
  alias: { punycode: 'punycode/' },
} as const satisfies BuildOptions;
