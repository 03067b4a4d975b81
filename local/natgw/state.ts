/**
 * The in-memory network namespace of one simulated NAT gateway pod: links, addresses, routes, tc qdiscs and
 * u32 filters, and the iptables nat table. The tools in ip.ts, tc.ts and iptables.ts read and change it; the
 * script in script.ts drives those tools the way nat-gateway.sh does.
 */

/** What a tool run printed and how it exited. */
export interface ToolResult {
  out: string;
  err: string;
  code: number;
}

export const ok = (out = ''): ToolResult => ({ out, err: '', code: 0 });
export const fail = (err: string, code = 1): ToolResult => ({ out: '', err, code });

// ---------------------------------------------------------------- addresses

export interface Inet {
  family: 4 | 6;
  value: bigint;
  prefix: number;
}

const V4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const V6 = /^[0-9a-fA-F:.]+$/;

/** A plain address (no prefix), strictly: dotted quad without leading zeros, or an IPv6 text. */
export function parseIp(text: string): { family: 4 | 6; value: bigint } | undefined {
  if (V4.test(text)) {
    return { family: 4, value: text.split('.').reduce((n, o) => (n << 8n) | BigInt(Number(o)), 0n) };
  }
  if (text.includes(':') && V6.test(text)) return parseV6(text);
  return undefined;
}

function parseV6(text: string): { family: 6; value: bigint } | undefined {
  let head = text;
  let tailV4: bigint | undefined;
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    const v4 = parseIp(last);
    if (v4?.family !== 4) return undefined;
    tailV4 = v4.value;
    head = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const halves = head.split('::');
  if (halves.length > 2) return undefined;
  const groups = (s: string): string[] | undefined => {
    if (s === '') return [];
    const g = s.split(':');
    return g.every((x) => /^[0-9a-fA-F]{1,4}$/.test(x)) ? g : undefined;
  };
  const left = groups(halves[0] ?? '');
  const right = halves.length === 2 ? groups(halves[1] ?? '') : [];
  if (!left || !right) return undefined;
  const missing = 8 - left.length - right.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const all = [...left, ...Array<string>(missing).fill('0'), ...right];
  let value = all.reduce((n, g) => (n << 16n) | BigInt(Number.parseInt(g, 16)), 0n);
  if (tailV4 !== undefined) value = (value & ~0xffffffffn) | tailV4;
  return { family: 6, value };
}

/** `a.b.c.d[/len]` (or IPv6) as iproute2's get_prefix reads it; the prefix defaults to the host length. */
export function parsePrefix(text: string): Inet | undefined {
  const [addr = '', len, extra] = text.split('/');
  if (extra !== undefined) return undefined;
  const ip = parseIp(addr);
  if (!ip) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  if (len === undefined) return { ...ip, prefix: max };
  if (!/^\d{1,3}$/.test(len)) return undefined;
  const prefix = Number(len);
  if (prefix > max) return undefined;
  return { ...ip, prefix };
}

export function formatIp(family: 4 | 6, value: bigint): string {
  if (family === 4) {
    return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 0xffn)).join('.');
  }
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((s) => (value >> s) & 0xffffn);
  // RFC 5952: compress the longest run (>1) of zero groups, the first one on a tie.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0n) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0n) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

function bits(family: 4 | 6): number {
  return family === 4 ? 32 : 128;
}

export function maskOf(family: 4 | 6, prefix: number): bigint {
  const width = BigInt(bits(family));
  const all = (1n << width) - 1n;
  return prefix === 0 ? 0n : all ^ ((1n << (width - BigInt(prefix))) - 1n);
}

export function networkOf(a: Inet): bigint {
  return a.value & maskOf(a.family, a.prefix);
}

export function inSubnet(ip: { family: 4 | 6; value: bigint }, net: Inet): boolean {
  return ip.family === net.family && (ip.value & maskOf(net.family, net.prefix)) === networkOf(net);
}

export function formatInet(a: Inet): string {
  return `${formatIp(a.family, a.value)}/${a.prefix}`;
}

// ---------------------------------------------------------------- links, routes

export interface Link {
  index: number;
  name: string;
  /** Shown after the name in `ip link`/`ip addr` (`net1@if2`). */
  peer: string;
  mac: string;
  mtu: number;
  up: boolean;
  arp: boolean;
  addresses: Inet[];
}

export interface Route {
  /** 'default' or a network prefix. */
  dst: Inet;
  via?: { family: 4 | 6; value: bigint };
  dev: string;
}

// ---------------------------------------------------------------- tc

export interface U32Node {
  /** `800::800` */
  handle: string;
  order: number;
  direction: 'src' | 'dst';
  match: Inet;
  /** Bits per second. */
  rate: bigint;
  /** Bytes. */
  burst: number;
  policeIndex: number;
  action: string;
  flowid: string;
}

export interface U32Prio {
  prio: number;
  /** Hash table id, e.g. 0x800. */
  ht: number;
  nextNode: number;
  nodes: U32Node[];
}

