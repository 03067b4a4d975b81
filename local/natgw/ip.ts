/**
 * `ip` (iproute2) over the simulated namespace: `addr` and `link` here, `route` in ip-route.ts, with the output
 * formats and the error messages and exit codes of the real tool for the cases the scripts and a person at a
 * shell reach.
 */
import { formatInet, formatIp, type Inet, maskOf, networkOf, parsePrefix, sameInet } from './addr.js';
import { route } from './ip-route.js';
import { type Address, fail, type Link, macFrom, type NetState, ok, type ToolResult } from './state.js';

/** iproute2's `matches(word, full)`: the word is a non-empty prefix of the full keyword. */
const matches = (word: string | undefined, full: string): boolean =>
  word !== undefined && word.length > 0 && full.startsWith(word);

export interface IpFlags {
  oneline: boolean;
  family?: 4 | 6;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
export function ip(net: NetState, argv: readonly string[]): ToolResult {
  const flags: IpFlags = { oneline: false };
  let i = 0;
  for (; i < argv.length && argv[i]?.startsWith('-'); i++) {
    const f = argv[i];
    if (f === '-o' || f === '-oneline') flags.oneline = true;
    else if (f === '-4') flags.family = 4;
    else if (f === '-6') flags.family = 6;
    else if (f === '-d' || f === '-details' || f === '-s' || f === '-stats') {
      // accepted; nothing extra is modelled
    } else return fail(`Option "${f}" is unknown, try "ip -help".\n`, 255);
  }
  const object = argv[i];
  const rest = argv.slice(i + 1);
  if (object === undefined) return fail(USAGE, 255);
  if (matches(object, 'address')) return addr(net, rest, flags);
  if (matches(object, 'link')) return link(net, rest);
  if (matches(object, 'route')) return route(net, rest, flags);
  return fail(`Object "${object}" is unknown, try "ip help".\n`, 1);
}

const USAGE =
  'Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }\n' +
  '       ip [ -force ] -batch filename\n' +
  'where  OBJECT := { address | link | route | ... }\n';

// ---------------------------------------------------------------- ip addr

function addr(net: NetState, args: readonly string[], flags: IpFlags): ToolResult {
  const [cmd, ...rest] = args;
  if (cmd === undefined || matches(cmd, 'list') || matches(cmd, 'show') || cmd === 'lst') {
    return addrShow(net, rest, flags);
  }
  if (matches(cmd, 'add')) return addrModify(net, rest, 'add');
  if (matches(cmd, 'replace')) return addrModify(net, rest, 'replace');
  if (matches(cmd, 'delete')) return addrModify(net, rest, 'del');
  return fail(`Command "${cmd}" is unknown, try "ip address help".\n`, 255);
}

function deviceArg(args: readonly string[]): { dev?: string; error?: ToolResult } {
  let dev: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') {
      dev = args[++i];
      if (dev === undefined) return { error: fail('Command line is not complete. Try option "help"\n', 255) };
    } else if (dev === undefined) dev = a;
    else return { error: fail(`Either "dev" is duplicate, or "${a}" is a garbage.\n`, 1) };
  }
  return { dev };
}

function addrShow(net: NetState, args: readonly string[], flags: IpFlags): ToolResult {
  const { dev, error } = deviceArg(args);
  if (error) return error;
  if (dev !== undefined && !net.link(dev)) return fail(`Device "${dev}" does not exist.\n`, 1);
  const links = [...net.links.values()].filter((l) => dev === undefined || l.name === dev);
  const lines: string[] = [];
  for (const l of links) {
    const secondary = secondaries(l);
    const addrs = l.addresses
      .map((a, idx) => ({ a, secondary: secondary[idx] ?? false }))
      .filter(({ a }) => flags.family === undefined || a.family === flags.family);
    if (flags.oneline) {
      for (const { a, secondary } of addrs) {
        lines.push(
          `${l.index}: ${l.name}    ${inetLine(l, a, secondary)}\\       valid_lft forever preferred_lft forever`,
        );
      }
      continue;
    }
    if (flags.family !== undefined && addrs.length === 0) continue;
    lines.push(...linkHeader(net, l, false));
    for (const { a, secondary } of addrs) {
      lines.push(`    ${inetLine(l, a, secondary)}`, '       valid_lft forever preferred_lft forever');
    }
  }
  return ok(lines.map((s) => `${s}\n`).join(''));
}

