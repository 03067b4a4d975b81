/**
 * kube-ovn's dist/images/vpcnatgateway/nat-gateway.sh as shipped with kube-ovn 1.12, re-expressed over the
 * simulated tools: the same ops, argument formats (comma fields, several space-separated rules per call), echo
 * lines, messages and exit codes. Commands are built as strings and word-split exactly where the script lets
 * bash do it, then handed to the simulated tool, so malformed arguments fail the way the real tools fail.
 * Nothing is ever evaluated.
 *
 * Deliberate differences from the script (local/natgw/README.md): eip-del and the tc filter deletion match the
 * address exactly (docs/kube-ovn-differences.md#simulator-matches-addresses-exactly); `sleep` and `ipcalc` lines are skipped; `conntrack -D` is a no-op.
 */
import { formatIp, type NetState, parsePrefix, type ToolResult, words } from './state.js';

export type Shell = (argv: string[]) => ToolResult;

/** `exit N` inside the script. */
class Exit {
  constructor(readonly code: number) {}
}

export const SCRIPT_PATH = '/kube-ovn/nat-gateway.sh';

export const OPS = [
  'init',
  'subnet-route-add',
  'subnet-route-del',
  'ext-subnet-route-add',
  'ext-subnet-route-del',
  'eip-add',
  'eip-del',
  'dnat-add',
  'dnat-del',
  'snat-add',
  'snat-del',
  'floating-ip-add',
  'floating-ip-del',
  'get-iptables-version',
  'eip-ingress-qos-add',
  'eip-egress-qos-add',
  'eip-ingress-qos-del',
  'eip-egress-qos-del',
] as const;

/** grep -w: the pattern occurs delimited by non-word characters (or the line ends). */
function grepWord(line: string, pattern: string): boolean {
  if (pattern === '') return false;
  const isWord = (c: string | undefined): boolean => c !== undefined && /[A-Za-z0-9_]/.test(c);
  for (let at = line.indexOf(pattern); at >= 0; at = line.indexOf(pattern, at + 1)) {
    if (!isWord(line[at - 1]) && !isWord(line[at + pattern.length])) return true;
  }
  return false;
}

/** `arr=(${rule//,/ })`: comma fields, empty ones dropped by word splitting. */
const fields = (rule: string): string[] => words(rule.replaceAll(',', ' '));
/** `x=(${v//\// })` then `$x`: the part before the first slash. */
const beforeSlash = (v: string | undefined): string => words((v ?? '').replaceAll('/', ' '))[0] ?? '';
const lines = (text: string): string[] => text.split('\n').filter((l) => l !== '');

class Run {
  out = '';
  err = '';
  /** Exit status of the last command, which becomes the script's status when it runs off the end. */
  status = 0;

  constructor(
    private readonly sh: Shell,
    readonly net: NetState,
  ) {}

  echo(text: string): void {
    this.out += `${text}\n`;
  }

  /** A plain command: its output goes to the script's output. */
  run(cmdline: string, opts: { quiet?: boolean } = {}): ToolResult {
    const r = this.sh(words(cmdline));
    this.out += r.out;
    if (!opts.quiet) this.err += r.err;
    this.status = r.code;
    return r;
  }

  /** `$(cmd)`: stdout captured, stderr still reaches the script's stderr. */
  capture(cmdline: string): string {
    const r = this.sh(words(cmdline));
    this.err += r.err;
    return r.out;
  }

  /** `cmd | grep …`: prints the matching lines; true if any matched. */
  grep(cmdline: string, keep: (line: string) => boolean): boolean {
    const hit = lines(this.capture(cmdline)).filter(keep);
    for (const l of hit) this.echo(l);
    this.status = hit.length > 0 ? 0 : 1;
    return hit.length > 0;
  }

  /** exec_cmd: on failure prints `failed to exec "<cmd>"` (stdout, in this era) and exits with its code. */
  execCmd(cmdline: string): void {
    const r = this.run(cmdline);
    if (r.code !== 0) {
      this.echo(`failed to exec "${cmdline}"`);
      throw new Exit(r.code);
    }
  }

  /** exec_cmd inside a pipeline's subshell: the failure ends the subshell only. */
  execCmdInSubshell(cmdline: string): number {
    try {
      this.execCmd(cmdline);
      return 0;
    } catch (e) {
      if (e instanceof Exit) return e.code;
      throw e;
    }
  }

