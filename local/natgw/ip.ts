/**
 * `ip` (iproute2) over the simulated namespace: `addr`, `link` and `route`, with the output formats and the
 * error messages and exit codes of the real tool for the cases nat-gateway.sh and a person at a shell reach.
 */
import {
  fail,
  formatInet,
  formatIp,
  type Inet,
  type Link,
  maskOf,
  type NetState,
  networkOf,
  ok,
  parseIp,
  parsePrefix,
  type Route,
  sameInet,
  type ToolResult,
} from './state.js';

/** iproute2's `matches(word, full)`: the word is a non-empty prefix of the full keyword. */
const matches = (word: string | undefined, full: string): boolean =>
  word !== undefined && word.length > 0 && full.startsWith(word);

interface IpFlags {
  oneline: boolean;
  family?: 4 | 6;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
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

function inetLine(l: Link, a: Inet, secondary: boolean): string {
  const fam = a.family === 4 ? 'inet' : 'inet6';
  const brd =
    a.family === 4 && a.prefix < 31 && l.name !== 'lo'
      ? ` brd ${formatIp(4, networkOf(a) | (maskOf(4, a.prefix) ^ 0xffffffffn))}`
      : '';
  const scope = l.name === 'lo' ? 'host' : 'global';
  const tail = a.family === 4 ? ` ${l.name}` : '';
  return `${fam} ${formatInet(a)}${brd} scope ${scope}${secondary ? ' secondary' : ''}${tail}`;
}

function linkHeader(net: NetState, l: Link, modeLine: boolean): string[] {
  const flags =
    l.name === 'lo'
      ? ['LOOPBACK', ...(l.up ? ['UP', 'LOWER_UP'] : [])]
      : ['BROADCAST', 'MULTICAST', ...(l.arp ? [] : ['NOARP']), ...(l.up ? ['UP', 'LOWER_UP'] : [])];
  const root = l.name === 'net1' ? net.qdiscs.find((q) => q.kind === 'htb') : undefined;
  const qdisc = root ? 'htb' : 'noqueue';
  const state = l.name === 'lo' ? 'UNKNOWN' : l.up ? 'UP' : 'DOWN';
  const mode = modeLine ? ' mode DEFAULT' : '';
  const lladdr =
    l.name === 'lo'
      ? '    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00'
      : `    link/ether ${l.mac} brd ff:ff:ff:ff:ff:ff link-netnsid 0`;
  return [
    `${l.index}: ${l.name}${l.peer}: <${flags.join(',')}> mtu ${l.mtu} qdisc ${qdisc} state ${state}${mode} group default ${l.name === 'lo' ? 'qlen 1000' : ''}`.trimEnd(),
    lladdr,
  ];
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
function addrModify(net: NetState, args: readonly string[], op: 'add' | 'replace' | 'del'): ToolResult {
  let local: string | undefined;
  let dev: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') dev = args[++i];
    else if (a === 'local') local = args[++i];
    else if (['broadcast', 'brd', 'scope', 'label', 'valid_lft', 'preferred_lft', 'metric'].includes(a)) i++;
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
  if (op === 'del') {
    const wildcard = !local.includes('/');
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
  const existing = l.addresses.findIndex((a) => sameInet(a, inet));
  if (existing >= 0) {
    if (op === 'add') return fail(`Error: ipv${inet.family}: Address already assigned.\n`, 2);
    return ok();
  }
  l.addresses.push(inet);
  return ok();
}

// ---------------------------------------------------------------- ip link

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
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
  if (cmd !== 'set') return fail(`Command "${cmd}" is unknown, try "ip link help".\n`, 255);
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
    } else if (a === 'mtu') {
      const v = rest[++i] ?? '';
      if (!/^\d+$/.test(v)) return fail(`Error: argument "${v}" is wrong: Invalid "mtu" value\n`, 255);
      changes.push((l) => (l.mtu = Number(v)));
    } else if (dev === undefined) dev = a;
    else return fail(`Error: either "dev" is duplicate, or "${a}" is a garbage.\n`, 255);
  }
  if (dev === undefined) return fail('Not enough information: "dev" argument is required.\n', 255);
  const l = net.link(dev);
  if (!l) return fail(`Cannot find device "${dev}"\n`, 1);
  for (const c of changes) c(l);
  return ok();
}

// ---------------------------------------------------------------- ip route