/** An address is secondary when an earlier one on the link has the same network and prefix length. */
function secondaries(l: Link): boolean[] {
  const seen = new Set<string>();
  return l.addresses.map((a) => {
    const key = `${a.family}/${a.prefix}/${networkOf(a)}`;
    if (seen.has(key)) return true;
    seen.add(key);
    return false;
  });
}

function inetLine(l: Link, a: Address, secondary: boolean): string {
  const fam = a.family === 4 ? 'inet' : 'inet6';
  const brd =
    a.brd && a.family === 4 && a.prefix < 31
      ? ` brd ${formatIp(4, networkOf(a) | (maskOf(4, a.prefix) ^ 0xffffffffn))}`
      : '';
  const scope = l.name === 'lo' ? 'host' : 'global';
  const tail = a.family === 4 ? ` ${l.name}` : '';
  return `${fam} ${formatInet(a)}${brd} scope ${scope}${secondary ? ' secondary' : ''}${tail}`;
}

function linkFlags(l: Link): string[] {
  if (l.name === 'lo') return ['LOOPBACK', ...(l.up ? ['UP', 'LOWER_UP'] : [])];
  return [
    'BROADCAST',
    ...(l.kind ? [] : ['MULTICAST']),
    ...(l.arp ? [] : ['NOARP']),
    ...(l.up ? ['UP', 'LOWER_UP'] : []),
  ];
}

function linkHeader(net: NetState, l: Link, modeLine: boolean): string[] {
  const root = net.qdiscs.find((q) => q.dev === l.name && q.parent === 'root');
  const qdisc = root ? root.kind : l.kind && !l.up ? 'noop' : 'noqueue';
  const state = l.name === 'lo' || (l.kind && l.up) ? 'UNKNOWN' : l.up ? 'UP' : 'DOWN';
  const mode = modeLine ? ' mode DEFAULT' : '';
  const qlen = l.name === 'lo' ? ' qlen 1000' : l.txqueuelen !== undefined ? ` qlen ${l.txqueuelen}` : '';
  let lladdr = `    link/ether ${l.mac} brd ff:ff:ff:ff:ff:ff${l.kind ? '' : ' link-netnsid 0'}`;
  if (l.name === 'lo') lladdr = '    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00';
  return [
    `${l.index}: ${l.name}${l.peer}: <${linkFlags(l).join(',')}> mtu ${l.mtu} qdisc ${qdisc} state ${state}${mode} group default${qlen}`,
    lladdr,
  ];
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function addrModify(net: NetState, args: readonly string[], op: 'add' | 'replace' | 'del'): ToolResult {
  let local: string | undefined;
  let dev: string | undefined;
  let brd = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') dev = args[++i];
    else if (a === 'local') local = args[++i];
    else if (a === 'broadcast' || a === 'brd') brd = args[++i] !== undefined;
    else if (['scope', 'label', 'valid_lft', 'preferred_lft', 'metric'].includes(a)) i++;
    else if (['noprefixroute', 'nodad', 'home', 'secondary'].includes(a)) {
      // flags: accepted, not modelled
    } else if (local === undefined) local = a;
    else return fail(`Either "local" is duplicate, or "${a}" is a garbage.\n`, 1);
  }
  if (local === undefined) return fail('Not enough information: "local" argument is required.\n', 1);
  const inet = parsePrefix(local);
  if (!inet) return fail(`Error: any valid prefix is expected rather than "${local}".\n`, 1);
  if (dev === undefined) return fail('Not enough information: "dev" argument is required.\n', 1);
  const l = net.link(dev);
  if (!l) return fail(`Cannot find device "${dev}"\n`, 1);
  if (op === 'del') return addrDel(l, inet, !local.includes('/'));
  const existing = l.addresses.findIndex((a) => sameInet(a, inet));
  if (existing >= 0) {
    if (op === 'add') return fail(`Error: ipv${inet.family}: Address already assigned.\n`, 2);
    return ok();
  }
  l.addresses.push({ ...inet, brd });
  return ok();
}

