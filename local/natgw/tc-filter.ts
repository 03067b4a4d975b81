/**
 * `tc filter` over the simulated namespace: u32 filters matching one IPv4 source or destination (or every packet,
 * `match u32 0 0`), with a police action (1.12–1.15 EIP QoS), a class to send to (1.16+ htb classes), or a mirred
 * redirect to the ifb device (1.16+ ingress). `-p` decodes the key as `match IP dst a.b.c.d/32`, as the scripts
 * expect. A u32 `handle 0x42b3` keeps its low 12 bits as the node id (`800::2b3`), as the kernel does.
 */
import { formatInet, type Inet, networkOf, parsePrefix } from './addr.js';
import {
  fail,
  type NetState,
  ok,
  type Police,
  type Qdisc,
  type ToolResult,
  type U32Node,
  type U32Prio,
} from './state.js';
import {
  formatRate,
  formatSize,
  keptSize,
  majorOf,
  needDev,
  parseClassId,
  parseRate,
  parseSize,
} from './tc-units.js';

export interface TcFlags {
  pretty: boolean;
  stats: boolean;
  details: boolean;
}

interface FilterTarget {
  dev?: string;
  parent?: string;
  prio?: number;
  handle?: string;
  protocol?: string;
  rest: string[];
}

const isResult = (x: unknown): x is ToolResult => typeof x === 'object' && x !== null && 'code' in x;

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
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

function resolveParent(net: NetState, dev: string, parent: string | undefined): Qdisc | undefined {
  if (parent === undefined) return undefined;
  if (parent === 'root') return net.qdiscs.find((q) => q.dev === dev && q.parent === 'root');
  return net.qdisc(dev, parent);
}

// ---------------------------------------------------------------- show

export function filterShow(net: NetState, args: readonly string[], flags: TcFlags): ToolResult {
  const t = filterHead(args);
  if (isResult(t)) return t;
  if (t.rest.length > 0) return fail(`What is "${t.rest[0]}"? Try "tc filter help"\n`, 255);
  const bad = needDev(net, t.dev);
  if (bad) return bad;
  const dev = t.dev!;
  const lines: string[] = [];
  // A missing parent qdisc dumps nothing: the kernel's filter dump returns an empty answer for it.
  const qdiscs =
    t.parent !== undefined
      ? [resolveParent(net, dev, t.parent)].filter((q): q is Qdisc => q !== undefined)
      : net.qdiscs.filter((q) => q.dev === dev);
  for (const q of qdiscs) {
    const prefix = t.parent !== undefined ? 'filter' : `filter parent ${q.handle}`;
    for (const p of [...q.prios].sort((a, b) => a.prio - b.prio)) {
      if (t.prio !== undefined && p.prio !== t.prio) continue;
      lines.push(...renderPrio(prefix, p, flags));
    }
  }
  return ok(lines.map((s) => `${s}\n`).join(''));
}

function renderPrio(prefix: string, p: U32Prio, flags: TcFlags): string[] {
  const head = `${prefix} protocol ${p.protocol} pref ${p.prio} u32 chain 0`;
  const ht = p.ht.toString(16);
  const out = [`${head} `, `${head} fh ${ht}: ht divisor 1 `];
  for (const n of p.nodes) {
    const flow = n.flowid !== undefined ? `*flowid ${n.flowid}` : 'terminal flowid';
    out.push(`${head} fh ${n.handle} order ${n.order} key ht ${ht} bkt 0 ${flow} not_in_hw `);
    out.push(`  ${matchText(n, flags.pretty)}`);
    if (n.police) out.push(...policeLines(n.police, flags));
    if (n.mirred) {
      out.push(
        `\taction order 1: mirred (Egress Redirect to device ${n.mirred.dev}) stolen`,
        `\tindex ${n.mirred.index} ref 1 bind 1`,
        '',
      );
    }
  }
  return out;
}

function policeLines(p: Police, flags: TcFlags): string[] {
  const linklayer = flags.details ? ' linklayer ethernet' : '';
  const out = [
    ` police 0x${p.index.toString(16)} rate ${formatRate(p.rate)} burst ${formatSize(keptSize(p.rate, p.burst))} mtu 2Kb action ${p.action} overhead 0b${linklayer}`,
    flags.stats ? '\tref 1 bind 1  installed 0 sec used 0 sec firstused 0 sec' : '\tref 1 bind 1',
  ];
  if (flags.stats) out.push('', ' Sent 0 bytes 0 pkts (dropped 0, overlimits 0)');
  return out;
}

