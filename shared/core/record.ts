/**
 * What add and update write once the address is on the gateway (./converge.ts): its placement in IPAM — the gateway,
 * prefix, QoS applied and, on a replicated gateway, the namespace and the pods that carry it (docs/adr/0105-ha-gateways.md)
 * — in one write only when it changed, and the EIP's status with its conditions (./view.ts, ./replicas.ts).
 */
import { ConflictError, type PermanentError } from '../domain/errors.js';
import { externalNetworkOf, type GatewayPod, type IptablesEip, Label } from '../domain/kube-ovn.js';
import type { Allocation, Placement } from '../ports.js';
import { natStatus, type Run } from './prelude.js';
import type { QosResult } from './qos.js';
import { type Lacking, PARTIALLY_CONFIGURED, podConditions, samePods } from './replicas.js';
import { configuredConditions, statusChanges } from './view.js';

/**
 * Records where the address is configured, and — when `placement.qos` is given — which policy the gateway polices it
 * with; a policy recorded earlier is kept when it is not. The namespace and pods given replace what was recorded
 * (none given: none recorded). The owner must still hold it (a lease holder always does). Returns the allocation as
 * now recorded; no write when nothing changes.
 */
export async function recordPlacement(run: Run, a: Allocation, placement: Placement): Promise<Allocation> {
  const qos = placement.qos ?? a.placement?.qos;
  const next: Placement = {
    gateway: placement.gateway,
    prefix: placement.prefix,
    ...(qos !== undefined && { qos }),
    ...(placement.namespace !== undefined && { namespace: placement.namespace }),
    ...(placement.pods !== undefined && { pods: placement.pods }),
  };
  const p = a.placement;
  const moved = p?.gateway !== next.gateway || p?.prefix !== next.prefix || p?.namespace !== next.namespace;
  if (!moved && p?.qos === next.qos && samePods(p?.pods, next.pods)) return a;
  if (!(await run.deps.ipam.place(a.subnet, a.address, a.owner.uid, next)))
    throw new ConflictError(
      `${a.address} is no longer held by ${a.owner.uid}; its placement was not recorded`,
    );
  if (moved) run.did(`place ${a.address} on ${next.gateway}`);
  else if (p?.qos !== next.qos) run.did(`record qos "${next.qos}" for ${a.address}`);
  else
    run.did(
      `record pods ${
        Object.values(next.pods ?? {})
          .map((x) => x.name)
          .join(',') || '(none)'
      }`,
    );
  return { ...a, placement: next };
}

/** The gateway's pods as the status tells them (a gateway of several pods, or one whose pod failed). */
export interface PodsView {
  found: readonly GatewayPod[];
  carrying: readonly GatewayPod[];
  failed: readonly Lacking[];
}

/**
 * Status of an EIP whose address is on the gateway: Ready (False, PartiallyConfigured, while an active pod lacks
 * it), the QoS and refusal conditions, GatewayPods on a gateway of several pods.
 */
export async function writeConfiguredStatus(
  run: Run,
  eip: IptablesEip,
  s: { ip: string; redo: string; qos: QosResult; refusal?: PermanentError; pods?: PodsView },
): Promise<void> {
  const { deps } = run;
  const { qos, refusal, pods } = s;
  const configured = configuredConditions(
    eip,
    {
      ip: s.ip,
      qosWanted: qos.wanted,
      ...(qos.problem && { qosProblem: qos.problem }),
      ...(refusal && { refusal }),
    },
    run.now(),
  );
  const conditions = pods ? podConditions(configured, { ip: s.ip, ...pods }, run.now()) : configured;
  const change = statusChanges(eip, {
    ready: !pods || pods.failed.length === 0,
    ip: s.ip,
    redo: s.redo,
    nat: await natStatus(run, eip),
    qosPolicy: qos.applied,
    conditions,
  });
  if (!change) return;
  await deps.cluster.patchEipStatus(eip.metadata.name, change);
  run.did(`status ${Object.keys(change).join(',')}`);
  // status.ip is written once per EIP: that is when an EIP has got its address.
  if (change.ip !== undefined && !eip.status?.ip)
    deps.metrics.count('Allocations', 1, {
      subnet: eip.metadata.labels?.[Label.subnet] ?? externalNetworkOf(eip),
    });
  const problem = refusal ?? qos.problem;
  const before = eip.status?.conditions?.find((c) => c.reason === problem?.code && c.status === 'False');
  if (problem && !before)
    await deps.cluster.emitEvent(eip, { type: 'Warning', reason: problem.code, message: problem.message });
  await notePartial(run, eip, conditions);
}

/** A Warning Event when the EIP becomes partially configured (the Ready condition says which pods lack it). */
async function notePartial(
  run: Run,
  eip: IptablesEip,
  conditions: NonNullable<IptablesEip['status']>['conditions'],
): Promise<void> {
  const ready = conditions?.find((c) => c.type === 'Ready');
  if (ready?.reason !== PARTIALLY_CONFIGURED) return;
  const before = eip.status?.conditions?.find((c) => c.type === 'Ready');
  if (before?.reason === PARTIALLY_CONFIGURED && before.message === ready.message) return;
  await run.deps.cluster.emitEvent(eip, {
    type: 'Warning',
    reason: PARTIALLY_CONFIGURED,
    message: ready.message ?? '',
  });
}
