/**
 * The workloads kube-ovn keeps for a VpcNatGateway, reduced to what they do with pods (the local API serves no
 * apps/v1, so the stand-in plays the StatefulSet, Deployment and ReplicaSet controllers too):
 *
 * - a StatefulSet `<prefix>-<gw>` keeps one pod `<prefix>-<gw>-0`, rolled (deleted, then re-created) when its
 *   template changes;
 * - on kube-ovn master with `spec.replicas > 1`, a Deployment `<prefix>-<gw>` (genNatGwDeployment) whose ReplicaSet
 *   `<prefix>-<gw>-<pod-template-hash>` keeps `replicas` pods `<rs>-<5 chars>`; a changed template rolls them one at
 *   a time (genGatewayDeploymentStrategy: maxUnavailable 1, maxSurge 0); scaling down deletes the pods the
 *   ReplicaSet controller ranks first (not running, not ready, most restarts, newest).
 *
 * kube-ovn master switches between the two by `spec.replicas` without deleting the other one, and a new name prefix
 * or `spec.namespace` makes a new workload beside the old one: the stand-in keeps every workload it made for a gateway
 * until the gateway is deleted, as kube-ovn's ownerReferences do (local/controllers/README.md).
 */
import { createHash, randomInt } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { GATEWAY_CONTAINER, Label } from '../../shared/domain/kube-ovn.js';
import { type GatewayPodInput, POD_TEMPLATE_HASH_LABEL, REVISION_LABEL } from './gateway-pod.js';

/** What every pod of a workload is built from: the pod input without what each pod gets for itself. */
export type PodTemplate = Omit<GatewayPodInput, 'name' | 'owner' | 'lanIp' | 'net1Address'> & {
  /** spec.lanIp: the StatefulSet's pod has it in its template; replicas get theirs from kube-ovn's IPAM. */
  staticLanIp?: string;
};

export interface Workload {
  gateway: string;
  kind: 'StatefulSet' | 'Deployment';
  namespace: string;
  /** `<prefix>-<gw>`. */
  name: string;
  replicas: number;
  template: PodTemplate;
  /** controller-revision-hash value (StatefulSet) or pod-template-hash (the Deployment's current ReplicaSet). */
  revision: string;
  /** The uid of the workload (a StatefulSet's pods' owner); a ReplicaSet's is derived from it and the revision. */
  uid: string;
}

export type WorkloadAction = { kind: 'create'; name: string } | { kind: 'delete'; pod: V1Pod; why: string };

/** The alphabet of k8s.io/apimachinery's rand.String and rand.SafeEncodeString (no vowels, no 0, 1, 3). */
const ALPHANUMS = 'bcdfghjklmnpqrstvwxz2456789';

