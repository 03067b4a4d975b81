/**
 * A bearer token for the EKS API server, minted from the Lambda role's credentials without any AWS call: a
 * presigned STS GetCallerIdentity URL carrying the cluster name in the signed `x-k8s-aws-id` header, base64url
 * encoded behind `k8s-aws-v1.` (what `aws eks get-token` produces). The API server accepts it for 15 minutes after
 * its signing time; we reuse one for 14.
 */
import { Sha256 } from '@aws-crypto/sha256-js';
import { fromEnv } from '@aws-sdk/credential-provider-env';
import { HttpRequest } from '@smithy/protocol-http';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentityProvider } from '@smithy/types';

export const TOKEN_LIFETIME_MS = 14 * 60_000;

/**
 * The DNS suffix of each AWS partition, by the region-name pattern the SDK's partition table uses (China:
 * amazonaws.com.cn; GovCloud: amazonaws.com, with us-gov regions; the isolated partitions their own). Checked
 * against the SDK's table and its STS endpoint rules in test/unit/eks-token.test.ts.
 */
const PARTITIONS: readonly [RegExp, string][] = [
  [/^cn-\w+-\d+$/, 'amazonaws.com.cn'],
  [/^us-gov-\w+-\d+$/, 'amazonaws.com'],
  [/^us-iso-\w+-\d+$/, 'c2s.ic.gov'],
  [/^us-isob-\w+-\d+$/, 'sc2s.sgov.gov'],
  [/^eu-isoe-\w+-\d+$/, 'cloud.adc-e.uk'],
  [/^us-isof-\w+-\d+$/, 'csp.hci.ic.gov'],
  [/^eusc-de-\w+-\d+$/, 'amazonaws.eu'],
];

/** The regional STS host of a region: what `aws eks get-token` presigns, and the API server's authenticator accepts. */
export function stsHostOf(region: string): string {
  if (!/^[a-z]{2,4}(-[a-z]+)+-\d+$/.test(region)) throw new Error(`"${region}" is not an AWS region name`);
  const suffix = PARTITIONS.find(([pattern]) => pattern.test(region))?.[1] ?? 'amazonaws.com';
  return `sts.${region}.${suffix}`;
}

export async function mintEksToken(options: {
  clusterName: string;
  region: string;
  credentials?: AwsCredentialIdentityProvider;
  now?: Date;
}): Promise<string> {
  const hostname = stsHostOf(options.region);
  const signer = new SignatureV4({
    service: 'sts',
    region: options.region,
    credentials: options.credentials ?? fromEnv(),
    sha256: Sha256,
    applyChecksum: false,
  });
  const presigned = await signer.presign(
    new HttpRequest({
      method: 'GET',
      protocol: 'https:',
      hostname,
      path: '/',
      query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
      headers: { host: hostname, 'x-k8s-aws-id': options.clusterName },
    }),
    { expiresIn: 60, ...(options.now && { signingDate: options.now }) },
  );
  const query = Object.entries(presigned.query ?? {})
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  return `k8s-aws-v1.${Buffer.from(`https://${hostname}/?${query}`).toString('base64url')}`;
}

/** Caches a token and mints a new one shortly before the API server would stop accepting it. */
export function cachedEksToken(options: Parameters<typeof mintEksToken>[0] & { clock?: () => number }) {
  const clock = options.clock ?? Date.now;
  let cached: { token: string; until: number } | undefined;
  return async (): Promise<string> => {
    const now = clock();
    if (!cached || now >= cached.until) {
      cached = {
        token: await mintEksToken({ ...options, now: new Date(now) }),
        until: now + TOKEN_LIFETIME_MS,
      };
    }
    return cached.token;
  };
}
