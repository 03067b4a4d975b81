/**
 * The kube-ovn objects the EIP path reads and writes, with kube-ovn's exact JSON field names, label keys
 * and finalizers (the CRDs are in infra/crds/). Only the fields this product touches are typed; everything
 * else a real object carries passes through untouched.
 */
import { type GatewayPodTemplate, NAME_PREFIX_KEY } from './gateway-pod.js';

export const GROUP = 'kubeovn.io';
export const VERSION = 'v1';
export const API_VERSION = `${GROUP}/${VERSION}` as const;

/** Plural resource names (the URL segment under /apis/kubeovn.io/v1). All are cluster-scoped. */
export const Plural = {
  eip: 'iptables-eips',
  qos: 'qos-policies',
  subnet: 'subnets',
  fip: 'iptables-fip-rules',
  dnat: 'iptables-dnat-rules',
  snat: 'iptables-snat-rules',
  gateway: 'vpc-nat-gateways',
} as const;

/** Label keys (kube-ovn pkg/util/const.go). */
export const Label = {
  subnet: 'ovn.kubernetes.io/subnet',
  natGwName: 'ovn.kubernetes.io/vpc-nat-gw-name',
  eipV4Ip: 'ovn.kubernetes.io/eip_v4_ip',
  qos: 'ovn.kubernetes.io/qos',
  /** On gateway pods, with value "true". */
  vpcNatGw: 'ovn.kubernetes.io/vpc-nat-gw',
  app: 'app',
} as const;

/** Annotation keys on the gateway pod. */
export const Annotation = {
  vpcNatGw: 'ovn.kubernetes.io/vpc_nat_gw',
  vpcNatGwInit: 'ovn.kubernetes.io/vpc_nat_gw_init',
  networks: 'k8s.v1.cni.cncf.io/networks',
  logicalSwitch: 'ovn.kubernetes.io/logical_switch',
  ipAddress: 'ovn.kubernetes.io/ip_address',
} as const;

/** The finalizer this product adds (kube-ovn's later domain-qualified name), and the 1.12 one it replaces. */
export const FINALIZER = 'kubeovn.io/kube-ovn-controller';
export const LEGACY_FINALIZER = 'kube-ovn-controller';

/** `spec.externalSubnet` empty means this compile-time default in kube-ovn (not configurable there either). */
export const DEFAULT_EXTERNAL_SUBNET = 'ovn-vpc-external-network';

/** The gateway container the script runs in, and the script path. */
export const GATEWAY_CONTAINER = 'vpc-nat-gw';
export const NAT_GATEWAY_SCRIPT = '/kube-ovn/nat-gateway.sh';

/** ConfigMaps (in the controller namespace) that switch the VPC NAT gateway feature on. */
export const NatGwConfigMap = {
  enable: 'ovn-vpc-nat-gw-config',
  enableKey: 'enable-vpc-nat-gw',
  image: 'ovn-vpc-nat-config',
  imageKey: 'image',
} as const;

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid: string;
  resourceVersion: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

/** kube-ovn's Condition (pkg/apis/kubeovn/v1/condition.go). */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  observedGeneration?: number;
  lastUpdateTime?: string;
  lastTransitionTime?: string;
}

export interface IptablesEipSpec {
  v4ip?: string;
  v6ip?: string;
  macAddress?: string;
  natGwDp?: string;
  qosPolicy?: string;
  externalSubnet?: string;
  /** kube-ovn master: where the gateway's pods are (gatewayNamespaceOf in gateway-pod.ts). */
  namespace?: string;
}

export interface IptablesEipStatus {
  ready?: boolean;
  ip?: string;
  redo?: string;
  nat?: string;
  qosPolicy?: string;
  conditions?: Condition[];
}

export interface IptablesEip {
  apiVersion: typeof API_VERSION;
  kind: 'IptablesEIP';
  metadata: ObjectMeta;
  spec: IptablesEipSpec;
  status?: IptablesEipStatus;
}

export type QoSDirection = 'ingress' | 'egress';

export interface QoSPolicyBandwidthLimitRule {
  name: string;
  interface?: string;
  rateMax?: string;
  burstMax?: string;
  priority?: number;
  direction?: QoSDirection | string;
  matchType?: string;
  matchValue?: string;
}

export interface QoSPolicySpec {
  shared?: boolean;
  bindingType?: 'EIP' | 'NATGW' | string;
  bandwidthLimitRules?: QoSPolicyBandwidthLimitRule[];
}

export interface QoSPolicy {
  apiVersion: typeof API_VERSION;
  kind: 'QoSPolicy';
  metadata: ObjectMeta;
  spec: QoSPolicySpec;
  status?: QoSPolicySpec & { conditions?: Condition[] };
}

export interface SubnetSpec {
  cidrBlock: string;
  gateway?: string;
  excludeIps?: string[];
  protocol?: 'IPv4' | 'IPv6' | 'Dual' | string;
  provider?: string;
  vpc?: string;
}