  checkInited(): void {
    const found = this.grep(
      'iptables-save -t nat',
      (l) => l.includes('SNAT_FILTER') && l.includes('SHARED_SNAT'),
    );
    if (!found) {
      this.echo('nat gateway not inited');
      throw new Exit(1);
    }
  }
}

export function runScript(sh: Shell, net: NetState, args: readonly string[]): ToolResult {
  const [opt = '', ...rest] = args;
  const rules = rest.join(' ');
  const list = words(rules);
  const r = new Run(sh, net);
  try {
    const op = OPS.find((o) => o === opt);
    if (!op) {
      r.echo(
        `Usage: ${SCRIPT_PATH} [init|subnet-route-add|subnet-route-del|eip-add|eip-del|floating-ip-add|floating-ip-del|dnat-add|dnat-del|snat-add|snat-del] ...`,
      );
      throw new Exit(1);
    }
    r.echo(`${op} ${rules}`);
    r.status = 0;
    HANDLERS[op](r, list);
    return { out: r.out, err: r.err, code: r.status };
  } catch (e) {
    if (e instanceof Exit) return { out: r.out, err: r.err, code: e.code };
    throw e;
  }
}

const HANDLERS: Record<(typeof OPS)[number], (r: Run, rules: string[]) => void> = {
  init,
  'subnet-route-add': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const [cidr = '', nextHop = ''] = fields(rule);
      r.execCmd(`ip route replace ${cidr} via ${nextHop} dev eth0`);
    }
  },
  'subnet-route-del': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const [cidr = ''] = fields(rule);
      r.execCmd(`ip route del ${cidr} dev eth0`);
    }
  },
  'ext-subnet-route-add': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const [, nextHop = ''] = fields(rule);
      r.execCmd(`ip route replace default via ${nextHop} dev net1`);
      // (the script sleeps one second here)
      r.grep('ip route', (l) => l.includes(`default via ${nextHop} dev net1`));
    }
  },
  'ext-subnet-route-del': (r) => r.checkInited(),
  'eip-add': addEip,
  'eip-del': delEip,
  'floating-ip-add': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const f = fields(rule);
      const eip = beforeSlash(f[0]);
      const internalIp = f[1] ?? '';
      if (fipExists(r, eip)) throw new Exit(0);
      r.execCmd(`iptables -t nat -A EXCLUSIVE_DNAT -d ${eip} -j DNAT --to-destination ${internalIp}`);
      r.execCmd(`iptables -t nat -A EXCLUSIVE_SNAT -s ${internalIp} -j SNAT --to-source ${eip}`);
    }
  },
  'floating-ip-del': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const f = fields(rule);
      const eip = beforeSlash(f[0]);
      const internalIp = f[1] ?? '';
      if (fipExists(r, eip)) {
        r.execCmd(`iptables -t nat -D EXCLUSIVE_DNAT -d ${eip} -j DNAT --to-destination ${internalIp}`);
        r.execCmd(`iptables -t nat -D EXCLUSIVE_SNAT -s ${internalIp} -j SNAT --to-source ${eip}`);
        // conntrack -D -d <eip> 2>/dev/nul || true: no connection tracking is simulated.
      }
      r.status = 0;
    }
  },
  'snat-add': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const [first, internalCidr = '', randomFully = ''] = fields(rule);
      const eip = beforeSlash(first);
      if (snatMatches(r, eip, internalCidr, true).length > 0) throw new Exit(0);
      r.execCmd(
        `iptables -t nat -A SHARED_SNAT -o net1 -s ${internalCidr} -j SNAT --to-source ${eip} ${randomFully}`,
      );
    }
  },
  'snat-del': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const [first, internalCidr = ''] = fields(rule);
      const eip = beforeSlash(first);
      const match = snatMatches(r, eip, internalCidr, false);
      if (match.length > 0) {
        // ruleMatch=$(echo $ruleMatch | sed 's/-A //'): the lines joined by spaces, the first "-A " dropped.
        r.execCmd(`iptables -t nat -D ${match.join(' ').replace('-A ', '')}`);
      }
      r.status = 0;
    }
  },
  'dnat-add': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const d = dnatFields(rule);
      if (dnatExists(r, d, true)) throw new Exit(0);
      r.execCmd(
        `iptables -t nat -A SHARED_DNAT -p ${d.protocol} -d ${d.eip} --dport ${d.dport} -j DNAT --to-destination ${d.internalIp}:${d.internalPort}`,
      );
    }
  },
  'dnat-del': (r, rules) => {
    r.checkInited();
    for (const rule of rules) {
      const d = dnatFields(rule);
      if (dnatExists(r, d, true)) {
        r.execCmd(
          `iptables -t nat -D SHARED_DNAT -p ${d.protocol} -d ${d.eip} --dport ${d.dport} -j DNAT --to-destination ${d.internalIp}:${d.internalPort}`,
        );
      }
      r.status = 0;
    }
  },
  'get-iptables-version': (r) => r.execCmd('iptables --version'),
  'eip-ingress-qos-add': (r, rules) => qosAdd(r, rules, 'dst'),
  'eip-egress-qos-add': (r, rules) => qosAdd(r, rules, 'src'),
  'eip-ingress-qos-del': (r, rules) => {
    for (const rule of rules) {
      const ip = beforeSlash(fields(rule)[0]);
      const qdiscId = ingressQdiscId(r);
      r.status = qdiscId ? deleteTcU32Filter(r, 'net1', qdiscId, ip, 'dst') : 0;
    }
  },
  'eip-egress-qos-del': (r, rules) => {
    for (const rule of rules) {
      const ip = beforeSlash(fields(rule)[0]);
      r.status = deleteTcU32Filter(r, 'net1', '1:0', ip, 'src');
    }
  },
};