export interface Qdisc {
  kind: 'ingress' | 'htb';
  /** Major handle, e.g. 'ffff:' or '1:'. */
  handle: string;
  prios: U32Prio[];
  nextHt: number;
}

// ---------------------------------------------------------------- iptables

export interface NatRule {
  src?: Inet;
  dst?: Inet;
  in?: string;
  out?: string;
  proto?: string;
  dport?: string;
  target: string;
  /** Target options in iptables-save order, e.g. ['--to-destination', '192.168.0.5:80']. */
  targetArgs: string[];
}

export interface Chain {
  builtin: boolean;
  rules: NatRule[];
}

export const BUILTIN_NAT_CHAINS = ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'] as const;

// ---------------------------------------------------------------- the namespace

export interface NetOptions {
  net1?: Inet;
  eth0?: Inet;
}

/** Deterministic locally administered MAC from a seed string. */
export function macFrom(seed: string): string {
  let h = 2166136261;
  for (const c of seed) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  const bytes = [0x02, 0x42, (h >>> 24) & 0xff, (h >>> 16) & 0xff, (h >>> 8) & 0xff, h & 0xff];
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}

export class NetState {
  links = new Map<string, Link>();
  routes: Route[] = [];
  qdiscs: Qdisc[] = [];
  chains = new Map<string, Chain>();
  policeIndex = 0;

  constructor(private readonly options: NetOptions) {
    this.reset();
  }

  /** Back to what the CNI gives a fresh sandbox: own addresses, a default route via eth0, nothing else. */
  reset(): void {
    const { net1, eth0 } = this.options;
    this.links = new Map([
      [
        'lo',
        {
          index: 1,
          name: 'lo',
          peer: '',
          mac: '00:00:00:00:00:00',
          mtu: 65536,
          up: true,
          arp: false,
          addresses: [{ family: 4, value: 0x7f000001n, prefix: 8 }],
        },
      ],
      [
        'eth0',
        {
          index: 2,
          name: 'eth0',
          peer: '@if9',
          mac: macFrom(`eth0:${eth0 ? formatInet(eth0) : ''}`),
          mtu: 1400,
          up: true,
          arp: true,
          addresses: eth0 ? [eth0] : [],
        },
      ],
      [
        'net1',
        {
          index: 3,
          name: 'net1',
          peer: '@if2',
          mac: macFrom(`net1:${net1 ? formatInet(net1) : ''}`),
          mtu: 1500,
          up: true,
          arp: true,
          addresses: net1 ? [net1] : [],
        },
      ],
    ]);
    this.routes = [];
    if (eth0?.family === 4 && eth0.prefix < 31) {
      // kube-ovn's subnet gateway defaults to the first host address of the subnet.
      this.routes.push({
        dst: { family: 4, value: 0n, prefix: 0 },
        via: { family: 4, value: networkOf(eth0) + 1n },
        dev: 'eth0',
      });
    }
    this.qdiscs = [];
    this.chains = new Map(BUILTIN_NAT_CHAINS.map((c) => [c, { builtin: true, rules: [] }]));
    this.policeIndex = 0;
  }

  link(name: string): Link | undefined {
    return this.links.get(name);
  }

  /** Connected (proto kernel) routes: one per distinct network of each up link's addresses. */
  kernelRoutes(): Array<Route & { src: Inet }> {
    const out: Array<Route & { src: Inet }> = [];
    for (const l of this.links.values()) {
      if (!l.up || l.name === 'lo') continue;
      for (const a of l.addresses) {
        if (a.prefix === bits(a.family)) continue;
        const dst: Inet = { family: a.family, value: networkOf(a), prefix: a.prefix };
        if (out.some((r) => r.dev === l.name && sameInet(r.dst, dst))) continue;
        out.push({ dst, dev: l.name, src: a });
      }
    }
    return out;
  }

  /** Whether `gw` is directly reachable on `dev` (inside one of its connected networks). */
  reachable(gw: { family: 4 | 6; value: bigint }, dev: string): boolean {
    const l = this.links.get(dev);
    if (!l) return false;
    return l.addresses.some((a) => inSubnet(gw, a) && a.prefix < bits(a.family));
  }

  qdisc(handle: string): Qdisc | undefined {
    return this.qdiscs.find((q) => q.handle === handle);
  }

  /** True once `init` has created the script's chains (check_inited's test). */
  get initialised(): boolean {
    return (this.chains.get('SNAT_FILTER')?.rules ?? []).some((r) => r.target === 'SHARED_SNAT');
  }
}

export function sameInet(a: Inet, b: Inet): boolean {
  return a.family === b.family && a.value === b.value && a.prefix === b.prefix;
}

/** Bash word splitting on the default IFS (space, tab, newline); empty words vanish. */
export function words(text: string): string[] {
  return text.split(/[ \t\n]+/).filter((w) => w !== '');
}
