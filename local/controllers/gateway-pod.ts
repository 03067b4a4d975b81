/**
 * The gateway pod each kube-ovn release's StatefulSet template makes (pkg/controller/vpc_nat_gateway.go,
 * genNatGwStatefulSet, at the release's tag), and how its controller then initialises the gateway
 * (handleInitVpcNatGw, handleUpdateNatGwSubnetRoute). What differs per release:
 *
 * - 1.12: an init container `bash -c "bash /kube-ovn/nat-gateway.sh init <svcCIDR>,<lanGw>"`, a
 *   `bash -c "while true; do sleep 10000; done"` container; no routes annotations (eth0's default route stays);
 *   then the controller's exec of `init <svcCIDR>,<pod's gateway>` (a no-op by then) and
 *   `ext-subnet-route-add <extCIDR>,<extGw>`.
 * - 1.13, 1.14: no init container, `sleep infinity`, termination grace 0, the routes annotations
 *   (`ovn.kubernetes.io/routes`: service CIDR via the LAN gateway; `<ext provider>.kubernetes.io/routes`:
 *   0.0.0.0/0 via the external gateway); the controller execs `init` with no arguments.
 * - 1.15, 1.16, master: as 1.13 plus `GATEWAY_V4`/`GATEWAY_V6` in the container's environment and a postStart
 *   hook enabling IPv4 forwarding. master's controller execs argv instead of `bash -c`.
 * - master with `spec.replicas > 1` (genNatGwDeployment): the same pod from a Deployment's template, without the
 *   static LAN address, with a required pod anti-affinity on the gateway's labels across nodes; the pod is named and
 *   labelled as a Deployment's ReplicaSet makes it (`<rs>-<5 chars>`, `pod-template-hash`, owned by the ReplicaSet).
 */
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { Annotation, GATEWAY_CONTAINER, Label, NAT_GATEWAY_SCRIPT } from '../../shared/domain/kube-ovn.js';
import { atLeast, type KubeOvnRelease } from '../natgw/releases.js';

export const INIT_CONTAINER = 'vpc-nat-gw-init';
/** The StatefulSet controller's revision label, and the Deployment controller's. */
export const REVISION_LABEL = 'controller-revision-hash';
export const POD_TEMPLATE_HASH_LABEL = 'pod-template-hash';
const POD_NAME_LABEL = 'statefulset.kubernetes.io/pod-name';
const HOSTNAME_TOPOLOGY = 'kubernetes.io/hostname';

/** The workload a pod belongs to, as its ownerReference and labels show it. */
export interface PodOwner {
  /** StatefulSet (one pod, `<name>-0`) or, for master's replicated gateway, the Deployment's ReplicaSet. */
  kind: 'StatefulSet' | 'ReplicaSet';
  /** The StatefulSet's name, or the ReplicaSet's (`<deployment>-<pod-template-hash>`). */
  name: string;
  uid: string;
  /** controller-revision-hash (StatefulSet) or pod-template-hash (ReplicaSet). */
  revision: string;
}

/** What the pod is built from: the gateway, its subnets (as kube-ovn's IPAM saw them) and the pod's own addresses. */
export interface GatewayPodInput {
  release: KubeOvnRelease;
  image: string;
  gateway: string;
  /** The pod's name and namespace (`spec.namespace` on master, else kube-ovn's controller namespace). */
  name: string;
  namespace: string;
  /** kube-ovn's controller namespace, where the external network's attachment definition is. */
  nadNamespace: string;
  /** The workload's `app` label: `<prefix>-<gw>`. */
  app: string;
  owner: PodOwner;
  serviceCidr: string;
  lanSubnet: string;
  /** The pod's LAN address: spec.lanIp, or for a replica the one kube-ovn's IPAM gave it. */
  lanIp: string;
  lan: { cidr: string; gateway: string; provider?: string };
  /** The external network (NAD) name and its subnet. */
  externalNetwork: string;
  external: { cidr: string; gateway: string; provider?: string };
  net1Address: string;
}

/** The annotation key prefix kube-ovn uses for an attachment's addresses: `<network>.<namespace>.kubernetes.io`. */
export function providerPrefix(network: string, namespace: string): string {
  return `${network}.${namespace}.kubernetes.io`;
}

const PRIVILEGED = { privileged: true, allowPrivilegeEscalation: true };

