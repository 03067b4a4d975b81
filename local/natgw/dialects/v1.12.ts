/**
 * kube-ovn 1.12 (v1.12.35): the gateway's routes are the script's job. `init <svcCIDR>,<lanGw>` brings net1 up
 * with ARP off and routes the service CIDR via eth0; `eip-add <ip>/<len>,<gw>` puts the address on net1, turns ARP
 * on, points the default route at `<gw>` and runs duplicate address detection (`arping -D`) then a gratuitous
 * ARP (`arping -A`); `ext-subnet-route-add <cidr>,<gw>` sets the default route too. Messages go to stderr.
 */
import { beforeSlash, type Dialect, fields, type Op, SCRIPT_PATH } from '../script.js';
import {
  createChains,
  createJumps,
  dnatAdd,
  dnatDel,
  eipDel,
  exitIfInitialised,
  floatingIpAdd,
  floatingIpDel,
  getIptablesVersion,
  notSimulated,
  snatAdd,
  snatDel,
  subnetRouteAdd,
  subnetRouteDel,
} from './common.js';
import { eipEgressQosAdd, eipEgressQosDel, eipIngressQosAdd, eipIngressQosDel } from './qos-police.js';

const init: Op = (r, a) => {
  exitIfInitialised(r);
  r.run('iptables -t nat -N DNAT_FILTER');
  r.run('ip link set net1 up');
  r.run('ip link set dev net1 arp off');
  createChains(r);
  createJumps(r);
  r.status = 0;
  for (const rule of a.rules) {
    const [cidr = '', nextHop = ''] = fields(rule);
    r.execCmd(`ip route replace ${cidr} via ${nextHop} dev eth0`);
  }
};

const eipAdd: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const [eip = '', gateway = ''] = fields(rule);
    const address = beforeSlash(eip);
    // eip_network / eip_prefix: values the script computes and never uses; only ipcalc's complaints show.
    r.capture(`ipcalc -n ${eip}`);
    r.capture(`ipcalc -p ${eip}`);
    r.execCmd(`ip addr replace ${eip} dev net1`);
    r.run('ip link set dev net1 arp on');
    r.execCmd(`ip route replace default via ${gateway} dev net1`);
    r.grep('ip route', (l) => l.includes(`default via ${gateway} dev net1`));
    r.execCmd(`arping -I net1 -c 3 -D ${address}`);
    r.execCmd(`arping -I net1 -c 3 -A ${address} `);
  }
};

const extSubnetRouteAdd: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const [, nextHop = ''] = fields(rule);
    r.execCmd(`ip route replace default via ${nextHop} dev net1`);
    // (the script sleeps one second here)
    r.grep('ip route', (l) => l.includes(`default via ${nextHop} dev net1`));
  }
};

/** The ops every release before 1.15 shares with 1.12 unchanged. */
export const NAT_OPS: Readonly<Record<string, Op>> = {
  'subnet-route-add': subnetRouteAdd,
  'subnet-route-del': subnetRouteDel,
  'eip-del': eipDel,
  'dnat-add': dnatAdd,
  'dnat-del': dnatDel,
  'snat-add': snatAdd,
  'snat-del': snatDel,
  'floating-ip-add': floatingIpAdd,
  'floating-ip-del': floatingIpDel,
  'get-iptables-version': getIptablesVersion,
  'eip-ingress-qos-add': eipIngressQosAdd,
  'eip-egress-qos-add': eipEgressQosAdd,
  'eip-ingress-qos-del': eipIngressQosDel,
  'eip-egress-qos-del': eipEgressQosDel,
  'qos-add': notSimulated('qos-add'),
  'qos-del': notSimulated('qos-del'),
};

export const USAGE = `Usage: ${SCRIPT_PATH} [init|subnet-route-add|subnet-route-del|eip-add|eip-del|floating-ip-add|floating-ip-del|dnat-add|dnat-del|snat-add|snat-del] ...`;

export const v112: Dialect = {
  release: '1.12',
  argv: false,
  ops: {
    init,
    'eip-add': eipAdd,
    'ext-subnet-route-add': extSubnetRouteAdd,
    'ext-subnet-route-del': (r) => r.checkInited(),
    ...NAT_OPS,
  },
  silent: new Set(),
  unknown: (r) => r.echo(USAGE),
};
