import { describe, expect, it } from 'vitest';
import { buildDeps } from '../../shared/adapters/live.js';
import { ConfigError, loadConfig } from '../../shared/config/config.js';
import { profileRegion, resolveRegion } from '../../shared/config/region.js';

describe('loadConfig', () => {
  it('reads a local setup: kubeconfig, table and endpoint, with defaults', () => {
    const c = loadConfig({
      KUBECONFIG: '/tmp/kc',
      TABLE_NAME: 'eip-ipam',
      DYNAMODB_ENDPOINT: 'http://127.0.0.1:4567',
    });
    expect(c).toMatchObject({
      namespace: 'kube-system',
      kube: { kind: 'kubeconfig', path: '/tmp/kc' },
      dynamo: { tableName: 'eip-ipam', endpoint: 'http://127.0.0.1:4567' },
      execTimeoutMs: 20_000,
      readCacheMs: 0,
      logLevel: 'info',
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('caches slowly changing reads for 5 s in Lambda by default, as EIP_READ_CACHE_MS says otherwise', () => {
    const base = { KUBECONFIG: '/tmp/kc', TABLE_NAME: 'eip-ipam', AWS_REGION: 'eu-west-1' };
    expect(loadConfig({ ...base, AWS_LAMBDA_FUNCTION_NAME: 'eip-add' }).readCacheMs).toBe(5_000);
    expect(
      loadConfig({ ...base, AWS_LAMBDA_FUNCTION_NAME: 'eip-add', EIP_READ_CACHE_MS: '0' }).readCacheMs,
    ).toBe(0);
    expect(loadConfig({ ...base, EIP_READ_CACHE_MS: '2000' }).readCacheMs).toBe(2_000);
    expect(() => loadConfig({ ...base, EIP_READ_CACHE_MS: '-1' })).toThrow(
      /EIP_READ_CACHE_MS must be an integer/,
    );
  });

  it('KUBE_OVN_RELEASE: a release the product speaks, or auto (no default)', () => {
    const base = { KUBECONFIG: '/tmp/kc', TABLE_NAME: 'eip-ipam', AWS_REGION: 'eu-west-1' };
    expect(loadConfig(base).kubeOvnRelease).toBeUndefined();
    expect(loadConfig({ ...base, KUBE_OVN_RELEASE: 'auto' }).kubeOvnRelease).toBeUndefined();
    expect(loadConfig({ ...base, KUBE_OVN_RELEASE: ' ' }).kubeOvnRelease).toBeUndefined();
    for (const r of ['1.12', '1.14', 'v1.15.3', '1.16', 'master'])
      expect(loadConfig({ ...base, KUBE_OVN_RELEASE: r }).kubeOvnRelease).toBe(r);
    expect(() => loadConfig({ ...base, KUBE_OVN_RELEASE: '1.11' })).toThrow(
      /KUBE_OVN_RELEASE: kube-ovn 1\.11 is not supported .*; or auto/,
    );
    expect(() => loadConfig({ ...base, KUBE_OVN_RELEASE: 'newest' })).toThrow(
      /KUBE_OVN_RELEASE: "newest" is not a kube-ovn release/,
    );
  });

  it('prefers EKS access when its variables are set', () => {
    const c = loadConfig({
      EKS_CLUSTER_NAME: 'prod',
      EKS_ENDPOINT: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com',
      EKS_CA_DATA: 'LS0t',
      AWS_REGION: 'eu-west-1',
      TABLE_NAME: 't-ipam',
    });
    expect(c.kube).toEqual({
      kind: 'eks',
      clusterName: 'prod',
      endpoint: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com',
      caData: 'LS0t',
      region: 'eu-west-1',
    });
  });

  it('reports every problem at once', () => {
    try {
      loadConfig({ EKS_CLUSTER_NAME: 'x', EIP_NAMESPACE: 'Bad_NS', EXEC_TIMEOUT_MS: 'soon' });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      const problems = (e as ConfigError).problems.join('\n');
      expect(problems).toMatch(/EIP_NAMESPACE "Bad_NS"/);
      expect(problems).toMatch(/missing EKS_ENDPOINT, EKS_CA_DATA/);
      expect(problems).toMatch(/TABLE_NAME is required/);
      expect(problems).toMatch(/EXEC_TIMEOUT_MS must be an integer/);
    }
  });

  it('reads what the Lambda runtime sets: the function name, in Lambda or not, and placeholder credentials locally', () => {
    const base = { KUBECONFIG: '/tmp/kc', TABLE_NAME: 'eip-ipam', AWS_REGION: 'eu-west-1' };
    expect(loadConfig(base)).toMatchObject({ service: 'eip-lambdas', inLambda: false });
    expect(loadConfig({ ...base, AWS_LAMBDA_FUNCTION_NAME: 'eip-add' })).toMatchObject({
      service: 'eip-add',
      inLambda: true,
    });
    const local = { ...base, DYNAMODB_ENDPOINT: 'http://127.0.0.1:4567' };
    expect(loadConfig(local).dynamo.placeholderCredentials).toBe(true);
    expect(loadConfig({ ...local, AWS_ACCESS_KEY_ID: 'AKIA' }).dynamo.placeholderCredentials).toBe(false);
    expect(loadConfig(base).dynamo.placeholderCredentials).toBe(false);
  });

  it('DRIFT_REPAIR: on unless off, anything else reported', () => {
    const base = { KUBECONFIG: '/tmp/kc', TABLE_NAME: 'eip-ipam', AWS_REGION: 'eu-west-1' };
    expect(loadConfig(base).driftRepair).toBe(true);
    expect(loadConfig({ ...base, DRIFT_REPAIR: 'on' }).driftRepair).toBe(true);
    expect(loadConfig({ ...base, DRIFT_REPAIR: 'OFF' }).driftRepair).toBe(false);
    expect(() => loadConfig({ ...base, DRIFT_REPAIR: 'no' })).toThrow(
      /DRIFT_REPAIR must be on or off, got "no"/,
    );
  });

  it('the product never reads a kubeconfig itself: a local caller passes it in (local/kubeconfig.ts)', () => {
    const config = loadConfig({ KUBECONFIG: '/tmp/kc', TABLE_NAME: 'eip-ipam', AWS_REGION: 'eu-west-1' });
    expect(() => buildDeps(config)).toThrow(ConfigError);
    expect(() => buildDeps(config)).toThrow(/KUBECONFIG \(\/tmp\/kc\) is for local runs/);
    const given = { server: 'https://127.0.0.1:1', headers: async () => ({}) };
    expect(buildDeps(config, { kubeConfig: given }).cluster).toBeDefined();
  });
});

describe('the AWS region (shared/config/region.ts)', () => {
  const file = (text: string) => (path: string) => (path === '/cfg' ? text : undefined);
  const CONFIG = [
    '# a comment',
    '[default]',
    'region = eu-west-3',
    '[profile prod]',
    'output = json',
    's3 =',
    '  region = us-west-2',
    'region = ap-northeast-1 ; inline comment',
    '[staging]',
    'region = sa-east-1',
  ].join('\n');

  it('takes AWS_REGION, then AWS_DEFAULT_REGION, then the profile in the shared config file, as the CLI does', () => {
    const env = { AWS_CONFIG_FILE: '/cfg' };
    expect(
      resolveRegion({ ...env, AWS_REGION: 'eu-central-1', AWS_DEFAULT_REGION: 'x-y-1' }, file(CONFIG)),
    ).toEqual({ region: 'eu-central-1', from: '$AWS_REGION' });
    expect(resolveRegion({ ...env, AWS_DEFAULT_REGION: 'us-gov-west-1' }, file(CONFIG))?.region).toBe(
      'us-gov-west-1',
    );
    expect(resolveRegion(env, file(CONFIG))).toEqual({
      region: 'eu-west-3',
      from: 'profile default in /cfg',
    });
    expect(resolveRegion({ ...env, AWS_PROFILE: 'prod' }, file(CONFIG))?.region).toBe('ap-northeast-1');
  });

  it('reads the config file the SDK does: [profile NAME] sections, nested settings skipped, no guess', () => {
    expect(profileRegion(CONFIG, 'prod')).toBe('ap-northeast-1'); // not the nested s3 region
    expect(profileRegion(CONFIG, 'staging')).toBeUndefined(); // [staging] without `profile` is not a config profile
    expect(profileRegion('[profile default]\nregion=cn-north-1\n', 'default')).toBe('cn-north-1');
    expect(resolveRegion({ AWS_CONFIG_FILE: '/none' }, file(CONFIG))).toBeUndefined();
    expect(
      resolveRegion({ HOME: '/home/me' }, (p) => (p === '/home/me/.aws/config' ? CONFIG : undefined))?.from,
    ).toBe('profile default in /home/me/.aws/config');
  });

  it('is required unless DynamoDB is a local endpoint, and must be a region name', () => {
    const none = { AWS_CONFIG_FILE: '/nonexistent/aws-config', TABLE_NAME: 'eip-ipam' };
    expect(() => loadConfig({ ...none, KUBECONFIG: '/tmp/kc' })).toThrow(/no AWS region for DynamoDB/);
    expect(() =>
      loadConfig({ ...none, EKS_CLUSTER_NAME: 'c', EKS_ENDPOINT: 'https://x.example', EKS_CA_DATA: 'LS0t' }),
    ).toThrow(/no AWS region for the EKS token and DynamoDB/);
    const local = loadConfig({ ...none, KUBECONFIG: '/tmp/kc', DYNAMODB_ENDPOINT: 'http://127.0.0.1:1' });
    expect(local.dynamo.region).toBe('local');
    expect(() => loadConfig({ ...none, KUBECONFIG: '/tmp/kc', AWS_REGION: 'eu-west-1.evil' })).toThrow(
      /"eu-west-1.evil" \(from \$AWS_REGION\) is not a region name/,
    );
  });
});
