// @ts-check
/**
 * StrykerJS over the core (shared/core), with the unit tests only. Not part of CI: it is slow. How to run it, the
 * score and the surviving mutants kept on purpose: docs/mutation.md. Work files and the JSON report go under
 * .local/ (ignored by git).
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'stryker.config.vitest.mts', related: false },
  mutate: ['shared/core/**/*.ts'],
  coverageAnalysis: 'perTest',
  // The machine is shared: one test process, and a mutant that hangs the tests is given 10 s beyond the normal run.
  concurrency: 1,
  timeoutMS: 10_000,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: '.local/mutation/mutation.json' },
  tempDirName: '.local/stryker-tmp',
  cleanTempDir: true,
  ignorePatterns: ['.local', 'bench/results', '.ci/out', 'coverage', '.serverless', '.esbuild'],
};
