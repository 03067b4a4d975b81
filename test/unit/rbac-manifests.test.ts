/**
 * The handlers' RBAC and exec policy as `kubectl apply -k infra/rbac` sends them, and as the overlay in
 * docs/deploy-eks.md moves them to another gateway namespace: only the gateway-pod Role and RoleBinding move, the
 * parameter itself is never applied, and the rules are the ones handlers.yaml states (which the real-adapter tests
 * check every request against).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { kubectlOrSkip } from '../support/kubectl.js';
import { type Doc, kustomize, kustomizeOverlay } from '../support/kustomize.js';

const root = join(import.meta.dirname, '../..');
const { skip } = kubectlOrSkip();
let base: Doc[];
let overlay: Doc[];

const key = (d: Doc) => `${d.kind}/${d.metadata.namespace ?? ''}/${d.metadata.name}`;

beforeAll(() => {
  if (skip) return;
  base = kustomize(join(root, 'infra/rbac'));
  overlay = kustomizeOverlay('rbac', (rel) => [
    `resources: [${rel}]`,
    `components: [${rel}/params]`,
    'configMapGenerator:',
    '  - name: eip-lambdas-handlers-params',
    '    literals: [gatewayNamespace=kube-ovn]',
    '    options:',
    '      disableNameSuffixHash: true',
    '      annotations: { config.kubernetes.io/local-config: "true" }',
  ]);
});

describe.skipIf(skip)('handlers RBAC (kubectl kustomize infra/rbac)', () => {
  it('the base is exactly handlers.yaml and exec-policy.yaml, the gateway-pod Role in kube-system', () => {
    const files = ['handlers.yaml', 'exec-policy.yaml'].flatMap((f) =>
      parseAllDocuments(readFileSync(join(root, 'infra/rbac', f), 'utf8')).map((d) => d.toJS() as Doc),
    );
    expect(base.map(key).sort()).toEqual(files.map(key).sort());
    const role = base.find((d) => d.kind === 'Role' && d.metadata.name === 'eip-lambdas-handlers')!;
    expect(role.metadata.namespace).toBe('kube-system');
    expect(role.rules).toEqual(files.find((d) => key(d) === key(role))!.rules);
  });

  it('the overlay moves the gateway-pod Role and RoleBinding, and only them; the parameter is not applied', () => {
    const moved = (d: Doc) =>
      d.metadata.name === 'eip-lambdas-handlers' && ['Role', 'RoleBinding'].includes(d.kind);
    expect(overlay.filter(moved).map((d) => d.metadata.namespace)).toEqual(['kube-ovn', 'kube-ovn']);
    expect(overlay.some((d) => d.kind === 'ConfigMap')).toBe(false);
    const rest = (docs: Doc[]) => docs.filter((d) => !moved(d));
    expect(rest(overlay)).toEqual(rest(base));
    const role = (docs: Doc[]) => docs.find((d) => d.kind === 'Role' && moved(d))!.rules;
    expect(role(overlay)).toEqual(role(base));
  });
});