function annotations(i: GatewayPodInput): Record<string, string> {
  const attachment = providerPrefix(i.externalNetwork, i.nadNamespace);
  const out: Record<string, string> = {
    [Annotation.vpcNatGw]: i.gateway,
    [Annotation.networks]: `${i.nadNamespace}/${i.externalNetwork}`,
    [Annotation.logicalSwitch]: i.lanSubnet,
    // The template's static address (a StatefulSet's pod), or what kube-ovn's pod controller writes for a replica.
    [Annotation.ipAddress]: i.lanIp,
    // What kube-ovn's pod controller writes once it has allocated the addresses.
    'ovn.kubernetes.io/allocated': 'true',
    'ovn.kubernetes.io/cidr': i.lan.cidr,
    'ovn.kubernetes.io/gateway': i.lan.gateway,
    [`${attachment}/allocated`]: 'true',
    [`${attachment}/logical_switch`]: i.externalNetwork,
    [`${attachment}/ip_address`]: i.net1Address,
    [`${attachment}/cidr`]: i.external.cidr,
    [`${attachment}/gateway`]: i.external.gateway,
  };
  if (!atLeast(i.release, '1.13')) return out;
  // setPodRoutesAnnotation: the LAN subnet's provider (1.13/1.14: always ovn) and the external subnet's.
  const lanProvider = atLeast(i.release, '1.15') ? (i.lan.provider ?? 'ovn') : 'ovn';
  const extProvider = i.external.provider ?? `${i.externalNetwork}.${i.nadNamespace}`;
  out[`${lanProvider}.kubernetes.io/routes`] = JSON.stringify([{ dst: i.serviceCidr, gw: i.lan.gateway }]);
  out[`${extProvider}.kubernetes.io/routes`] = JSON.stringify([{ dst: '0.0.0.0/0', gw: i.external.gateway }]);
  return out;
}

function containers(i: GatewayPodInput): { containers: V1Container[]; initContainers?: V1Container[] } {
  if (!atLeast(i.release, '1.13')) {
    return {
      initContainers: [
        {
          name: INIT_CONTAINER,
          image: i.image,
          imagePullPolicy: 'IfNotPresent',
          command: ['bash'],
          args: ['-c', `bash ${NAT_GATEWAY_SCRIPT} init ${i.serviceCidr},${i.lan.gateway}`],
          securityContext: PRIVILEGED,
        },
      ],
      containers: [
        {
          name: GATEWAY_CONTAINER,
          image: i.image,
          imagePullPolicy: 'IfNotPresent',
          // Only the container's command, as kube-ovn declares it; nothing ever runs it.
          command: ['bash'],
          args: ['-c', 'while true; do sleep 10000; done'],
          securityContext: PRIVILEGED,
        },
      ],
    };
  }
  const container: V1Container = {
    name: GATEWAY_CONTAINER,
    image: i.image,
    command: ['sleep', 'infinity'],
    imagePullPolicy: 'IfNotPresent',
    securityContext: PRIVILEGED,
  };
  if (atLeast(i.release, '1.15')) {
    container.lifecycle = {
      postStart: { exec: { command: ['sh', '-c', 'sysctl -w net.ipv4.ip_forward=1'] } },
    };
    container.env = [
      { name: 'GATEWAY_V4', value: i.external.gateway },
      { name: 'GATEWAY_V6', value: '' },
    ];
  }
  return { containers: [container] };
}

export function gatewayPod(i: GatewayPodInput): V1Pod {
  const replica = i.owner.kind === 'ReplicaSet';
  const selected = { [Label.app]: i.app, [Label.vpcNatGw]: 'true' };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: i.name,
      namespace: i.namespace,
      labels: replica
        ? { ...selected, [POD_TEMPLATE_HASH_LABEL]: i.owner.revision }
        : { ...selected, [REVISION_LABEL]: i.owner.revision, [POD_NAME_LABEL]: i.name },
      annotations: annotations(i),
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: i.owner.kind,
          name: i.owner.name,
          uid: i.owner.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      // 1.12's template leaves the grace period at the default; the local API stops containers at once anyway.
      ...(atLeast(i.release, '1.13') && { terminationGracePeriodSeconds: 0 }),
      ...containers(i),
      // genGatewayPodAntiAffinity(labels, required): one replica per node. The lab has one node and does not
      // schedule by affinity (local/controllers/README.md).
      ...(replica && {
        affinity: {
          podAntiAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: [
              { labelSelector: { matchLabels: selected }, topologyKey: HOSTNAME_TOPOLOGY },
            ],
          },
        },
      }),
    },
  };
}

/**
 * The controller's gateway initialisation, as argv (the lab's exec runs argv only; kube-ovn before master joins
 * the same words into `bash -c`): 1.12's no-op `init` and its external route, `init` alone since 1.13.
 */
export function initialisation(
  i: Pick<GatewayPodInput, 'release' | 'serviceCidr' | 'external'>,
  podGateway: string,
): string[][] {
  const script = ['bash', NAT_GATEWAY_SCRIPT];
  if (atLeast(i.release, '1.13')) return [[...script, 'init']];
  return [
    [...script, 'init', `${i.serviceCidr},${podGateway}`],
    [...script, 'ext-subnet-route-add', `${i.external.cidr},${i.external.gateway}`],
  ];
}
