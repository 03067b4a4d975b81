/**
 * The lab's StatefulSet, Deployment and ReplicaSet controllers (local/controllers/gateway-workloads.ts) one step at a
 * time: what each does next with a workload's pods. The rules are Kubernetes' (pkg/controller/statefulset, deployment
 * with kube-ovn's strategy maxUnavailable 1 and maxSurge 0, replicaset's ActivePodsWithRanks, reduced to what differs
 * between gateway pods) and apimachinery's rand.SafeEncodeString; the integration test
 * (test/integration/k8s-standins-replicas.test.ts) drives them through the local API.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  ownedBy,
  type PodTemplate,
  planWorkload,
  podNameSuffix,
  podTemplateHash,
  replicaSetName,
  safeEncode,
  type Workload,
} from '../../local/controllers/gateway-workloads.js';

const template = { app: 'vpc-nat-gw-gw1' } as PodTemplate;
const deployment: Workload = {
  gateway: 'gw1',
  kind: 'Deployment',
  namespace: 'kube-system',
  name: 'vpc-nat-gw-gw1',
  replicas: 2,
  template,
  revision: '7d4f8c9b5',
  uid: 'u',
};
const sts: Workload = { ...deployment, kind: 'StatefulSet', replicas: 1, revision: 'vpc-nat-gw-gw1-abc' };

function pod(
  name: string,
  o: {
    revision?: string;
    ready?: boolean;
    phase?: string;
    restarts?: number;
    created?: string;
    gone?: boolean;
  } = {},
): V1Pod {
  const sts = name.endsWith('-0');
  return {
    metadata: {
      name,
      namespace: 'kube-system',
      creationTimestamp: new Date(o.created ?? '2026-12-01T10:00:00Z'),
      labels: {
        app: 'vpc-nat-gw-gw1',
        [sts ? 'controller-revision-hash' : 'pod-template-hash']:
          o.revision ?? (sts ? 'vpc-nat-gw-gw1-abc' : '7d4f8c9b5'),
      },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: sts ? 'StatefulSet' : 'ReplicaSet',
          name: sts ? 'vpc-nat-gw-gw1' : `vpc-nat-gw-gw1-${o.revision ?? '7d4f8c9b5'}`,
          uid: 'x',
          controller: true,
        },
      ],
      ...(o.gone && { deletionTimestamp: new Date() }),
    },
    status: {
      phase: o.phase ?? 'Running',
      containerStatuses: [
        { name: 'vpc-nat-gw', ready: o.ready ?? true, restartCount: o.restarts ?? 0, image: '', imageID: '' },
      ],
    },
  } as V1Pod;
}

const deleted = (w: Workload, pods: V1Pod[]) =>
  planWorkload(w, pods).flatMap((a) => (a.kind === 'delete' ? [a.pod.metadata?.name] : []));
const created = (w: Workload, pods: V1Pod[]) => planWorkload(w, pods).filter((a) => a.kind === 'create');

describe('the StatefulSet', () => {
  it('makes its one pod <name>-0, rolls it when the template changed, waits while it terminates', () => {
    expect(planWorkload(sts, [])).toEqual([{ kind: 'create', name: 'vpc-nat-gw-gw1-0' }]);
    expect(planWorkload(sts, [pod('vpc-nat-gw-gw1-0')])).toEqual([]);
    expect(deleted(sts, [pod('vpc-nat-gw-gw1-0', { revision: 'vpc-nat-gw-gw1-old' })])).toEqual([
      'vpc-nat-gw-gw1-0',
    ]);
    expect(planWorkload(sts, [pod('vpc-nat-gw-gw1-0', { gone: true })])).toEqual([]);
  });
});

describe('the Deployment and its ReplicaSet', () => {
  it('creates the missing replicas under the ReplicaSet’s name and a generated suffix', () => {
    const made = created(deployment, [pod('vpc-nat-gw-gw1-7d4f8c9b5-bbbbb')]);
    expect(made).toHaveLength(1);
    expect(made[0]).toMatchObject({
      name: expect.stringMatching(/^vpc-nat-gw-gw1-7d4f8c9b5-[bcdfghjklmnpqrstvwxz2456789]{5}$/),
    });
    expect(created(deployment, [])).toHaveLength(2);
    // A terminating pod is no longer a replica: its replacement is made at once.
    expect(
      created(deployment, [
        pod('vpc-nat-gw-gw1-7d4f8c9b5-bbbbb'),
        pod('vpc-nat-gw-gw1-7d4f8c9b5-ccccc', { gone: true }),
      ]),
    ).toHaveLength(1);
  });

  it('scales down the pods ranked first: not Running, not ready, more restarts, newer', () => {
    const w = { ...deployment, replicas: 1 };
    const ready = pod('vpc-nat-gw-gw1-7d4f8c9b5-aaaaa');
    expect(deleted(w, [ready, pod('vpc-nat-gw-gw1-7d4f8c9b5-ppppp', { phase: 'Pending' })])).toEqual([
      'vpc-nat-gw-gw1-7d4f8c9b5-ppppp',
    ]);
    expect(deleted(w, [pod('vpc-nat-gw-gw1-7d4f8c9b5-nnnnn', { ready: false }), ready])).toEqual([
      'vpc-nat-gw-gw1-7d4f8c9b5-nnnnn',
    ]);
    expect(deleted(w, [ready, pod('vpc-nat-gw-gw1-7d4f8c9b5-rrrrr', { restarts: 2 })])).toEqual([
      'vpc-nat-gw-gw1-7d4f8c9b5-rrrrr',
    ]);
    expect(
      deleted(w, [pod('vpc-nat-gw-gw1-7d4f8c9b5-zzzzz', { created: '2026-12-01T10:00:09Z' }), ready]),
    ).toEqual(['vpc-nat-gw-gw1-7d4f8c9b5-zzzzz']);
    expect(
      deleted({ ...deployment, replicas: 1 }, [ready, pod('vpc-nat-gw-gw1-5c4-ooooo', { revision: '5c4' })]),
    ).toEqual(['vpc-nat-gw-gw1-5c4-ooooo']);
  });

  it('rolls a changed template one pod at a time, only while every replica is ready (maxUnavailable 1, maxSurge 0)', () => {
    const old = [
      pod('vpc-nat-gw-gw1-5c4-aaaaa', { revision: '5c4' }),
      pod('vpc-nat-gw-gw1-5c4-bbbbb', { revision: '5c4' }),
    ];
    const step = planWorkload(deployment, old);
    expect(step.map((a) => a.kind)).toEqual(['delete']);
    // One gone: the new template's pod comes, nothing else goes until it is ready.
    const next = [old[1]!, pod('vpc-nat-gw-gw1-7d4f8c9b5-nnnnn', { ready: false })];
    expect(planWorkload(deployment, next)).toEqual([]);
    expect(deleted(deployment, [old[1]!, pod('vpc-nat-gw-gw1-7d4f8c9b5-nnnnn')])).toEqual([
      'vpc-nat-gw-gw1-5c4-bbbbb',
    ]);
    expect(created(deployment, [old[1]!])).toHaveLength(1);
  });

  it("owns its pods only: the gateway's app label, its namespace, a ReplicaSet named after it", () => {
    expect(ownedBy(pod('vpc-nat-gw-gw1-7d4f8c9b5-aaaaa'), deployment)).toBe(true);
    expect(ownedBy(pod('vpc-nat-gw-gw1-0'), deployment)).toBe(false);
    expect(ownedBy(pod('vpc-nat-gw-gw1-0'), sts)).toBe(true);
    const other = pod('vpc-nat-gw-gw1-x-7d4f8c9b5-aaaaa');
    other.metadata!.labels!.app = 'vpc-nat-gw-gw1-x';
    expect(ownedBy(other, deployment)).toBe(false);
    expect(ownedBy(pod('vpc-nat-gw-gw1-7d4f8c9b5-aaaaa'), { ...deployment, namespace: 'team-a' })).toBe(
      false,
    );
  });
});

describe('names', () => {
  it('encodes as rand.SafeEncodeString does (the alphabet without vowels, 0, 1 and 3), as a pod-template-hash looks', () => {
    // Each character to ALPHANUMS[code % 27]: the digits 0-9 become 4 5 6 7 8 9 b c d f.
    expect(safeEncode('0123456789')).toBe('456789bcdf');
    expect(podTemplateHash({ a: 1 })).toMatch(/^[4-9bcdf]{1,10}$/);
    expect(podTemplateHash({ a: 1 })).toBe(podTemplateHash({ a: 1 }));
    expect(podTemplateHash({ a: 1 })).not.toBe(podTemplateHash({ a: 2 }));
    expect(podNameSuffix()).toMatch(/^[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    expect(replicaSetName(deployment)).toBe('vpc-nat-gw-gw1-7d4f8c9b5');
  });
});
