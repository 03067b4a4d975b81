/**
 * The slices of watched objects the bridge looks at, and small pure readers over them. Objects arrive either as
 * raw watch JSON (strings everywhere) or as list items that client-node deserialised (dates as `Date`), so every
 * reader here tolerates both and never trusts a field to be present.
 */
import { createHash } from 'node:crypto';
import { gatewayOfApp } from '../domain/gateway-pod.js';
import { Annotation, GATEWAY_CONTAINER, Label } from '../domain/kube-ovn.js';
import type { ObjectSnapshot } from '../events.js';

/** A Kubernetes object as a watch or a list delivers it; only the fields the routing reads are typed. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    deletionTimestamp?: string | Date;
    finalizers?: string[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    creationTimestamp?: string | Date;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  /** ConfigMaps. */
  data?: Record<string, string>;
}

/** The kinds the bridge watches, by the `kind` their objects carry. */
export const WATCHED_KINDS = [
  'IptablesEIP',
  'IptablesFIPRule',
  'IptablesDnatRule',
  'IptablesSnatRule',
  'QoSPolicy',
  'Subnet',
  'VpcNatGateway',
  'Pod',
  'ConfigMap',
] as const;
export type WatchedKind = (typeof WATCHED_KINDS)[number];
export const NAT_RULE_KINDS = ['IptablesFIPRule', 'IptablesDnatRule', 'IptablesSnatRule'] as const;

export const nameOf = (o: KubeObject | undefined): string => o?.metadata?.name ?? '';
export const uidOf = (o: KubeObject | undefined): string | undefined => o?.metadata?.uid || undefined;
export const rvOf = (o: KubeObject | undefined): string | undefined =>
  o?.metadata?.resourceVersion || undefined;
export const isTerminating = (o: KubeObject | undefined): boolean => !!o?.metadata?.deletionTimestamp;

/** A string field of spec or status; absent, null and '' all read as ''. */
export function field(o: KubeObject | undefined, part: 'spec' | 'status', key: string): string {
  const v = o?.[part]?.[key];
  return typeof v === 'string' ? v : '';
}

/** `namespace/name` (cluster-scoped objects: just the name). */
export function keyOf(o: KubeObject): string {
  const ns = o.metadata?.namespace;
  return ns ? `${ns}/${nameOf(o)}` : nameOf(o);
}

/** JSON equality that ignores key order (status lists from different writers may order keys differently). */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(v: unknown): string {
  if (v === undefined) return 'null';
  if (v instanceof Date) return JSON.stringify(v.toISOString());
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

// ------------------------------------------------------------------------------------------- gateway pods

/** The VpcNatGateway a gateway pod serves: annotation `ovn.kubernetes.io/vpc_nat_gw`, else label `app=vpc-nat-gw-<gw>`. */
export function gatewayOfPod(pod: KubeObject): string | undefined {
  const annotated = pod.metadata?.annotations?.[Annotation.vpcNatGw];
  if (annotated) return annotated;
  return gatewayOfApp(pod.metadata?.labels?.[Label.app]);
}

interface ContainerStatus {
  name?: string;
  ready?: boolean;
  restartCount?: number;
  state?: { running?: { startedAt?: string | Date } };
}

/** The `vpc-nat-gw` container's status, if the pod reports one. */
export function gatewayContainer(pod: KubeObject | undefined): ContainerStatus | undefined {
  const list = pod?.status?.containerStatuses;
  if (!Array.isArray(list)) return undefined;
  return (list as ContainerStatus[]).find((c) => c?.name === GATEWAY_CONTAINER);
}

/** Running, with its vpc-nat-gw container ready: the state in which a handler can exec into it. */
export function isGatewayUp(pod: KubeObject | undefined): boolean {
  return pod?.status?.phase === 'Running' && gatewayContainer(pod)?.ready === true;
}

/** Epoch ms of an RFC 3339 string or a Date; undefined when absent or unparsable. */
export function timeOf(v: unknown): number | undefined {
  if (v instanceof Date) return v.getTime();
  if (typeof v !== 'string' || v === '') return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
}

// ------------------------------------------------------------------------------------------- snapshots

/**
 * The trimmed copy of an EIP a delete event carries: the metadata the delete handler needs, spec, and status
 * without conditions (they can be long and nobody downstream reads them).
 */
export function snapshotOf(o: KubeObject): ObjectSnapshot {
  const m = o.metadata ?? {};
  const metadata: NonNullable<ObjectSnapshot['metadata']> = {};
  if (m.name) metadata.name = m.name;
  if (m.uid) metadata.uid = m.uid;
  if (m.resourceVersion) metadata.resourceVersion = m.resourceVersion;
  if (m.deletionTimestamp)
    metadata.deletionTimestamp =
      m.deletionTimestamp instanceof Date ? m.deletionTimestamp.toISOString() : m.deletionTimestamp;
  if (m.finalizers?.length) metadata.finalizers = [...m.finalizers];
  if (m.labels && Object.keys(m.labels).length) metadata.labels = { ...m.labels };
  const out: ObjectSnapshot = { metadata };
  if (o.spec) out.spec = { ...o.spec } as ObjectSnapshot['spec'];
  if (o.status) {
    const { conditions: _dropped, ...status } = o.status;
    out.status = status as ObjectSnapshot['status'];
  }
  return out;
}

/**
 * The id of an event fanned out from another object's change (a rule, a gateway pod, a QoS policy): the
 * triggering object's `eventId` plus the target EIP's name, so ids stay unique per target. Names can be 253
 * characters; past the schema's 256-character limit the name is replaced by a digest of it.
 */
export function fanOutId(base: string, target: string): string {
  const id = `${base}:${target}`;
  if (id.length <= 256) return id;
  return `${base}:${createHash('sha256').update(target).digest('hex').slice(0, 32)}`;
}
