/**
 * `tc class` over the simulated namespace: htb classes directly under an htb root qdisc (`parent 1:`), as the
 * 1.16+ scripts make one per EIP and a default class 1:9999. Class ids are hexadecimal (`1:0x42b3` = `1:42b3`).
 */
import { fail, type HtbClass, type NetState, ok, type ToolResult } from './state.js';
import {
  defaultBurst,
  formatClassId,
  formatRate,
  formatSize,
  keptSize,
  needDev,
  parseClassId,
  parseRate,
  parseSize,
} from './tc-units.js';

interface ClassArgs {
  dev?: string;
  parent?: { major: string; minor: number };
  classid?: { major: string; minor: number };
  kind?: string;
  rest: string[];
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function parseClassArgs(args: readonly string[]): ClassArgs | ToolResult {
  const c: ClassArgs = { rest: [] };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') c.dev = args[++i];
    else if (a === 'parent' || a === 'classid') {
      const v = args[++i] ?? '';
      const id = parseClassId(v);
      if (!id) return fail(`Error: argument "${v}" is wrong: invalid class ID\n`, 255);
      if (a === 'parent') c.parent = id;
      else c.classid = id;
    } else if (a === 'root') c.parent = undefined;
    else {
      c.kind = a;
      c.rest = args.slice(i + 1);
      break;
    }
  }
  return c;
}