function matchText(n: U32Node, pretty: boolean): string {
  if (!n.key) return 'match 00000000/00000000 at 0';
  const { direction, match } = n.key;
  if (pretty) return `match IP ${direction} ${formatInet(match)}`;
  const hex = (v: bigint): string => v.toString(16).padStart(8, '0');
  const mask = match.prefix === 0 ? 0n : (0xffffffffn << BigInt(32 - match.prefix)) & 0xffffffffn;
  return `match ${hex(networkOf(match))}/${hex(mask)} at ${direction === 'src' ? 12 : 16}`;
}

// ---------------------------------------------------------------- add

const POLICE_ACTIONS = ['drop', 'shot', 'pass', 'ok', 'continue', 'reclassify', 'pipe'];

interface U32Spec {
  key?: { direction: 'src' | 'dst'; match: Inet };
  anything: boolean;
  police?: Omit<Police, 'index'>;
  mirredDev?: string;
  flowid?: string;
}

function parseMatch(opts: readonly string[], i: number): U32Spec['key'] | 'any' | undefined {
  const [type, a, b] = [opts[i + 1], opts[i + 2], opts[i + 3]];
  if (type === 'u32') return a === '0' && b === '0' ? 'any' : undefined;
  const inet = b === undefined ? undefined : parsePrefix(b);
  if (type !== 'ip' || (a !== 'src' && a !== 'dst') || !inet || inet.family !== 4) return undefined;
  return { direction: a, match: { ...inet, value: networkOf(inet) } };
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function parseU32(opts: readonly string[]): U32Spec | ToolResult {
  const spec: U32Spec = { anything: false };
  for (let i = 0; i < opts.length; i++) {
    const a = opts[i]!;
    if (a === 'match') {
      const m = parseMatch(opts, i);
      i += 3;
      if (m === undefined) return fail('Illegal "match"\n', 1);
      if (m === 'any') spec.anything = true;
      else spec.key = m;
    } else if (a === 'police') {
      const parsed = parsePolice(opts, i + 1);
      if (isResult(parsed)) return parsed;
      spec.police = parsed.police;
      i = parsed.next - 1;
    } else if (a === 'action' && opts[i + 1] === 'mirred') {
      if (opts[i + 2] !== 'egress' || opts[i + 3] !== 'redirect' || opts[i + 4] !== 'dev')
        return fail('Error: only "mirred egress redirect dev <dev>" is simulated.\n', 1);
      spec.mirredDev = opts[i + 5] ?? '';
      i += 5;
    } else if (a === 'flowid' || a === 'classid') {
      const v = opts[++i] ?? '';
      const id = parseClassId(v);
      if (!id) return fail('Illegal "classid"\n', 1);
      spec.flowid = v.startsWith(':') ? v : `${id.major}${id.minor.toString(16)}`;
    } else return fail(`What is "${a}"?\nIllegal "match"\n`, 1);
  }
  if (!spec.key && !spec.anything)
    return fail('Illegal "match": the simulation models u32 filters on an IPv4 src/dst or u32 0 0 only\n', 1);
  return spec;
}

/** The node id a `handle` asks for (0 = pick one): `0x42b3` keeps its low 12 bits, `800::2b3` its last part. */
function requestedNode(handle: string | undefined): number | undefined {
  if (handle === undefined) return 0;
  if (/^0[xX][0-9a-fA-F]{1,8}$/.test(handle)) return Number.parseInt(handle, 16) & 0xfff;
  const m = /^[0-9a-fA-F]{0,3}:[0-9a-fA-F]{0,2}:([0-9a-fA-F]{1,3})$/.exec(handle);
  return m ? Number.parseInt(m[1]!, 16) : undefined;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
export function filterAdd(net: NetState, args: readonly string[]): ToolResult {
  const t = filterHead(args);
  if (isResult(t)) return t;
  const bad = needDev(net, t.dev);
  if (bad) return bad;
  const [kind, ...opts] = t.rest;
  if (kind !== 'u32')
    return fail(`Unknown filter "${kind ?? ''}", hence option "${opts[0] ?? ''}" is unparsable\n`, 1);
  const protocol = t.protocol ?? 'all';
  if (protocol !== 'ip' && protocol !== 'all')
    return fail(`Error: argument "${protocol}" is wrong: invalid protocol\n`, 255);
  const node = requestedNode(t.handle);
  if (node === undefined) return fail(`Illegal "handle"\n`, 1);
  const spec = parseU32(opts);
  if (isResult(spec)) return spec;
  if (spec.mirredDev !== undefined && !net.link(spec.mirredDev))
    return fail(`Cannot find device "${spec.mirredDev}"\n`, 1);
  const q = resolveParent(net, t.dev!, t.parent);
  if (!q) return fail("Error: Parent Qdisc doesn't exists.\nWe have an error talking to the kernel\n", 2);
  const prio = prioFor(q, t.prio ?? 0, protocol);
  const nodeNo = node === 0 ? prio.nextNode : node;
  if (prio.nodes.some((n) => n.order === nodeNo))
    return fail('RTNETLINK answers: No space left on device\nWe have an error talking to the kernel\n', 2);
  if (node === 0) prio.nextNode++;
  prio.nodes.push(nodeOf(net, prio, nodeNo, spec));
  prio.nodes.sort((a, b) => a.order - b.order);
  return ok();
}

function prioFor(q: Qdisc, requested: number, protocol: 'ip' | 'all'): U32Prio {
  let prioNo = requested;
  if (prioNo === 0) {
    const lowest = Math.min(...q.prios.map((p) => p.prio));
    prioNo = q.prios.length === 0 ? 49152 : lowest - 1;
  }
  let prio = q.prios.find((p) => p.prio === prioNo);
  if (!prio) {
    prio = { prio: prioNo, protocol, ht: q.nextHt++, nextNode: 0x800, nodes: [] };
    q.prios.push(prio);
  }
  return prio;
}

function nodeOf(net: NetState, prio: U32Prio, nodeNo: number, spec: U32Spec): U32Node {
  const n: U32Node = { handle: `${prio.ht.toString(16)}::${nodeNo.toString(16)}`, order: nodeNo };
  if (spec.key) n.key = spec.key;
  if (spec.police) n.police = { ...spec.police, index: ++net.actionIndex };
  if (spec.mirredDev !== undefined) n.mirred = { index: 1, dev: spec.mirredDev };
  if (spec.flowid !== undefined) n.flowid = spec.flowid;
  else if (spec.police) n.flowid = ':1';
  return n;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function parsePolice(
  opts: readonly string[],
  start: number,
): { police: Omit<Police, 'index'>; next: number } | ToolResult {
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

// ---------------------------------------------------------------- del

export function filterDel(net: NetState, args: readonly string[]): ToolResult {
  const t = filterHead(args);
  if (isResult(t)) return t;
  const bad = needDev(net, t.dev);
  if (bad) return bad;
  if (t.rest.length > 0 && t.rest[0] !== 'u32') {
    return fail(`Unknown filter "${t.rest[0]}", hence option "" is unparsable\n`, 1);
  }
  const q = resolveParent(net, t.dev!, t.parent);
  if (!q) return fail("Error: Parent Qdisc doesn't exists.\nWe have an error talking to the kernel\n", 2);
  if (t.prio === undefined) {
    if (t.handle !== undefined)
      return fail('Error: Cannot flush filters with protocol, handle or kind set.\n', 2);
    q.prios = [];
    forgetHashTables(q);
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
    forgetHashTables(q);
    return ok();
  }
  const idx = prio.nodes.findIndex((n) => n.handle === t.handle);
  if (idx < 0)
    return fail('RTNETLINK answers: No such file or directory\nWe have an error talking to the kernel\n', 2);
  prio.nodes.splice(idx, 1);
  // The u32 instances of one qdisc share their bookkeeping; the kernel drops the last one left with its last
  // filter (the prio leaves the listing), while an emptied prio beside another stays listed.
  if (prio.nodes.length === 0 && q.prios.length === 1) q.prios = [];
  forgetHashTables(q);
  return ok();
}

/** With its last u32 instance gone the kernel frees their shared state: hash table ids start at 800 again. */
function forgetHashTables(q: Qdisc): void {
  if (q.prios.length === 0) q.nextHt = 0x800;
}
