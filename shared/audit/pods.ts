/**
 * Which pods the audit reads (docs/adr/0120-audit-reads-every-replica.md): every pod of every gateway, found by
 * kube-ovn's rule (`Cluster.findGatewayPods`: the name prefix of ovn-vpc-nat-config, in the namespace the EIP or
 * the gateway names, else kube-ovn's), and of those the active ones (Running, not terminating) are read one by one.
 * A gateway is known from its pods (`listGatewayPods`, every namespace the gateways name) and from the EIPs that
 * name it; a namespace from the gateway's `spec.namespace` and each of its EIPs' (kube-ovn master).
 */
import { InvalidSpecError } from '../domain/errors.js';
import { gatewayNamespaceOf, gatewayOfApp } from '../domain/gateway-pod.js';
import type { GatewayPod, IptablesEip, VpcNatGateway } from '../domain/kube-ovn.js';
import type { Deps } from '../ports.js';

/** The gateway a pod serves: its `ovn.kubernetes.io/vpc_nat_gw` annotation, else its `app` label's default form. */
export const gatewayOfPod = (pod: Pick<GatewayPod, 'app' | 'gateway'>): string | undefined =>
  pod.gateway || gatewayOfApp(pod.app);

/** The pods of one gateway in one namespace, as kube-ovn finds them. */
export interface PodSet {
  gateway: string;
  /** The namespace they were looked for in, '' for kube-ovn's own (the adapter's). */
  scope: string;
  pods: GatewayPod[];
}

/** The key an EIP's expected pods are found under: its gateway and the namespace kube-ovn looks in for it. */
export const scopeKey = (gateway: string, scope: string): string => `${gateway}\u0000${scope}`;

/** The namespace kube-ovn looks for `eip`'s pods in ('' for its own), under the release the adapter was told. */
export function scopeOf(
  eip: IptablesEip | undefined,
  gateway: Pick<VpcNatGateway, 'spec'> | undefined,
  release: string | undefined,
): string {
  return gatewayNamespaceOf(eip, gateway, release) ?? '';
}

/** Why a pod found for a gateway is not read, or undefined when it is read. A terminating pod is left out silently. */
export function notReadable(pod: GatewayPod): string | undefined {
  if (pod.phase !== 'Running') return `pod is not running (phase ${pod.phase})`;
  if (pod.container?.ready === false) return 'container vpc-nat-gw is not running';
  return undefined;
}

/**
 * Every gateway's pods, per namespace kube-ovn looks in for it: the gateways of `listed` (every gateway pod) and of
 * `eips`, each in the namespace its VpcNatGateway names and in each other one an EIP of it names. Also returns the
 * VpcNatGateways read, by name (undefined: none).
 */
export async function findPodSets(
  deps: Pick<Deps, 'cluster' | 'kubeOvnRelease'>,
  listed: readonly GatewayPod[],
  eips: readonly IptablesEip[],
): Promise<{ sets: PodSet[]; gateways: Map<string, VpcNatGateway | undefined> }> {
  const names = new Set<string>([
    ...listed.map(gatewayOfPod).filter((gw): gw is string => !!gw),
    ...eips.map((e) => e.spec.natGwDp).filter((gw): gw is string => !!gw),
  ]);
  const gateways = new Map<string, VpcNatGateway | undefined>();
  const sets: PodSet[] = [];
  for (const gw of [...names].sort()) {
    const gateway = await deps.cluster.getVpcNatGateway(gw);
    gateways.set(gw, gateway);
    for (const scope of scopesOf(gw, gateway, eips, deps.kubeOvnRelease)) {
      const pods = await podsIn(deps, gw, scope);
      if (pods.length) sets.push({ gateway: gw, scope, pods });
    }
  }
  return { sets, gateways };
}

/** The namespaces kube-ovn looks in for gateway `gw`'s pods: the gateway's own, and each one an EIP of it names. */
function scopesOf(
  gw: string,
  gateway: VpcNatGateway | undefined,
  eips: readonly IptablesEip[],
  release: string | undefined,
): string[] {
  const scopes = new Set([scopeOf(undefined, gateway, release)]);
  for (const e of eips)
    if (e.spec.natGwDp === gw && !e.metadata.deletionTimestamp) scopes.add(scopeOf(e, gateway, release));
  return [...scopes].sort();
}

async function podsIn(deps: Pick<Deps, 'cluster'>, gw: string, scope: string): Promise<GatewayPod[]> {
  try {
    return await deps.cluster.findGatewayPods({ name: gw, ...(scope && { namespace: scope }) });
  } catch (e) {
    // A namespace that is no namespace name: the core refuses those EIPs (InvalidSpec); anything else is a failure.
    if (e instanceof InvalidSpecError) return [];
    throw e;
  }
}

/** A pod of `gateway` by uid, found again in the namespace it was read in, if still there and not terminating. */
export async function podAgain(
  deps: Pick<Deps, 'cluster'>,
  gateway: string,
  pod: string | undefined,
  uid: string | undefined,
): Promise<GatewayPod | undefined> {
  if (!pod || !uid) return undefined;
  const namespace = pod.slice(0, pod.indexOf('/'));
  const pods = await deps.cluster.findGatewayPods({ name: gateway, ...(namespace && { namespace }) });
  return pods.find((p) => p.uid === uid && !p.terminating);
}