function route(net: NetState, args: readonly string[], flags: IpFlags): ToolResult {
  const [cmd, ...rest] = args;
  if (cmd === undefined || matches(cmd, 'list') || matches(cmd, 'show'))
    return ok(routeTable(net, flags.family ?? 4));
  if (matches(cmd, 'add')) return routeModify(net, rest, 'add');
  if (matches(cmd, 'replace')) return routeModify(net, rest, 'replace');
  if (matches(cmd, 'delete')) return routeModify(net, rest, 'del');
  return fail(`Command "${cmd}" is unknown, try "ip route help".\n`, 255);
}

/** The main table as `ip route` prints it: default first, then ascending by network. */
export function routeTable(net: NetState, family: 4 | 6 = 4): string {
  const kernel = net.kernelRoutes().filter((r) => r.dst.family === family);
  const all: Array<Route & { src?: Inet }> = [
    ...net.routes.filter((r) => r.dst.family === family),
    ...kernel,
  ];
  all.sort((a, b) =>
    a.dst.value !== b.dst.value ? (a.dst.value < b.dst.value ? -1 : 1) : a.dst.prefix - b.dst.prefix,
  );
  return all
    .map((r) => {
      const dst = r.dst.prefix === 0 ? 'default' : formatInet(r.dst);
      if (r.src)
        return `${dst} dev ${r.dev} proto kernel scope link src ${formatIp(r.src.family, r.src.value)}\n`;
      const via = r.via ? ` via ${formatIp(r.via.family, r.via.value)}` : '';
      return `${dst}${via} dev ${r.dev}${r.via ? '' : ' scope link'}\n`;
    })
    .join('');
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
function routeModify(net: NetState, args: readonly string[], op: 'add' | 'replace' | 'del'): ToolResult {
  let dstText: string | undefined;
  let viaText: string | undefined;
  let dev: string | undefined;
  let onlink = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'via') {
      viaText = args[++i];
      if (viaText === undefined) return fail('Command line is not complete. Try option "help"\n', 255);
      // iproute2 parses left to right: a bad gateway is reported before anything after it.
      if (!parseIp(viaText))
        return fail(`Error: any valid address is expected rather than "${viaText}".\n`, 1);
    } else if (a === 'dev' || a === 'oif') dev = args[++i];
    else if (['proto', 'scope', 'metric', 'table', 'src', 'mtu', 'realm'].includes(a)) i++;
    else if (a === 'onlink') onlink = true;
    else if (dstText === undefined) dstText = a === 'to' ? args[++i] : a;
    else return fail(`Error: either "to" is duplicate, or "${a}" is a garbage.\n`, 255);
  }
  if (dstText === undefined) return fail('Error: "to" argument is required.\n', 255);
  let dst: Inet | undefined;
  if (dstText === 'default' || dstText === 'all') dst = { family: 4, value: 0n, prefix: 0 };
  else dst = parsePrefix(dstText);
  if (!dst) return fail(`Error: any valid prefix is expected rather than "${dstText}".\n`, 1);
  if (dst.value !== networkOf(dst)) return fail('Error: Invalid prefix for given prefix length.\n', 2);
  let via: { family: 4 | 6; value: bigint } | undefined;
  if (viaText !== undefined) {
    via = parseIp(viaText);
    if (!via) return fail(`Error: any valid address is expected rather than "${viaText}".\n`, 1);
  }
  if (dev !== undefined && !net.link(dev)) return fail(`Cannot find device "${dev}"\n`, 1);
  const matchesRoute = (r: Route): boolean => sameInet(r.dst, dst) && (dev === undefined || r.dev === dev);
  if (op === 'del') {
    const idx = net.routes.findIndex(matchesRoute);
    if (idx < 0) return fail('RTNETLINK answers: No such process\n', 2);
    net.routes.splice(idx, 1);
    return ok();
  }
  if (!dev) {
    const found = via && [...net.links.values()].find((l) => net.reachable(via, l.name));
    if (!found) return fail('Error: Nexthop has invalid gateway.\n', 2);
    dev = found.name;
  }
  if (via) {
    const l = net.link(dev)!;
    // eth0 may carry no modelled address (the emulator did not say); then its neighbours are taken on trust.
    const unknown = l.addresses.length === 0 && l.name === 'eth0';
    if (!onlink && !unknown && !net.reachable(via, dev))
      return fail('Error: Nexthop has invalid gateway.\n', 2);
  }
  const existing = net.routes.findIndex((r) => sameInet(r.dst, dst));
  const next: Route = { dst, dev, ...(via ? { via } : {}) };
  if (existing >= 0) {
    if (op === 'add') return fail('RTNETLINK answers: File exists\n', 2);
    net.routes[existing] = next;
  } else net.routes.push(next);
  return ok();
}
