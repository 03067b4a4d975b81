/** The gateway pod identity and annotation rules, defined once in shared/domain/gateway-pod.ts. */
import { describe, expect, it } from 'vitest';
import {
  gatewayApp,
  gatewayNamespaceOf,
  gatewayOfApp,
  gatewayPodName,
  gatewayPodSelector,
  gatewayReplicasOf,
  isNamespaceName,
  isPodOwner,
  namePrefixFor,
  namePrefixOf,
  net1Address,
  podAttachments,
  podNetworkAddresses,
  podOwner,
} from '../../shared/domain/gateway-pod.js';

describe('gateway pod identity', () => {
  it("names and selects gateway gw1's pod as kube-ovn's StatefulSet does", () => {
    expect(gatewayApp('gw1')).toBe('vpc-nat-gw-gw1');
    expect(gatewayPodName('gw1')).toBe('vpc-nat-gw-gw1-0');
    expect(gatewayPodSelector('gw1')).toBe('app=vpc-nat-gw-gw1,ovn.kubernetes.io/vpc-nat-gw=true');
    expect(gatewayOfApp(gatewayApp('gw-a.b'))).toBe('gw-a.b');
    expect(gatewayOfApp('vpc-nat-gw-')).toBeUndefined();
    expect(gatewayOfApp('nginx')).toBeUndefined();
  });

  it('names them with the prefix of ovn-vpc-nat-config (util.GenNatGwName): empty is the default, 1.12 has none', () => {
    expect(gatewayApp('gw1', 'egress')).toBe('egress-gw1');
    expect(gatewayPodName('gw1', 'egress')).toBe('egress-gw1-0');
    expect(gatewayPodSelector('gw1', 'egress')).toBe('app=egress-gw1,ovn.kubernetes.io/vpc-nat-gw=true');
    expect(gatewayApp('gw1', '')).toBe('vpc-nat-gw-gw1');
    expect(namePrefixOf({ image: 'x', natGwNamePrefix: 'egress' })).toBe('egress');
    expect(namePrefixOf({ image: 'x', natGwNamePrefix: '' })).toBe('vpc-nat-gw');
    expect(namePrefixOf({ image: 'x' })).toBe('vpc-nat-gw');
    expect(namePrefixOf(undefined)).toBe('vpc-nat-gw');
    expect(namePrefixOf({ natGwNamePrefix: 'egress' }, '1.12')).toBe('vpc-nat-gw');
    expect(namePrefixOf({ natGwNamePrefix: 'egress' }, 'v1.13.4')).toBe('egress');
    expect(namePrefixOf({ natGwNamePrefix: 'egress' }, 'master')).toBe('egress');
    expect(namePrefixFor('egress', '1.12')).toBe('vpc-nat-gw');
    expect(namePrefixFor('egress', 'master')).toBe('egress');
    expect(namePrefixFor('', 'master')).toBe('vpc-nat-gw');
    expect(namePrefixFor(undefined)).toBe('vpc-nat-gw');
  });

  it("puts them in the EIP's spec.namespace, else the gateway's, on master only (natEipNamespace)", () => {
    const eip = { spec: { namespace: 'team-e' } };
    const gw = { spec: { namespace: 'team-g' } };
    expect(gatewayNamespaceOf(eip, gw)).toBe('team-e');
    expect(gatewayNamespaceOf({ spec: { namespace: '' } }, gw)).toBe('team-g');
    expect(gatewayNamespaceOf(undefined, gw, 'master')).toBe('team-g');
    expect(gatewayNamespaceOf(undefined, { spec: {} })).toBeUndefined();
    expect(gatewayNamespaceOf(eip, gw, '1.16')).toBeUndefined();
    expect(isNamespaceName('team-a')).toBe(true);
    expect(isNamespaceName('Team_A')).toBe(false);
    expect(isNamespaceName('a'.repeat(64))).toBe(false);
  });

  it('runs spec.replicas pods on master (getNatGwReplicas), one otherwise', () => {
    expect(gatewayReplicasOf({ spec: { replicas: 3 } })).toBe(3);
    expect(gatewayReplicasOf({ spec: { replicas: 3 } }, 'master')).toBe(3);
    expect(gatewayReplicasOf({ spec: { replicas: 3 } }, '1.16')).toBe(1);
    expect(gatewayReplicasOf({ spec: { replicas: 0 } })).toBe(1);
    expect(gatewayReplicasOf({ spec: {} })).toBe(1);
  });

  it('marks a gateway pod reservation in IPAM apart from an EIP uid', () => {
    expect(podOwner('1234')).toBe('pod:1234');
    expect(isPodOwner(podOwner('1234'))).toBe(true);
    expect(isPodOwner('5f0c6a8e-0000-4000-8000-000000000000')).toBe(false);
  });
});

describe('gateway pod annotations', () => {
  it('keys an attachment by the namespace named in the networks annotation, not the pod namespace', () => {
    const ann = {
      'k8s.v1.cni.cncf.io/networks': 'kube-system/ovn-vpc-external-network',
      'ovn-vpc-external-network.kube-system.kubernetes.io/ip_address': '172.18.0.254',
      'ovn-vpc-external-network.kube-system.kubernetes.io/cidr': '172.18.0.0/24',
    };
    expect(podAttachments('gateways', ann)).toEqual([
      { network: 'ovn-vpc-external-network', namespace: 'kube-system' },
    ]);
    expect(podNetworkAddresses('gateways', ann)).toEqual({ 'ovn-vpc-external-network': '172.18.0.254' });
    expect(net1Address('gateways', ann)).toBe('172.18.0.254/24');
  });

  it('reads the JSON list form, defaults the namespace to the pod, and takes the first of several addresses', () => {
    const ann = {
      'k8s.v1.cni.cncf.io/networks': '[{"name":"ext"},{"name":"ext2","namespace":"other"}]',
      'ext.kube-system.kubernetes.io/ip_address': '192.168.0.9,fd00::9',
      'ext2.other.kubernetes.io/ip_address': '10.9.0.9',
    };
    expect(podAttachments('kube-system', ann)).toEqual([
      { network: 'ext', namespace: 'kube-system' },
      { network: 'ext2', namespace: 'other' },
    ]);
    expect(podNetworkAddresses('kube-system', ann)).toEqual({ ext: '192.168.0.9', ext2: '10.9.0.9' });
    expect(net1Address('kube-system', ann)).toBe('192.168.0.9');
  });

  it('finds nothing on a pod without attachments or with a malformed list', () => {
    expect(podAttachments('kube-system', undefined)).toEqual([]);
    expect(podAttachments('kube-system', { 'k8s.v1.cni.cncf.io/networks': '[{' })).toEqual([]);
    expect(net1Address('kube-system', {})).toBeUndefined();
  });
});
