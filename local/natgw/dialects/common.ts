/**
 * The ops every release's nat-gateway.sh has in the same shape (1.16 changed the NAT rule ops: nat-strict.ts):
 * routes via the VPC interface, floating IPs, DNAT and SNAT rules, eip-del, the iptables version, and the chains
 * `init` creates. They use the run's interfaces, which are fixed before 1.15 and come from the env file since.
 */
import { formatIp, parsePrefix } from '../addr.js';
import { beforeSlash, Exit, fields, grepWord, lines, type Op, type Run } from '../script.js';

export const subnetRouteAdd: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const [cidr = '', nextHop = ''] = fields(rule);
    r.execCmd(`ip route replace ${cidr} via ${nextHop} dev ${r.vpcIf}`);
  }
};

export const subnetRouteDel: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const [cidr = ''] = fields(rule);
    r.execCmd(`ip route del ${cidr} dev ${r.vpcIf}`);
  }
};

export const getIptablesVersion: Op = (r) => r.execCmd('iptables --version');

/** The nat chains every release's init creates after DNAT_FILTER (its "init once" flag). */
export function createChains(r: Run): void {
  for (const chain of ['SNAT_FILTER', 'EXCLUSIVE_DNAT', 'EXCLUSIVE_SNAT', 'SHARED_DNAT', 'SHARED_SNAT']) {
    r.run(`iptables -t nat -N ${chain}`);
  }
}

export function createJumps(r: Run): void {
  r.run('iptables -t nat -A PREROUTING -j DNAT_FILTER');
  r.run('iptables -t nat -A DNAT_FILTER -j EXCLUSIVE_DNAT');
  r.run('iptables -t nat -A DNAT_FILTER -j SHARED_DNAT');
  r.run('iptables -t nat -A POSTROUTING -j SNAT_FILTER');
  r.run('iptables -t nat -A SNAT_FILTER -j EXCLUSIVE_SNAT');
  r.run('iptables -t nat -A SNAT_FILTER -j SHARED_SNAT');
}

/** "run once is enough": `iptables-save | grep DNAT_FILTER && exit 0`. */
export function exitIfInitialised(r: Run): void {
  if (r.grep('iptables-save', (l) => l.includes('DNAT_FILTER'))) throw new Exit(0);
}

/**
 * del_eip. Before 1.16 the script greps `ip addr show <ext>` for the argument as a regex substring, so "/24" (an
 * empty status.ip) matches every /24 address including the pod's own; 1.16 greps with -w, which leaves that case
 * matching nothing. Here the address must match exactly, and the prefix too when one is given.
 */
export function deleteAddress(r: Run, eip: string): void {
  const wanted = parsePrefix(eip);
  const found = wanted
    ? r.net
        .link(r.extIf)
        ?.addresses.find(
          (a) =>
            a.family === wanted.family &&
            a.value === wanted.value &&
            (!eip.includes('/') || a.prefix === wanted.prefix),
        )
    : undefined;
  if (found) r.execCmd(`ip addr del ${formatIp(found.family, found.value)}/${found.prefix} dev ${r.extIf}`);
  r.status = 0;
}

export const eipDel: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) deleteAddress(r, fields(rule)[0] ?? '');
};

// ---------------------------------------------------------------- NAT rules, 1.12–1.15

function fipExists(r: Run, eip: string): boolean {
  return r.grep(
    'iptables-save',
    (l) => l.includes('EXCLUSIVE_DNAT') && grepWord(l, `-d ${eip}/32`) && l.includes('destination'),
  );
}

export const floatingIpAdd: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const f = fields(rule);
    const eip = beforeSlash(f[0]);
    const internalIp = f[1] ?? '';
    if (fipExists(r, eip)) throw new Exit(0);
    r.execCmd(`iptables -t nat -A EXCLUSIVE_DNAT -d ${eip} -j DNAT --to-destination ${internalIp}`);
    r.execCmd(`iptables -t nat -A EXCLUSIVE_SNAT -s ${internalIp} -j SNAT --to-source ${eip}`);
  }
};

export const floatingIpDel: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const f = fields(rule);
    const eip = beforeSlash(f[0]);
    const internalIp = f[1] ?? '';
    if (fipExists(r, eip)) {
      r.execCmd(`iptables -t nat -D EXCLUSIVE_DNAT -d ${eip} -j DNAT --to-destination ${internalIp}`);
      r.execCmd(`iptables -t nat -D EXCLUSIVE_SNAT -s ${internalIp} -j SNAT --to-source ${eip}`);
      // conntrack -D -d <eip> 2>/dev/null || true: no connection tracking is simulated.
    }
    r.status = 0;
  }
};

function snatMatches(r: Run, eip: string, internalCidr: string, print: boolean): string[] {
  const hit = lines(r.capture('iptables-save')).filter(
    (l) => l.includes('SHARED_SNAT') && l.includes(`-s ${internalCidr}`) && l.includes(`source ${eip}`),
  );
  if (print) for (const l of hit) r.echo(l);
  return hit;
}

export const snatAdd: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const [first, internalCidr = '', randomFully = ''] = fields(rule);
    const eip = beforeSlash(first);
    if (snatMatches(r, eip, internalCidr, true).length > 0) throw new Exit(0);
    r.execCmd(
      `iptables -t nat -A SHARED_SNAT -o ${r.extIf} -s ${internalCidr} -j SNAT --to-source ${eip} ${randomFully}`,
    );
  }
};

export const snatDel: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const [first, internalCidr = ''] = fields(rule);
    const match = snatMatches(r, beforeSlash(first), internalCidr, false);
    // ruleMatch=$(echo $ruleMatch | sed 's/-A //'): the lines joined by spaces, the first "-A " dropped.
    if (match.length > 0) r.execCmd(`iptables -t nat -D ${match.join(' ').replace('-A ', '')}`);
    r.status = 0;
  }
};

interface Dnat {
  eip: string;
  dport: string;
  protocol: string;
  internalIp: string;
  internalPort: string;
}

export function dnatFields(rule: string): Dnat {
  const [first, dport = '', protocol = '', internalIp = '', internalPort = ''] = fields(rule);
  return { eip: beforeSlash(first), dport, protocol, internalIp, internalPort };
}

function dnatExists(r: Run, d: Dnat): boolean {
  return r.grep(
    'iptables-save',
    (l) =>
      l.includes('SHARED_DNAT') &&
      grepWord(l, `-d ${d.eip}/32`) &&
      l.includes(`p ${d.protocol}`) &&
      grepWord(l, `dport ${d.dport}`) &&
      grepWord(l, `destination ${d.internalIp}:${d.internalPort}`),
  );
}

const dnatRule = (d: Dnat): string =>
  `SHARED_DNAT -p ${d.protocol} -d ${d.eip} --dport ${d.dport} -j DNAT --to-destination ${d.internalIp}:${d.internalPort}`;

export const dnatAdd: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const d = dnatFields(rule);
    if (dnatExists(r, d)) throw new Exit(0);
    r.execCmd(`iptables -t nat -A ${dnatRule(d)}`);
  }
};

export const dnatDel: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.rules) {
    const d = dnatFields(rule);
    if (dnatExists(r, d)) r.execCmd(`iptables -t nat -D ${dnatRule(d)}`);
    r.status = 0;
  }
};

/** An op the real script has and the simulation does not model (NAT gateway QoS, nft share DNAT). */
export function notSimulated(op: string): Op {
  return (r) => {
    r.warn(`nat gateway simulator: ${op} is not simulated`);
    throw new Exit(70);
  };
}
