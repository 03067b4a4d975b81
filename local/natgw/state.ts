/**
 * The in-memory network namespace (and the few files) of one simulated NAT gateway container: links, addresses,
 * routes, tc qdiscs, htb classes and u32 filters, the iptables nat and mangle tables, and a small file map. The
 * tools in ip.ts, tc*.ts and iptables*.ts read and change it; the release dialects in dialects/ drive those tools
 * the way each release's nat-gateway.sh does.
 */
import { bits, formatInet, type Inet, type Ip, inSubnet, networkOf, sameInet } from './addr.js';

/** What a tool run printed and how it exited. */
export interface ToolResult {
  out: string;
  err: string;
  code: number;
}

export const ok = (out = ''): ToolResult => ({ out, err: '', code: 0 });
export const fail = (err: string, code = 1): ToolResult => ({ out: '', err, code });

// ---------------------------------------------------------------- links, routes

export interface Link {
  index: number;
  name: string;
  /** Shown after the name in `ip link`/`ip addr` (`net1@if2`). */
  peer: string;
  /** `ifb` for a device made with `ip link add … type ifb`; undefined for the CNI's veth/macvlan links. */
  kind?: 'ifb';
  mac: string;
  mtu: number;
  txqueuelen?: number;
  up: boolean;
  arp: boolean;
  addresses: Address[];
}

/** An address on a link; `brd` when it was given a broadcast address (the CNI's own addresses are). */
export type Address = Inet & { brd?: boolean };

export interface Route {
  /** 'default' or a network prefix. */
  dst: Inet;
  via?: Ip;
  dev: string;
  onlink?: boolean;
}

/** A route the CNI puts in a fresh sandbox (from the pod's annotations), in text form. */
export interface CniRoute {
  /** `0.0.0.0/0` or a CIDR. */
  dst: string;
  via?: string;
  dev: string;
}

// ---------------------------------------------------------------- tc

export interface Police {
  index: number;
  /** Bits per second. */
  rate: bigint;
  /** Bytes. */
  burst: number;
  action: string;
}

export interface U32Node {
  /** `800::800` */
  handle: string;
  order: number;
  /** `match ip src|dst <cidr>`; undefined for `match u32 0 0` (every packet). */
  key?: { direction: 'src' | 'dst'; match: Inet };
  police?: Police;
  /** `action mirred egress redirect dev <dev>`. */
  mirred?: { index: number; dev: string };
  /** `1:42b3`, `:1`; undefined when the node only acts (mirred). */
  flowid?: string;
}

export interface U32Prio {
  prio: number;
  protocol: 'ip' | 'all';
  /** Hash table id, e.g. 0x800. */
  ht: number;
  nextNode: number;
  nodes: U32Node[];
}

export type QdiscKind = 'ingress' | 'htb' | 'fq_codel' | 'pfifo';

export interface Qdisc {
  dev: string;
  kind: QdiscKind;
  /** Major handle as tc prints it: 'ffff:', '1:', '8001:'. */
  handle: string;
  /** 'root', 'ingress', or the class a leaf hangs from ('1:42b3'). */
  parent: string;
  /** htb's `default` class minor (0 = none). */
  defaultMinor?: number;
  prios: U32Prio[];
  nextHt: number;
}

export interface HtbClass {
  dev: string;
  /** The qdisc's major handle, '1:'. */
  major: string;
  minor: number;
  rate: bigint;
  ceil: bigint;
  burst: number;
  cburst: number;
}

// ---------------------------------------------------------------- iptables

export interface NatRule {
  src?: Inet;
  dst?: Inet;
  in?: string;
  out?: string;
  proto?: string;
  dport?: string;
  /** `-m mark --mark <value>/<mask>`, as given (`0x1/0x1`). */
  mark?: string;
  /** `-m conntrack --ctstate <state> [--ctorigdst <ip>]`. */
  conntrack?: { state?: string; origDst?: Inet };
  target: string;
  /** Target options in iptables-save order, e.g. ['--to-destination', '192.168.0.5:80']. */
  targetArgs: string[];
}

export interface Chain {
  builtin: boolean;
  rules: NatRule[];
}

export type TableName = 'nat' | 'mangle';

export const BUILTIN_CHAINS: Record<TableName, readonly string[]> = {
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
};

// ---------------------------------------------------------------- the namespace

export interface NetOptions {
  net1?: Inet;
  eth0?: Inet;
  /** The routes the CNI installs; undefined = a default route via the first host of eth0's subnet. */
  cniRoutes?: readonly { dst: Inet; via?: Ip; dev: string }[];
}

