/**
 * Reading what a NAT gateway has configured: net1's addresses and the u32 police filters of EIP QoS, through
 * pods/exec with fixed argv (no value from an object ever reaches these commands), and parsing iproute2's output.
 * Decision and format notes: docs/adr/0037-gateway-inspection.md.
 */
import { formatAddress, parseAddress } from '../domain/addressing.js';
import type { ExecResult, GatewayPod } from '../ports.js';

/**
 * The only commands an inspector may run: read-only, constant, one exec each. `tc filter show` without a parent
 * dumps only the root qdisc's filters on a real kernel, so ingress and egress are asked for separately.
 */
export const INSPECTION_ARGV = {
  addresses: ['ip', '-o', 'addr', 'show', 'dev', 'net1'],
  ingress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', 'ffff:'],
  egress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', '1:'],
} as const satisfies Record<string, readonly string[]>;

export type InspectionCommand = keyof typeof INSPECTION_ARGV;

/**
 * The read-only exec capability an audit needs. Adapters run exactly `INSPECTION_ARGV[command]` in the pod's
 * vpc-nat-gw container and resolve with its output when it exits 0.
 * @throws GatewayCommandError on a non-zero exit, a lost stream or a timeout; GatewayNotReadyError when the pod is gone
 */
export interface GatewayInspector {
  read(pod: GatewayPod, command: InspectionCommand, signal?: AbortSignal): Promise<ExecResult>;
}

/** One address on net1, as `ip -o addr` lists it. */
export interface Net1Address {
  family: 4 | 6;
  address: string;
  prefix: number;
  /** Flags after the scope (`secondary`, `dynamic`, `tentative`, `dadfailed`, …). */
  flags: string[];
  scope: string;
}

/** One u32 police filter on net1 (EIP QoS). */
export interface QosFilter {
  direction: 'ingress' | 'egress';
  /** The matched address (without prefix). */
  ip: string;
  prio: number;
  /** Police rate in bits per second, when a police action is attached. */
  rateBps?: number;
  /** As tc printed them. */
  rate?: string;
  burst?: string;
}

/** What one gateway had configured when it was read. */
export interface GatewayState {
  gateway: string;
  pod: string;
  addresses: Net1Address[];
  filters: QosFilter[];
  /** Epoch ms when the read finished. */
  readAt: number;
}

/** Reads a gateway: three constant read-only execs, one after the other. */
export async function inspectGateway(
  inspector: GatewayInspector,
  gateway: string,
  pod: GatewayPod,
  now: () => number,
  signal?: AbortSignal,
): Promise<GatewayState> {
  const addresses = parseNet1Addresses((await inspector.read(pod, 'addresses', signal)).stdout);
  const ingress = parseTcFilters((await inspector.read(pod, 'ingress', signal)).stdout, 'ingress');
  const egress = parseTcFilters((await inspector.read(pod, 'egress', signal)).stdout, 'egress');
  return {
    gateway,
    pod: `${pod.namespace}/${pod.name}`,
    addresses,
    filters: [...ingress, ...egress],
    readAt: now(),
  };
}

/** True when `argv` is exactly one of the inspection commands (adapters check before they exec). */
export function isInspectionArgv(argv: readonly string[]): boolean {
  return Object.values(INSPECTION_ARGV).some(
    (a) => a.length === argv.length && a.every((x, i) => x === argv[i]),
  );
}

const ADDR_LINE = /^\s*\d+:\s+(\S+)\s+(inet6?)\s+([0-9A-Fa-f.:]+)(?:\/(\d{1,3}))?(?:\s+peer\s+\S+)?(.*)$/;

/**
 * Parses `ip -o addr show dev net1` (one line per address; iproute2 joins the continuation with `\`). Lines that
 * are not address lines (a link line, an empty line) are skipped; a malformed address is skipped too, so the
 * audit never judges from a half-understood line. Addresses are canonical (`parseAddress` then formatted).
 */