export interface Subnet {
  apiVersion: typeof API_VERSION;
  kind: 'Subnet';
  metadata: ObjectMeta;
  spec: SubnetSpec;
  status?: Record<string, unknown>;
}

export type NatRuleKind = 'dnat' | 'fip' | 'snat';

export interface NatRule {
  apiVersion: typeof API_VERSION;
  kind: 'IptablesFIPRule' | 'IptablesDnatRule' | 'IptablesSnatRule';
  metadata: ObjectMeta;
  spec: { eip?: string } & Record<string, unknown>;
  status?: Record<string, unknown>;
}

export const NatRuleKindOf = {
  IptablesDnatRule: 'dnat',
  IptablesFIPRule: 'fip',
  IptablesSnatRule: 'snat',
} as const satisfies Record<NatRule['kind'], NatRuleKind>;

export interface VpcNatGatewaySpec {
  vpc?: string;
  subnet?: string;
  lanIp?: string;
  externalSubnets?: string[];
  qosPolicy?: string;
  /** kube-ovn master: the namespace of the gateway's pods (default: kube-ovn's controller namespace). */
  namespace?: string;
  /** kube-ovn master: how many pods; above 1 a Deployment, each pod carrying every EIP (gatewayReplicasOf). */
  replicas?: number;
}

export interface VpcNatGateway {
  apiVersion: typeof API_VERSION;
  kind: 'VpcNatGateway';
  metadata: ObjectMeta;
  spec: VpcNatGatewaySpec;
  status?: Record<string, unknown>;
}

/** The slice of a core/v1 Pod the EIP path needs to reach and judge a gateway pod. */
export interface GatewayPod {
  namespace: string;
  name: string;
  uid: string;
  phase: string;
  creationTimestamp: string;
  /** Its `app` label: `<prefix>-<gw>` (what kube-ovn's workload sets, and how a gateway's pods are found). */
  app?: string;
  /**
   * The VpcNatGateway it serves, from its `ovn.kubernetes.io/vpc_nat_gw` annotation (every release's pod template
   * sets it, whatever the name prefix), when the adapter read it.
   */
  gateway?: string;
  /** The pod is being deleted (metadata.deletionTimestamp): kube-ovn runs no more operations in it. */
  terminating?: boolean;
  /** `vpc-nat-gw` container: restart count and the start time of its current run (RFC 3339), if running. */
  container?: { restartCount: number; startedAt?: string; ready: boolean };
  /**
   * The pod's own addresses on attached networks, by network name, from kube-ovn's annotations
   * `<network>.<namespace>.kubernetes.io/ip_address` (e.g. its net1 address on the external subnet).
   */
  addresses?: Record<string, string>;
  /**
   * What the pod's spec says about the kube-ovn release that built it (image, env, init container, routes
   * annotations, owner), when the adapter read the whole pod; the dialect is chosen from it (docs/compatibility.md).
   */
  template?: GatewayPodTemplate;
}

// The gateway pod's identity and annotations live in gateway-pod.ts; re-exported for existing importers.
export { gatewayPodName, podNetworkAddresses } from './gateway-pod.js';

/** `spec.externalSubnet` as kube-ovn resolves it (util.GetExternalNetwork). */
export function externalNetworkOf(eip: Pick<IptablesEip, 'spec'>): string {
  return eip.spec.externalSubnet || DEFAULT_EXTERNAL_SUBNET;
}

/**
 * kube-ovn's rule for the VPC NAT gateway feature (resyncVpcNatGwConfig): off when ovn-vpc-nat-gw-config is absent
 * or says enable-vpc-nat-gw "false"; otherwise ovn-vpc-nat-config must exist and carry an `image` key. Takes the two
 * ConfigMaps' data (undefined when the ConfigMap does not exist); the messages are kube-ovn's.
 */
export function natGwFeatureOf(
  enable: Record<string, string> | undefined,
  image: Record<string, string> | undefined,
): { enabled: boolean; reason?: string; namePrefix?: string } {
  if (!enable) return { enabled: false, reason: `configMap "${NatGwConfigMap.enable}" not configured` };
  if (enable[NatGwConfigMap.enableKey] === 'false')
    return {
      enabled: false,
      reason: `parameter "${NatGwConfigMap.enableKey}" in ConfigMap "${NatGwConfigMap.enable}" not true`,
    };
  if (!image)
    return {
      enabled: false,
      reason: `failed to get ${NatGwConfigMap.image}, configmaps "${NatGwConfigMap.image}" not found`,
    };
  if (!Object.hasOwn(image, NatGwConfigMap.imageKey))
    return { enabled: false, reason: `${NatGwConfigMap.image} should have ${NatGwConfigMap.imageKey} field` };
  // The gateway workloads' name prefix, when the ConfigMap names one (kube-ovn 1.13+; namePrefixOf applies it).
  const namePrefix = image[NAME_PREFIX_KEY];
  return namePrefix ? { enabled: true, namePrefix } : { enabled: true };
}