function init(r: Run, rules: string[]): void {
  // "run once is enough": iptables-save | grep DNAT_FILTER && exit 0
  if (r.grep('iptables-save', (l) => l.includes('DNAT_FILTER'))) throw new Exit(0);
  r.run('iptables -t nat -N DNAT_FILTER');
  r.run('ip link set net1 up');
  r.run('ip link set dev net1 arp off');
  for (const chain of ['SNAT_FILTER', 'EXCLUSIVE_DNAT', 'EXCLUSIVE_SNAT', 'SHARED_DNAT', 'SHARED_SNAT']) {
    r.run(`iptables -t nat -N ${chain}`);
  }
  r.run('iptables -t nat -A PREROUTING -j DNAT_FILTER');
  r.run('iptables -t nat -A DNAT_FILTER -j EXCLUSIVE_DNAT');
  r.run('iptables -t nat -A DNAT_FILTER -j SHARED_DNAT');
  r.run('iptables -t nat -A POSTROUTING -j SNAT_FILTER');
  r.run('iptables -t nat -A SNAT_FILTER -j EXCLUSIVE_SNAT');
  r.run('iptables -t nat -A SNAT_FILTER -j SHARED_SNAT');
  r.status = 0;
  for (const rule of rules) {
    const [cidr = '', nextHop = ''] = fields(rule);
    r.execCmd(`ip route replace ${cidr} via ${nextHop} dev eth0`);
  }
}

function addEip(r: Run, rules: string[]): void {
  r.checkInited();
  for (const rule of rules) {
    const [eip = '', gateway = ''] = fields(rule);
    const withoutPrefix = beforeSlash(eip);
    // (ipcalc -n / -p fill variables the script never uses)
    r.execCmd(`ip addr replace ${eip} dev net1`);
    r.run('ip link set dev net1 arp on');
    r.execCmd(`ip route replace default via ${gateway} dev net1`);
    r.grep('ip route', (l) => l.includes(`default via ${gateway} dev net1`));
    r.execCmd(`arping -I net1 -c 3 -D ${withoutPrefix}`);
  }
}

/**
 * del_eip. The script greps `ip addr show net1` for the argument as a regex substring, so "/24" (an empty
 * status.ip) matches every /24 address including the pod's own. Here the address must match exactly, and
 * the prefix too when one is given.
 */
function delEip(r: Run, rules: string[]): void {
  r.checkInited();
  for (const rule of rules) {
    const [eip = ''] = fields(rule);
    const wanted = parsePrefix(eip);
    const net1 = r.net.link('net1');
    const found = wanted
      ? net1?.addresses.find(
          (a) =>
            a.family === wanted.family &&
            a.value === wanted.value &&
            (!eip.includes('/') || a.prefix === wanted.prefix),
        )
      : undefined;
    if (found) r.execCmd(`ip addr del ${formatIp(found.family, found.value)}/${found.prefix} dev net1`);
    r.status = 0;
  }
}