export function parseNet1Addresses(text: string): Net1Address[] {
  const out: Net1Address[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.split('\\')[0] ?? '';
    const m = ADDR_LINE.exec(line);
    if (!m) continue;
    const [, dev, kind, addr, prefixText, rest] = m;
    if (!dev?.startsWith('net1')) continue;
    const parsed = parseAddress(addr!);
    const family = kind === 'inet6' ? 6 : 4;
    if (!parsed || parsed.family !== family) continue;
    const prefix = prefixText === undefined ? (family === 4 ? 32 : 128) : Number(prefixText);
    if (prefix > (family === 4 ? 32 : 128)) continue;
    const words = (rest ?? '').trim().split(/\s+/).filter(Boolean);
    let scope = 'global';
    const flags: string[] = [];
    for (let i = 0; i < words.length; i++) {
      const w = words[i]!;
      if (w === 'brd' || w === 'metric') i++;
      else if (w === 'scope') scope = words[++i] ?? scope;
      else if (w === dev || w.startsWith(`${dev}:`))
        continue; // the label
      else flags.push(w);
    }
    out.push({ family, address: canonical(addr!), prefix, flags, scope });
  }
  return out;
}

const FILTER_HEAD = /^filter\b.*\bpref\s+(\d+)\s+u32\b.*\bfh\s+[0-9a-f]+:[0-9a-f]*:[0-9a-f]+\b/i;
const PRETTY_MATCH = /^\s*match\s+IP\s+(src|dst)\s+(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})\b/;
const RAW_MATCH = /^\s*match\s+([0-9a-f]{8})\/([0-9a-f]{8})\s+at\s+(12|16)\b/i;
const POLICE = /\bpolice\s+(?:0x[0-9a-f]+|\d+)\s+rate\s+(\S+)\s+burst\s+(\S+)/i;

/**
 * Parses `tc -p filter show dev net1 parent <qdisc>`: a u32 key node line (`… fh 800::800 …`) starts a filter,
 * its `match` line gives the address (pretty `match IP dst a.b.c.d/32`, or the raw `match ac12000b/ffffffff at 16`
 * when -p is not honoured) and its police line the rate. Hash-table lines and unknown lines are skipped.
 */
export function parseTcFilters(text: string, direction: 'ingress' | 'egress'): QosFilter[] {
  const out: QosFilter[] = [];
  let current: { prio: number; ip?: string; rate?: string; burst?: string } | undefined;
  const flush = (): void => {
    if (current?.ip) {
      const rateBps = current.rate === undefined ? undefined : parseTcRate(current.rate);
      out.push({
        direction,
        ip: current.ip,
        prio: current.prio,
        ...(current.rate !== undefined && { rate: current.rate }),
        ...(current.burst !== undefined && { burst: current.burst }),
        ...(rateBps !== undefined && { rateBps }),
      });
    }
    current = undefined;
  };
  for (const line of text.split('\n')) {
    const head = FILTER_HEAD.exec(line);
    if (head) {
      flush();
      current = { prio: Number(head[1]) };
      continue;
    }
    if (/^filter\b/.test(line)) {
      flush();
      continue;
    }
    if (!current) continue;
    const pretty = PRETTY_MATCH.exec(line);
    if (pretty && current.ip === undefined) {
      const ip = canonical(pretty[2]!);
      if (parseAddress(ip)?.family === 4 && pretty[3] === '32') current.ip = ip;
      continue;
    }
    const raw = RAW_MATCH.exec(line);
    if (raw && current.ip === undefined) {
      if (raw[2]!.toLowerCase() === 'ffffffff') {
        const v = Number.parseInt(raw[1]!, 16);
        current.ip = [24, 16, 8, 0].map((s) => (v >>> s) & 0xff).join('.');
      }
      continue;
    }
    const police = POLICE.exec(line);
    if (police) {
      current.rate = police[1]!;
      current.burst = police[2]!;
    }
  }
  flush();
  return out;
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

function canonical(address: string): string {
  const p = parseAddress(address);
  return p ? formatAddress(p.family, p.value) : address;
}
