/**
 * A change to RBAC or to an admission policy takes effect on the very next request, as on kube-apiserver (its RBAC
 * authorizer and policy plugin read informers, so a write is seen within milliseconds; here, with no lag at all).
 * The local API keeps what it derives from those objects between requests (ADR 0128: a user's rules per namespace,
 * the policies and bindings in order); these tests write each kind of object once it has been used and expect the
 * next request to be decided by the new state: a Role's rules, a RoleBinding made, its subjects changed and deleted,
 * a ClusterRole a RoleBinding names, a ClusterRoleBinding, a ClusterRole aggregation, impersonation rights, and a
 * ValidatingAdmissionPolicy's expression, its binding's actions and the binding's deletion.
 *
 * How the model was checked against the real thing: what is allowed and refused follows from the RBAC and policy
 * semantics pinned against kubectl in rbac.test.ts and admission.test.ts; this file pins only that nothing stale is
 * decided from.
 */
import { describe, expect, it } from 'vitest';
import { adminFetch } from '../../local/kube-api/testing.js';
import { useApi } from './harness.js';

const USER = 'u-token';
const NS = 'authz';
const RBAC = '/apis/rbac.authorization.k8s.io/v1';
const VAP = '/apis/admissionregistration.k8s.io/v1';

describe('RBAC and admission policy changes are decided from at once', () => {
  const env = useApi({ tokens: [{ token: USER, user: 'someone', groups: ['team'] }] });

  const admin = async (method: string, path: string, body?: unknown): Promise<Response> => {
    const r = await adminFetch(`${env.api.url}${path}`, {
      method,
      headers: {
        'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    expect(r.status, `${method} ${path}: ${await r.clone().text()}`).toBeLessThan(300);
    return r;
  };
  const asUser = (path: string, init: RequestInit = {}) => adminFetch(`${env.api.url}${path}`, init, USER);
  const listConfigMaps = async () => (await asUser(`/api/v1/namespaces/${NS}/configmaps`)).status;
  const listPods = async () => (await asUser(`/api/v1/namespaces/${NS}/pods`)).status;
  const listNamespaces = async () => (await asUser('/api/v1/namespaces')).status;

  const user = { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'someone' };
  const role = (resources: string[]) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'reader', namespace: NS },
    rules: [{ apiGroups: [''], resources, verbs: ['list'] }],
  });
  const binding = (subjects: unknown[], roleRef = { kind: 'Role', name: 'reader' }) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'reader', namespace: NS },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', ...roleRef },
    subjects,
  });
  /** A ClusterRoleBinding of ClusterRole `name` to the test's user, named as the role. */
  const clusterBinding = (name: string) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: [user],
  });

  it('follows a Role, its RoleBinding, a ClusterRole it names and a ClusterRoleBinding as they change', async () => {
    await admin('POST', '/api/v1/namespaces', { metadata: { name: NS } });
    expect(await listConfigMaps()).toBe(403);
    await admin('POST', `${RBAC}/namespaces/${NS}/roles`, role(['configmaps']));
    expect(await listConfigMaps()).toBe(403); // a role alone grants nothing
    await admin('POST', `${RBAC}/namespaces/${NS}/rolebindings`, binding([user]));
    expect(await listConfigMaps()).toBe(200);
    expect(await listPods()).toBe(403);

    await admin('PUT', `${RBAC}/namespaces/${NS}/roles/reader`, role(['pods']));
    expect(await listPods()).toBe(200);
    expect(await listConfigMaps()).toBe(403);

    // The subject becomes a group the user is in, then one it is not in.
    const group = (name: string) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name });
    await admin('PATCH', `${RBAC}/namespaces/${NS}/rolebindings/reader`, { subjects: [group('team')] });
    expect(await listPods()).toBe(200);
    await admin('PATCH', `${RBAC}/namespaces/${NS}/rolebindings/reader`, { subjects: [group('others')] });
    expect(await listPods()).toBe(403);

    // A RoleBinding to a ClusterRole: the ClusterRole's rules, as they change.
    await admin('DELETE', `${RBAC}/namespaces/${NS}/rolebindings/reader`);
    await admin('POST', `${RBAC}/clusterroles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'authz-reader' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['list'] }],
    });
    await admin(
      'POST',
      `${RBAC}/namespaces/${NS}/rolebindings`,
      binding([user], { kind: 'ClusterRole', name: 'authz-reader' }),
    );
    expect(await listConfigMaps()).toBe(200);
    expect(await listNamespaces()).toBe(403); // a RoleBinding grants only in its namespace
    await admin('PATCH', `${RBAC}/clusterroles/authz-reader`, {
      rules: [{ apiGroups: [''], resources: ['configmaps', 'namespaces'], verbs: ['list'] }],
    });
    expect(await listNamespaces()).toBe(403);
    await admin('POST', `${RBAC}/clusterrolebindings`, clusterBinding('authz-reader'));
    expect(await listNamespaces()).toBe(200);
    await admin('DELETE', `${RBAC}/clusterroles/authz-reader`);
    expect(await listNamespaces()).toBe(403);
    expect(await listConfigMaps()).toBe(403);
  });

  it('follows a ClusterRole aggregation as a selected role gains a rule', async () => {
    await admin('POST', `${RBAC}/clusterroles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'authz-aggregate' },
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: { 'authz-test': 'true' } }] },
    });
    await admin('POST', `${RBAC}/clusterrolebindings`, clusterBinding('authz-aggregate'));
    const crds = async () => (await asUser('/apis/apiextensions.k8s.io/v1/customresourcedefinitions')).status;
    expect(await crds()).toBe(403);
    await admin('POST', `${RBAC}/clusterroles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'authz-part', labels: { 'authz-test': 'true' } },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
    });
    await admin('PATCH', `${RBAC}/clusterroles/authz-part`, {
      rules: [
        { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['list'] },
      ],
    });
    expect(await crds()).toBe(200);
    await admin('PATCH', `${RBAC}/clusterroles/authz-part`, { metadata: { labels: { 'authz-test': null } } });
    expect(await crds()).toBe(403);
  });

  it('follows the right to impersonate as it is granted and taken away', async () => {
    const impersonating = async () =>
      (await asUser('/api/v1/namespaces', { headers: { 'Impersonate-User': 'eip-admin' } })).status;
    expect(await impersonating()).toBe(403);
    await admin('POST', `${RBAC}/clusterroles`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'authz-impersonate' },
      rules: [{ apiGroups: [''], resources: ['users', 'groups'], verbs: ['impersonate'] }],
    });
    await admin('POST', `${RBAC}/clusterrolebindings`, clusterBinding('authz-impersonate'));
    // Impersonated, the request is decided by eip-admin's own RBAC: it has none but what everyone has.
    expect(await impersonating()).toBe(403);
    const asAdminGroup = async () =>
      (
        await asUser('/api/v1/namespaces', {
          headers: { 'Impersonate-User': 'eip-admin', 'Impersonate-Group': 'system:masters' },
        })
      ).status;
    expect(await asAdminGroup()).toBe(200);
    await admin('DELETE', `${RBAC}/clusterrolebindings/authz-impersonate`);
    expect(await asAdminGroup()).toBe(403);
  });

  it('follows a ValidatingAdmissionPolicy, its binding and the binding going', async () => {
    const policy = (expression: string) => ({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: 'authz-cm' },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] },
          ],
        },
        validations: [{ expression, message: 'refused by authz-cm' }],
      },
    });
    let n = 0;
    const create = async () => {
      n += 1;
      const r = await adminFetch(`${env.api.url}/api/v1/namespaces/${NS}/configmaps`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ metadata: { name: `cm-${n}` }, data: { size: 'small' } }),
      });
      return { status: r.status, warning: r.headers.get('warning') ?? '', text: await r.text() };
    };
    await admin('POST', `${VAP}/validatingadmissionpolicies`, policy("object.data.size == 'large'"));
    expect((await create()).status).toBe(201); // no binding yet
    await admin('POST', `${VAP}/validatingadmissionpolicybindings`, {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: 'authz-cm' },
      spec: { policyName: 'authz-cm', validationActions: ['Deny'] },
    });
    const denied = await create();
    expect(denied.status).toBe(422);
    expect(denied.text).toContain('refused by authz-cm');

    await admin('PUT', `${VAP}/validatingadmissionpolicies/authz-cm`, policy("object.data.size == 'small'"));
    expect((await create()).status).toBe(201);
    await admin('PUT', `${VAP}/validatingadmissionpolicies/authz-cm`, policy("object.data.size == 'large'"));
    expect((await create()).status).toBe(422);

    await admin('PATCH', `${VAP}/validatingadmissionpolicybindings/authz-cm`, {
      spec: { validationActions: ['Warn'] },
    });
    const warned = await create();
    expect(warned.status).toBe(201);
    expect(warned.warning).toContain('refused by authz-cm');

    await admin('PATCH', `${VAP}/validatingadmissionpolicybindings/authz-cm`, {
      spec: { validationActions: ['Deny'] },
    });
    expect((await create()).status).toBe(422);
    await admin('DELETE', `${VAP}/validatingadmissionpolicybindings/authz-cm`);
    const after = await create();
    expect(after.status).toBe(201);
    expect(after.warning).toBe('');
  });
});
