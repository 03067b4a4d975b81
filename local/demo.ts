import { EIP_RANGE_ANNOTATION } from '../shared/domain/addressing.js';
import { DEFAULT_RELEASE, gatewayImage, type KubeOvnRelease } from './natgw/releases.js';

/**
 * The demo a newcomer meets with `npm start`: what a kube-ovn cluster with the VPC NAT gateway feature has — the
 * two ConfigMaps that switch it on, the external subnet, a VPC subnet with a gateway in it, a QoS policy — and one
 * EIP using them. `eipRange`: a dedicated EIP range for the external subnet (its annotation, and in excludeIps), as
 * beside kube-ovn (docs/deploy-eks.md, step 2b).
 */
export function demoObjects(namespace: string, release: KubeOvnRelease = DEFAULT_RELEASE, eipRange?: string) {
  return [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ovn-vpc-nat-gw-config', namespace },
      data: { 'enable-vpc-nat-gw': 'true' },
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ovn-vpc-nat-config', namespace },
      data: { image: gatewayImage(release) },
    },
    {
      apiVersion: 'kubeovn.io/v1',
      kind: 'Subnet',
      metadata: {
        name: 'ovn-vpc-external-network',
        ...(eipRange && { annotations: { [EIP_RANGE_ANNOTATION]: eipRange } }),
      },
      spec: {
        protocol: 'IPv4',
        provider: `ovn-vpc-external-network.${namespace}`,
        cidrBlock: '172.18.0.0/24',
        gateway: '172.18.0.1',
        excludeIps: ['172.18.0.1..172.18.0.10', ...(eipRange ? [eipRange] : [])],
      },
    },
    {
      // The VPC's own subnet the gateway sits in (its lanIp); kube-ovn's init passes this subnet's gateway.
      apiVersion: 'kubeovn.io/v1',
      kind: 'Subnet',
      metadata: { name: 'vpc1-subnet1' },
      spec: {
        vpc: 'vpc1',
        protocol: 'IPv4',
        cidrBlock: '10.0.1.0/24',
        gateway: '10.0.1.1',
        excludeIps: ['10.0.1.1'],
      },
    },
    {
      apiVersion: 'kubeovn.io/v1',
      kind: 'VpcNatGateway',
      metadata: { name: 'gw1' },
      spec: {
        vpc: 'vpc1',
        subnet: 'vpc1-subnet1',
        lanIp: '10.0.1.254',
        externalSubnets: ['ovn-vpc-external-network'],
      },
    },
    {
      apiVersion: 'kubeovn.io/v1',
      kind: 'QoSPolicy',
      metadata: { name: 'qos-demo' },
      spec: {
        shared: true,
        bindingType: 'EIP',
        bandwidthLimitRules: [
          { name: 'egress', direction: 'egress', priority: 2, rateMax: '10', burstMax: '10' },
          { name: 'ingress', direction: 'ingress', priority: 1, rateMax: '20', burstMax: '20' },
        ],
      },
    },
    {
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: { name: 'demo-eip' },
      spec: { natGwDp: 'gw1', qosPolicy: 'qos-demo' },
    },
  ];
}