/** rand.SafeEncodeString: each character mapped into ALPHANUMS by its code. */
export function safeEncode(s: string): string {
  let out = '';
  for (const c of s) out += ALPHANUMS[c.charCodeAt(0) % ALPHANUMS.length];
  return out;
}

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`. */
function fnv32a(text: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(text, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * A pod-template-hash as the Deployment controller forms it (controller.ComputeHash: FNV-32a of the template, then
 * SafeEncodeString of the decimal value, so 1 to 10 characters of `4-9bcdf`). The template is hashed as JSON here,
 * not as Go's DeepHashObject: the value differs from a real cluster's for the same template, its form does not.
 */
export function podTemplateHash(template: unknown): string {
  return safeEncode(String(fnv32a(JSON.stringify(template))));
}

/** The 5-character suffix the ReplicaSet controller's generateName gets from the API server (rand.String(5)). */
export function podNameSuffix(): string {
  let out = '';
  for (let i = 0; i < 5; i++) out += ALPHANUMS[randomInt(ALPHANUMS.length)];
  return out;
}

/** A uid for an object the lab does not store (a workload, a ReplicaSet), stable for what it is derived from. */
export function derivedUid(from: string): string {
  const h = createHash('sha256').update(from).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export const workloadKey = (w: Pick<Workload, 'kind' | 'namespace' | 'name'>): string =>
  `${w.kind}/${w.namespace}/${w.name}`;

/** The current ReplicaSet of a Deployment workload: `<deployment>-<pod-template-hash>`. */
export const replicaSetName = (w: Pick<Workload, 'name' | 'revision'>): string => `${w.name}-${w.revision}`;

export const replicaSetUid = (w: Workload): string => derivedUid(`${w.uid}/${replicaSetName(w)}`);

const ownerOf = (pod: V1Pod) => pod.metadata?.ownerReferences?.find((r) => r.controller) ?? undefined;

/** Whether `pod` is one of the workload's: its namespace, its `app` label, owned by it (or by one of its ReplicaSets). */
export function ownedBy(pod: V1Pod, w: Workload): boolean {
  const m = pod.metadata;
  if (m?.namespace !== w.namespace || m.labels?.[Label.app] !== w.template.app) return false;
  const owner = ownerOf(pod);
  if (w.kind === 'StatefulSet') return owner?.kind === 'StatefulSet' && owner.name === w.name;
  return owner?.kind === 'ReplicaSet' && owner.name.startsWith(`${w.name}-`);
}

function gatewayContainer(pod: V1Pod) {
  return pod.status?.containerStatuses?.find((c) => c.name === GATEWAY_CONTAINER);
}

export function podReady(pod: V1Pod): boolean {
  return pod.status?.phase === 'Running' && gatewayContainer(pod)?.ready === true;
}

const revisionOf = (pod: V1Pod, w: Workload): string | undefined =>
  pod.metadata?.labels?.[w.kind === 'StatefulSet' ? REVISION_LABEL : POD_TEMPLATE_HASH_LABEL];

/**
 * The order in which the ReplicaSet controller deletes pods when it has too many (ActivePodsWithRanks, reduced to
 * what differs here): an old template first, then not Running, not ready, more restarts, newer.
 */
function deletionRank(w: Workload): (a: V1Pod, b: V1Pod) => number {
  const key = (p: V1Pod): Array<number | string> => [
    revisionOf(p, w) === w.revision ? 1 : 0,
    p.status?.phase === 'Running' ? 1 : 0,
    podReady(p) ? 1 : 0,
    -(gatewayContainer(p)?.restartCount ?? 0),
    -Date.parse(String(p.metadata?.creationTimestamp ?? 0)),
    p.metadata?.name ?? '',
  ];
  return (a, b) => {
    const [ka, kb] = [key(a), key(b)];
    for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i]! < kb[i]! ? -1 : 1;
    return 0;
  };
}

/**
 * What the workload's controller does next with `pods` (its own, terminating ones included). One step: the stand-in
 * runs it again after every change it sees.
 */
export function planWorkload(w: Workload, pods: readonly V1Pod[]): WorkloadAction[] {
  if (w.kind === 'StatefulSet') {
    const name = `${w.name}-0`;
    const pod = pods.find((p) => p.metadata?.name === name);
    if (!pod) return [{ kind: 'create', name }];
    if (pod.metadata?.deletionTimestamp) return [];
    return revisionOf(pod, w) === w.revision ? [] : [{ kind: 'delete', pod, why: 'the gateway changed' }];
  }
  const active = pods.filter((p) => !p.metadata?.deletionTimestamp);
  if (active.length > w.replicas)
    return [...active]
      .sort(deletionRank(w))
      .slice(0, active.length - w.replicas)
      .map((pod) => ({ kind: 'delete', pod, why: `scaled down to ${w.replicas}` }));
  const actions: WorkloadAction[] = [];
  const old = active.filter((p) => revisionOf(p, w) !== w.revision);
  // Rolling update, maxUnavailable 1 and maxSurge 0: one old pod goes only while every replica is available.
  if (old.length > 0 && active.length === w.replicas && active.every(podReady))
    actions.push({ kind: 'delete', pod: [...old].sort(deletionRank(w))[0]!, why: 'rolling update' });
  for (let i = active.length; i < w.replicas; i++)
    actions.push({ kind: 'create', name: `${replicaSetName(w)}-${podNameSuffix()}` });
  return actions;
}
