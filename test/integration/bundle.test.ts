/**
 * The Lambda artefact itself: each function bundled as serverless.yml bundles it (esbuild, CJS, node22) must load in
 * a fresh Node process and run its middy chain. (A module-level `import.meta.url` once crashed every cold start.)
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { FUNCTION_BUNDLE } from '../../scripts/function-bundle.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'eip-bundle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the Lambda bundles', () => {
  it.each(['add', 'update', 'reset', 'delete'])(
    '%s loads from a CJS bundle and rejects an invalid event',
    async (fn) => {
      const out = join(dir, `${fn}.cjs`);
      await build({
        ...FUNCTION_BUNDLE,
        entryPoints: [join(root, `functions/${fn}/handler.ts`)],
        outfile: out,
        logLevel: 'silent',
      });
      const script = `require(${JSON.stringify(out)}).handler({ version: 1 }, {}).then((o) => process.stdout.write(JSON.stringify(o)), (e) => { console.error(e); process.exit(3); })`;
      const { stdout } = await run(process.execPath, ['-e', script], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '' },
      });
      expect(JSON.parse(stdout)).toMatchObject({
        status: 'rejected',
        code: 'InvalidEvent',
        message: expect.stringMatching(/event\.id is required/),
      });
    },
  );

  it('gc loads from a CJS bundle and reports a configuration error, not a crash at import', async () => {
    const out = join(dir, 'gc.cjs');
    await build({
      ...FUNCTION_BUNDLE,
      entryPoints: [join(root, 'functions/gc/handler.ts')],
      outfile: out,
      logLevel: 'silent',
    });
    const script = `require(${JSON.stringify(out)}).handler().then(() => process.exit(0), (e) => { process.stdout.write(e.name + ': ' + e.message); })`;
    const { stdout } = await run(process.execPath, ['-e', script], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(stdout).toMatch(/^ConfigError: invalid configuration:[\s\S]*TABLE_NAME is required/);
  });

  it('keeps error class names through minification: a deadline shows as DeadlineError, not a mangled name', async () => {
    const out = join(dir, 'add-names.cjs');
    await build({
      ...FUNCTION_BUNDLE,
      entryPoints: [join(root, 'functions/add/handler.ts')],
      outfile: out,
      logLevel: 'silent',
    });
    // A valid event and configuration, a table nobody answers for, and 1 ms of budget left before the early
    // timeout: the edge gives up with a DeadlineError (retryable), which the runtime reports by its `name`.
    const event = {
      version: 1,
      id: 'e1',
      handler: 'add',
      reason: 'added',
      object: { kind: 'IptablesEIP', name: 'eip-1', uid: 'u1' },
    };
    const script = `require(${JSON.stringify(out)}).handler(${JSON.stringify(event)}, { getRemainingTimeInMillis: () => 3001, awsRequestId: 'r1' }).then((o) => process.stdout.write('resolved ' + JSON.stringify(o)), (e) => process.stdout.write(e.name))`;
    const { stdout } = await run(process.execPath, ['-e', script], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        AWS_REGION: 'eu-west-1',
        AWS_ACCESS_KEY_ID: 'x',
        AWS_SECRET_ACCESS_KEY: 'x',
        EKS_CLUSTER_NAME: 'c',
        EKS_ENDPOINT: 'https://127.0.0.1:1',
        EKS_CA_DATA: 'LS0t',
        TABLE_NAME: 'names-ipam',
        DYNAMODB_ENDPOINT: 'http://127.0.0.1:1',
        LOG_LEVEL: 'error',
      },
    });
    expect(stdout.trim().split('\n').at(-1)).toBe('DeadlineError');
  });

  it.each(['add', 'update', 'reset', 'delete', 'gc'])(
    '%s ships the thin Kubernetes client, without client-node or a YAML parser, under 1 MB (ADR 0027)',
    async (fn) => {
      const r = await build({
        ...FUNCTION_BUNDLE,
        entryPoints: [join(root, `functions/${fn}/handler.ts`)],
        outfile: join(dir, `${fn}-meta.cjs`),
        metafile: true,
        write: false,
        logLevel: 'silent',
      });
      const inputs = Object.keys(r.metafile.inputs);
      expect(inputs.some((f) => f.includes('shared/adapters/k8s/rest.ts'))).toBe(true);
      expect(inputs.filter((f) => /@kubernetes\/client-node|node_modules\/(js-)?yaml\//.test(f))).toEqual([]);
      expect(r.outputFiles[0]!.contents.length).toBeLessThan(1024 * 1024);
    },
  );
});
