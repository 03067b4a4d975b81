/**
 * `ip route` over the simulated namespace: list, add, replace, delete in the main table, with `onlink`, and the
 * output format of iproute2 6.x (each line ends in a space, as the real tool prints it).
 */
import {
  formatInet,
  formatIp,
  type Inet,
  type Ip,
  networkOf,
  parseIp,
  parsePrefix,
  sameInet,
} from './addr.js';
import type { IpFlags } from './ip.js';
import { fail, type NetState, ok, type Route, type ToolResult } from './state.js';

const matches = (word: string | undefined, full: string): boolean =>
  word !== undefined && word.length > 0 && full.startsWith(word);

export function route(net: NetState, args: readonly string[], flags: IpFlags): ToolResult {
  const [cmd, ...rest] = args;
  const family = flags.family ?? 4;
  if (cmd === undefined || matches(cmd, 'list') || matches(cmd, 'show')) return ok(routeTable(net, family));
  if (matches(cmd, 'add')) return routeModify(net, rest, 'add', family);
  if (matches(cmd, 'replace')) return routeModify(net, rest, 'replace', family);
  if (matches(cmd, 'delete')) return routeModify(net, rest, 'del', family);
  return fail(`Command "${cmd}" is unknown, try "ip route help".\n`, 255);
}

function routeLine(r: Route & { src?: Inet }): string {
  const dst = r.dst.prefix === 0 ? 'default' : formatInet(r.dst);
  if (r.src) return `${dst} dev ${r.dev} proto kernel scope link src ${formatIp(r.src.family, r.src.value)} `;
  const via = r.via ? ` via ${formatIp(r.via.family, r.via.value)}` : '';
  const onlink = r.onlink ? ' onlink' : '';
  if (r.dst.family === 6) return `${dst}${via} dev ${r.dev} metric 1024${onlink} pref medium`;
  return `${dst}${via} dev ${r.dev}${r.via ? '' : ' scope link'}${onlink} `;
}

/** The main table as `ip route` prints it: default first, then ascending by network. */
export function routeTable(net: NetState, family: 4 | 6 = 4): string {
  const kernel = net.kernelRoutes().filter((r) => r.dst.family === family);
  const all: Array<Route & { src?: Inet }> = [
    ...net.routes.filter((r) => r.dst.family === family),
    ...kernel,
  ];
  // Ascending by network; the longer prefix first within one network value (the kernel's trie order).
  all.sort((a, b) =>
    a.dst.value !== b.dst.value ? (a.dst.value < b.dst.value ? -1 : 1) : b.dst.prefix - a.dst.prefix,
  );
  return all.map((r) => `${routeLine(r)}\n`).join('');
}

interface RouteArgs {
  dstText?: string;
  viaText?: string;
  dev?: string;
  onlink: boolean;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function parseRouteArgs(args: readonly string[]): RouteArgs | ToolResult {
  const out: RouteArgs = { onlink: false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'via') {
      out.viaText = args[++i];
      if (out.viaText === undefined) return fail('Command line is not complete. Try option "help"\n', 255);
      // iproute2 parses left to right: a bad gateway is reported before anything after it.
      if (!parseIp(out.viaText))
        return fail(`Error: any valid address is expected rather than "${out.viaText}".\n`, 1);
    } else if (a === 'dev' || a === 'oif') out.dev = args[++i];
    else if (['proto', 'scope', 'metric', 'table', 'src', 'mtu', 'realm'].includes(a)) i++;
    else if (a === 'onlink') out.onlink = true;
    else if (out.dstText === undefined) {
      out.dstText = a === 'to' ? args[++i] : a;
      // … and a bad destination before anything after it.
      if (out.dstText !== undefined && !parseDst(out.dstText, 4))
        return fail(`Error: any valid prefix is expected rather than "${out.dstText}".\n`, 1);
    } else return fail(`Error: either "to" is duplicate, or "${a}" is a garbage.\n`, 255);
  }
  return out;
}

function parseDst(text: string, family: 4 | 6): Inet | undefined {
  if (text === 'default' || text === 'all') return { family, value: 0n, prefix: 0 };
  return parsePrefix(text);
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function routeModify(
  net: NetState,
  args: readonly string[],
  op: 'add' | 'replace' | 'del',
  family: 4 | 6,
): ToolResult {
  const parsed = parseRouteArgs(args);
  if ('code' in parsed) return parsed;
  const { dstText, viaText, onlink } = parsed;
  let dev = parsed.dev;
  if (dstText === undefined) return fail('Error: "to" argument is required.\n', 255);
  const dst = parseDst(dstText, viaText && parseIp(viaText)?.family === 6 ? 6 : family);
  if (!dst) return fail(`Error: any valid prefix is expected rather than "${dstText}".\n`, 1);
  if (dst.value !== networkOf(dst)) return fail('Error: Invalid prefix for given prefix length.\n', 2);
  const via: Ip | undefined = viaText === undefined ? undefined : parseIp(viaText);
  if (dev !== undefined && !net.link(dev)) return fail(`Cannot find device "${dev}"\n`, 1);
  if (op === 'del') {
    const idx = net.routes.findIndex((r) => sameInet(r.dst, dst) && (dev === undefined || r.dev === dev));
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
  const next: Route = { dst, dev, ...(via ? { via } : {}), ...(onlink ? { onlink } : {}) };
  if (existing >= 0) {
    if (op === 'add') return fail('RTNETLINK answers: File exists\n', 2);
    net.routes[existing] = next;
  } else net.routes.push(next);
  return ok();
}
