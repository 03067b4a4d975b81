/**
 * Parsers of what the gateway's tools print: `ip -o addr show`, `tc -p filter show`, `tc class show`,
 * `iptables-save -t nat` and the env file kube-ovn 1.15+ writes. Tested on the output of real runs
 * (test/fixtures/gateway-runs/) and on hand-written samples of other iproute2 versions (test/unit/audit-parse.test.ts).
 * A line that is not understood is skipped, so nothing is judged from a half-understood line.
 */
import { formatAddress, parseAddress } from '../addressing.js';

/** One address on an interface, as `ip -o addr` lists it. */
export interface InterfaceAddress {
  family: 4 | 6;
  address: string;
  prefix: number;
  /** Flags after the scope (`secondary`, `dynamic`, `tentative`, `dadfailed`, …). */
  flags: string[];
  scope: string;
}

/** One address's QoS in one direction: a u32 filter with a police action (1.12–1.15) or an HTB class (1.16+). */
export interface QosFilter {
  direction: 'ingress' | 'egress';
  /** The matched address (without prefix). */
  ip: string;
  prio: number;
  /** The rate in bits per second, when the police action or the class gives one. */
  rateBps?: number;
  /** As tc printed them. */
  rate?: string;
  burst?: string;
  /** The class the filter sends to (`1:1b5d`), on 1.16+. */
  classid?: string;
}

const ADDR_LINE = /^\s*\d+:\s+(\S+)\s+(inet6?)\s+([0-9A-Fa-f.:]+)(?:\/(\d{1,3}))?(?:\s+peer\s+\S+)?(.*)$/;

function canonical(address: string): string {
  const p = parseAddress(address);
  return p ? formatAddress(p.family, p.value) : address;
}

/**
 * Parses `ip -o addr show dev <dev>` (one line per address; iproute2 joins the continuation with `\`). Lines of
 * other interfaces, link lines and malformed addresses are skipped. Addresses are canonical.
 */
export function parseAddresses(text: string, dev = 'net1'): InterfaceAddress[] {
  return text.split('\n').flatMap((line) => addressOf(line, dev) ?? []);
}

function addressOf(line: string, dev: string): InterfaceAddress | undefined {
  const m = ADDR_LINE.exec(line.split('\\')[0] ?? '');
  if (!m) return undefined;
  const [, name, kind, addr, prefixText, rest] = m;
  if (name !== dev && !name!.startsWith(`${dev}@`)) return undefined;
  const family = kind === 'inet6' ? 6 : 4;
  if (parseAddress(addr!)?.family !== family) return undefined;
  const max = family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return undefined;
  return { family, address: canonical(addr!), prefix, ...scopeAndFlags(rest ?? '', name!) };
}

function scopeAndFlags(rest: string, dev: string): { flags: string[]; scope: string } {
  const words = rest.trim().split(/\s+/).filter(Boolean);
  let scope = 'global';
  const flags: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    if (w === 'brd' || w === 'metric') i++;
    else if (w === 'scope') scope = words[++i] ?? scope;
    else if (w !== dev && !w.startsWith(`${dev}:`)) flags.push(w); // not the label
  }
  return { flags, scope };
}

const FILTER_HEAD = /^filter\b.*\bpref\s+(\d+)\s+u32\b.*\bfh\s+[0-9a-f]+:[0-9a-f]*:[0-9a-f]+\b/i;
const FLOWID = /\bflowid\s+([0-9a-f]*:[0-9a-f]+)\b/i;
const PRETTY_MATCH = /^\s*match\s+IP\s+(src|dst)\s+(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})\b/;
const RAW_MATCH = /^\s*match\s+([0-9a-f]{8})\/([0-9a-f]{8})\s+at\s+(12|16)\b/i;
const POLICE = /\bpolice\s+(?:0x[0-9a-f]+|\d+)\s+rate\s+(\S+)\s+burst\s+(\S+)/i;

interface Pending {
  prio: number;
  flowid?: string;
  ip?: string;
  rate?: string;
  burst?: string;
}

function finished(p: Pending | undefined, direction: QosFilter['direction']): QosFilter[] {
  if (!p?.ip) return [];
  const rateBps = p.rate === undefined ? undefined : parseTcRate(p.rate);
  return [
    {
      direction,
      ip: p.ip,
      prio: p.prio,
      ...(p.rate !== undefined && { rate: p.rate }),
      ...(p.burst !== undefined && { burst: p.burst }),
      ...(rateBps !== undefined && { rateBps }),
      ...(p.flowid?.startsWith('1:') && { classid: p.flowid }),
    },
  ];
}

/** The address of a `match` line, pretty (`match IP dst a.b.c.d/32`) or raw (`match ac12000b/ffffffff at 16`). */
function matchedAddress(line: string): string | undefined | null {
  const pretty = PRETTY_MATCH.exec(line);
  if (pretty) {
    const ip = canonical(pretty[2]!);
    return parseAddress(ip)?.family === 4 && pretty[3] === '32' ? ip : null;
  }
  const raw = RAW_MATCH.exec(line);
  if (!raw) return undefined;
  if (raw[2]!.toLowerCase() !== 'ffffffff') return null;
  const v = Number.parseInt(raw[1]!, 16);
  return [24, 16, 8, 0].map((s) => (v >>> s) & 0xff).join('.');
}

/**
 * Parses `tc -p filter show dev <dev> parent <qdisc>`: a u32 key node line (`… fh 800::800 …`) starts a filter, its
 * `match` line gives the address and its police line the rate (1.12–1.15); on 1.16+ its flowid names the class.
 * Hash-table lines, the IFB redirect (`match 00000000/00000000 at 0`) and unknown lines are skipped.
 */
