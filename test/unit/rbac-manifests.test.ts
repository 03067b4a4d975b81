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
let namespaces: Doc[];

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
  // Gateways in two more namespaces (kube-ovn master's spec.namespace): one small kustomization each, beside it.
  const more = (ns: string) => (rel: string) => [`resources: [${rel}/gateway-namespace]`, `namespace: ${ns}`];
  namespaces = kustomizeOverlay('rbac', (rel) => [`resources: [${rel}, ../team-a, ../team-b]`], {
    'team-a': more('team-a'),
    'team-b': more('team-b'),
  });
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

  it("name-prefix sets the exec policy's pod prefix to kube-ovn's natGwNamePrefix, and changes nothing else", () => {
    const prefixDocs = kustomizeOverlay('rbac', (rel) => [
      `resources: [${rel}]`,
      `components: [${rel}/params, ${rel}/name-prefix]`,
      'configMapGenerator:',
      '  - name: eip-lambdas-handlers-params',
      '    literals: [gatewayNamespace=kube-ovn, natGwNamePrefix=egress]',
      '    options:',
      '      disableNameSuffixHash: true',
      '      annotations: { config.kubernetes.io/local-config: "true" }',
    ]);
    type Policy = { spec: { variables: { name: string; expression: string }[] } };
    const podPrefix = (docs: Doc[]) =>
      (docs.find((d) => d.kind === 'ValidatingAdmissionPolicy') as unknown as Policy).spec.variables.find(
        (v) => v.name === 'podPrefix',
      )?.expression;
    expect(podPrefix(base)).toBe("'vpc-nat-gw' + '-'");
    expect(podPrefix(prefixDocs)).toBe("'egress' + '-'");
    const withoutPolicy = (docs: Doc[]) => docs.filter((d) => d.kind !== 'ValidatingAdmissionPolicy');
    expect(withoutPolicy(prefixDocs)).toEqual(withoutPolicy(overlay));
    const unchanged = (docs: Doc[]) => {
      const p = structuredClone(
        docs.find((d) => d.kind === 'ValidatingAdmissionPolicy') as unknown as Policy,
      );
      p.spec.variables = p.spec.variables.filter((v) => v.name !== 'podPrefix');
      return p;
    };
    expect(unchanged(prefixDocs)).toEqual(unchanged(base));
  });

  it('gateway-namespace gives the group its pod rules in each namespace it is included for, nothing more', () => {
    const added = namespaces.filter((d) => d.metadata.name === 'eip-lambdas-handlers-gateway-pods');
    expect(added.map(key).sort()).toEqual([
      'Role/team-a/eip-lambdas-handlers-gateway-pods',
      'Role/team-b/eip-lambdas-handlers-gateway-pods',
      'RoleBinding/team-a/eip-lambdas-handlers-gateway-pods',
      'RoleBinding/team-b/eip-lambdas-handlers-gateway-pods',
    ]);
    for (const d of added.filter((x) => x.kind === 'Role'))
      expect(d.rules).toEqual([
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] },
        { apiGroups: [''], resources: ['pods/exec'], verbs: ['get', 'create'] },
      ]);
    for (const d of added.filter((x) => x.kind === 'RoleBinding')) {
      expect(d.roleRef).toMatchObject({ kind: 'Role', name: 'eip-lambdas-handlers-gateway-pods' });
      expect(d.subjects).toEqual([
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'eip-lambdas:handlers' },
      ]);
    }
    // The gateway-pod Role's pod rules, without the ConfigMaps: those stay in kube-ovn's namespace.
    const home = base.find((d) => d.kind === 'Role' && d.metadata.name === 'eip-lambdas-handlers')!.rules!;
    expect(added.find((d) => d.kind === 'Role')!.rules).toEqual(
      home.filter((r) => !r.resources.includes('configmaps')),
    );
    expect(namespaces.filter((d) => !added.includes(d))).toEqual(base);
  });
});
