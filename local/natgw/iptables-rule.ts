/**
 * One iptables rule of the simulated nat and mangle tables: the options the scripts write (addresses,
 * interfaces, protocol and port, `-m mark`, `-m conntrack`, the DNAT/SNAT/MARK targets), parsed with iptables'
 * messages, and printed in iptables-save's canonical order (`-s -d -i -o -p`, then the matches, then the target).
 */
import { formatInet, formatIp, networkOf, parseIp, parsePrefix } from './addr.js';
import { fail, type NatRule, type ToolResult } from './state.js';

export const IPTABLES_VERSION = 'iptables v1.8.10 (nf_tables)';

const TRY = "Try `iptables -h' or 'iptables --help' for more information.\n";
export const usageError = (message: string): ToolResult => fail(`${IPTABLES_VERSION}: ${message}\n${TRY}`, 2);

const PORT_PROTOCOLS = ['tcp', 'udp', 'sctp', 'dccp'];
const PROTOCOLS = [...PORT_PROTOCOLS, 'icmp', 'all'];
const MATCHES = [...PORT_PROTOCOLS, 'mark', 'conntrack'];

/**
 * Each rule's text after `-A <chain>`, made once: iptables-save, -S and every -C or -D print or compare every rule
 * of the table, so a gateway with a thousand EIPs printed thousands of rules for each command. Rules do not change
 * once made (completeRule freezes them); a flush or delete drops them.
 */
const rendered = new WeakMap<NatRule, string>();

export function renderRule(chain: string, r: NatRule): string {
  let text = rendered.get(r);
  if (text === undefined) {
    text = ruleText(r);
    rendered.set(r, text);
  }
  return `-A ${chain} ${text}`;
}

function ruleText(r: NatRule): string {
  const parts: string[] = [];
  if (r.src) parts.push(`-s ${formatInet(r.src)}`);
  if (r.dst) parts.push(`-d ${formatInet(r.dst)}`);
  if (r.in) parts.push(`-i ${r.in}`);
  if (r.out) parts.push(`-o ${r.out}`);
  if (r.proto) parts.push(`-p ${r.proto}`);
  if (r.dport) parts.push(`-m ${r.proto} --dport ${r.dport}`);
  if (r.mark) parts.push(`-m mark --mark ${r.mark}`);
  if (r.conntrack) {
    const { state, origDst } = r.conntrack;
    const ct = ['-m conntrack'];
    if (state) ct.push(`--ctstate ${state}`);
    if (origDst)
      ct.push(`--ctorigdst ${origDst.prefix === 32 ? formatIp(4, origDst.value) : formatInet(origDst)}`);
    parts.push(ct.join(' '));
  }
  parts.push(`-j ${r.target}`, ...r.targetArgs);
  return parts.join(' ');
}

export type Spec = Partial<NatRule> & { targetArgs: string[]; matches: string[] };

type OptionHandler = (spec: Spec, value: string, option: string) => ToolResult | undefined;

function address(spec: Spec, v: string, option: string): ToolResult | undefined {
  const inet = parsePrefix(v);
  if (inet?.family !== 4) return usageError(`host/network \`${v}' not found`);
  const net4 = { ...inet, value: networkOf(inet) };
  if (option === '-s' || option === '--source') spec.src = net4;
  else spec.dst = net4;
  return undefined;
}

function inInterface(spec: Spec, v: string): undefined {
  spec.in = v;
}

function outInterface(spec: Spec, v: string): undefined {
  spec.out = v;
}

function protocol(spec: Spec, v: string): ToolResult | undefined {
  if (!PROTOCOLS.includes(v.toLowerCase())) return usageError(`unknown protocol "${v}" specified`);
  spec.proto = v.toLowerCase();
  return undefined;
}

function match(spec: Spec, v: string): ToolResult | undefined {
  if (!MATCHES.includes(v))
    return fail(`${IPTABLES_VERSION}: Couldn't load match \`${v}':No such file or directory\n${TRY}`, 2);
  spec.matches.push(v);
  return undefined;
}

function dport(spec: Spec, v: string, option: string): ToolResult | undefined {
  const explicit = spec.matches.find((m) => PORT_PROTOCOLS.includes(m));
  if (!spec.proto || !PORT_PROTOCOLS.includes(spec.proto) || (explicit && explicit !== spec.proto))
    return usageError(`unknown option "${option}"`);
  if (!validPort(v)) return usageError(`invalid port/service \`${v}' specified`);
  spec.dport = String(Number(v));
  return undefined;
}

function mark(spec: Spec, v: string, option: string): ToolResult | undefined {
  if (!spec.matches.includes('mark')) return usageError(`unknown option "${option}"`);
  if (!/^(0x[0-9a-fA-F]+|\d+)(\/(0x[0-9a-fA-F]+|\d+))?$/.test(v)) return usageError(`Bad MARK value "${v}"`);
  spec.mark = v;
  return undefined;
}

