/**
 * Addresses as the gateway's tools read and print them: IPv4 and IPv6 text, prefixes, masks and networks.
 */

export type Ip = { family: 4 | 6; value: bigint };

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

export function bits(family: 4 | 6): number {
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

export function sameInet(a: Inet, b: Inet): boolean {
  return a.family === b.family && a.value === b.value && a.prefix === b.prefix;
}
