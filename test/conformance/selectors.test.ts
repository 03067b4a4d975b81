/**
 * Conformance (local/kube-api/README.md): label selectors (with `!=` and `notin` matching unlabelled objects, `+` as
 * a space) and field selectors, the same through kubectl -l and client-node's labelSelector.
 */
import { beforeAll, expect, it } from 'vitest';
import { adminFetch } from '../../local/kube-api/testing.js';
import { apiError, kubectlSuite, useApi } from './harness.js';

kubectlSuite('selectors', () => {
  const env = useApi();

  beforeAll(async () => {
    const pod = (name: string, labels?: Record<string, string>) =>
      env.core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name, ...(labels ? { labels } : {}) },
          spec: { containers: [{ name: 'c', image: 'i' }] },
        },
      });
    await Promise.all([pod('pa', { app: 'a' }), pod('pb', { app: 'b' }), pod('pn'), pod('pe', { app: '' })]);
    await env.core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'pending' },
        spec: { schedulerName: 'nobody', containers: [{ name: 'c', image: 'i' }] },
      },
    });
  });

  const cases: [string, string[]][] = [
    ['app=a', ['pa']],
    ['app==a', ['pa']],
    ['app!=a', ['pb', 'pe', 'pending', 'pn']],
    ['app notin (a)', ['pb', 'pe', 'pending', 'pn']],
    ['!app', ['pending', 'pn']],
    ['app', ['pa', 'pb', 'pe']],
    ['app in (a,b)', ['pa', 'pb']],
    ['app=', ['pe']],
    ['app in (a), app!=b', ['pa']],
    ['', ['pa', 'pb', 'pe', 'pending', 'pn']],
  ];

  it.each(cases)(
    'selects the same pods for %j through kubectl -l and client-node',
    async (selector, expected) => {
      const [viaKubectl, viaClient] = await Promise.all([
        env.k('get', 'pods', '-n', 'default', '-l', selector, '-o', 'jsonpath={.items[*].metadata.name}'),
        env.core.listNamespacedPod({ namespace: 'default', labelSelector: selector }),
      ]);
      expect(viaKubectl.code, viaKubectl.stderr).toBe(0);
      expect(viaKubectl.stdout.split(' ').filter(Boolean)).toEqual(expected);
      expect(viaClient.items.map((p) => p.metadata?.name)).toEqual(expected);
    },
  );

  it('decodes + in a raw query as a space', async () => {
    const r = await adminFetch(
      `${env.api.url}/api/v1/namespaces/default/pods?labelSelector=app+in+%28a%2Cb%29`,
    );
    const body = (await r.json()) as { items: { metadata: { name: string } }[] };
    expect(body.items.map((i) => i.metadata.name)).toEqual(['pa', 'pb']);
  });

  it('refuses an empty value set with 400', async () => {
    const e = await apiError(
      env.core.listNamespacedPod({ namespace: 'default', labelSelector: 'app in ()' }),
    );
    expect(e.code).toBe(400);
    expect(String(e.body.message)).toContain("for 'in', 'notin' operators, values set can't be empty");
    const r = await env.k('get', 'pods', '-l', 'app in ()');
    expect(r.code).toBe(1);
  });

  it('refuses an invalid label key with 400 unable to parse requirement', async () => {
    const e = await apiError(env.core.listNamespacedPod({ namespace: 'default', labelSelector: '-bad-=x' }));
    expect(e.code).toBe(400);
    expect(String(e.body.message)).toMatch(
      /^unable to parse requirement: .*name part must consist of alphanumeric characters/,
    );
    const r = await env.k('get', 'pods', '-l', '-bad-=x');
    expect(r.stderr).toContain('unable to parse requirement');
  });

  it('selects pods by the field labels pods support', async () => {
    const [phase, node, name] = await Promise.all([
      env.core.listNamespacedPod({ namespace: 'default', fieldSelector: 'status.phase=Pending' }),
      env.k('get', 'pods', '-n', 'default', '--field-selector', 'spec.nodeName!=local-node', '-o', 'name'),
      env.core.listPodForAllNamespaces({ fieldSelector: 'metadata.name=pa,metadata.namespace=default' }),
    ]);
    expect(phase.items.map((p) => p.metadata?.name)).toEqual(['pending']);
    expect(node.stdout.trim()).toBe('pod/pending');
    expect(name.items.map((p) => p.metadata?.name)).toEqual(['pa']);
  });

  it('refuses a field label a pod does not support', async () => {
    const e = await apiError(
      env.core.listNamespacedPod({ namespace: 'default', fieldSelector: 'spec.containers=x' }),
    );
    expect([e.code, e.body.message]).toEqual([400, 'field label not supported: spec.containers']);
  });
});
