/**
 * The vitest configuration StrykerJS runs (stryker.config.mjs): the project's, narrowed to the unit tests that
 * drive the core (shared/core) — the operations on the in-memory ports, the handler edge and
 * the port contracts on the fakes. The rest of test/unit never reaches the core, and several of those tests read
 * the repository's text (docs links, the import rule, metric names), which the sandbox's instrumented copy breaks.
 */
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: ['test/unit/core-*.test.ts', 'test/unit/handler.test.ts', 'test/unit/*-contract.test.ts'],
  },
});
