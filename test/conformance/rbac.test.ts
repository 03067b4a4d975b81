/**
 * Authentication and RBAC of the local API, as each identity of the lab (local/identities.ts) with kubectl and
 * client-node: who each kubeconfig is, what each may do under the RBAC the lab applies (infra/rbac, infra/bridge,
 * kube-ovn's system:ovn) and what it is refused, with the API server's Status and message; unknown tokens,
 * anonymous requests, impersonation, `kubectl auth can-i` (and --list), non-resource URLs, ClusterRole aggregation.
 *
 * How the model was checked against the real thing: the messages, Status shapes, verbs and request attributes are
 * those of kube-apiserver's source (endpoints/handlers/responsewriters forbiddenMessage, request.RequestInfoFactory,
 * the RBAC authorizer's rule and subject matching and its "RBAC: allowed by" reasons, the impersonation filter, the
 * bootstrap policy's default roles); kubectl 1.32's own output below is what it prints for those Status objects.
 */
import {
  AuthenticationV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
} from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type Component, IDENTITIES, labManifests } from '../../local/identities.js';
import { adminFetch, kubeConfigFor } from '../../local/kube-api/testing.js';
import { eventually } from '../support/eventually.js';
import { apiError, EIP, eip, kubectlSuite, manifest, useApi } from './harness.js';

const TOKENS: Record<Component, string> = { handlers: 'h-token', bridge: 'b-token', 'kube-ovn': 'o-token' };
const HANDLERS = IDENTITIES.handlers.user;
const BRIDGE = IDENTITIES.bridge.user;

