/** The gateway pod identity and annotation rules, defined once in shared/domain/gateway-pod.ts. */
import { describe, expect, it } from 'vitest';
import {
  gatewayApp,
  gatewayOfApp,
  gatewayPodName,
  gatewayPodSelector,
  isPodOwner,
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
