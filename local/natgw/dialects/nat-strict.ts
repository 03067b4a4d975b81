/**
 * The NAT rule ops of kube-ovn 1.16+: an add that finds the rule's identity taken by a different target fails
 * (exit 1, the conflict on stdout) instead of succeeding silently; deletes match the identity only (a floating IP
 * by its EIP, a DNAT rule by EIP, port and protocol) and remove the rule found in iptables-save; SNAT rules match
 * by (EIP, internal CIDR). Functions iterate over `"$@"` (master: the exec's arguments as given).
 */
import { beforeSlash, Exit, fields, grepWord, lines, type Op, type Run } from '../script.js';
import { dnatFields } from './common.js';

function saved(r: Run, chain: string, table = false): string[] {
  return lines(r.capture(table ? 'iptables-save -t nat' : 'iptables-save')).filter((l) => l.includes(chain));
}

/** Deletes one iptables-save line (`-A CHAIN …` → `iptables -t nat -D CHAIN …`). */
function deleteSaved(r: Run, line: string): void {
  r.execCmd(`iptables -t nat -D ${line.replace(/^-A /, '')}`);
}

export const floatingIpAdd: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.quoted) {
    const f = fields(rule);
    const eip = beforeSlash(f[0]);
    const internalIp = f[1] ?? '';
    const existing = saved(r, 'EXCLUSIVE_DNAT').filter((l) => grepWord(l, `-d ${eip}/32`));
    if (existing.length > 0) {
      if (existing.some((l) => grepWord(l, `--to-destination ${internalIp}`))) throw new Exit(0);
      r.echo(`eip ${eip} already bindTo rule: ${existing.join('\n')}, but expected internalIp ${internalIp}`);
      throw new Exit(1);
    }
    r.execCmd(`iptables -t nat -A EXCLUSIVE_DNAT -d ${eip} -j DNAT --to-destination ${internalIp}`);
    r.execCmd(`iptables -t nat -A EXCLUSIVE_SNAT -s ${internalIp} -j SNAT --to-source ${eip}`);
  }
};

export const floatingIpDel: Op = (r, a) => {
  r.checkInited();
  for (const eip of a.quoted) {
    const dnat = saved(r, 'EXCLUSIVE_DNAT').find((l) => grepWord(l, `-d ${eip}/32`));
    // conntrack -D -d <eip> after the DNAT rule: no connection tracking is simulated.
    if (dnat) deleteSaved(r, dnat);
    const snat = saved(r, 'EXCLUSIVE_SNAT').find((l) => grepWord(l, `--to-source ${eip}`));
    if (snat) deleteSaved(r, snat);
    r.status = 0;
  }
};

/** `grep -w -- "-s <cidr>" | grep -E -- "--to-source <eip>($| )"` over the SHARED_SNAT lines. */
export function snatMatch(all: readonly string[], eip: string, internalCidr: string): string[] {
  return all.filter(
    (l) =>
      grepWord(l, `-s ${internalCidr}`) &&
      (l.endsWith(`--to-source ${eip}`) || l.includes(`--to-source ${eip} `)),
  );
}

export const snatAdd: Op = (r, a) => {
  r.checkInited();
  const all = saved(r, 'SHARED_SNAT', true);
  for (const rule of a.quoted) {
    const [first, internalCidr = '', randomFully = ''] = fields(rule);
    const eip = beforeSlash(first);
    if (snatMatch(all, eip, internalCidr).length === 0)
      r.execCmd(
        `iptables -t nat -A SHARED_SNAT -o ${r.extIf} -s ${internalCidr} -j SNAT --to-source ${eip} ${randomFully}`,
      );
  }
};

export const snatDel: Op = (r, a) => {
  r.checkInited();
  const all = saved(r, 'SHARED_SNAT', true);
  for (const rule of a.quoted) {
    const [first, internalCidr = ''] = fields(rule);
    const match = snatMatch(all, beforeSlash(first), internalCidr)[0];
    if (match) deleteSaved(r, match);
    r.status = 0;
  }
};

function dnatIdentity(r: Run, eip: string, protocol: string, dport: string): string[] {
  return saved(r, 'SHARED_DNAT').filter(
    (l) => grepWord(l, `-d ${eip}/32`) && grepWord(l, `-p ${protocol}`) && grepWord(l, `dport ${dport}`),
  );
}

export const dnatAdd: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.quoted) {
    const d = dnatFields(rule);
    const existing = dnatIdentity(r, d.eip, d.protocol, d.dport);
    if (existing.length > 0) {
      if (existing.some((l) => grepWord(l, `destination ${d.internalIp}:${d.internalPort}`)))
        throw new Exit(0);
      r.echo(
        `dnat (${d.eip}, ${d.dport}, ${d.protocol}) already exists: ${existing.join('\n')}, but expected ${d.internalIp}:${d.internalPort}`,
      );
      throw new Exit(1);
    }
    r.execCmd(
      `iptables -t nat -A SHARED_DNAT -p ${d.protocol} -d ${d.eip} --dport ${d.dport} -j DNAT --to-destination ${d.internalIp}:${d.internalPort}`,
    );
  }
};

export const dnatDel: Op = (r, a) => {
  r.checkInited();
  for (const rule of a.quoted) {
    const d = dnatFields(rule);
    const existing = dnatIdentity(r, d.eip, d.protocol, d.dport)[0];
    // conntrack -D for the identity after the delete: no connection tracking is simulated.
    if (existing) deleteSaved(r, existing);
    r.status = 0;
  }
};
