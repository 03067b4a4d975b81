/**
 * Which cluster and table the command-line tools use (scripts/target.ts), and how `npm run invoke` reports a target
 * it refuses: a named target is used as named or refused with a usage error (exit 2), never completed with the
 * local stack's table nor replaced by the in-memory demo.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTarget, TargetError } from '../../scripts/target.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
let dir: string;
let stackFile: string;
let stackKubeconfig: string;
let realKubeconfig: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'eip-target-'));
  stackKubeconfig = join(dir, 'local-kubeconfig');
  realKubeconfig = join(dir, 'real-kubeconfig');
  for (const f of [stackKubeconfig, realKubeconfig]) writeFileSync(f, 'apiVersion: v1\nkind: Config\n');
  stackFile = join(dir, 'stack.json');
  writeFileSync(
    stackFile,
    JSON.stringify({
      kubeconfig: stackKubeconfig,
      tableName: 'local-ipam',
      dynamodbEndpoint: 'http://127.0.0.1:45999',
      namespace: 'kube-system',
    }),
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `fn` in a directory without .local/stack.json (the repository may have a local stack running). */
function noStack<T>(fn: () => T): T {
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    return fn();
  } finally {
    process.chdir(cwd);
  }
}

describe('resolveTarget', () => {
  it('uses the local stack when nothing is named', () => {
    const t = resolveTarget({ stack: stackFile }, {});
    expect(t?.config.kube).toEqual({ kind: 'kubeconfig', path: stackKubeconfig });
    expect(t?.config.dynamo).toMatchObject({ tableName: 'local-ipam', endpoint: 'http://127.0.0.1:45999' });
  });

  it('lets the stack complete its own kubeconfig, named by flag or $KUBECONFIG', () => {
    expect(
      resolveTarget({ stack: stackFile, kubeconfig: stackKubeconfig }, {})?.config.dynamo.tableName,
    ).toBe('local-ipam');
    expect(
      resolveTarget({ stack: stackFile }, { KUBECONFIG: stackKubeconfig })?.config.dynamo.tableName,
    ).toBe('local-ipam');
  });

  it('finds the stack.json npm start wrote beside the kubeconfig named (npm start -- --kubeconfig FILE)', () => {
    noStack(() => {
      const byFlag = resolveTarget({ kubeconfig: stackKubeconfig }, {});
      expect(byFlag?.config.dynamo).toMatchObject({
        tableName: 'local-ipam',
        endpoint: 'http://127.0.0.1:45999',
      });
      expect(resolveTarget({}, { KUBECONFIG: stackKubeconfig })?.config.dynamo.tableName).toBe('local-ipam');
      // A stack.json beside another kubeconfig names its own: it does not complete this one.
      expect(() => resolveTarget({ kubeconfig: realKubeconfig }, {})).toThrow(
        /--kubeconfig given, but no table/,
      );
    });
  });

  it('refuses a real kubeconfig paired with the local table (exported KUBECONFIG, stack running)', () => {
    expect(() => resolveTarget({ stack: stackFile }, { KUBECONFIG: realKubeconfig })).toThrow(TargetError);
    expect(() => resolveTarget({ stack: stackFile }, { KUBECONFIG: realKubeconfig })).toThrow(
      /\$KUBECONFIG names a cluster other than the local stack's, and no table is named/,
    );
    expect(() =>
      resolveTarget(
        {
          stack: stackFile,
          kubeconfig: realKubeconfig,
          table: 'x-ipam',
          'dynamodb-endpoint': 'http://127.0.0.1:45999',
        },
        {},
      ),
    ).toThrow(/never paired with the local table/);
    expect(() =>
      resolveTarget(
        { stack: stackFile },
        { EKS_CLUSTER_NAME: 'c', EKS_ENDPOINT: 'https://x.example', EKS_CA_DATA: 'eA==' },
      ),
    ).toThrow(/\$EKS_CLUSTER_NAME names a cluster other than the local stack's/);
  });

  it("accepts a real cluster with its own table, in the AWS profile's region", () => {
    const awsConfig = join(dir, 'aws-config');
    writeFileSync(awsConfig, '[default]\nregion = eu-north-1\n[profile prod]\nregion = ap-south-2\n');
    const flags = { stack: stackFile, kubeconfig: realKubeconfig, table: 'prod-ipam' };
    const t = resolveTarget(flags, { AWS_CONFIG_FILE: awsConfig, AWS_PROFILE: 'prod' });
    expect(t?.config.kube).toEqual({ kind: 'kubeconfig', path: realKubeconfig });
    expect(t?.config.dynamo).toEqual({
      tableName: 'prod-ipam',
      region: 'ap-south-2',
      placeholderCredentials: false,
    });
    expect(resolveTarget(flags, { AWS_CONFIG_FILE: awsConfig })?.config.dynamo.region).toBe('eu-north-1');
    // The environment comes before the profile, as for the AWS CLI.
    const env = { AWS_CONFIG_FILE: awsConfig, AWS_DEFAULT_REGION: 'ca-west-1' };
    expect(resolveTarget(flags, env)?.config.dynamo.region).toBe('ca-west-1');
    // No region anywhere: a usage error that says where to set one, not a guessed region.
    expect(() => resolveTarget(flags, { AWS_CONFIG_FILE: join(dir, 'no-aws-config') })).toThrow(
      /no AWS region for DynamoDB: set AWS_REGION .* AWS profile/,
    );
  });

  it('never falls back when something is named: a cluster without a table, a missing kubeconfig', () => {
    noStack(() => {
      expect(() => resolveTarget({ kubeconfig: realKubeconfig }, {})).toThrow(
        /--kubeconfig given, but no table/,
      );
      expect(() => resolveTarget({ table: 't-ipam' }, {})).toThrow(/--table given, but no cluster/);
      expect(() => resolveTarget({ kubeconfig: join(dir, 'missing'), table: 't-ipam' }, {})).toThrow(
        /missing \(--kubeconfig\) does not exist/,
      );
    });
    expect(() => resolveTarget({ stack: join(dir, 'no-stack.json') }, {})).toThrow(/--stack .*no such file/);
  });

  it('returns nothing only when nothing is named and no stack runs', () => {
    noStack(() => expect(resolveTarget({}, {})).toBeUndefined());
  });
});

describe('npm run invoke', () => {
  const invoke = (args: string[], env: Record<string, string>) =>
    run(
      process.execPath,
      [
        join(root, 'node_modules/tsx/dist/cli.mjs'),
        join(root, 'scripts/invoke.ts'),
        'add',
        join(root, 'events/add.json'),
        ...args,
      ],
      { cwd: dir, env: { ...process.env, KUBECONFIG: '', TABLE_NAME: '', DYNAMODB_ENDPOINT: '', ...env } },
    ).then(
      (r) => ({ code: 0, ...r }),
      (e: { code: number; stdout: string; stderr: string }) => e,
    );

  it('exits 2, with nothing on stdout, for a refused or incomplete target', async () => {
    const cases = await Promise.all([
      invoke(['--stack', stackFile], { KUBECONFIG: realKubeconfig }),
      invoke(['--kubeconfig', realKubeconfig], {}),
      invoke(['--kubeconfig', join(dir, 'missing'), '--table', 't-ipam'], {}),
      invoke(['--memory', '--table', 't-ipam'], {}),
    ]);
    expect(cases.map((c) => c.code)).toEqual([2, 2, 2, 2]);
    expect(cases.map((c) => c.stdout)).toEqual(['', '', '', '']);
    expect(cases[0]!.stderr).toMatch(/never paired with another cluster/);
    expect(cases[1]!.stderr).toMatch(/no table/);
    expect(cases[2]!.stderr).toMatch(/does not exist/);
    expect(cases[3]!.stderr).toMatch(/--memory cannot be combined with --table/);
    for (const c of cases) expect(c.stderr).not.toMatch(/using a fresh in-memory demo world/);
  }, 120_000);
});
