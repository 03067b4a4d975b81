/** `kubectl kustomize <dir>` (kubectl's built-in kustomize), parsed: for the tests of the manifests under infra/. */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { expect } from 'vitest';
import { parseAllDocuments } from 'yaml';

export type Doc = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  rules?: { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] }[];
  subjects?: { kind: string; name: string; namespace: string }[];
  roleRef?: { kind: string; name: string };
  data?: Record<string, string>;
  spec?: Record<string, unknown>;
};

export function kustomize(dir: string): Doc[] {
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return parseAllDocuments(r.stdout).map((d) => {
    expect(d.errors).toEqual([]);
    return d.toJS() as Doc;
  });
}

/**
 * Renders an overlay of `infra/<target>` as an operator would write it beside the checkout (docs/deploy-eks.md):
 * `body` gets the overlay's relative path to `infra/<target>` and returns the kustomization's lines after its kind.
 * `siblings` are more kustomizations beside it (`../<name>` from the overlay), written the same way.
 */
export function kustomizeOverlay(
  target: string,
  body: (rel: string) => string[],
  siblings: Record<string, (rel: string) => string[]> = {},
): Doc[] {
  const root = join(import.meta.dirname, '../..');
  const dir = mkdtempSync(join(tmpdir(), `${target}-overlay-`));
  try {
    for (const [name, lines] of Object.entries({ prod: body, ...siblings })) {
      mkdirSync(join(dir, name));
      const rel = relative(join(dir, name), join(root, 'infra', target));
      writeFileSync(
        join(dir, name, 'kustomization.yaml'),
        ['apiVersion: kustomize.config.k8s.io/v1beta1', 'kind: Kustomization', ...lines(rel), ''].join('\n'),
      );
    }
    return kustomize(join(dir, 'prod'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
