/**
 * Who is who in the local lab: the identities the components run as (each with its own bearer token and kubeconfig),
 * and the RBAC and admission policies `npm start` applies for them — infra/rbac and infra/bridge as kustomize renders
 * them for a cluster (docs/deploy-eks.md), and kube-ovn's own (local/rbac/kube-ovn.yaml).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { type StaticToken, serviceAccountToken } from './kube-api/index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export type Component = 'handlers' | 'bridge' | 'kube-ovn';

/** The user each component authenticates as, as on EKS. */
export const IDENTITIES: Record<Component, Omit<StaticToken, 'token'>> = {
  // An IAM role mapped by an access entry to the group infra/rbac binds: EKS names the user after the assumed role
  // and its session (the function).
  handlers: {
    user: 'arn:aws:sts::000000000000:assumed-role/eip-lambdas-local-handlers/eip-lambdas-local',
    groups: ['eip-lambdas:handlers'],
  },
  // The bridge's ServiceAccount (infra/bridge/base/rbac.yaml), as its projected token authenticates.
  bridge: serviceAccountToken('', 'eip-lambdas', 'eip-lambdas-bridge'),
  // kube-ovn-controller's ServiceAccount (local/rbac/kube-ovn.yaml).
  'kube-ovn': serviceAccountToken('', 'kube-system', 'ovn'),
};

/** A fresh token per component (a static token file made at start: a restart invalidates the old kubeconfigs). */
export function componentTokens(): Record<Component, StaticToken> {
  const make = (c: Component): StaticToken => ({
    ...IDENTITIES[c],
    token: randomBytes(24).toString('base64url'),
  });
  return { handlers: make('handlers'), bridge: make('bridge'), 'kube-ovn': make('kube-ovn') };
}

export type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
} & Record<string, unknown>;

function readDocs(text: string, what: string): Manifest[] {
  return parseAllDocuments(text).map((d) => {
    if (d.errors.length > 0) throw new Error(`${what}: ${d.errors[0]?.message}`);
    return d.toJS() as Manifest;
  });
}

/**
 * A kustomization rendered as `kubectl kustomize` does (kubectl's built-in kustomize). Without kubectl, its
 * `resources` files are read as they are: for infra/rbac that is the same; for infra/bridge it leaves out the
 * generated parameter ConfigMap (which nothing here reads) and keeps the placeholders of the base.
 */
export function renderKustomization(dir: string): { docs: Manifest[]; how: string } {
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 30_000 });
  if (!r.error && r.status === 0) return { docs: readDocs(r.stdout, dir), how: 'kubectl kustomize' };
  const files = (d: string): string[] => {
    const k = readDocs(readFileSync(join(d, 'kustomization.yaml'), 'utf8'), d)[0] as { resources?: string[] };
    return (k.resources ?? []).flatMap((res) =>
      res.endsWith('.yaml') ? [join(d, res)] : files(join(d, res)),
    );
  };
  return {
    docs: files(dir).flatMap((f) => readDocs(readFileSync(f, 'utf8'), f)),
    how: 'the files listed in kustomization.yaml (kubectl not found)',
  };
}

/** infra/kube-ovn-fence: what keeps an unmodified kube-ovn-controller off the EIPs (ADR 0095). */
export function kubeOvnFence(): { docs: Manifest[]; how: string } {
  return renderKustomization(join(root, 'infra/kube-ovn-fence'));
}

/** infra/rbac, infra/bridge and kube-ovn's RBAC, in the order they are applied (namespaces first). */
export function labManifests(): { docs: Manifest[]; notes: string[] } {
  const rbac = renderKustomization(join(root, 'infra/rbac'));
  const bridge = renderKustomization(join(root, 'infra/bridge'));
  const kubeOvn = readDocs(
    readFileSync(join(root, 'local/rbac/kube-ovn.yaml'), 'utf8'),
    'local/rbac/kube-ovn.yaml',
  );
  // The bridge runs in the stack's process, not as a Deployment (the local API serves no apps/v1).
  const docs = [...bridge.docs.filter((d) => d.kind !== 'Deployment'), ...rbac.docs, ...kubeOvn];
  const rank = (d: Manifest) => (d.kind === 'Namespace' ? 0 : d.kind === 'ServiceAccount' ? 1 : 2);
  return {
    docs: docs.sort((a, b) => rank(a) - rank(b)),
    notes: [
      `infra/rbac rendered with ${rbac.how}`,
      `infra/bridge rendered with ${bridge.how} (without its Deployment)`,
    ],
  };
}