/** Deterministic locally administered MAC from a seed string. */
export function macFrom(seed: string): string {
  let h = 2166136261;
  for (const c of seed) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  const bytes = [0x02, 0x42, (h >>> 24) & 0xff, (h >>> 16) & 0xff, (h >>> 8) & 0xff, h & 0xff];
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':');
}

function cniLink(index: number, name: string, peer: string, mtu: number, own: Inet | undefined): Link {
  return {
    index,
    name,
    peer,
    mac: macFrom(`${name}:${own ? formatInet(own) : ''}`),
    mtu,
    up: true,
    arp: true,
    addresses: own ? [{ ...own, brd: name !== 'lo' }] : [],
  };
}

export class NetState {
  links = new Map<string, Link>();
  routes: Route[] = [];
  qdiscs: Qdisc[] = [];
  classes: HtbClass[] = [];
  /** Each htb qdisc's class hash table (`<dev> <major>`), which decides the order classes are listed in. */
  classHashes = new Map<string, { size: number; count: number; buckets: HtbClass[][] }>();
  tables = new Map<TableName, Map<string, Chain>>();
  /** The container's files the scripts write and read (/etc/kube-ovn/nat-gateway.env). */
  files = new Map<string, string>();
  /** tc action indexes (police, mirred) and the next automatic qdisc handle. */
  actionIndex = 0;
  nextQdiscHandle = 0x8001;

  constructor(private readonly options: NetOptions) {
    this.reset();
  }

  /** Back to what the CNI gives a fresh sandbox: own addresses and the CNI's routes, nothing else. */
  reset(): void {
    const { net1, eth0 } = this.options;
    const lo = cniLink(1, 'lo', '', 65536, { family: 4, value: 0x7f000001n, prefix: 8 });
    lo.mac = '00:00:00:00:00:00';
    lo.arp = false;
    this.links = new Map([
      ['lo', lo],
      ['eth0', cniLink(2, 'eth0', '@if9', 1400, eth0)],
      ['net1', cniLink(3, 'net1', '@if2', 1500, net1)],
    ]);
    this.routes = this.options.cniRoutes
      ? this.options.cniRoutes.map((r) => ({ ...r }))
      : defaultRoutes(eth0);
    this.qdiscs = [];
    this.classes = [];
    this.classHashes = new Map();
    // iptables-nft makes a table on its first write; before init iptables-save prints nothing.
    this.tables = new Map();
    this.files = new Map();
    this.actionIndex = 0;
    this.nextQdiscHandle = 0x8001;
  }

  link(name: string): Link | undefined {
    return this.links.get(name);
  }

  /** The nat table's chains (none before anything wrote to it). */
  get chains(): ReadonlyMap<string, Chain> {
    return this.tables.get('nat') ?? new Map();
  }

  /** A table's chains, created with its built-in chains on first use (as iptables-nft does). */
  table(name: TableName): Map<string, Chain> {
    let t = this.tables.get(name);
    if (!t) {
      t = builtinChains(name);
      this.tables.set(name, t);
    }
    return t;
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
  reachable(gw: Ip, dev: string): boolean {
    const l = this.links.get(dev);
    if (!l) return false;
    return l.addresses.some((a) => inSubnet(gw, a) && a.prefix < bits(a.family));
  }

  /** The qdisc of `dev` with major handle `handle` ('1:', 'ffff:'). */
  qdisc(dev: string, handle: string): Qdisc | undefined {
    return this.qdiscs.find((q) => q.dev === dev && q.handle === handle);
  }

  /** True once `init` has created the script's chains (check_inited's test). */
  get initialised(): boolean {
    return (this.chains.get('SNAT_FILTER')?.rules ?? []).some((r) => r.target === 'SHARED_SNAT');
  }
}

/** Without routes from the pod's annotations, the CNI points the default route at eth0's subnet gateway. */
function defaultRoutes(eth0: Inet | undefined): Route[] {
  if (eth0?.family !== 4 || eth0.prefix >= 31) return [];
  // kube-ovn's subnet gateway defaults to the first host address of the subnet.
  return [
    {
      dst: { family: 4, value: 0n, prefix: 0 },
      via: { family: 4, value: networkOf(eth0) + 1n },
      dev: 'eth0',
    },
  ];
}

/** A table with only its built-in chains (what iptables lists for a table nothing wrote to yet). */
export function builtinChains(table: TableName): Map<string, Chain> {
  return new Map(BUILTIN_CHAINS[table].map((c) => [c, { builtin: true, rules: [] }]));
}

/** Bash word splitting on the default IFS (space, tab, newline); empty words vanish. */
export function words(text: string): string[] {
  return text.split(/[ \t\n]+/).filter((w) => w !== '');
}
