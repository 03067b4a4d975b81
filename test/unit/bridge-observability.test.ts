/**
 * What the bridge tells operators: foreign writers found in an EIP's managedFields, and the CloudWatch metrics
 * (PutMetricData through the client seam, or EMF lines) that the alarms watch.
 */
import { describe, expect, it } from 'vitest';
import { FIELD_MANAGER } from '../../shared/adapters/k8s/cluster.js';
import { ForeignWriterWatch, foreignWrites, OWN_FIELD_MANAGERS } from '../../shared/bridge/foreign.js';
import {
  BRIDGE_METRIC_NAMES,
  BRIDGE_METRICS_NAMESPACE,
  BridgeMetrics,
  cloudWatchPublisher,
  emfPublisher,
} from '../../shared/bridge/metrics.js';
import type { KubeObject } from '../../shared/bridge/objects.js';

/** managedFields as a real API server records them (kube-ovn-controller writes status through /status). */
function eipWrittenBy(
  entries: { manager: string; subresource?: string; fields: object; time?: string }[],
): KubeObject {
  return {
    kind: 'IptablesEIP',
    metadata: {
      name: 'e1',
      uid: 'uid-e1',
      managedFields: entries.map((e) => ({
        manager: e.manager,
        operation: 'Update',
        apiVersion: 'kubeovn.io/v1',
        time: e.time ?? '2026-11-30T10:00:00Z',
        fieldsType: 'FieldsV1',
        fieldsV1: e.fields,
        ...(e.subresource && { subresource: e.subresource }),
      })),
    } as KubeObject['metadata'],
  };
}

describe('foreign writers', () => {
  const kubectlSpec = { manager: 'kubectl-client-side-apply', fields: { 'f:spec': { 'f:natGwDp': {} } } };
  const ours = [
    { manager: FIELD_MANAGER, fields: { 'f:metadata': { 'f:finalizers': {}, 'f:labels': {} } } },
    { manager: FIELD_MANAGER, subresource: 'status', fields: { 'f:status': { 'f:ready': {} } } },
  ];

  it('sees nothing when only the product and users editing the spec wrote the EIP', () => {
    expect(OWN_FIELD_MANAGERS).toEqual([FIELD_MANAGER]);
    expect(foreignWrites(eipWrittenBy([kubectlSpec, ...ours]))).toEqual([]);
  });

  it('names another manager that writes status or finalizers, and what it owns', () => {
    const eip = eipWrittenBy([
      kubectlSpec,
      ...ours,
      { manager: 'kube-ovn-controller', subresource: 'status', fields: { 'f:status': { 'f:ip': {} } } },
      {
        manager: 'kube-ovn-controller',
        fields: { 'f:metadata': { 'f:finalizers': { 'v:"kube-ovn-controller"': {} } } },
      },
    ]);
    expect(foreignWrites(eip)).toEqual([
      {
        manager: 'kube-ovn-controller',
        fields: ['status'],
        time: '2026-11-30T10:00:00Z',
        subresource: 'status',
      },
      { manager: 'kube-ovn-controller', fields: ['finalizers'], time: '2026-11-30T10:00:00Z' },
    ]);
  });

  it('counts each write once: a new entry time is a new write', () => {
    const watch = new ForeignWriterWatch();
    const write = (time: string) =>
      eipWrittenBy([
        { manager: 'kube-ovn-controller', subresource: 'status', fields: { 'f:status': {} }, time },
      ]);
    expect(watch.observe(write('2026-11-30T10:00:00Z'))).toEqual([expect.objectContaining({ first: true })]);
    expect(watch.observe(write('2026-11-30T10:00:00Z'))).toEqual([]);
    const later = watch.observe(write('2026-11-30T10:00:05Z'));
    expect(later).toHaveLength(1);
    expect(later[0]!.first).toBeUndefined(); // warned once per EIP and manager; later writes are only counted
    watch.forget(write(''));
    expect(watch.observe(write('2026-11-30T10:00:05Z'))).toHaveLength(1);
  });

  it('tolerates objects without managedFields, or with malformed entries', () => {
    expect(foreignWrites({ metadata: { name: 'x' } })).toEqual([]);
    expect(
      foreignWrites({ metadata: { name: 'x', managedFields: [null, 3, {}] } as KubeObject['metadata'] }),
    ).toEqual([]);
  });
});

