/**
 * `tc` over the simulated namespace: qdiscs here (ingress, htb at the root, fq_codel/pfifo leaves under htb
 * classes), htb classes in tc-class.ts, u32 filters with police and mirred actions in tc-filter.ts — what the
 * releases' EIP QoS uses. Output follows iproute2 6.x, trailing spaces included where it prints them.
 */

import { fail, type NetState, ok, type Qdisc, type QdiscKind, type ToolResult } from './state.js';
import { classAdd, classDel, classShow, dumpOrder } from './tc-class.js';
import { filterAdd, filterDel, filterShow, type TcFlags } from './tc-filter.js';
import { formatClassId, majorOf, needDev, parseClassId } from './tc-units.js';

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
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
    if (cmd === 'add' || cmd === 'replace') return qdiscAdd(net, rest, cmd);
    if (cmd === 'del' || cmd === 'delete') return qdiscDel(net, rest);
    return fail(`Command "${cmd}" is unknown, try "tc qdisc help".\n`, 255);
  }
  if ('class'.startsWith(object)) {
    if (show) return classShow(net, rest);
    if (cmd === 'add') return classAdd(net, rest);
    if (cmd === 'del' || cmd === 'delete') return classDel(net, rest);
    return fail(`Command "${cmd}" is unknown, try "tc class help".\n`, 255);
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

// ---------------------------------------------------------------- show

function qdiscLine(q: Qdisc | undefined, dev: string | undefined): string {
  const on = dev === undefined ? '' : ` dev ${dev}`;
  if (!q) return `qdisc noqueue 0:${on} root refcnt 2 `;
  switch (q.kind) {
    case 'ingress':
      return `qdisc ingress ffff:${on} parent ffff:fff1 ---------------- `;
    case 'htb': {
      const def = q.defaultMinor ? `0x${q.defaultMinor.toString(16)}` : '0';
      return `qdisc htb ${q.handle}${on} root refcnt 2 r2q 10 default ${def} direct_packets_stat 0 direct_qlen 1000`;
    }
    case 'fq_codel':
      return `qdisc fq_codel ${q.handle}${on} parent ${q.parent} limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 `;
    default:
      return `qdisc pfifo ${q.handle}${on} parent ${q.parent} limit 1000p`;
  }
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
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
    const mine = net.qdiscs.filter((q) => q.dev === l.name);
    const root = mine.find((q) => q.parent === 'root');
    // Leaves in the order of their classes (the kernel's own order depends on handles allocated host-wide).
    const leaves = dumpOrder(net, l.name).flatMap((c) =>
      mine.filter((q) => q.parent === formatClassId(c.major, c.minor)),
    );
    const ingress = mine.find((q) => q.kind === 'ingress');
    if (which !== 'ingress')
      lines.push(qdiscLine(root, shownDev), ...leaves.map((q) => qdiscLine(q, shownDev)));
    if (which !== 'root' && ingress) lines.push(qdiscLine(ingress, shownDev));
  }
  return ok(lines.map((s) => `${s}\n`).join(''));
}

// ---------------------------------------------------------------- add, replace, del

interface QdiscArgs {
  dev?: string;
  handle?: string;
  parent?: string;
  kind?: string;
  defaultMinor?: number;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function parseQdiscArgs(args: readonly string[]): QdiscArgs | ToolResult {
  const q: QdiscArgs = {};
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') q.dev = args[++i];
    else if (a === 'handle') {
      const h = args[++i] ?? '';
      q.handle = majorOf(h);
      if (!q.handle) return fail(`Error: argument "${h}" is wrong: invalid qdisc ID\n`, 255);
    } else if (a === 'root') q.parent = 'root';
    else if (a === 'ingress') {
      q.parent = 'ingress';
      q.kind = 'ingress';
    } else if (a === 'parent') {
      const p = args[++i] ?? '';
      const id = parseClassId(p);
      if (!id) return fail(`Error: argument "${p}" is wrong: invalid parent ID\n`, 255);
      q.parent = formatClassId(id.major, id.minor);
    } else if (q.kind === undefined) q.kind = a;
    else if (q.kind === 'htb' && a === 'default') {
      // htb reads its default class as hexadecimal, like a class id's minor.
      const v = args[++i] ?? '';
      if (!/^(0[xX])?[0-9a-fA-F]+$/.test(v)) return fail('Illegal "default"\n', 1);
      q.defaultMinor = Number.parseInt(v, 16);
    } else if (q.kind === 'htb' && a === 'r2q') i++;
    else return fail(`What is "${a}"?\n`, 1);
  }
  return q;
}

const KINDS: readonly QdiscKind[] = ['ingress', 'htb', 'fq_codel', 'pfifo'];

