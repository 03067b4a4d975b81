/**
 * Detection of a second controller (ADR 0021) on the local Kubernetes API, which records metadata.managedFields
 * as a real API server does: the product's own writes (the k8s adapter, field manager `eip-lambdas`) are not
 * reported; a status or finalizer write by another manager (kube-ovn-controller) is — a warning and the
 * ForeignWriter metric with its manager — and the bridge does nothing else about it.
 */
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApi } from '../../local/kube-api/index.js';
import { kubeConfigFor } from '../../local/kube-api/testing.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { createK8sCluster } from '../../shared/adapters/k8s/index.js';
import { BridgeMetrics, startBridge } from '../../shared/bridge/index.js';
import type { Sink } from '../../shared/bridge/sinks/sink.js';
import { GROUP, Plural, VERSION } from '../../shared/domain/kube-ovn.js';
import type { EipEvent } from '../../shared/events.js';
import { eventually } from '../support/eventually.js';

describe('foreign writers seen by the bridge', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('reports another controller writing an EIP’s status or finalizers, not the product’s own writes', async () => {
    const api = await startKubeApi();
    const kc = kubeConfigFor(api);
    const events: EipEvent[] = [];
    const sink: Sink = {
      async send(e) {
        events.push(e);
      },
    };
    const published: { name: string; dimensions: Record<string, string>; value: number }[] = [];
    const metrics = new BridgeMetrics(async (data) => {
      published.push(...data);
    });
    const log = memoryLogger('warn');
    const bridge = await startBridge({ kubeConfig: kc, sink, log, metrics, resyncMs: 0, statsIntervalMs: 0 });
    cleanups.push(async () => {
      await bridge.drain(1_000);
      await api.close();
    });
    await bridge.ready();

    const custom = kc.makeApiClient(CustomObjectsApi);
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    await custom.createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: Plural.eip,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'IptablesEIP',
        metadata: { name: 'shared' },
        spec: { natGwDp: 'gw1' },
      },
      fieldManager: 'kubectl-create',
    });
    // The product writes status through its adapter (fieldManager eip-lambdas): not foreign.
    const cluster = createK8sCluster({ kubeConfig: kc });
    await cluster.patchEipStatus('shared', { ready: true, ip: '172.18.0.2' });
    await eventually(() => expect(events.map((e) => e.reason)).toEqual(['added']));
    await bridge.idle();
    const foreignLines = () =>
      log.lines.filter((l) => l.message === 'another controller writes this EIP; leaving it alone');
    expect(foreignLines()).toEqual([]);

    // kube-ovn's controller writes the same status, then the finalizer.
    await custom.patchClusterCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        plural: Plural.eip,
        name: 'shared',
        body: { status: { ip: '172.18.0.77' } },
        fieldManager: 'kube-ovn-controller',
      },
      merge,
    );
    await eventually(() => expect(bridge.stats().foreignWrites).toEqual({ 'kube-ovn-controller': 1 }));
    expect(foreignLines()[0]).toMatchObject({
      eip: 'shared',
      manager: 'kube-ovn-controller',
      fields: ['status'],
    });
    await custom.patchClusterCustomObject(
      {
        group: GROUP,
        version: VERSION,
        plural: Plural.eip,
        name: 'shared',
        body: { metadata: { finalizers: ['kubeovn.io/kube-ovn-controller'] } },
        fieldManager: 'kube-ovn-controller',
      },
      merge,
    );
    await eventually(() => expect(bridge.stats().foreignWrites).toEqual({ 'kube-ovn-controller': 2 }));
    // ...and the product's own next write is still not counted
    await cluster.patchEipStatus('shared', { ready: true, ip: '172.18.0.2' });
    await new Promise((r) => setTimeout(r, 200));
    expect(bridge.stats().foreignWrites).toEqual({ 'kube-ovn-controller': 2 });
    // no fight: none of these writes routed an event
    expect(events.map((e) => e.reason)).toEqual(['added']);

    await bridge.drain(1_000); // flushes the metrics
    expect(published.filter((d) => d.name === 'ForeignWriter')).toEqual([
      {
        name: 'ForeignWriter',
        dimensions: { service: 'eip-bridge', manager: 'kube-ovn-controller' },
        value: 2,
      },
    ]);
  });
});
