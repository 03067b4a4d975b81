/**
 * kube-ovn master's replicated gateway outside kube-ovn's namespace, on the local stack as `npm start` runs it: the
 * stand-ins as kube-ovn's own identity under its RBAC (local/rbac/kube-ovn.yaml, the lab's stand-in rules
 * cluster-wide, as kube-controller-manager's are), the product's adapter under infra/rbac with
 * infra/rbac/gateway-namespace for the other namespace. A user applies the gateway with kubectl and sees its pods with
 * `kubectl get pods -n … -l …`; the handlers' identity finds them all with findGatewayPods.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { kubectl, kubectlWith } from '../../local/kube-api/testing.js';
import { createK8sCluster } from '../../shared/adapters/k8s/index.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { startTestStack, type TestStack } from '../support/stack.js';

const { skip } = kubectlOrSkip();
const TEAM = 'team-a';

describe.skipIf(skip)(
  'a replicated gateway in another namespace, on the local stack (kube-ovn master)',
  () => {
    let t: TestStack;
    beforeAll(async () => {
      t = await startTestStack('stack-replicas-', { kubeOvnRelease: 'master' });
    }, 60_000);
    afterAll(async () => {
      await t?.stop();
    });

    it('kube-ovn keeps two pods in spec.namespace; the handlers find both once gateway-namespace lets them list there', async () => {
      const api = t.stack.api;
      const apply = async (yaml: string) => {
        const r = await kubectlWith(api, { stdin: yaml }, 'apply', '-f', '-');
        expect(r.code, r.stderr).toBe(0);
      };
      await apply(`apiVersion: v1\nkind: Namespace\nmetadata: { name: ${TEAM} }\n`);
      await apply(
        [
          'apiVersion: kubeovn.io/v1',
          'kind: VpcNatGateway',
          'metadata: { name: gw-ha }',
          `spec: { vpc: vpc1, subnet: vpc1-subnet1, lanIp: "", replicas: 2, namespace: ${TEAM} }`,
          '',
        ].join('\n'),
      );
      const selector = 'app=vpc-nat-gw-gw-ha,ovn.kubernetes.io/vpc-nat-gw=true';
      const names = await eventuallyValue(
        async () => {
          const r = await kubectl(api, 'get', 'pods', '-n', TEAM, '-l', selector, '-o', 'json');
          const items = (
            JSON.parse(r.stdout) as {
              items: { metadata: { name: string; annotations?: Record<string, string> } }[];
            }
          ).items;
          const ready = items.filter(
            (p) => p.metadata.annotations?.['ovn.kubernetes.io/vpc_nat_gw_init'] === 'true',
          );
          return ready.length === 2 ? ready.map((p) => p.metadata.name).sort() : undefined;
        },
        { timeoutMs: 30_000, what: 'two initialised pods of gw-ha in team-a' },
      );
      for (const n of names)
        expect(n).toMatch(/^vpc-nat-gw-gw-ha-[4-9bcdf]+-[bcdfghjklmnpqrstvwxz2456789]{5}$/);

      // The handlers' identity, under infra/rbac only: no pods in team-a for it yet.
      const kc = new KubeConfig();
      kc.loadFromFile(t.stack.kubeconfigs.handlers);
      const handlers = createK8sCluster({ kubeConfig: kc, namespace: 'kube-system' });
      await expect(handlers.findGatewayPods({ name: 'gw-ha', namespace: TEAM })).rejects.toThrow(
        /forbidden|403/i,
      );
      // What `namespace: team-a` over infra/rbac/gateway-namespace renders (test/unit/rbac-manifests.test.ts).
      const file = join(import.meta.dirname, '../../infra/rbac/gateway-namespace/gateway-pods.yaml');
      const docs = parseAllDocuments(readFileSync(file, 'utf8')).map(
        (d) => d.toJS() as { metadata: Record<string, unknown> },
      );
      for (const d of docs)
        await apply(JSON.stringify({ ...d, metadata: { ...d.metadata, namespace: TEAM } }));
      const found = await eventuallyValue(async () => {
        const pods = await handlers.findGatewayPods({ name: 'gw-ha', namespace: TEAM }).catch(() => []);
        return pods.length === 2 ? pods : undefined;
      });
      expect(found.map((p) => [p.namespace, p.name, p.template?.ownerKind])).toEqual(
        names.map((n) => [TEAM, n, 'ReplicaSet']),
      );
      // The demo's gateway is still where it was, and alone.
      expect((await handlers.findGatewayPods({ name: 'gw1' })).map((p) => p.name)).toEqual([
        'vpc-nat-gw-gw1-0',
      ]);
    }, 90_000);
  },
);
