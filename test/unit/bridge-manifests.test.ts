/**
 * The bridge's Kubernetes manifests kept in step with the code: RBAC grants read access to exactly what the
 * informers watch, and the Deployment's configuration is one the bridge accepts.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadBridgeConfig } from '../../shared/bridge/config.js';
import { WATCHED_CONFIG_MAPS, watchPaths } from '../../shared/bridge/source.js';

type Doc = {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] }[];
  subjects?: { kind: string; name: string; namespace: string }[];
  roleRef?: { kind: string; name: string };
  spec?: Record<string, unknown>;
};

const docs = (file: string): Doc[] =>
  parseAllDocuments(readFileSync(new URL(`../../infra/bridge/${file}`, import.meta.url), 'utf8')).map(
    (d) => d.toJS() as Doc,
  );

const rbac = docs('rbac.yaml');
const [deployment] = docs('deployment.yaml');
const pod = (deployment!.spec!.template as { spec: Record<string, unknown> }).spec as {
  serviceAccountName: string;
  terminationGracePeriodSeconds: number;
  containers: {
    env: { name: string; value: string }[];
    ports: { name: string; containerPort: number }[];
    livenessProbe: { httpGet: { path: string; port: string } };
    readinessProbe: { httpGet: { path: string; port: string } };
    securityContext: Record<string, unknown>;
  }[];
};
const container = pod.containers[0]!;
const env = Object.fromEntries(container.env.map((e) => [e.name, e.value]));
const config = loadBridgeConfig({ ...env, KUBERNETES_SERVICE_HOST: '10.96.0.1' });

/** "group/resource" for everything a role grants, with the verbs. */
function grants(kind: 'ClusterRole' | 'Role'): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const d of rbac.filter((x) => x.kind === kind))
    for (const r of d.rules ?? [])
      for (const g of r.apiGroups) for (const res of r.resources) out[`${g}/${res}`] = [...r.verbs].sort();
  return out;
}

describe('bridge manifests', () => {
  const watched = watchPaths(config.namespace);

  it('grant get/list/watch on exactly the kube-ovn resources the bridge watches, and nothing else cluster-wide', () => {
    const crs = watched
      .filter((w) => w.path.startsWith('/apis/'))
      .map((w) => {
        const [, , group, , plural] = w.path.split('/');
        return `${group}/${plural}`;
      });
    expect(Object.keys(grants('ClusterRole')).sort()).toEqual(crs.sort());
    for (const verbs of Object.values(grants('ClusterRole'))) expect(verbs).toEqual(['get', 'list', 'watch']);
  });

  it('grant read access to pods and the two nat-gw ConfigMaps (by name) only in the gateway namespace', () => {
    expect(grants('Role')).toEqual({
      '/pods': ['get', 'list', 'watch'],
      '/configmaps': ['get', 'list', 'watch'],
    });
    const role = rbac.find((d) => d.kind === 'Role')!;
    expect(role.metadata.namespace).toBe(config.namespace);
    expect(watched.find((w) => w.kind === 'Pod')!.path).toBe(
      `/api/v1/namespaces/${role.metadata.namespace}/pods`,
    );
    const configMaps = role.rules!.find((r) => r.resources.includes('configmaps'))!;
    expect([...(configMaps.resourceNames ?? [])].sort()).toEqual([...WATCHED_CONFIG_MAPS].sort());
    // every ConfigMap watch selects one of those names, so the API server can authorise it by resourceNames
    const cmWatches = watched.filter((w) => w.kind === 'ConfigMap');
    expect(cmWatches.map((w) => w.fieldSelector?.replace('metadata.name=', '')).sort()).toEqual(
      [...WATCHED_CONFIG_MAPS].sort(),
    );
    for (const w of cmWatches)
      expect(w.path).toBe(`/api/v1/namespaces/${role.metadata.namespace}/configmaps`);
  });

  it('bind both roles to the ServiceAccount the Deployment runs as', () => {
    const sa = rbac.find((d) => d.kind === 'ServiceAccount')!;
    expect(pod.serviceAccountName).toBe(sa.metadata.name);
    for (const b of rbac.filter((d) => d.kind.endsWith('Binding'))) {
      expect(b.subjects).toEqual([
        { kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace },
      ]);
      const role = rbac.find((d) => d.kind === b.roleRef!.kind && d.metadata.name === b.roleRef!.name);
      expect(role).toBeDefined();
    }
  });

  it('configure a bridge the code accepts, probed where it serves health, draining within the grace period', () => {
    expect(config.sink).toBe('eventbridge');
    const port = container.ports.find((p) => p.name === container.readinessProbe.httpGet.port)!;
    expect(port.containerPort).toBe(config.healthPort);
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(config.drainMs).toBeLessThan(pod.terminationGracePeriodSeconds * 1000);
    expect(container.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
  });
});
