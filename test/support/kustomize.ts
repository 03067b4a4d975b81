/** `kubectl kustomize <dir>` (kubectl's built-in kustomize), parsed: for the tests of the manifests under infra/. */
import { spawnSync } from 'node:child_process';
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
