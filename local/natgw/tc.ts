/**
 * `tc` over the simulated namespace: the ingress and htb root qdiscs on net1 and u32 filters with a police
 * action, which is all nat-gateway.sh's EIP QoS uses. Output follows iproute2's formats (rates printed with
 * tc's unit rules, `-p` decoding the u32 key as `match IP dst a.b.c.d/32`).
 */
import {
  fail,
  formatInet,
  type Inet,
  type NetState,
  networkOf,
  ok,
  parsePrefix,
  type Qdisc,
  type ToolResult,
  type U32Node,
  type U32Prio,
} from './state.js';

interface TcFlags {
  pretty: boolean;
  stats: boolean;
  details: boolean;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
export function tc(net: NetState, argv: readonly string[]): ToolResult {
  const flags: TcFlags = { pretty: false, stats: false, details: false };
  let i = 0;
  for (; i < argv.length && argv[i]?.startsWith('-'); i++) {
    const f = argv[i]!;
    if (f === '-p' || f === '-pretty') flags.pretty = true;
    else if (f === '-s' || f === '-stats' || f === '-statistics') flags.stats = true;
    else if (f === '-d' || f === '-details') flags.details = true;
    else return fail(`Option "${f}" is unknown, try "tc -help".\n`, 255);
  }
  const [object, cmd, ...rest] = argv.slice(i);
  if (object === undefined) return fail(USAGE, 255);
  const show = cmd === undefined || ['show', 'list', 'ls'].includes(cmd);
  if ('qdisc'.startsWith(object)) {
    if (show) return qdiscShow(net, rest);
    if (cmd === 'add') return qdiscAdd(net, rest);
    if (cmd === 'del' || cmd === 'delete') return qdiscDel(net, rest);
    return fail(`Command "${cmd}" is unknown, try "tc qdisc help".\n`, 255);
  }
  if ('filter'.startsWith(object)) {
    if (show) return filterShow(net, rest, flags);
    if (cmd === 'add') return filterAdd(net, rest);
    if (cmd === 'del' || cmd === 'delete') return filterDel(net, rest);
    return fail(`Command "${cmd}" is unknown, try "tc filter help".\n`, 255);
  }
  return fail(`Object "${object}" is unknown, try "tc help".\n`, 1);
}

const USAGE =
  'Usage:\ttc [ OPTIONS ] OBJECT { COMMAND | help }\n' +
  '\ttc [-force] -batch filename\n' +
  'where  OBJECT := { qdisc | class | filter | chain |\n' +
  '\t\t    action | monitor | exec }\n';

/** `1:0`, `1:`, `ffff:` → the major handle as tc prints it (`1:`, `ffff:`). */
function majorOf(handle: string): string | undefined {
  const m = /^([0-9a-fA-F]{1,4}):(0*)$/.exec(handle);
  return m ? `${Number.parseInt(m[1]!, 16).toString(16)}:` : undefined;
}

function needDev(net: NetState, dev: string | undefined): ToolResult | undefined {
  if (dev === undefined) return fail('Cannot find device ""\n', 1);
  if (!net.link(dev)) return fail(`Cannot find device "${dev}"\n`, 1);
  return undefined;
}

// ---------------------------------------------------------------- qdisc

function qdiscLine(q: Qdisc | undefined, dev: string | undefined): string {
  const on = dev === undefined ? '' : ` dev ${dev}`;
  if (!q) return `qdisc noqueue 0:${on} root refcnt 2`;
  if (q.kind === 'ingress') return `qdisc ingress ffff:${on} parent ffff:fff1 ----------------`;
  return `qdisc htb ${q.handle}${on} root refcnt 2 r2q 10 default 0 direct_packets_stat 0 direct_qlen 1000`;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
function qdiscShow(net: NetState, args: readonly string[]): ToolResult {
  let dev: string | undefined;
  let which: 'ingress' | 'root' | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') dev = args[++i];
    else if (a === 'ingress' || a === 'root') which = a;
    else return fail(`What is "${a}"? Try "tc qdisc help".\n`, 255);
  }
  if (dev !== undefined && !net.link(dev)) return fail(`Cannot find device "${dev}"\n`, 1);
  const lines: string[] = [];
  for (const l of net.links.values()) {
    if (dev !== undefined && l.name !== dev) continue;
    const shownDev = dev === undefined ? l.name : undefined;
    const mine = l.name === 'net1' ? net.qdiscs : [];
    const root = mine.find((q) => q.kind === 'htb');
    const ingress = mine.find((q) => q.kind === 'ingress');
    if (which !== 'ingress') lines.push(qdiscLine(root, shownDev));
    if (which !== 'root' && ingress) lines.push(qdiscLine(ingress, shownDev));
  }
  return ok(lines.map((s) => `${s}\n`).join(''));
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
function qdiscAdd(net: NetState, args: readonly string[]): ToolResult {
  let dev: string | undefined;
  let handle: string | undefined;
  let where: 'root' | 'ingress' | undefined;
  let kind: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') dev = args[++i];
    else if (a === 'handle') {
      const h = args[++i] ?? '';
      handle = majorOf(h);
      if (!handle) return fail(`Error: argument "${h}" is wrong: invalid qdisc ID\n`, 255);
    } else if (a === 'root') where = 'root';
    else if (a === 'ingress') {
      where = 'ingress';
      kind = 'ingress';
    } else if (a === 'parent') return fail('Error: only "root" and "ingress" parents are simulated.\n', 2);
    else if (kind === undefined) kind = a;
    else if (kind === 'htb' && (a === 'default' || a === 'r2q')) i++;
    else return fail(`What is "${a}"?\n`, 1);
  }
  const bad = needDev(net, dev);
  if (bad) return bad;
  if (kind !== 'htb' && kind !== 'ingress')
    return fail(`Unknown qdisc "${kind ?? ''}", hence option "" is unparsable\n`, 1);
  if (dev !== 'net1') return fail('Error: only net1 carries qdiscs in the simulation.\n', 2);
  if (kind === 'htb' && where !== 'root') return fail('Error: the htb qdisc is only simulated as root.\n', 2);
  const existing = net.qdiscs.find((q) => q.kind === kind || (kind === 'htb' && q.kind === 'htb'));
  if (existing) return fail('Error: Exclusivity flag on, cannot modify.\n', 2);
  net.qdiscs.push({
    kind,
    handle: kind === 'ingress' ? 'ffff:' : (handle ?? '8001:'),
    prios: [],
    nextHt: 0x800,
  });
  return ok();
}

function qdiscDel(net: NetState, args: readonly string[]): ToolResult {
  let dev: string | undefined;
  let which: 'root' | 'ingress' | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') dev = args[++i];
    else if (a === 'root' || a === 'ingress') which = a;
    else if (a === 'handle') i++;
  }
  const bad = needDev(net, dev);
  if (bad) return bad;
  const kind = which === 'ingress' ? 'ingress' : 'htb';
  const idx = dev === 'net1' ? net.qdiscs.findIndex((q) => q.kind === kind) : -1;
  if (idx < 0) {
    return fail(
      which === 'ingress' ? 'Error: Invalid handle.\n' : 'Error: Cannot delete qdisc with handle of zero.\n',
      2,
    );
  }
  net.qdiscs.splice(idx, 1);
  return ok();
}

