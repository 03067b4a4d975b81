/**
 * The bridge's Kubernetes manifests, as `kubectl kustomize` renders them (kubectl's built-in kustomize): the base
 * with its placeholder parameters, and an overlay that sets every parameter the way docs/deploy-eks.md shows. The
 * output must be valid, carry the parameters everywhere they matter (nothing to edit by hand), put the Namespace
 * first, grant read access to exactly what the informers watch, and configure a bridge the code accepts.
 */
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadBridgeConfig } from '../../shared/bridge/config.js';
import { gatewayPodWatch, WATCHED_CONFIG_MAPS, watchPaths } from '../../shared/bridge/source.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { type Doc, kustomize, kustomizeOverlay } from '../support/kustomize.js';

type Container = {
  image: string;
  env: { name: string; value?: string; valueFrom?: { configMapKeyRef: { name: string; key: string } } }[];
  ports: { name: string; containerPort: number }[];
  livenessProbe: { httpGet: { path: string; port: string } };
  readinessProbe: { httpGet: { path: string; port: string } };
  securityContext: Record<string, unknown>;
};

const root = join(import.meta.dirname, '../..');
const { skip } = kubectlOrSkip();

/** The rendered manifests, with the Deployment's environment resolved through its ConfigMap references. */
function view(docs: Doc[]) {
  const deployment = docs.find((d) => d.kind === 'Deployment')!;
  const pod = (deployment.spec!.template as { spec: Record<string, unknown> }).spec as {
    serviceAccountName: string;
    terminationGracePeriodSeconds: number;
    containers: Container[];
  };
  const container = pod.containers[0]!;
  const env: Record<string, string> = {};
  for (const e of container.env) {
    if (e.value !== undefined) env[e.name] = e.value;
    else {
      const ref = e.valueFrom!.configMapKeyRef;
      const cm = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === ref.name);
      expect(cm, `ConfigMap ${ref.name} referenced by ${e.name}`).toBeDefined();
      expect(cm!.metadata.namespace).toBe(deployment.metadata.namespace);
      env[e.name] = cm!.data![ref.key]!;
    }
  }
  const grants = (kind: 'ClusterRole' | 'Role'): Record<string, string[]> => {
    const out: Record<string, string[]> = {};
    for (const d of docs.filter((x) => x.kind === kind))
      for (const r of d.rules ?? [])
        for (const g of r.apiGroups) for (const res of r.resources) out[`${g}/${res}`] = [...r.verbs].sort();
    return out;
  };
  return { deployment, pod, container, env, grants, sa: docs.find((d) => d.kind === 'ServiceAccount')! };
}

let base: Doc[];
let overlay: Doc[];
const PARAMS = {
  eventBusName: 'eip-lambdas-prod',
  stage: 'prod',
  region: 'eu-central-1',
  roleArn: 'arn:aws:iam::123456789012:role/eip-lambdas-bridge-prod',
  eipNamespace: 'ovn-system',
};
const IMAGE = '123456789012.dkr.ecr.eu-central-1.amazonaws.com/eip-lambdas-bridge:1.4.2';

beforeAll(() => {
  if (skip) return;
  base = kustomize(join(root, 'infra/bridge'));
  // The overlay docs/deploy-eks.md tells an operator to write.
  overlay = kustomizeOverlay('bridge', (rel) => [
    `resources: [${rel}/base]`,
    `components: [${rel}/params]`,
    `images: [{ name: eip-lambdas-bridge, newName: ${IMAGE.split(':')[0]}, newTag: "${IMAGE.split(':')[1]}" }]`,
    'configMapGenerator:',
    '  - name: eip-lambdas-bridge-params',
    '    namespace: eip-lambdas',
    '    behavior: merge',
    '    literals:',
    ...Object.entries(PARAMS).map(([k, v]) => `      - ${k}=${v}`),
  ]);
});