function addrDel(l: Link, inet: Inet, wildcard: boolean): ToolResult {
  const idx = l.addresses.findIndex(
    (a) => a.family === inet.family && a.value === inet.value && (wildcard || a.prefix === inet.prefix),
  );
  const warn = wildcard
    ? 'Warning: Executing wildcard deletion to stay compatible with old scripts.\n' +
      `         Explicitly specify the prefix length (${formatInet(inet)}) to avoid this warning.\n` +
      '         This special behaviour is likely to disappear in further releases,\n' +
      '         fix your scripts!\n'
    : '';
  if (idx < 0) return { out: '', err: `${warn}Error: ipv${inet.family}: Address not found.\n`, code: 2 };
  l.addresses.splice(idx, 1);
  return { out: '', err: warn, code: 0 };
}

// ---------------------------------------------------------------- ip link

function link(net: NetState, args: readonly string[]): ToolResult {
  const [cmd, ...rest] = args;
  if (cmd === undefined || matches(cmd, 'list') || matches(cmd, 'show') || cmd === 'lst') {
    const { dev, error } = deviceArg(rest);
    if (error) return error;
    if (dev !== undefined && !net.link(dev)) return fail(`Device "${dev}" does not exist.\n`, 1);
    const lines = [...net.links.values()]
      .filter((l) => dev === undefined || l.name === dev)
      .flatMap((l) => linkHeader(net, l, true));
    return ok(lines.map((s) => `${s}\n`).join(''));
  }
  if (cmd === 'add') return linkAdd(net, rest);
  if (cmd !== 'set') return fail(`Command "${cmd}" is unknown, try "ip link help".\n`, 255);
  return linkSet(net, rest);
}

/** `ip link add <name> type ifb`: the only kind of link the scripts create. */
function linkAdd(net: NetState, args: readonly string[]): ToolResult {
  let name: string | undefined;
  let type: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'type') type = args[++i];
    else if (a === 'name' || a === 'dev') name = args[++i];
    else if (name === undefined) name = a;
    else return fail(`Error: either "dev" is duplicate, or "${a}" is a garbage.\n`, 255);
  }
  if (name === undefined) return fail('Not enough information: "dev" argument is required.\n', 255);
  if (type !== 'ifb') return fail('Error: Unknown device type.\n', 2);
  if (net.link(name)) return fail('RTNETLINK answers: File exists\n', 2);
  const index = Math.max(...[...net.links.values()].map((l) => l.index)) + 1;
  net.links.set(name, {
    index,
    name,
    peer: '',
    kind: 'ifb',
    mac: macFrom(`${name}:ifb`),
    mtu: 1500,
    txqueuelen: 32,
    up: false,
    arp: false,
    addresses: [],
  });
  return ok();
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function linkSet(net: NetState, rest: readonly string[]): ToolResult {
  let dev: string | undefined;
  const changes: Array<(l: Link) => void> = [];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a === 'dev') dev = rest[++i];
    else if (a === 'up') changes.push((l) => (l.up = true));
    else if (a === 'down') changes.push((l) => (l.up = false));
    else if (a === 'arp') {
      const v = rest[++i];
      if (v !== 'on' && v !== 'off')
        return fail(`Error: argument "${v ?? ''}" is wrong: "arp" must be "on" or "off"\n`, 255);
      changes.push((l) => (l.arp = v === 'on'));
    } else if (a === 'mtu' || a === 'txqueuelen' || a === 'qlen') {
      const v = rest[++i] ?? '';
      const what = a === 'mtu' ? 'mtu' : 'txqueuelen';
      if (!/^\d+$/.test(v)) return fail(`Error: argument "${v}" is wrong: Invalid "${what}" value\n`, 255);
      changes.push((l) => {
        if (a === 'mtu') l.mtu = Number(v);
        else l.txqueuelen = Number(v);
      });
    } else if (dev === undefined) dev = a;
    else return fail(`Error: either "dev" is duplicate, or "${a}" is a garbage.\n`, 255);
  }
  if (dev === undefined) return fail('Not enough information: "dev" argument is required.\n', 255);
  const l = net.link(dev);
  if (!l) return fail(`Cannot find device "${dev}"\n`, 1);
  for (const c of changes) c(l);
  return ok();
}
