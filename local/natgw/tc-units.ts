/**
 * tc's number formats: rates and sizes as tc parses and prints them, and qdisc/class handles (hexadecimal, as
 * iproute2's get_tc_classid reads them: `1:9999` is minor 0x9999).
 */
import { fail, type NetState, type ToolResult } from './state.js';

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

/** `1:0`, `1:`, `ffff:` → the major handle as tc prints it (`1:`, `ffff:`). */
export function majorOf(handle: string): string | undefined {
  const m = /^([0-9a-fA-F]{1,4}):(0*)$/.exec(handle);
  return m ? `${Number.parseInt(m[1]!, 16).toString(16)}:` : undefined;
}

/** A class id `1:0x42b3` / `1:42b3` / `1:` → major `1:` and minor 0x42b3 / 0 (tc reads both parts as hex). */
export function parseClassId(text: string): { major: string; minor: number } | undefined {
  const m = /^([0-9a-fA-F]{0,4}):(?:(?:0[xX])?([0-9a-fA-F]{1,4}))?$/.exec(text);
  if (!m) return undefined;
  return {
    major: `${Number.parseInt(m[1] || '0', 16).toString(16)}:`,
    minor: m[2] === undefined ? 0 : Number.parseInt(m[2], 16),
  };
}

export function formatClassId(major: string, minor: number): string {
  return `${major}${minor.toString(16)}`;
}

/** tc's answer for a missing or unknown `dev`. */
export function needDev(net: NetState, dev: string | undefined): ToolResult | undefined {
  if (dev === undefined) return fail('Cannot find device ""\n', 1);
  if (!net.link(dev)) return fail(`Cannot find device "${dev}"\n`, 1);
  return undefined;
}

/** iproute2's tick per microsecond (from /proc/net/psched on a high-resolution kernel: 1000/64). */
const TICK_IN_USEC = 15.625;
const u32 = (x: number): number => Math.trunc(x) >>> 0;

/**
 * A burst as tc shows it after the kernel kept it: tc turns the size into transmit time in unsigned ticks at
 * the rate (tc_calc_xmittime) and back (tc_calc_xmitsize), truncating at each unsigned step, so 1 MiB at 10mbit
 * comes back as 1048573 bytes ("1024Kb") and 1024 bytes as 1022.
 */
export function keptSize(rateBitsPerSecond: bigint, bytes: number): number {
  const rate = Number(rateBitsPerSecond / 8n);
  if (rate === 0) return bytes;
  const ticks = u32(u32(1e6 * (bytes / rate)) * TICK_IN_USEC);
  return u32((rate * u32(ticks / TICK_IN_USEC)) / 1e6);
}

/** htb's burst when none is given: rate / hz (1e9 on a high-resolution kernel) + an mtu of 1600 bytes. */
export function defaultBurst(rateBitsPerSecond: bigint): number {
  return Number(rateBitsPerSecond / 8n / 1_000_000_000n) + 1600;
}