interface HtbOptions {
  rate?: bigint;
  ceil?: bigint;
  burst?: number;
  cburst?: number;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function parseHtbOptions(opts: readonly string[]): HtbOptions | ToolResult {
  const o: HtbOptions = {};
  for (let i = 0; i < opts.length; i++) {
    const a = opts[i]!;
    const v = opts[++i] ?? '';
    if (a === 'rate' || a === 'ceil') {
      const r = parseRate(v);
      if (r === undefined) return fail(`Illegal "${a}"\n`, 1);
      o[a] = r;
    } else if (a === 'burst' || a === 'cburst' || a === 'buffer' || a === 'cbuffer') {
      const s = parseSize(v);
      if (s === undefined) return fail(`Illegal "${a}"\n`, 1);
      if (a === 'burst' || a === 'buffer') o.burst = s;
      else o.cburst = s;
    } else if (a === 'prio' || a === 'quantum' || a === 'mtu') {
      // accepted, not modelled
    } else return fail(`htb: unknown parameter "${a}"\n`, 1);
  }
  if (o.rate === undefined) return fail('"rate" is required.\n', 1);
  return o;
}

export function classAdd(net: NetState, args: readonly string[]): ToolResult {
  const c = parseClassArgs(args);
  if ('code' in c) return c;
  const bad = needDev(net, c.dev);
  if (bad) return bad;
  if (c.kind !== 'htb') return fail(`Unknown qdisc "${c.kind ?? ''}", hence option "" is unparsable\n`, 1);
  const opts = parseHtbOptions(c.rest);
  if ('code' in opts) return opts;
  const major = c.classid?.major ?? c.parent?.major;
  const q = major ? net.qdisc(c.dev!, major) : undefined;
  if (q?.kind !== 'htb' || !c.classid) return fail('RTNETLINK answers: No such file or directory\n', 2);
  if (findClass(net, c.dev!, c.classid.major, c.classid.minor))
    return fail('RTNETLINK answers: File exists\n', 2);
  const warning = quantumWarning(c.classid.major, c.classid.minor, opts.rate!);
  const cls: HtbClass = {
    dev: c.dev!,
    major: c.classid.major,
    minor: c.classid.minor,
    rate: opts.rate!,
    ceil: opts.ceil ?? opts.rate!,
    burst: opts.burst ?? defaultBurst(opts.rate!),
    cburst: opts.cburst ?? defaultBurst(opts.ceil ?? opts.rate!),
  };
  net.classes.push(cls);
  hashInsert(net, cls);
  return { out: '', err: warning, code: 0 };
}

/** The kernel's htb warning when rate / r2q (10) leaves the quantum outside 1000–200000 bytes. */
function quantumWarning(major: string, minor: number, rate: bigint): string {
  const quantum = rate / 8n / 10n;
  const id = ((Number.parseInt(major, 16) << 16) | minor).toString(16).toUpperCase();
  if (quantum > 200000n) return `Warning: sch_htb: quantum of class ${id} is big. Consider r2q change.\n`;
  if (quantum < 1000n) return `Warning: sch_htb: quantum of class ${id} is small. Consider r2q change.\n`;
  return '';
}

function findClass(net: NetState, dev: string, major: string, minor: number): HtbClass | undefined {
  return net.classes.find((x) => x.dev === dev && x.major === major && x.minor === minor);
}

export function classDel(net: NetState, args: readonly string[]): ToolResult {
  const c = parseClassArgs(args);
  if ('code' in c) return c;
  const bad = needDev(net, c.dev);
  if (bad) return bad;
  const id = c.classid;
  const cls = id ? findClass(net, c.dev!, id.major, id.minor) : undefined;
  if (!cls || !id) return fail('RTNETLINK answers: No such file or directory\n', 2);
  const flowid = formatClassId(id.major, id.minor);
  const q = net.qdisc(c.dev!, id.major);
  const bound = q?.prios.some((p) => p.nodes.some((n) => n.flowid === flowid));
  if (bound) return fail('Error: HTB class in use.\n', 2);
  net.classes = net.classes.filter((x) => x !== cls);
  const table = net.classHashes.get(`${cls.dev} ${cls.major}`);
  if (table) {
    for (const b of table.buckets) if (b.includes(cls)) b.splice(b.indexOf(cls), 1);
    table.count--;
  }
  net.qdiscs = net.qdiscs.filter((x) => !(x.dev === c.dev && x.parent === flowid));
  return ok();
}

export function classLine(net: NetState, cls: HtbClass): string {
  const id = formatClassId(cls.major, cls.minor);
  const leaf = net.qdiscs.find((q) => q.dev === cls.dev && q.parent === id);
  return `class htb ${id} root ${leaf ? `leaf ${leaf.handle} ` : ''}prio 0 rate ${formatRate(cls.rate)} ceil ${formatRate(cls.ceil)} burst ${formatSize(keptSize(cls.rate, cls.burst))} cburst ${formatSize(keptSize(cls.ceil, cls.cburst))} `;
}

export function classShow(net: NetState, args: readonly string[]): ToolResult {
  const c = parseClassArgs(args);
  if ('code' in c) return c;
  if (c.kind !== undefined) return fail(`What is "${c.kind}"? Try "tc class help".\n`, 255);
  if (c.dev === undefined) return fail('Cannot find device ""\n', 1);
  if (!net.link(c.dev)) return fail(`Cannot find device "${c.dev}"\n`, 1);
  const id = c.classid;
  const shown = dumpOrder(net, c.dev).filter((x) => !id || (x.major === id.major && x.minor === id.minor));
  return ok(shown.map((x) => `${classLine(net, x)}\n`).join(''));
}

// ---------------------------------------------------------------- the kernel's class hash

/** The kernel's qdisc_class_hash of a full class id (major << 16 | minor). */
function bucketOf(cls: HtbClass, size: number): number {
  let id = (Number.parseInt(cls.major, 16) << 16) | cls.minor;
  id ^= id >>> 8;
  id ^= id >>> 4;
  return id & (size - 1);
}

/** Adds a class at the head of its bucket; the table doubles (rehashing bucket by bucket) past 3/4 full. */
function hashInsert(net: NetState, cls: HtbClass): void {
  const key = `${cls.dev} ${cls.major}`;
  let table = net.classHashes.get(key);
  if (!table) {
    table = { size: 4, count: 0, buckets: [[], [], [], []] };
    net.classHashes.set(key, table);
  }
  table.buckets[bucketOf(cls, table.size)]!.unshift(cls);
  table.count++;
  if (table.count * 4 <= table.size * 3) return;
  const size = table.size * 2;
  const buckets: HtbClass[][] = Array.from({ length: size }, () => []);
  for (const bucket of table.buckets) for (const x of bucket) buckets[bucketOf(x, size)]!.unshift(x);
  table.size = size;
  table.buckets = buckets;
}

/** A device's classes in the order the kernel dumps them: bucket by bucket, newest first within one. */
export function dumpOrder(net: NetState, dev: string): HtbClass[] {
  const out: HtbClass[] = [];
  for (const [key, table] of net.classHashes) {
    if (key.startsWith(`${dev} `)) for (const b of table.buckets) out.push(...b);
  }
  return out;
}
