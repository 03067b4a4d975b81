import { partition } from '@aws-sdk/core/client';
import { STSClient } from '@aws-sdk/nested-clients/sts';
import { describe, expect, it } from 'vitest';
import { cachedEksToken, mintEksToken, stsHostOf } from '../../shared/adapters/aws/eks-token.js';

const credentials = async () => ({
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'secret',
  sessionToken: 'session/token+=',
});

function decode(token: string): URL {
  expect(token.startsWith('k8s-aws-v1.')).toBe(true);
  return new URL(Buffer.from(token.slice('k8s-aws-v1.'.length), 'base64url').toString());
}

describe('EKS token', () => {
  it('is a presigned STS GetCallerIdentity URL that signs the cluster name, in the format the API server verifies', async () => {
    const token = await mintEksToken({
      clusterName: 'prod',
      region: 'eu-west-1',
      credentials,
      now: new Date('2026-01-02T03:04:05Z'),
    });
    const url = decode(token);
    expect(url.origin + url.pathname).toBe('https://sts.eu-west-1.amazonaws.com/');
    const q = url.searchParams;
    expect(q.get('Action')).toBe('GetCallerIdentity');
    expect(q.get('Version')).toBe('2011-06-15');
    expect(q.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(q.get('X-Amz-Credential')).toBe('AKIDEXAMPLE/20260102/eu-west-1/sts/aws4_request');
    expect(q.get('X-Amz-Date')).toBe('20260102T030405Z');
    expect(q.get('X-Amz-Expires')).toBe('60');
    expect(q.get('X-Amz-SignedHeaders')).toBe('host;x-k8s-aws-id');
    expect(q.get('X-Amz-Security-Token')).toBe('session/token+=');
    expect(q.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    expect(token.length).toBeLessThanOrEqual(4096);
    expect(token).not.toContain('=');
  });

  it('signs the cluster name: another cluster gives another signature', async () => {
    const at = new Date('2026-01-02T03:04:05Z');
    const a = decode(await mintEksToken({ clusterName: 'a', region: 'eu-west-1', credentials, now: at }));
    const b = decode(await mintEksToken({ clusterName: 'b', region: 'eu-west-1', credentials, now: at }));
    expect(a.searchParams.get('X-Amz-Signature')).not.toBe(b.searchParams.get('X-Amz-Signature'));
  });

  it('is reused for 14 minutes and minted again after', async () => {
    let t = Date.parse('2026-01-02T03:00:00Z');
    const get = cachedEksToken({ clusterName: 'c', region: 'eu-west-1', credentials, clock: () => t });
    const first = await get();
    t += 13 * 60_000;
    expect(await get()).toBe(first);
    t += 2 * 60_000;
    expect(await get()).not.toBe(first);
  });
});

describe('the STS host of the token, by partition', () => {
  // Regions of every partition in the SDK's own partition table, and names it has not heard of yet.
  const regions = [
    'eu-west-1',
    'us-east-1',
    'ap-southeast-7',
    'mx-central-1',
    'il-central-1',
    'cn-north-1',
    'cn-northwest-1',
    'us-gov-west-1',
    'us-gov-east-1',
    'us-iso-east-1',
    'us-isob-east-1',
    'eu-isoe-west-1',
    'us-isof-south-1',
    'eusc-de-east-1',
    'ap-future-9',
    'cn-future-9',
  ];

  it.each(regions)('%s: the SDK partition table and its STS endpoint rules give the same host', (region) => {
    // The SDK's STS client (the credential providers' own) resolves the regional endpoint from its rule set.
    const sts = new STSClient({ region });
    const url = sts.config.endpointProvider({
      Region: region,
      UseFIPS: false,
      UseDualStack: false,
      UseGlobalEndpoint: false,
    }).url;
    expect(stsHostOf(region)).toBe(url.hostname);
    expect(stsHostOf(region)).toBe(`sts.${region}.${partition(region).dnsSuffix}`);
  });

  it('China: the token is presigned for sts.<region>.amazonaws.com.cn, signed for that region', async () => {
    const token = await mintEksToken({ clusterName: 'c', region: 'cn-north-1', credentials });
    const url = decode(token);
    expect(url.hostname).toBe('sts.cn-north-1.amazonaws.com.cn');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/\/cn-north-1\/sts\/aws4_request$/);
  });

  it('GovCloud: amazonaws.com with the us-gov region', () => {
    expect(stsHostOf('us-gov-west-1')).toBe('sts.us-gov-west-1.amazonaws.com');
  });

  it.each(['', 'eu_west_1', 'EU-WEST-1', 'evil.example.com/x', 'eu-west-1.attacker'])(
    'refuses %j: the region becomes a host name',
    (region) => {
      expect(() => stsHostOf(region)).toThrow(/is not an AWS region name/);
    },
  );
});