// ---------------------------------------------------------------- rates and sizes

const RATE_UNITS: Record<string, number> = {
  bit: 1,
  kibit: 1024,
  kbit: 1000,
  mibit: 1024 ** 2,
  mbit: 1000 ** 2,
  gibit: 1024 ** 3,
  gbit: 1000 ** 3,
  tibit: 1024 ** 4,
  tbit: 1000 ** 4,
  bps: 8,
  kibps: 8 * 1024,
  kbps: 8 * 1000,
  mibps: 8 * 1024 ** 2,
  mbps: 8 * 1000 ** 2,
  gibps: 8 * 1024 ** 3,
  gbps: 8 * 1000 ** 3,
  tibps: 8 * 1024 ** 4,
  tbps: 8 * 1000 ** 4,
};

const NUMBER = /^(\+?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(.*)$/;

/** tc's get_rate64: a decimal number and a unit; the result in bits per second (bytes × 8, as stored). */
export function parseRate(text: string): bigint | undefined {
  const m = NUMBER.exec(text);
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = m[2]!.toLowerCase();
  const mult = unit === '' ? 8 : RATE_UNITS[unit];
  if (mult === undefined || !Number.isFinite(n)) return undefined;
  const bytes = Math.floor((n * mult) / 8);
  return BigInt(bytes) * 8n;
}

/** tc's get_size: bytes, with k/kb, m/mb, g/gb (binary) or kbit/mbit/gbit. */
export function parseSize(text: string): number | undefined {
  const m = NUMBER.exec(text);
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = m[2]!.toLowerCase();
  const mult: Record<string, number> = {
    '': 1,
    b: 1,
    k: 1024,
    kb: 1024,
    m: 1024 ** 2,
    mb: 1024 ** 2,
    g: 1024 ** 3,
    gb: 1024 ** 3,
    kbit: 1024 / 8,
    mbit: 1024 ** 2 / 8,
    gbit: 1024 ** 3 / 8,
  };
  const k = mult[unit];
  if (k === undefined) return undefined;
  const size = Math.floor(n * k);
  return Number.isFinite(size) && size <= 0xffffffff ? size : undefined;
}

/** tc's sprint_rate (SI units). */
export function formatRate(bitsPerSecond: bigint): string {
  const units = ['', 'K', 'M', 'G', 'T'];
  let rate = bitsPerSecond;
  let i = 0;
  for (; i < units.length - 1; i++) {
    if (rate < 1000n) break;
    if (rate % 1000n !== 0n && rate < 1000n * 1000n) break;
    rate /= 1000n;
  }
  return `${rate}${units[i]}bit`;
}

/** tc's sprint_size. */
export function formatSize(bytes: number): string {
  const MB = 1024 * 1024;
  if (bytes >= MB && Math.abs(MB * Math.round(bytes / MB) - bytes) < 1024)
    return `${Math.round(bytes / MB)}Mb`;
  if (bytes >= 1024 && Math.abs(1024 * Math.round(bytes / 1024) - bytes) < 16)
    return `${Math.round(bytes / 1024)}Kb`;
  return `${bytes}b`;
}

// ---------------------------------------------------------------- filter

interface FilterTarget {
  dev?: string;
  parent?: string;
  prio?: number;
  handle?: string;
  protocol?: string;
  rest: string[];
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
function filterHead(args: readonly string[]): FilterTarget | ToolResult {
  const t: FilterTarget = { rest: [] };
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') t.dev = args[++i];
    else if (a === 'parent') {
      const p = args[++i] ?? '';
      const major = p === 'ingress' ? 'ffff:' : p === 'root' ? 'root' : majorOf(p);
      if (!major) return fail(`Error: argument "${p}" is wrong: Invalid parent ID\n`, 255);
      t.parent = major;
    } else if (a === 'ingress') t.parent = 'ffff:';
    else if (a === 'root') t.parent = 'root';
    else if (a === 'protocol') t.protocol = args[++i];
    else if (a === 'prio' || a === 'pref' || a === 'priority') {
      const p = args[++i] ?? '';
      if (!/^\d+$/.test(p) || Number(p) > 0xffff)
        return fail(`Error: argument "${p}" is wrong: invalid priority value\n`, 255);
      t.prio = Number(p);
    } else if (a === 'handle') t.handle = args[++i];
    else break;
  }
  t.rest = args.slice(i);
  return t;
}

const isResult = (x: unknown): x is ToolResult => typeof x === 'object' && x !== null && 'code' in x;

function resolveParent(net: NetState, parent: string | undefined): Qdisc | undefined {
  if (parent === undefined) return undefined;
  if (parent === 'root') return net.qdiscs.find((q) => q.kind === 'htb');
  return net.qdisc(parent);
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
function filterShow(net: NetState, args: readonly string[], flags: TcFlags): ToolResult {
  const t = filterHead(args);
  if (isResult(t)) return t;
  if (t.rest.length > 0) return fail(`What is "${t.rest[0]}"? Try "tc filter help"\n`, 255);
  if (t.dev !== undefined && !net.link(t.dev)) return fail(`Cannot find device "${t.dev}"\n`, 1);
  if (t.dev !== undefined && t.dev !== 'net1') return ok();
  const lines: string[] = [];
  // A missing parent qdisc dumps nothing: the kernel's filter dump returns an empty answer for it.
  const qdiscs = t.parent !== undefined ? [resolveParent(net, t.parent)].filter((q) => q) : net.qdiscs;
  for (const q of qdiscs as Qdisc[]) {
    const prefix = t.parent !== undefined ? 'filter' : `filter parent ${q.handle}`;
    for (const p of [...q.prios].sort((a, b) => a.prio - b.prio)) {
      if (t.prio !== undefined && p.prio !== t.prio) continue;
      lines.push(...renderPrio(prefix, p, flags));
    }
  }
  return ok(lines.map((s) => `${s}\n`).join(''));
}

function renderPrio(prefix: string, p: U32Prio, flags: TcFlags): string[] {
  const head = `${prefix} protocol ip pref ${p.prio} u32 chain 0`;
  const ht = p.ht.toString(16);
  const out = [head, `${head} fh ${ht}: ht divisor 1`];
  for (const n of p.nodes) {
    out.push(`${head} fh ${n.handle} order ${n.order} key ht ${ht} bkt 0 *flowid ${n.flowid} not_in_hw`);
    out.push(`  ${matchText(n, flags.pretty)}`);
    if (n.policeIndex > 0) {
      const linklayer = flags.details ? ' linklayer ethernet' : '';
      out.push(
        ` police 0x${n.policeIndex.toString(16)} rate ${formatRate(n.rate)} burst ${formatSize(n.burst)} mtu 2Kb action ${n.action} overhead 0b${linklayer}`,
      );
      out.push(flags.stats ? '\tref 1 bind 1  installed 0 sec used 0 sec firstused 0 sec' : '\tref 1 bind 1');
      if (flags.stats) out.push('', ' Sent 0 bytes 0 pkts (dropped 0, overlimits 0)');
    }
  }
  return out;
}

function matchText(n: U32Node, pretty: boolean): string {
  if (pretty) return `match IP ${n.direction} ${formatInet(n.match)}`;
  const hex = (v: bigint): string => v.toString(16).padStart(8, '0');
  const mask = n.match.prefix === 0 ? 0n : (0xffffffffn << BigInt(32 - n.match.prefix)) & 0xffffffffn;
  return `match ${hex(networkOf(n.match))}/${hex(mask)} at ${n.direction === 'src' ? 12 : 16}`;
}

const POLICE_ACTIONS = ['drop', 'shot', 'pass', 'ok', 'continue', 'reclassify', 'pipe'];

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
function filterAdd(net: NetState, args: readonly string[]): ToolResult {
  const t = filterHead(args);
  if (isResult(t)) return t;
  const bad = needDev(net, t.dev);
  if (bad) return bad;
  const [kind, ...opts] = t.rest;
  if (kind !== 'u32')
    return fail(`Unknown filter "${kind ?? ''}", hence option "${opts[0] ?? ''}" is unparsable\n`, 1);
  if (t.protocol !== undefined && t.protocol !== 'ip' && t.protocol !== 'all') {
    return fail(`Error: argument "${t.protocol}" is wrong: invalid protocol\n`, 255);
  }
  let match: { direction: 'src' | 'dst'; inet: Inet } | undefined;
  let police: { rate: bigint; burst: number; action: string } | undefined;
  let flowid = ':1';
  for (let i = 0; i < opts.length; i++) {
    const a = opts[i]!;
    if (a === 'match') {
      const [type, dir, value] = [opts[i + 1], opts[i + 2], opts[i + 3]];
      i += 3;
      const inet = value === undefined ? undefined : parsePrefix(value);
      if (type !== 'ip' || (dir !== 'src' && dir !== 'dst') || !inet || inet.family !== 4) {
        return fail('Illegal "match"\n', 1);
      }
      match = { direction: dir, inet };
    } else if (a === 'police') {
      const parsed = parsePolice(opts, i + 1);
      if (isResult(parsed)) return parsed;
      police = parsed.police;
      i = parsed.next - 1;
    } else if (a === 'flowid' || a === 'classid') {
      flowid = opts[++i] ?? '';
      if (!/^[0-9a-fA-F]*:[0-9a-fA-F]*$/.test(flowid)) return fail('Illegal "classid"\n', 1);
    } else return fail(`What is "${a}"?\nIllegal "match"\n`, 1);
  }
  if (!match) return fail('Illegal "match": the simulation models u32 filters on an IPv4 src/dst only\n', 1);
  const q = resolveParent(net, t.parent);
  if (!q || t.dev !== 'net1') {
    return fail("Error: Parent Qdisc doesn't exists.\nWe have an error talking to the kernel\n", 2);
  }
  let prioNo = t.prio ?? 0;
  if (prioNo === 0) {
    const lowest = Math.min(...q.prios.map((p) => p.prio));
    prioNo = q.prios.length === 0 ? 49152 : lowest - 1;
  }
  let prio = q.prios.find((p) => p.prio === prioNo);
  if (!prio) {
    prio = { prio: prioNo, ht: q.nextHt++, nextNode: 0x800, nodes: [] };
    q.prios.push(prio);
  }
  const nodeNo = prio.nextNode++;
  prio.nodes.push({
    handle: `${prio.ht.toString(16)}::${nodeNo.toString(16)}`,
    order: nodeNo,
    direction: match.direction,
    match: { ...match.inet, value: networkOf(match.inet) },
    rate: police?.rate ?? 0n,
    burst: police?.burst ?? 0,
    policeIndex: police ? ++net.policeIndex : 0,
    action: police?.action ?? 'reclassify',
    flowid,
  });
  return ok();
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the simulated gateway parses the real tool's argument grammar option by option (local/natgw/README.md), pinned by test/unit/natgw-tools.test.ts and natgw-script.test.ts; the branches are that grammar
function parsePolice(
  opts: readonly string[],
  start: number,
): { police: { rate: bigint; burst: number; action: string }; next: number } | ToolResult {
  let rate = 0n;
  let burst = 0;
  let action = 'reclassify';
  let i = start;
  const illegal = (what: string): ToolResult => fail(`Illegal "${what}"\nIllegal "police"\n`, 1);
  for (; i < opts.length; i++) {
    const a = opts[i]!;
    if (a === 'rate') {
      const r = parseRate(opts[++i] ?? '');
      if (r === undefined) return illegal('rate');
      rate = r;
    } else if (a === 'burst' || a === 'buffer' || a === 'maxburst') {
      const b = parseSize(opts[++i] ?? '');
      if (b === undefined) return illegal('burst');
      burst = b;
    } else if (a === 'mtu' || a === 'minburst') {
      if (parseSize(opts[++i] ?? '') === undefined) return illegal('mtu');
    } else if (a === 'conform-exceed') {
      action = (opts[++i] ?? 'reclassify').split('/')[0]!;
    } else if (POLICE_ACTIONS.includes(a)) action = a;
    else break;
  }
  if (rate === 0n) return fail('"rate" or "avrate" or "pkts_rate" MUST be specified.\nIllegal "police"\n', 1);
  if (burst === 0) return fail('"burst" requires "rate".\nIllegal "police"\n', 1);
  return { police: { rate, burst, action }, next: i };
}

function filterDel(net: NetState, args: readonly string[]): ToolResult {
  const t = filterHead(args);
  if (isResult(t)) return t;
  const bad = needDev(net, t.dev);
  if (bad) return bad;
  if (t.rest.length > 0 && t.rest[0] !== 'u32') {
    return fail(`Unknown filter "${t.rest[0]}", hence option "" is unparsable\n`, 1);
  }
  const q = resolveParent(net, t.parent);
  if (!q || t.dev !== 'net1') {
    return fail("Error: Parent Qdisc doesn't exists.\nWe have an error talking to the kernel\n", 2);
  }
  if (t.prio === undefined) {
    if (t.handle !== undefined)
      return fail('Error: Cannot flush filters with protocol, handle or kind set.\n', 2);
    q.prios = [];
    return ok();
  }
  const prio = q.prios.find((p) => p.prio === t.prio);
  if (!prio)
    return fail(
      'Error: Filter with specified priority/protocol not found.\nWe have an error talking to the kernel\n',
      2,
    );
  if (t.handle === undefined) {
    q.prios = q.prios.filter((p) => p !== prio);
    return ok();
  }
  const idx = prio.nodes.findIndex((n) => n.handle === t.handle);
  if (idx < 0)
    return fail('RTNETLINK answers: No such file or directory\nWe have an error talking to the kernel\n', 2);
  prio.nodes.splice(idx, 1);
  return ok();
}