function fipExists(r: Run, eip: string): boolean {
  return r.grep(
    'iptables-save',
    (l) => l.includes('EXCLUSIVE_DNAT') && grepWord(l, `-d ${eip}/32`) && l.includes('destination'),
  );
}

function snatMatches(r: Run, eip: string, internalCidr: string, print: boolean): string[] {
  const hit = lines(r.capture('iptables-save')).filter(
    (l) => l.includes('SHARED_SNAT') && l.includes(`-s ${internalCidr}`) && l.includes(`source ${eip}`),
  );
  if (print) for (const l of hit) r.echo(l);
  return hit;
}

interface Dnat {
  eip: string;
  dport: string;
  protocol: string;
  internalIp: string;
  internalPort: string;
}

function dnatFields(rule: string): Dnat {
  const [first, dport = '', protocol = '', internalIp = '', internalPort = ''] = fields(rule);
  return { eip: beforeSlash(first), dport, protocol, internalIp, internalPort };
}

function dnatExists(r: Run, d: Dnat, print: boolean): boolean {
  const hit = lines(r.capture('iptables-save')).filter(
    (l) =>
      l.includes('SHARED_DNAT') &&
      grepWord(l, `-d ${d.eip}/32`) &&
      l.includes(`p ${d.protocol}`) &&
      grepWord(l, `dport ${d.dport}`) &&
      grepWord(l, `destination ${d.internalIp}:${d.internalPort}`),
  );
  if (print) for (const l of hit) r.echo(l);
  return hit.length > 0;
}

function ingressQdiscId(r: Run): string {
  // qdisc_id=$(tc qdisc show dev net1 ingress | awk '{print $3}')
  return lines(r.capture('tc qdisc show dev net1 ingress'))
    .map((l) => words(l)[2] ?? '')
    .join('\n');
}

function qosAdd(r: Run, rules: string[], direction: 'src' | 'dst'): void {
  for (const rule of rules) {
    const f = fields(rule);
    const ip = beforeSlash(f[0]);
    const [priority = '', rate = '', burst = ''] = f.slice(1);
    let qdiscId: string;
    if (direction === 'dst') {
      r.run('tc qdisc add dev net1 ingress', { quiet: true });
      qdiscId = ingressQdiscId(r);
    } else {
      qdiscId = '1:0';
      r.run(`tc qdisc add dev net1 root handle ${qdiscId} htb`, { quiet: true });
    }
    // del old filter: tc -p -s -d filter show … | grep -w <ip>
    if (r.grep(`tc -p -s -d filter show dev net1 parent ${qdiscId}`, (l) => grepWord(l, ip))) {
      deleteTcU32Filter(r, 'net1', qdiscId, ip, direction);
    }
    r.execCmd(
      `tc filter add dev net1 parent ${qdiscId} protocol ip prio ${priority} u32 match ip ${direction} ${ip} police rate ${rate}Mbit burst ${burst}Mb drop flowid :1`,
    );
  }
}

/**
 * delete_tc_u32_filter: finds the first u32 filter under `qdiscId` matching `<direction> <ip>` and deletes it
 * by prio and handle. The script matches the text "dst 10.0.0.5" as a substring, which also hits 10.0.0.50;
 * here the address must be equal. Returns the status of its pipeline subshell.
 */
function deleteTcU32Filter(
  r: Run,
  dev: string,
  qdiscId: string,
  ip: string,
  direction: 'src' | 'dst',
): number {
  const listing = r.capture(`tc -p -s -d filter show dev ${dev} parent ${qdiscId}`);
  const parent = qdiscId === 'ingress' ? 'ffff:' : qdiscId.replace(/:0*$/, ':');
  const q = r.net.qdiscs.find((x) => x.handle === parent.replace(/^0+(?=.)/, ''));
  if (!q || listing === '') return 0;
  for (const p of [...q.prios].sort((a, b) => a.prio - b.prio)) {
    for (const n of p.nodes) {
      if (n.direction !== direction || formatIp(n.match.family, n.match.value) !== ip) continue;
      r.echo(`match IP ${direction} ${formatIp(n.match.family, n.match.value)}/${n.match.prefix}`);
      return r.execCmdInSubshell(
        `tc filter del dev ${dev} parent ${qdiscId} protocol ip prio ${p.prio} handle ${n.handle} u32`,
      );
    }
  }
  return 0;
}