kubectlSuite('authentication and RBAC as each identity', () => {
  const env = useApi({
    tokens: (Object.keys(TOKENS) as Component[]).map((c) => ({ ...IDENTITIES[c], token: TOKENS[c] })),
  });
  const as = (c: Component, ...args: string[]) => env.kWith({ token: TOKENS[c] }, ...args);
  const kcOf = (c: Component): KubeConfig => kubeConfigFor(env.api, TOKENS[c]);

  beforeAll(async () => {
    // kubectl apply of the lab's RBAC (Namespace, ServiceAccounts, roles, bindings, the exec policy), twice: the
    // second apply finds everything unchanged.
    const yaml = labManifests()
      .docs.map((d) => stringify(d))
      .join('---\n');
    for (const pass of [1, 2]) {
      const r = await env.kWith({ stdin: yaml }, 'apply', '-f', '-');
      expect(r.code, r.stderr).toBe(0);
      if (pass === 2) expect(r.stdout).not.toMatch(/created|configured/);
    }
    await env.co.createClusterCustomObject({ ...EIP, body: eip('e1') });
    for (const name of ['ovn-vpc-nat-gw-config', 'other'])
      await env.core.createNamespacedConfigMap({
        namespace: 'kube-system',
        body: { metadata: { name }, data: { a: 'b' } },
      });
  }, 60_000);

  describe('who is who', () => {
    it('tells each kubeconfig its user and groups (kubectl auth whoami, SelfSubjectReview)', async () => {
      const admin = await env.k('auth', 'whoami', '-o', 'json');
      expect(JSON.parse(admin.stdout).status.userInfo).toEqual({
        username: 'eip-admin',
        uid: 'eip-admin',
        groups: ['system:masters', 'system:authenticated'],
      });
      const handlers = await as('handlers', 'auth', 'whoami');
      expect(handlers.stdout).toContain(HANDLERS);
      expect(handlers.stdout).toContain('[eip-lambdas:handlers system:authenticated]');
      const review = await kcOf('bridge')
        .makeApiClient(AuthenticationV1Api)
        .createSelfSubjectReview({
          body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
        });
      expect(review.status?.userInfo).toEqual({
        username: BRIDGE,
        groups: ['system:serviceaccounts', 'system:serviceaccounts:eip-lambdas', 'system:authenticated'],
      });
      const ovn = await as('kube-ovn', 'auth', 'whoami');
      expect(ovn.stdout).toContain('system:serviceaccount:kube-system:ovn');
    });

    it('answers an unknown token with 401 and the Unauthorized Status', async () => {
      const r = await adminFetch(`${env.api.url}/api/v1/namespaces`, {}, 'no-such-token');
      expect(r.status).toBe(401);
      expect(await r.json()).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'Unauthorized',
        reason: 'Unauthorized',
        code: 401,
      });
      const k = await env.kWith({ token: 'no-such-token' }, 'get', 'ns');
      expect(k.code).toBe(1);
      // kubectl's words for a 401 on discovery, as against any API server.
      expect(k.stderr).toContain(
        'error: You must be logged in to the server (the server has asked for the client to provide credentials)',
      );
      const n = await apiError(
        kubeConfigFor(env.api, 'no-such-token').makeApiClient(CoreV1Api).listNamespace(),
      );
      expect(n.code).toBe(401);
    });

    it('lets anonymous requests read /version and /healthz only (system:public-info-viewer)', async () => {
      expect((await fetch(`${env.api.url}/version`)).status).toBe(200);
      expect(await (await fetch(`${env.api.url}/healthz`)).text()).toBe('ok');
      const api = await fetch(`${env.api.url}/api`);
      expect([api.status, await api.json()]).toEqual([
        403,
        expect.objectContaining({
          message: 'forbidden: User "system:anonymous" cannot get path "/api"',
          details: {},
        }),
      ]);
      const pods = await fetch(`${env.api.url}/api/v1/pods`);
      expect(((await pods.json()) as { message: string }).message).toBe(
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope',
      );
    });
  });

  describe('the handlers (infra/rbac/handlers.yaml)', () => {
    it('may do what the product does: read EIPs, list gateway pods, read the two nat-gw ConfigMaps', async () => {
      expect((await as('handlers', 'get', 'iptables-eips', '-o', 'name')).stdout.trim()).toBe(
        'iptableseip.kubeovn.io/e1',
      );
      expect((await as('handlers', 'get', 'pods', '-n', 'kube-system')).code).toBe(0);
      expect(
        (await as('handlers', 'get', 'configmap', 'ovn-vpc-nat-gw-config', '-n', 'kube-system')).code,
      ).toBe(0);
      // The status patch the product sends (a merge patch, no read first: kubectl patch would GET the status,
      // which the handlers may not).
      const r = await adminFetch(
        `${env.api.url}/apis/kubeovn.io/v1/iptables-eips/e1/status`,
        {
          method: 'PATCH',
          headers: { 'content-type': 'application/merge-patch+json' },
          body: '{"status":{"ready":false}}',
        },
        TOKENS.handlers,
      );
      expect(r.status).toBe(200);
      const pods = await kcOf('handlers')
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace: 'kube-system' });
      expect(pods.items).toEqual([]);
    });

    it.each([
      [
        ['get', 'pods', '-n', 'default'],
        `pods is forbidden: User "${HANDLERS}" cannot list resource "pods" in API group "" in the namespace "default"`,
      ],
      [
        ['get', 'configmap', 'other', '-n', 'kube-system'],
        `configmaps "other" is forbidden: User "${HANDLERS}" cannot get resource "configmaps" in API group "" in the namespace "kube-system"`,
      ],
      [
        ['delete', 'iptables-eip', 'e1'],
        `iptables-eips.kubeovn.io "e1" is forbidden: User "${HANDLERS}" cannot delete resource "iptables-eips" in API group "kubeovn.io" at the cluster scope`,
      ],
      [
        ['get', 'iptables-eips', '-w', '--request-timeout=5s'],
        `iptables-eips.kubeovn.io is forbidden: User "${HANDLERS}" cannot watch resource "iptables-eips" in API group "kubeovn.io" at the cluster scope`,
      ],
      [
        ['create', 'configmap', 'x', '-n', 'kube-system'],
        `configmaps is forbidden: User "${HANDLERS}" cannot create resource "configmaps" in API group "" in the namespace "kube-system"`,
      ],
    ])('are refused kubectl %j with the API server message', async (args, message) => {
      const r = await as('handlers', ...args);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(message);
      expect(r.stderr).toMatch(/Error from server \(Forbidden\)|error: failed to create configmap/);
    });

    it('are refused by client-node with the Forbidden Status', async () => {
      const e = await apiError(
        kcOf('handlers').makeApiClient(CoreV1Api).listNamespacedPod({ namespace: 'default' }),
      );
      expect(e).toEqual({
        code: 403,
        body: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `pods is forbidden: User "${HANDLERS}" cannot list resource "pods" in API group "" in the namespace "default"`,
          reason: 'Forbidden',
          details: { kind: 'pods' },
          code: 403,
        },
      });
      const create = await apiError(
        kcOf('handlers')
          .makeApiClient(CustomObjectsApi)
          .createClusterCustomObject({ ...EIP, body: eip('h1') }),
      );
      expect(create.body.details).toEqual({ group: 'kubeovn.io', kind: 'iptables-eips' });
    });
  });

  describe('the bridge (infra/bridge/base/rbac.yaml)', () => {
    it('may watch what it watches, a ConfigMap by name (fieldSelector) included, and nothing else', async () => {
      expect((await as('bridge', 'get', 'vpc-nat-gateways')).code).toBe(0);
      const byName = await as(
        'bridge',
        'get',
        'configmaps',
        '-n',
        'kube-system',
        '--field-selector',
        'metadata.name=ovn-vpc-nat-gw-config',
        '-o',
        'name',
      );
      expect([byName.code, byName.stdout.trim()]).toEqual([0, 'configmap/ovn-vpc-nat-gw-config']);
      const all = await as('bridge', 'get', 'configmaps', '-n', 'kube-system');
      expect(all.stderr).toContain(
        `configmaps is forbidden: User "${BRIDGE}" cannot list resource "configmaps" in API group "" in the namespace "kube-system"`,
      );
      const status = await as(
        'bridge',
        'patch',
        'iptables-eip',
        'e1',
        '--subresource=status',
        '--type=merge',
        '-p',
        '{"status":{"ready":true}}',
      );
      expect(status.stderr).toContain(
        // kubectl patch reads the status subresource first: that GET is refused already.
        `iptables-eips.kubeovn.io "e1" is forbidden: User "${BRIDGE}" cannot get resource "iptables-eips/status" in API group "kubeovn.io" at the cluster scope`,
      );
    });
  });

  describe("kube-ovn (system:ovn and the lab's stand-in extras)", () => {
    it('may create gateway pods in any namespace and write QoS status, not change what the product owns elsewhere', async () => {
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p1', namespace: 'kube-system' },
        spec: { containers: [{ name: 'c', image: 'x' }] },
      };
      const r = await env.kWith({ token: TOKENS['kube-ovn'], stdin: manifest(pod) }, 'create', '-f', '-');
      expect(r.code, r.stderr).toBe(0);
      const cm = await as('kube-ovn', 'create', 'configmap', 'y', '-n', 'kube-system');
      expect(cm.stderr).toContain('cannot create resource "configmaps"');
      // The stand-in makes and deletes gateway pods wherever a gateway's spec.namespace puts them, as
      // kube-controller-manager's controllers do (local/rbac/kube-ovn.yaml): elsewhere not forbidden, only absent.
      const other = await as('kube-ovn', 'delete', 'pod', 'p1', '-n', 'default');
      expect(other.stderr).toContain('pods "p1" not found');
      const cmDefault = await as('kube-ovn', 'create', 'configmap', 'z', '-n', 'default');
      expect(cmDefault.stderr).toContain(
        'cannot create resource "configmaps" in API group "" in the namespace "default"',
      );
    });
  });

  describe('impersonation', () => {
    it("lets the administrator act as someone else (kubectl --as, --as-group), and that one's RBAC applies", async () => {
      const r = await env.k(
        'get',
        'pods',
        '-n',
        'kube-system',
        '--as=probe',
        '--as-group=eip-lambdas:handlers',
      );
      expect(r.code, r.stderr).toBe(0);
      const refused = await env.k(
        'get',
        'pods',
        '-n',
        'default',
        '--as=probe',
        '--as-group=eip-lambdas:handlers',
      );
      expect(refused.stderr).toContain('User "probe" cannot list resource "pods"');
      const sa = await env.k('auth', 'whoami', '--as=system:serviceaccount:eip-lambdas:eip-lambdas-bridge');
      expect(sa.stdout).toContain(
        '[system:serviceaccounts system:serviceaccounts:eip-lambdas system:authenticated]',
      );
    });

    it('refuses it to everyone else (the verb impersonate)', async () => {
      const r = await as('handlers', 'get', 'pods', '-n', 'kube-system', '--as=eip-admin');
      expect(r.stderr).toContain(
        `Error from server (Forbidden): users "eip-admin" is forbidden: User "${HANDLERS}" cannot impersonate resource "users" in API group "" at the cluster scope`,
      );
      const g = await adminFetch(
        `${env.api.url}/api/v1/namespaces/kube-system/pods`,
        { headers: { 'Impersonate-User': BRIDGE, 'Impersonate-Group': 'system:masters' } },
        TOKENS.bridge,
      );
      expect(((await g.json()) as { message: string }).message).toBe(
        `serviceaccounts "eip-lambdas-bridge" is forbidden: User "${BRIDGE}" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "eip-lambdas"`,
      );
    });
  });

  describe('kubectl auth can-i', () => {
    it('answers yes and no as RBAC decides, for the verbs kubectl and client-node use on pods/exec', async () => {
      const can = async (c: Component, ...args: string[]) => {
        const r = await as(c, 'auth', 'can-i', ...args);
        return `${r.stdout.trim()}${r.code === 0 ? '' : ` (exit ${r.code})`}`;
      };
      // SPDY exec is a POST (create), WebSocket exec a GET (get); `pods/exec` would name a pod called exec.
      expect(await can('handlers', 'create', 'pods', '--subresource=exec', '-n', 'kube-system')).toBe('yes');
      expect(await can('handlers', 'get', 'pods', '--subresource=exec', '-n', 'kube-system')).toBe('yes');
      expect(await can('handlers', 'create', 'pods', '--subresource=exec', '-n', 'default')).toBe(
        'no (exit 1)',
      );
      expect(await can('handlers', 'create', 'pods', '--subresource=attach', '-n', 'kube-system')).toBe(
        'no (exit 1)',
      );
      expect(await can('handlers', 'get', 'configmaps/ovn-vpc-nat-config', '-n', 'kube-system')).toBe('yes');
      expect(await can('handlers', 'get', 'configmaps/other', '-n', 'kube-system')).toBe('no (exit 1)');
      expect(await can('bridge', 'watch', 'iptables-eips')).toBe('yes');
      expect(await can('bridge', 'get', '/api')).toBe('yes');
      expect(await can('bridge', 'get', '/metrics')).toBe('no (exit 1)');
      const admin = await env.k(
        'auth',
        'can-i',
        'create',
        'pods',
        '--subresource=exec',
        '-n',
        'kube-system',
        '--as=probe',
        '--as-group=eip-lambdas:handlers',
      );
      expect(admin.stdout.trim()).toBe('yes');
    });

    it('gives the reason RBAC allowed a request (SelfSubjectAccessReview through client-node)', async () => {
      const r = await kcOf('handlers')
        .makeApiClient(AuthorizationV1Api)
        .createSelfSubjectAccessReview({
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SelfSubjectAccessReview',
            spec: {
              resourceAttributes: {
                namespace: 'kube-system',
                verb: 'get',
                resource: 'pods',
                subresource: 'exec',
              },
            },
          },
        });
      expect(r.status).toEqual({
        allowed: true,
        reason:
          'RBAC: allowed by RoleBinding "eip-lambdas-handlers/kube-system" of Role "eip-lambdas-handlers" to Group "eip-lambdas:handlers"',
      });
    });

    it('lists the rules of an identity (can-i --list, SelfSubjectRulesReview)', async () => {
      const r = await as('handlers', 'auth', 'can-i', '--list', '-n', 'kube-system');
      expect(r.code, r.stderr).toBe(0);
      const lines = (resource: string) =>
        r.stdout
          .split('\n')
          .filter((l) => l.startsWith(`${resource} `))
          .map((l) => l.trim().split(/\s{2,}/));
      expect(lines('pods/exec')).toEqual([['pods/exec', '[]', '[]', '[get create]']]);
      expect(lines('pods')).toEqual([['pods', '[]', '[]', '[get list]']]);
      expect(lines('configmaps').sort()).toEqual([
        ['configmaps', '[]', '[ovn-vpc-nat-config]', '[get]'],
        ['configmaps', '[]', '[ovn-vpc-nat-gw-config]', '[get]'],
      ]);
      expect(lines('iptables-eips.kubeovn.io')).toEqual([
        ['iptables-eips.kubeovn.io', '[]', '[]', '[get list patch]'],
      ]);
      expect(r.stdout).not.toMatch(/^(secrets|events)/m);
    });
  });

  describe('RBAC objects', () => {
    it('aggregates the rules of the ClusterRoles an aggregationRule selects, and follows their changes', async () => {
      const agg = {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'eip-viewer' },
        aggregationRule: {
          clusterRoleSelectors: [{ matchLabels: { 'example.com/aggregate-to-eip-viewer': 'true' } }],
        },
      };
      const part = {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'eip-viewer-part', labels: { 'example.com/aggregate-to-eip-viewer': 'true' } },
        rules: [{ apiGroups: ['kubeovn.io'], resources: ['iptables-eips'], verbs: ['get', 'list'] }],
      };
      const binding = {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'eip-viewer' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'eip-viewer' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'viewer' }],
      };
      for (const o of [agg, part, binding]) {
        const r = await env.kWith({ stdin: manifest(o) }, 'apply', '-f', '-');
        expect(r.code, r.stderr).toBe(0);
      }
      await eventually(async () => expect((await env.k('get', 'iptables-eips', '--as=viewer')).code).toBe(0));
      const role = JSON.parse((await env.k('get', 'clusterrole', 'eip-viewer', '-o', 'json')).stdout);
      expect(role.rules).toEqual(part.rules);
      expect((await env.k('delete', 'clusterrole', 'eip-viewer-part')).code).toBe(0);
      await eventually(async () =>
        expect((await env.k('get', 'iptables-eips', '--as=viewer')).stderr).toContain(
          'cannot list resource "iptables-eips"',
        ),
      );
    });

    it('names a missing role in the refusal, and refuses to change a binding roleRef', async () => {
      const binding = {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'dangling', namespace: 'default' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'missing' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'ghost' }],
      };
      expect((await env.kWith({ stdin: manifest(binding) }, 'create', '-f', '-')).code).toBe(0);
      const r = await env.k('get', 'configmaps', '-n', 'default', '--as=ghost');
      expect(r.stderr).toContain(
        'configmaps is forbidden: User "ghost" cannot list resource "configmaps" in API group "" in the namespace "default": RBAC: role.rbac.authorization.k8s.io "missing" not found',
      );
      const changed = { ...binding, roleRef: { ...binding.roleRef, name: 'other' } };
      const u = await env.kWith({ stdin: manifest(changed) }, 'replace', '-f', '-');
      expect(u.stderr).toContain('roleRef: Invalid value:');
      expect(u.stderr).toContain('cannot change roleRef');
    });

    it('serves rbac.authorization.k8s.io/v1 in discovery, with kubectl tables', async () => {
      const r = await env.k('api-resources', '--api-group=rbac.authorization.k8s.io', '-o', 'name');
      expect(r.stdout.split('\n').filter(Boolean).sort()).toEqual([
        'clusterrolebindings.rbac.authorization.k8s.io',
        'clusterroles.rbac.authorization.k8s.io',
        'rolebindings.rbac.authorization.k8s.io',
        'roles.rbac.authorization.k8s.io',
      ]);
      const b = await env.k('get', 'rolebinding', 'eip-lambdas-handlers', '-n', 'kube-system', '-o', 'wide');
      expect(b.stdout).toMatch(
        /eip-lambdas-handlers\s+Role\/eip-lambdas-handlers\s+\S+\s+eip-lambdas:handlers/,
      );
    });
  });
});