describe('bridge metrics', () => {
  it('sums counts per name and dimensions and publishes them with PutMetricData in the EipLambdas namespace', async () => {
    const sent: { input: { Namespace: string; MetricData: Record<string, unknown>[] } }[] = [];
    const metrics = new BridgeMetrics(
      cloudWatchPublisher({
        async send(command: { input: { Namespace: string; MetricData: Record<string, unknown>[] } }) {
          sent.push(command);
          return {};
        },
      }),
    );
    metrics.count('BridgeHeartbeat');
    metrics.count('ForeignWriter', 1, { manager: 'kube-ovn-controller' });
    metrics.count('ForeignWriter', 2, { manager: 'kube-ovn-controller' });
    const at = new Date('2026-11-30T10:00:00Z');
    await metrics.flush(at);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.input).toEqual({
      Namespace: BRIDGE_METRICS_NAMESPACE,
      MetricData: [
        {
          MetricName: 'BridgeHeartbeat',
          Dimensions: [{ Name: 'service', Value: 'eip-bridge' }],
          Timestamp: at,
          Value: 1,
          Unit: 'Count',
        },
        {
          MetricName: 'ForeignWriter',
          Dimensions: [
            { Name: 'service', Value: 'eip-bridge' },
            { Name: 'manager', Value: 'kube-ovn-controller' },
          ],
          Timestamp: at,
          Value: 3,
          Unit: 'Count',
        },
      ],
    });
    await metrics.flush();
    expect(sent).toHaveLength(1); // nothing new: no call
  });

  it('reports a publishing error instead of throwing it', async () => {
    const errors: string[] = [];
    const metrics = new BridgeMetrics(
      async () => {
        throw Object.assign(new Error('not authorized'), { name: 'AccessDenied' });
      },
      (e) => errors.push(e),
    );
    metrics.count('BridgeHeartbeat');
    await metrics.flush();
    expect(errors).toEqual(['AccessDenied: not authorized']);
  });

  it('writes one EMF line per data point with the dimension set [service] or [service, manager]', async () => {
    const lines: string[] = [];
    const metrics = new BridgeMetrics(emfPublisher((l) => lines.push(l)));
    metrics.count('BridgeQueueDepth', 7);
    metrics.count('ForeignWriter', 1, { manager: 'm' });
    await metrics.flush(new Date(0));
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      {
        _aws: {
          Timestamp: 0,
          CloudWatchMetrics: [
            {
              Namespace: 'EipLambdas',
              Dimensions: [['service']],
              Metrics: [{ Name: 'BridgeQueueDepth', Unit: 'Count' }],
            },
          ],
        },
        service: 'eip-bridge',
        BridgeQueueDepth: 7,
      },
      {
        _aws: {
          Timestamp: 0,
          CloudWatchMetrics: [
            {
              Namespace: 'EipLambdas',
              Dimensions: [['service', 'manager']],
              Metrics: [{ Name: 'ForeignWriter', Unit: 'Count' }],
            },
          ],
        },
        service: 'eip-bridge',
        manager: 'm',
        ForeignWriter: 1,
      },
    ]);
  });

  it('lists every metric it publishes with its dimensions (the alarms read this catalogue)', () => {
    expect(Object.keys(BRIDGE_METRIC_NAMES).sort()).toEqual(
      ['BridgeEventsFailed', 'BridgeHeartbeat', 'BridgeQueueDepth', 'ForeignWriter'].sort(),
    );
    expect(BRIDGE_METRIC_NAMES.ForeignWriter.dimensions).toEqual(['manager']);
  });
});
