/**
 * The local dashboard's per-pod rows (local/dashboard/pods.ts): every gateway pod with its phase, container run,
 * redo token and release, and for each EIP which pods of its gateway the last drift check read its address on. The
 * page that shows them, on the local stack in a browser: test/e2e/dashboard-browser.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { eipPods, gatewayPodRows } from '../../local/dashboard/pods.js';
import type { GatewayPod, IptablesEip } from '../../shared/domain/kube-ovn.js';

const pod = (name: string, o: Partial<GatewayPod> = {}): GatewayPod => ({
  namespace: 'team-a',
  name,
  uid: `uid-${name}`,
  phase: 'Running',
  creationTimestamp: '2026-12-01T10:00:00Z',
  app: 'edge-gw2',
  gateway: 'gw2',
  container: { restartCount: 0, startedAt: '2026-12-01T10:00:05Z', ready: true },
  template: {
    image: 'docker.io/kubeovn/vpc-nat-gateway:v1.15.2',
    env: {},
    initRunsScript: false,
    routes: {},
  },
  ...o,
});

const read = [
  {
    gateway: 'gw2',
    pod: 'team-a/edge-gw2-a',
    podUid: 'uid-edge-gw2-a',
    addresses: 2,
    filters: 0,
    line: '1.15',
    carries: ['172.18.0.40', '172.18.0.41'],
  },
  {
    gateway: 'gw2',
    pod: 'team-a/edge-gw2-b',
    podUid: 'uid-edge-gw2-b',
    addresses: 1,
    filters: 0,
    line: '1.15',
    carries: ['172.18.0.41'],
  },
];

const eip = (name: string, ip: string | undefined): IptablesEip => ({
  apiVersion: 'kubeovn.io/v1',
  kind: 'IptablesEIP',
  metadata: { name, uid: `u-${name}`, resourceVersion: '1' },
  spec: { natGwDp: 'gw2' },
  ...(ip && { status: { ready: true, ip, redo: '', nat: '', qosPolicy: '' } }),
});

describe('the dashboard per gateway pod', () => {
  it('lists each pod with its phase, container run, redo token and release; the addresses the last check read on it', () => {
    const rows = gatewayPodRows(
      [
        pod('edge-gw2-b', { container: { restartCount: 2, startedAt: '2026-12-01T11:30:00Z', ready: true } }),
        pod('edge-gw2-a'),
        pod('edge-gw2-c', { phase: 'Pending', container: undefined }),
        pod('edge-gw2-d', { terminating: true, container: { restartCount: 0, ready: false } }),
      ],
      read,
    );
    expect(rows).toEqual([
      {
        gateway: 'gw2',
        namespace: 'team-a',
        name: 'edge-gw2-a',
        phase: 'Running',
        terminating: false,
        container: 'running',
        restarts: 0,
        token: '2026-12-01T10:00:05',
        release: '1.15',
        carries: 2,
      },
      {
        gateway: 'gw2',
        namespace: 'team-a',
        name: 'edge-gw2-b',
        phase: 'Running',
        terminating: false,
        container: 'running',
        restarts: 2,
        token: '2026-12-01T11:30:00',
        release: '1.15',
        carries: 1,
      },
      // Not read by the last check: the release from its image, no count.
      {
        gateway: 'gw2',
        namespace: 'team-a',
        name: 'edge-gw2-c',
        phase: 'Pending',
        terminating: false,
        container: 'none',
        restarts: 0,
        token: '2026-12-01T10:00:00',
        release: 'v1.15.2',
      },
      {
        gateway: 'gw2',
        namespace: 'team-a',
        name: 'edge-gw2-d',
        phase: 'Running',
        terminating: true,
        container: 'not ready',
        restarts: 0,
        token: '2026-12-01T10:00:00',
        release: 'v1.15.2',
      },
    ]);
  });

  it('names, for each EIP, the pods of its gateway that carry its address and those that lack it', () => {
    expect(eipPods(eip('c', '172.18.0.40'), read)).toEqual([
      { pod: 'team-a/edge-gw2-a', carries: true },
      { pod: 'team-a/edge-gw2-b', carries: false },
    ]);
    expect(eipPods(eip('d', '172.18.0.41'), read).every((p) => p.carries)).toBe(true);
    expect(eipPods(eip('e', undefined), read)).toEqual([]);
    expect(eipPods(eip('c', '172.18.0.40'), undefined)).toEqual([]);
  });
});