describe.skipIf(skip)('bridge manifests (kubectl kustomize infra/bridge)', () => {
  it('render valid objects, the Namespace first, everything of the bridge in its namespace', () => {
    for (const docs of [base, overlay]) {
      expect(docs[0]).toMatchObject({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: 'eip-lambdas' },
      });
      for (const d of docs) {
        expect(d.apiVersion, JSON.stringify(d)).toMatch(/^(v1|apps\/v1|rbac\.authorization\.k8s\.io\/v1)$/);
        expect(d.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
      }
      for (const kind of ['ServiceAccount', 'Deployment', 'ConfigMap'])
        expect(docs.find((d) => d.kind === kind)!.metadata.namespace).toBe('eip-lambdas');
    }
  });

  it('carry every parameter of the overlay where it is used: image, bus, region, role, gateway namespace', () => {
    const v = view(overlay);
    expect(v.container.image).toBe(IMAGE);
    expect(v.env).toMatchObject({
      EVENT_BUS_NAME: PARAMS.eventBusName,
      STAGE: PARAMS.stage,
      AWS_REGION: PARAMS.region,
      EIP_NAMESPACE: PARAMS.eipNamespace,
    });
    expect(v.sa.metadata.annotations).toEqual({ 'eks.amazonaws.com/role-arn': PARAMS.roleArn });
    for (const d of overlay.filter((x) => x.kind === 'Role' || x.kind === 'RoleBinding'))
      expect(d.metadata.namespace).toBe(PARAMS.eipNamespace);
    // No placeholder of the base is left.
    expect(JSON.stringify(overlay)).not.toMatch(
      /set-roleArn-in-your-overlay|roleArn-parameter|eip-lambdas-dev/,
    );
  });

  it('the base alone renders its placeholders, visibly', () => {
    const v = view(base);
    expect(v.sa.metadata.annotations!['eks.amazonaws.com/role-arn']).toMatch(/set-roleArn-in-your-overlay/);
    expect(v.container.image).toBe('eip-lambdas-bridge:0.1.0');
  });

  for (const [name, docs] of [
    ['base', () => base],
    ['overlay', () => overlay],
  ] as const) {
    describe(name, () => {
      it('grant get/list/watch on exactly the kube-ovn resources watched, list on its IP objects, and nothing else cluster-wide', () => {
        const v = view(docs());
        const watched = watchPaths(v.env.EIP_NAMESPACE!);
        const crs = watched
          .filter((w) => w.path.startsWith('/apis/'))
          .map((w) => {
            const [, , group, , plural] = w.path.split('/');
            return `${group}/${plural}`;
          });
        // Besides: kube-ovn's IP objects, listed once by the coexistence check at start (ADR 0096).
        const { 'kubeovn.io/ips': ips, ...watchedGrants } = v.grants('ClusterRole');
        expect(ips).toEqual(['list']);
        expect(Object.keys(watchedGrants).sort()).toEqual(crs.sort());
        for (const verbs of Object.values(watchedGrants)) expect(verbs).toEqual(['get', 'list', 'watch']);
      });

      it('grant pods and the two nat-gw ConfigMaps (by name) only in the gateway namespace the bridge watches', () => {
        const v = view(docs());
        const watched = watchPaths(v.env.EIP_NAMESPACE!);
        expect(v.grants('Role')).toEqual({
          '/pods': ['get', 'list', 'watch'],
          '/configmaps': ['get', 'list', 'watch'],
        });
        const role = docs().find((d) => d.kind === 'Role')!;
        expect(role.metadata.namespace).toBe(v.env.EIP_NAMESPACE);
        expect(watched.find((w) => w.kind === 'Pod')!.path).toBe(
          `/api/v1/namespaces/${role.metadata.namespace}/pods`,
        );
        const configMaps = role.rules!.find((r) => r.resources.includes('configmaps'))!;
        expect([...(configMaps.resourceNames ?? [])].sort()).toEqual([...WATCHED_CONFIG_MAPS].sort());
        for (const w of watched.filter((x) => x.kind === 'ConfigMap'))
          expect(w.path).toBe(`/api/v1/namespaces/${role.metadata.namespace}/configmaps`);
      });

      it('bind both roles to the ServiceAccount the Deployment runs as', () => {
        const v = view(docs());
        expect(v.pod.serviceAccountName).toBe(v.sa.metadata.name);
        for (const b of docs().filter((d) => d.kind.endsWith('Binding'))) {
          expect(b.subjects).toEqual([
            { kind: 'ServiceAccount', name: v.sa.metadata.name, namespace: v.sa.metadata.namespace },
          ]);
          const role = docs().find((d) => d.kind === b.roleRef!.kind && d.metadata.name === b.roleRef!.name);
          expect(role).toBeDefined();
        }
      });

      it('configure a bridge the code accepts, probed where it serves health, draining within the grace period', () => {
        const v = view(docs());
        const config = loadBridgeConfig({ ...v.env, KUBERNETES_SERVICE_HOST: '10.96.0.1' });
        expect(config.sink).toBe('eventbridge');
        expect(config.namespace).toBe(v.env.EIP_NAMESPACE);
        // Its metrics go where the stack of that stage alarms (ADR 0080), in the stack's region.
        expect(config.metricsNamespace).toBe(`EipLambdas/${name === 'base' ? 'dev' : PARAMS.stage}`);
        expect(config.region).toBe(v.env.AWS_REGION);
        const port = v.container.ports.find((p) => p.name === v.container.readinessProbe.httpGet.port)!;
        expect(port.containerPort).toBe(config.healthPort);
        expect(v.container.livenessProbe.httpGet.path).toBe('/healthz');
        expect(v.container.readinessProbe.httpGet.path).toBe('/readyz');
        expect(config.drainMs).toBeLessThan(v.pod.terminationGracePeriodSeconds * 1000);
        expect(v.container.securityContext).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
        });
      });
    });
  }
});

describe.skipIf(skip)('infra/bridge/gateway-namespace (a VpcNatGateway whose pods are elsewhere)', () => {
  it("grants the bridge's ServiceAccount exactly the pod watch of that namespace, nothing more", () => {
    const docs = kustomizeOverlay('bridge', (rel) => [
      `resources: [${rel}/gateway-namespace]`,
      'namespace: team-a',
    ]);
    expect(docs.map((d) => `${d.kind}/${d.metadata.namespace}/${d.metadata.name}`).sort()).toEqual([
      'Role/team-a/eip-lambdas-bridge-gateway-pods',
      'RoleBinding/team-a/eip-lambdas-bridge-gateway-pods',
    ]);
    // What the watch of that namespace's gateway pods asks for (shared/bridge/source.ts gatewayPodWatch).
    const watch = gatewayPodWatch('team-a');
    expect(watch.path).toBe('/api/v1/namespaces/team-a/pods');
    expect(docs.find((d) => d.kind === 'Role')!.rules).toEqual([
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    ]);
    const binding = docs.find((d) => d.kind === 'RoleBinding')!;
    expect(binding.roleRef).toMatchObject({ kind: 'Role', name: 'eip-lambdas-bridge-gateway-pods' });
    const sa = base.find((d) => d.kind === 'ServiceAccount')!;
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace },
    ]);
  });
});