function qdiscAdd(net: NetState, args: readonly string[], cmd: 'add' | 'replace'): ToolResult {
  const q = parseQdiscArgs(args);
  if ('code' in q) return q;
  const bad = needDev(net, q.dev);
  if (bad) return bad;
  const kind = KINDS.find((k) => k === q.kind);
  if (!kind) return fail(`Unknown qdisc "${q.kind ?? ''}", hence option "" is unparsable\n`, 1);
  const dev = q.dev!;
  if (q.parent === undefined) return fail('Error: Either "root" or "parent" or "ingress" is required.\n', 2);
  if (q.parent === 'root' || q.parent === 'ingress') return addTopLevel(net, dev, kind, q, cmd);
  return graftLeaf(net, dev, kind, q.parent, q.handle, cmd);
}

function addTopLevel(
  net: NetState,
  dev: string,
  kind: QdiscKind,
  q: QdiscArgs,
  cmd: 'add' | 'replace',
): ToolResult {
  if (kind !== 'htb' && kind !== 'ingress')
    return fail(`Error: only htb and ingress are simulated at the ${q.parent}.\n`, 2);
  const existing = net.qdiscs.find((x) => x.dev === dev && x.parent === q.parent);
  if (existing) {
    if (cmd === 'add' || existing.kind !== kind)
      return fail('Error: Exclusivity flag on, cannot modify.\n', 2);
    return ok();
  }
  net.qdiscs.push({
    dev,
    kind,
    handle: kind === 'ingress' ? 'ffff:' : (q.handle ?? autoHandle(net)),
    parent: q.parent!,
    ...(kind === 'htb' && { defaultMinor: q.defaultMinor ?? 0 }),
    prios: [],
    nextHt: 0x800,
  });
  return ok();
}

/** A leaf qdisc under an htb class (`parent 1:42b3`); replace keeps a leaf of the same kind. */
function graftLeaf(
  net: NetState,
  dev: string,
  kind: QdiscKind,
  parent: string,
  handle: string | undefined,
  cmd: 'add' | 'replace',
): ToolResult {
  const id = parseClassId(parent)!;
  const owner = net.qdisc(dev, id.major);
  if (!owner) return fail('Error: Failed to find specified qdisc.\n', 2);
  if (!net.classes.some((c) => c.dev === dev && c.major === id.major && c.minor === id.minor))
    return fail('Error: Specified class not found.\n', 2);
  if (kind !== 'fq_codel' && kind !== 'pfifo')
    return fail('Error: only fq_codel and pfifo leaves are simulated.\n', 2);
  const idx = net.qdiscs.findIndex((x) => x.dev === dev && x.parent === parent);
  const current = idx >= 0 ? net.qdiscs[idx] : undefined;
  if (current && cmd === 'add') return fail('Error: Exclusivity flag on, cannot modify.\n', 2);
  if (current?.kind === kind) return ok();
  const leaf: Qdisc = { dev, kind, handle: handle ?? autoHandle(net), parent, prios: [], nextHt: 0x800 };
  if (current) net.qdiscs[idx] = leaf;
  else net.qdiscs.push(leaf);
  return ok();
}

function autoHandle(net: NetState): string {
  return `${(net.nextQdiscHandle++).toString(16)}:`;
}

function qdiscDel(net: NetState, args: readonly string[]): ToolResult {
  let dev: string | undefined;
  let which: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === 'dev') dev = args[++i];
    else if (a === 'root' || a === 'ingress') which = a;
    else if (a === 'parent') which = args[++i];
    else if (a === 'handle') i++;
  }
  const bad = needDev(net, dev);
  if (bad) return bad;
  const target = net.qdiscs.find((q) => q.dev === dev && q.parent === (which ?? 'root'));
  if (!target) {
    return fail(
      which === 'ingress' ? 'Error: Invalid handle.\n' : 'Error: Cannot delete qdisc with handle of zero.\n',
      2,
    );
  }
  removeQdisc(net, target);
  return ok();
}

/** Removes a qdisc with its classes, their leaves and its filters. */
function removeQdisc(net: NetState, q: Qdisc): void {
  const leaves = net.qdiscs.filter((x) => x.dev === q.dev && x.parent.startsWith(q.handle));
  const gone = new Set([q, ...(q.kind === 'htb' ? leaves : [])]);
  net.qdiscs = net.qdiscs.filter((x) => !gone.has(x));
  if (q.kind !== 'htb') return;
  net.classes = net.classes.filter((c) => !(c.dev === q.dev && c.major === q.handle));
  net.classHashes.delete(`${q.dev} ${q.handle}`);
}
