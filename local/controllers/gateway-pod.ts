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
 */
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { gatewayApp } from '../../shared/domain/gateway-pod.js';
import {
  Annotation,
  GATEWAY_CONTAINER,
  gatewayPodName,
  Label,
  NAT_GATEWAY_SCRIPT,
} from '../../shared/domain/kube-ovn.js';
import { atLeast, type KubeOvnRelease } from '../natgw/releases.js';

export const INIT_CONTAINER = 'vpc-nat-gw-init';
export const REVISION_LABEL = 'controller-revision-hash';
const POD_NAME_LABEL = 'statefulset.kubernetes.io/pod-name';

/** What the pod is built from: the gateway, its subnets (as kube-ovn's IPAM saw them) and the pod's own net1. */
export interface GatewayPodInput {
  release: KubeOvnRelease;
  image: string;
  gateway: string;
  namespace: string;
  serviceCidr: string;
  lanSubnet: string;
  lanIp: string;
  lan: { cidr: string; gateway: string; provider?: string };
  /** The external network (NAD) name and its subnet. */
  externalNetwork: string;
  external: { cidr: string; gateway: string; provider?: string };
  net1Address: string;
  revision: string;
}

/** The annotation key prefix kube-ovn uses for an attachment's addresses: `<network>.<namespace>.kubernetes.io`. */
export function providerPrefix(network: string, namespace: string): string {
  return `${network}.${namespace}.kubernetes.io`;
}

const PRIVILEGED = { privileged: true, allowPrivilegeEscalation: true };

function annotations(i: GatewayPodInput): Record<string, string> {
  const attachment = providerPrefix(i.externalNetwork, i.namespace);
  const out: Record<string, string> = {
    [Annotation.vpcNatGw]: i.gateway,
    [Annotation.networks]: `${i.namespace}/${i.externalNetwork}`,
    [Annotation.logicalSwitch]: i.lanSubnet,
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
  const extProvider = i.external.provider ?? `${i.externalNetwork}.${i.namespace}`;
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
  const name = gatewayPodName(i.gateway);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: i.namespace,
      labels: {
        [Label.app]: gatewayApp(i.gateway),
        [Label.vpcNatGw]: 'true',
        [REVISION_LABEL]: i.revision,
        [POD_NAME_LABEL]: name,
      },
      annotations: annotations(i),
    },
    spec: {
      // 1.12's template leaves the grace period at the default; the local API stops containers at once anyway.
      ...(atLeast(i.release, '1.13') && { terminationGracePeriodSeconds: 0 }),
      ...containers(i),
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
