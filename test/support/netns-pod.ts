/**
 * A gateway pod as each kube-ovn release's controller builds it (pkg/controller/vpc_nat_gateway.go at that tag, as
 * local/netns/README.md summarises), and the exec forms its controller sends. Written here, not taken from the
 * product's per-release dialects: the end-to-end test of the network-namespace gateway talks argv directly.
 */
import { atLeast, type ReleaseLine } from '../../local/netns/release.js';
import { NAT_GATEWAY_SCRIPT } from '../../shared/domain/kube-ovn.js';

export const NS = 'kube-system';
export const SERVICE_CIDR = '10.96.0.0/12';
export const LAN = {
  cidr: '10.0.1.0/24',
  gateway: '10.0.1.1',
  address: '10.0.1.254',
  mac: '02:00:00:0a:01:fe',
};
export const EXT = {
  network: 'ovn-vpc-external-network',
  cidr: '172.18.0.0/16',
  gateway: '172.18.0.1',
  address: '172.18.0.254',
  mac: '02:00:00:12:00:fe',
};

/** The annotations kube-ovn's pod controller writes, the routes annotations of 1.13+, the container as declared. */
export function netnsTestPod(o: { name: string; uid?: string; line: ReleaseLine; tag: string }) {
  const provider = `${EXT.network}.${NS}.kubernetes.io`;
  const image = `docker.io/kubeovn/vpc-nat-gateway:${o.tag}`;
  const annotations: Record<string, string> = {
    'ovn.kubernetes.io/vpc_nat_gw': o.name,
    'k8s.v1.cni.cncf.io/networks': `${NS}/${EXT.network}`,
    'ovn.kubernetes.io/ip_address': LAN.address,
    'ovn.kubernetes.io/cidr': LAN.cidr,
    'ovn.kubernetes.io/gateway': LAN.gateway,
    'ovn.kubernetes.io/mac_address': LAN.mac,
    [`${provider}/ip_address`]: EXT.address,
    [`${provider}/cidr`]: EXT.cidr,
    [`${provider}/gateway`]: EXT.gateway,
    [`${provider}/mac_address`]: EXT.mac,
  };
  if (atLeast(o.line, '1.13')) {
    annotations['ovn.kubernetes.io/routes'] = JSON.stringify([{ dst: SERVICE_CIDR, gw: LAN.gateway }]);
    annotations[`${provider}/routes`] = JSON.stringify([{ dst: '0.0.0.0/0', gw: EXT.gateway }]);
  }
  const newer = atLeast(o.line, '1.15');
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: o.name,
      namespace: NS,
      ...(o.uid && { uid: o.uid }),
      labels: { 'ovn.kubernetes.io/vpc-nat-gw': 'true' },
      annotations,
    },
    spec: {
      ...(o.line === '1.12' && {
        initContainers: [
          {
            name: 'vpc-nat-gw-init',
            image,
            command: ['bash', '-c', `bash ${NAT_GATEWAY_SCRIPT} init ${SERVICE_CIDR},${LAN.gateway}`],
          },
        ],
      }),
      containers: [
        {
          name: 'vpc-nat-gw',
          image,
          command: ['bash'],
          args: ['-c', 'while true; do sleep 10000; done'],
          ...(newer && {
            env: [
              { name: 'GATEWAY_V4', value: EXT.gateway },
              { name: 'GATEWAY_V6', value: '' },
            ],
            lifecycle: { postStart: { exec: { command: ['sysctl', '-w', 'net.ipv4.ip_forward=1'] } } },
          }),
        },
      ],
    },
  };
}

/** The exec kube-ovn's controller of `line` sends: `bash -c "bash <script> <op> <rules>"` up to 1.16, argv on master. */
export function controllerExec(line: ReleaseLine, op: string, rules: string[]): string[] {
  if (line === 'master') return ['bash', NAT_GATEWAY_SCRIPT, op, ...rules];
  return ['/bin/bash', '-c', `bash ${NAT_GATEWAY_SCRIPT} ${op} ${rules.join(' ')}`];
}

/** eip-add's argument in `line`'s format: `<ip>/<len>,<gw>` on 1.12, `<ip>/<len>` since 1.13. */
export function eipAddRule(line: ReleaseLine, ip: string, prefix: number): string {
  return line === '1.12' ? `${ip}/${prefix},${EXT.gateway}` : `${ip}/${prefix}`;
}