export function parseTcFilters(text: string, direction: QosFilter['direction']): QosFilter[] {
  const out: QosFilter[] = [];
  let current: Pending | undefined;
  for (const line of text.split('\n')) {
    if (/^filter\b/.test(line)) {
      out.push(...finished(current, direction));
      current = filterHead(line);
    } else if (current) readFilterLine(current, line);
  }
  out.push(...finished(current, direction));
  return out;
}

/** A u32 key node line starts a filter; any other `filter` line (a hash table) ends one. */
function filterHead(line: string): Pending | undefined {
  const head = FILTER_HEAD.exec(line);
  if (!head) return undefined;
  const flowid = FLOWID.exec(line)?.[1];
  return { prio: Number(head[1]), ...(flowid && { flowid }) };
}

function readFilterLine(current: Pending, line: string): void {
  const ip = current.ip === undefined ? matchedAddress(line) : undefined;
  if (ip !== undefined) {
    if (ip !== null) current.ip = ip;
    return;
  }
  const police = POLICE.exec(line);
  if (police) [current.rate, current.burst] = [police[1]!, police[2]!];
}

/** One HTB class, as `tc class show dev <dev>` prints it. */
export interface HtbClass {
  classid: string;
  rate: string;
  ceil: string;
  burst: string;
  rateBps?: number;
}

const HTB_CLASS = /^class htb (\S+)\b.*?\brate (\S+) ceil (\S+) burst (\S+)/;

/** Parses `tc class show dev <dev>`: HTB classes by class id (`1:1b5d`). */
export function parseHtbClasses(text: string): Map<string, HtbClass> {
  const out = new Map<string, HtbClass>();
  for (const line of text.split('\n')) {
    const m = HTB_CLASS.exec(line.trim());
    if (!m) continue;
    const rateBps = parseTcRate(m[2]!);
    out.set(m[1]!, {
      classid: m[1]!,
      rate: m[2]!,
      ceil: m[3]!,
      burst: m[4]!,
      ...(rateBps !== undefined && { rateBps }),
    });
  }
  return out;
}

/**
 * 1.16+: an address's limit is the class its filter sends to. A filter whose class is missing keeps no rate (the
 * audit then sees a wrong rate, as for a police filter without its action).
 */
export function withClassRates(
  filters: readonly QosFilter[],
  classes: ReadonlyMap<string, HtbClass>,
): QosFilter[] {
  return filters.map((f) => {
    const c = f.classid === undefined ? undefined : classes.get(f.classid);
    if (!c) return f;
    return { ...f, rate: c.rate, burst: c.burst, ...(c.rateBps !== undefined && { rateBps: c.rateBps }) };
  });
}

const RATE_UNIT: Record<string, number> = {
  '': 1,
  k: 1e3,
  m: 1e6,
  g: 1e9,
  t: 1e12,
  ki: 1024,
  mi: 1024 ** 2,
  gi: 1024 ** 3,
  ti: 1024 ** 4,
};

/** tc's printed rate (`10Mbit`, `10500Kbit`, `1Gbit`, `12Mibit`, `125Kbps`) in bits per second. */
export function parseTcRate(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)([kmgt]i?)?(bit|bps)$/i.exec(text.trim());
  if (!m) return undefined;
  const mult = RATE_UNIT[(m[2] ?? '').toLowerCase()];
  if (mult === undefined) return undefined;
  const n = Number(m[1]) * mult * (m[3]!.toLowerCase() === 'bps' ? 8 : 1);
  return Number.isFinite(n) ? Math.round(n) : undefined;
}

/** The chains of an `iptables-save -t nat` dump (`:NAME POLICY [packets:bytes]`). */
export function natChains(text: string): string[] {
  return [...text.matchAll(/^:(\S+)\s/gm)].map((m) => m[1]!);
}

/** One per-EIP hairpin SNAT rule (1.16+): traffic from the VPC to the EIP, DNATed back into the VPC, leaves as it. */
export interface HairpinRule {
  /** The EIP (`--ctorigdst`). */
  address: string;
  toSource: string;
  outInterface?: string;
}

/** Parses the HAIRPIN_SNAT rules of an `iptables-save -t nat` dump. */
export function parseHairpinSnat(text: string): HairpinRule[] {
  const out: HairpinRule[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('-A HAIRPIN_SNAT ')) continue;
    const dst = /--ctorigdst (\d{1,3}(?:\.\d{1,3}){3})(?:\/32)?\b/.exec(line)?.[1];
    const src = /--to-source (\d{1,3}(?:\.\d{1,3}){3})\b/.exec(line)?.[1];
    if (!dst || !src || parseAddress(dst)?.family !== 4) continue;
    const out_ = /(?:^|\s)-o (\S+)/.exec(line)?.[1];
    out.push({ address: canonical(dst), toSource: canonical(src), ...(out_ && { outInterface: out_ }) });
  }
  return out;
}

/**
 * Parses /etc/kube-ovn/nat-gateway.env (`KEY=value` lines, as 1.15+'s init writes them; the script sources it with
 * bash, so `export`, quotes and comments are read too). Later assignments win, as in bash.
 */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(raw);
    if (!m) continue;
    const value = m[2]!.trim();
    const quoted = /^(["'])(.*?)\1(\s+#.*)?$/.exec(value);
    out[m[1]!] = quoted ? quoted[2]! : value.replace(/\s+#.*$/, '');
  }
  return out;
}
