/**
 * kube-ovn 1.16: hairpin NAT and shaping. `init` adds a HAIRPIN_SNAT chain (jumped to from SNAT_FILTER) and a
 * mangle VPC_MARK chain marking what enters from the VPC, and tries to load the ifb module; `eip-add` adds, per
 * EIP, a hairpin SNAT rule (marked traffic DNAT'd back into the VPC leaves with the EIP as its source) and points
 * the default route at `$GATEWAY_V4` with `onlink`; `eip-del` removes the rule again and finds the address with
 * `grep -w`. EIP QoS is htb shaping (qos-htb.ts), the NAT rule ops are stricter (nat-strict.ts).
 */
import { beforeSlash, type Dialect, fields, type Op, type Run } from '../script.js';
import { createChains, createJumps, deleteAddress, exitIfInitialised } from './common.js';
import { dnatAdd, dnatDel, floatingIpAdd, floatingIpDel, snatAdd, snatDel } from './nat-strict.js';
import { eipEgressQosAdd, eipEgressQosDel, eipIngressQosAdd, eipIngressQosDel } from './qos-htb.js';
import {
  announceExternalAddresses,
  defaultRouteFromEnv,
  helpOps,
  helpText,
  initInterfaces,
  readInterfaces,
  v115,
} from './v1.15.js';

function loadIfbModule(r: Run): void {
  r.echo('Loading IFB kernel module for ingress QoS support...');
  if (r.run('modprobe ifb', { quiet: true }).code === 0) {
    r.echo('IFB kernel module loaded successfully');
    return;
  }
  if (
    r
      .capture('lsmod')
      .split('\n')
      .some((l) => l.startsWith('ifb '))
  ) {
    r.echo('IFB kernel module already loaded');
    return;
  }
  r.echo('WARNING: Failed to load IFB kernel module. Ingress QoS may not work correctly.');
  r.echo('         This is expected in some container environments. The system will attempt');
  r.echo('         to create IFB devices directly, which may work if the module is built-in.');
}

const init: Op = (r, a) => {
  initInterfaces(r, a.joined);
  exitIfInitialised(r);
  r.run('iptables -t nat -N DNAT_FILTER');
  createChains(r);
  r.run('iptables -t nat -N HAIRPIN_SNAT');
  r.run('iptables -t mangle -N VPC_MARK');
  createJumps(r);
  r.run('iptables -t nat -A SNAT_FILTER -j HAIRPIN_SNAT');
  r.run('iptables -t mangle -A PREROUTING -j VPC_MARK');
  r.run(`iptables -t mangle -A VPC_MARK -i ${r.vpcIf} -j MARK --set-xmark 0x1/0x1`);
  loadIfbModule(r);
  announceExternalAddresses(r);
};

/** The per-EIP hairpin SNAT rule (without the `--random-fully` every use appends). */
export function hairpinRule(r: Run, address: string): string {
  return `-m mark --mark 0x1/0x1 -o ${r.vpcIf} -m conntrack --ctstate DNAT --ctorigdst ${address} -j SNAT --to-source ${address}`;
}

function hairpinPresent(r: Run, address: string): boolean {
  return (
    r.run(`iptables -t nat -C HAIRPIN_SNAT ${hairpinRule(r, address)} --random-fully`, { silent: true })
      .code === 0
  );
}

const eipAdd: Op = (r, a) => {
  r.checkInited();
  for (const eip of a.rules) {
    const address = beforeSlash(eip);
    r.execCmd(`ip addr replace ${eip} dev ${r.extIf}`);
    r.execCmd(`arping -I ${r.extIf} -c 3 -U ${address}`);
    if (!hairpinPresent(r, address))
      r.execCmd(`iptables -t nat -A HAIRPIN_SNAT ${hairpinRule(r, address)} --random-fully`);
  }
  defaultRouteFromEnv(r, true);
};

const eipDel: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.quoted) {
    const eip = fields(rule)[0] ?? '';
    const address = beforeSlash(eip);
    deleteAddress(r, eip);
    if (hairpinPresent(r, address))
      r.execCmd(`iptables -t nat -D HAIRPIN_SNAT ${hairpinRule(r, address)} --random-fully`);
    r.status = 0;
  }
};

export const HELP_116 = helpText([
  '  QOS_DEBUG           - Enable verbose QoS debugging output (default: false)',
]);
const help = helpOps(HELP_116);

/** The 1.16 ops master keeps. */
export const OPS_116: Readonly<Record<string, Op>> = {
  ...v115.ops,
  init,
  'eip-add': eipAdd,
  'eip-del': eipDel,
  'floating-ip-add': floatingIpAdd,
  'floating-ip-del': floatingIpDel,
  'dnat-add': dnatAdd,
  'dnat-del': dnatDel,
  'snat-add': snatAdd,
  'snat-del': snatDel,
  'eip-ingress-qos-add': eipIngressQosAdd,
  'eip-egress-qos-add': eipEgressQosAdd,
  'eip-ingress-qos-del': eipIngressQosDel,
  'eip-egress-qos-del': eipEgressQosDel,
  help: help.op,
  '--help': help.op,
  '-h': help.op,
};

export const v116: Dialect = {
  release: '1.16',
  argv: false,
  ops: OPS_116,
  silent: v115.silent,
  prelude: readInterfaces,
  unknown: help.unknown,
};