function conntrack(spec: Spec, v: string, option: string): ToolResult | undefined {
  if (!spec.matches.includes('conntrack')) return usageError(`unknown option "${option}"`);
  const ct = spec.conntrack ?? {};
  if (option === '--ctstate') {
    if (!/^(INVALID|NEW|ESTABLISHED|RELATED|UNTRACKED|SNAT|DNAT)(,[A-Z]+)*$/.test(v))
      return usageError(`Bad ctstate "${v}"`);
    ct.state = v;
  } else {
    const inet = parsePrefix(v);
    if (inet?.family !== 4) return usageError(`host/network \`${v}' not found`);
    ct.origDst = inet;
  }
  spec.conntrack = ct;
  return undefined;
}

function jump(spec: Spec, v: string): ToolResult | undefined {
  spec.target = v;
  return undefined;
}

function natTarget(spec: Spec, v: string, option: string): ToolResult | undefined {
  const wanted = option === '--to-destination' ? 'DNAT' : 'SNAT';
  if (spec.target !== wanted) return usageError(`unknown option "${option}"`);
  const [host = '', port, extra] = v.split(':');
  if (extra !== undefined || parseIp(host)?.family !== 4) return usageError(`Bad IP address "${host}"`);
  if (port !== undefined) {
    if (!spec.proto || !PORT_PROTOCOLS.includes(spec.proto)) {
      return usageError('Need TCP, UDP, SCTP or DCCP with port specification');
    }
    if (!validPort(port)) return usageError(`Port "${port}" not valid`);
  }
  spec.targetArgs.push(option, v);
  return undefined;
}

function setMark(spec: Spec, v: string, option: string): ToolResult | undefined {
  if (spec.target !== 'MARK') return usageError(`unknown option "${option}"`);
  spec.targetArgs.push('--set-xmark', v.includes('/') ? v : `${v}/0xffffffff`);
  return undefined;
}

/** Options that take a value, by name. */
export const VALUE_OPTIONS: Record<string, OptionHandler> = {
  '-s': address,
  '--source': address,
  '-d': address,
  '--destination': address,
  '-i': inInterface,
  '--in-interface': inInterface,
  '-o': outInterface,
  '--out-interface': outInterface,
  '-p': protocol,
  '--protocol': protocol,
  '-m': match,
  '--match': match,
  '--dport': dport,
  '--destination-port': dport,
  '--mark': mark,
  '--ctstate': conntrack,
  '--ctorigdst': conntrack,
  '-j': jump,
  '--jump': jump,
  '--to-destination': natTarget,
  '--to-source': natTarget,
  '--set-xmark': setMark,
  '--set-mark': setMark,
};

/** `--random-fully`, `--random`: flags of the NAT targets. */
export function natFlag(spec: Spec, option: string): ToolResult | undefined {
  if (spec.target !== 'SNAT' && spec.target !== 'MASQUERADE' && spec.target !== 'DNAT') {
    return usageError(`unknown option "${option}"`);
  }
  spec.targetArgs.push(option);
  return undefined;
}

function validPort(v: string): boolean {
  return /^\d{1,5}$/.test(v) && Number(v) <= 65535;
}

/** A rule frozen with the parts its text is made of (each made for it by the parse): renderRule keeps the text. */
function frozen(rule: NatRule): NatRule {
  for (const part of [rule.src, rule.dst, rule.conntrack?.origDst, rule.conntrack, rule.targetArgs])
    if (part) Object.freeze(part);
  return Object.freeze(rule);
}

/** The rule a complete spec describes, or the error iptables gives for a missing target option. */
export function completeRule(spec: Spec): NatRule | ToolResult {
  if (!spec.target) return usageError('a target (-j) is required by the simulation');
  if (spec.target === 'DNAT' && !spec.targetArgs.includes('--to-destination'))
    return usageError('DNAT: needs --to-destination');
  if (spec.target === 'SNAT' && !spec.targetArgs.includes('--to-source'))
    return usageError('SNAT: needs --to-source');
  return frozen({
    ...(spec.src ? { src: spec.src } : {}),
    ...(spec.dst ? { dst: spec.dst } : {}),
    ...(spec.in ? { in: spec.in } : {}),
    ...(spec.out ? { out: spec.out } : {}),
    ...(spec.proto ? { proto: spec.proto } : {}),
    ...(spec.dport ? { dport: spec.dport } : {}),
    ...(spec.mark ? { mark: spec.mark } : {}),
    ...(spec.conntrack ? { conntrack: spec.conntrack } : {}),
    target: spec.target,
    targetArgs: spec.targetArgs,
  });
}
