/**
 * The kube-ovn release lines the lab speaks: which one a simulated gateway's script follows, which image a
 * gateway pod of that release runs, and which kube-ovn tag each line's model was read from.
 */

export const KUBE_OVN_RELEASES = ['1.12', '1.13', '1.14', '1.15', '1.16', 'master'] as const;
export type KubeOvnRelease = (typeof KUBE_OVN_RELEASES)[number];

/**
 * The lab's release when none is asked for: the newest, now that the product speaks every release
 * (docs/adr/0065-lab-speaks-every-kube-ovn-release.md, docs/adr/0090-core-speaks-each-gateways-dialect.md).
 */
export const DEFAULT_RELEASE: KubeOvnRelease = '1.16';

/** The kube-ovn tag each release line's model follows (the gateway image carries the same tag). */
export const RELEASE_TAG: Readonly<Record<KubeOvnRelease, string>> = {
  '1.12': 'v1.12.35',
  '1.13': 'v1.13.0',
  '1.14': 'v1.14.0',
  '1.15': 'v1.15.0',
  '1.16': 'v1.16.0',
  // master's VERSION file names the release it becomes; its images are built with that tag.
  master: 'v1.17.0',
};

/** `1.15`, `v1.15`, `1.15.0`, `v1.15.3` → `1.15`; `master` → `master`; anything else → undefined. */
export function parseRelease(text: string): KubeOvnRelease | undefined {
  if (text === 'master') return 'master';
  const m = /^v?(1\.1[2-6])(\.\d+)?$/.exec(text.trim());
  return m ? (m[1] as KubeOvnRelease) : undefined;
}

/** The vpc-nat-gw image of a release, as kube-ovn's install sets it in the ovn-vpc-nat-config ConfigMap. */
export function gatewayImage(release: KubeOvnRelease): string {
  return `docker.io/kubeovn/vpc-nat-gateway:${RELEASE_TAG[release]}`;
}

/** At or after `since` in release order (master last). */
export function atLeast(release: KubeOvnRelease, since: KubeOvnRelease): boolean {
  return KUBE_OVN_RELEASES.indexOf(release) >= KUBE_OVN_RELEASES.indexOf(since);
}
