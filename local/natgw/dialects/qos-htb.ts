/**
 * EIP QoS of kube-ovn 1.16+: shaping instead of policing. Each EIP gets an htb class (id derived from the
 * address) with an fq_codel leaf and a u32 filter sending its traffic there — egress on the external interface's
 * htb root `1:`, ingress on an ifb device `ifb-<ext>` that the external interface's ingress qdisc redirects every
 * packet to (mirred). Both trees get a default class 1:9999 at 10000mbit.
 *
 * Mirrored as the script behaves, including two of its edges: a class id already used by another address makes it
 * try id + 3571 (up to ten times); and the delete ops also remove whatever filter and class hold the address's
 * *derived* id, which after such a collision is the other address's.
 */
import { fields, lines, type Op, type Run } from '../script.js';

type Direction = 'src' | 'dst';

/** ip_to_classid: a weighted sum of the octets, 0x1–0x7ffe, as `0x…`. */
export function classIdOf(r: Run, ip: string): string {
  if (!/^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$/.test(ip)) {
    r.warn(`WARNING: Invalid IP format '${ip}' passed to ip_to_classid. Using default classid 0x1.`);
    return '0x1';
  }
  const [a = 0, b = 0, c = 0, d = 0] = ip.split('.').map(Number);
  const hash = (a * 251 + b * 241 + c * 239 + d * 233) % 32766;
  return `0x${(hash + 1).toString(16)}`;
}

/** burst_mb_to_bytes: awk's `printf "%.0f", <mb> * 1048576` (a bare word is an unset awk variable: 0). */
export function burstBytes(mb: string): string {
  if (/^[A-Za-z_]\w*$/.test(mb) || mb === '') return '0';
  if (!/^\d+(\.\d+)?$/.test(mb)) return '';
  const x = Number(mb) * 1048576;
  const floor = Math.floor(x);
  const frac = x - floor;
  // C's %.0f rounds half to even.
  const rounded = frac > 0.5 || (frac === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  return String(rounded);
}

/** The `tc -p filter show` text matches `match ip <dir> <ip>/32` (grep -i, dots escaped). */
function hasFilter(text: string, direction: Direction, ip: string): boolean {
  return text.toLowerCase().includes(`match ip ${direction} ${ip}/32`.toLowerCase());
}

/** The node line right before the first `match ip <dir> <ip>/32` line (what `grep -iB2 … | grep flowid` finds). */
function nodeLineFor(text: string, direction: Direction, ip: string): string | undefined {
  const all = lines(text);
  const at = all.findIndex((l) => hasFilter(l, direction, ip));
  if (at < 0) return undefined;
  return all.slice(Math.max(0, at - 2), at + 1).find((l) => l.includes('flowid'));
}

const pick = (line: string, re: RegExp): string | undefined => re.exec(line)?.[1];

/** delete_htb_filter_and_class: the address's filter (by prio and handle), then the class it sends to. */
export function deleteFilterAndClass(r: Run, dev: string, ip: string, direction: Direction): void {
  const text = r.capture(`tc -p filter show dev ${dev} parent 1:`, { quiet: true });
  const node = hasFilter(text, direction, ip) ? nodeLineFor(text, direction, ip) : undefined;
  if (node === undefined) return;
  const handle = pick(node, /fh ([0-9a-f:]+)/);
  const prio = pick(node, /pref (\d+)/);
  const classId = pick(node, /flowid 1:([0-9a-fA-F]+)/);
  if (handle && prio)
    r.run(`tc filter del dev ${dev} parent 1: prio ${prio} handle ${handle} u32`, { quiet: true });
  if (classId) r.run(`tc class del dev ${dev} classid 1:0x${classId}`, { quiet: true });
  if (hasFilter(r.capture(`tc -p filter show dev ${dev} parent 1:`, { quiet: true }), direction, ip)) {
    r.warn(`ERROR: Filter for ${ip} (${direction}) still exists on ${dev} after deletion!`);
    r.warn(`WARNING: Filter deletion verification failed for ${ip} on ${dev}`);
  }
}

/** The filter lines sending to class `id` (`grep -E "flowid 1:<id>\b"`). */
function filtersOfClass(r: Run, dev: string, id: string, pretty: boolean): string[] {
  const minor = id.replace(/^0x/, '');
  const text = r.capture(`tc ${pretty ? '-p ' : ''}filter show dev ${dev} parent 1:`, { quiet: true });
  return lines(text).filter((l) => new RegExp(`flowid 1:${minor}(?![A-Za-z0-9_])`).test(l));
}

/** find_available_classid: the derived id, or id + 3571 (wrapping) while another filter holds it. */
function availableClassId(r: Run, dev: string, initial: string): string {
  let id = Number.parseInt(initial, 16);
  if (filtersOfClass(r, dev, initial, true).length === 0) return `0x${id.toString(16)}`;
  // The script checks whether the holder is the same address in the flowid lines only, which never carry the
  // address: every holder counts as another one.
  for (let attempt = 0; attempt < 10; attempt++) {
    id += 3571;
    if (id > 32766) id -= 32766;
    if (id < 1) id = 1;
    const hex = `0x${id.toString(16)}`;
    if (r.capture(`tc class show dev ${dev} classid 1:${hex}`, { quiet: true }) === '') return hex;
  }
  r.warn(
    `WARNING: find_available_classid failed to find available classid after 10 attempts for IP '' on dev '${dev}'. Using classid 0x${id.toString(16)} which may cause collision.`,
  );
  return `0x${id.toString(16)}`;
}

/** delete_htb_filter_by_classid: whatever filter and class hold `id`. */
function deleteByClassId(r: Run, dev: string, id: string): void {
  const held = filtersOfClass(r, dev, id, false).join('\n');
  const prio = pick(held, /pref (\d+)/);
  const handle = pick(held, /fh ([0-9a-f:]+)/) ?? pick(held, /handle (0x[0-9a-fA-F]+)/);
  if (held && prio && handle) {
    r.run(`tc filter del dev ${dev} parent 1: prio ${prio} handle ${handle} u32`, { quiet: true });
    r.run(`tc filter del dev ${dev} parent 1: prio ${prio} handle ${handle} matchall`, { quiet: true });
  }
  r.run(`tc class del dev ${dev} classid 1:${id}`, { quiet: true });
}

/** setup_ifb_device, run in `$(…)`: its `exit 1` ends the subshell only, leaving the device name empty. */
function setupIfb(r: Run, dev: string): string {
  const ifb = `ifb-${dev}`;
  if (r.run(`ip link show ${ifb}`, { silent: true }).code !== 0) {
    if (r.run(`ip link add ${ifb} type ifb`).code !== 0) {
      r.warn(`failed to create IFB device ${ifb} (is IFB kernel module loaded?)`);
      return '';
    }
  }
  r.run(`ip link set ${ifb} txqueuelen 1000`);
  if (r.run(`ip link set ${ifb} up`).code !== 0) {
    r.warn(`failed to bring up IFB device ${ifb}`);
    return '';
  }
  r.run(`tc qdisc add dev ${dev} ingress`, { quiet: true });
  r.run(`tc qdisc add dev ${ifb} root handle 1: htb default 9999`, { quiet: true });
  r.run(`tc class add dev ${ifb} parent 1: classid 1:9999 htb rate 10000mbit ceil 10000mbit`, {
    quiet: true,
  });
  const redirect = lines(r.capture(`tc filter show dev ${dev} parent ffff:`, { quiet: true }));
  if (!redirect.some((l) => l.includes('mirred'))) {
    const add = `tc filter add dev ${dev} parent ffff: protocol all prio 65535 u32 match u32 0 0 action mirred egress redirect dev ${ifb}`;
    if (r.run(add).code !== 0) {
      r.warn(`failed to add redirect filter from ${dev} to ${ifb}`);
      return '';
    }
  }
  return ifb;
}

/** One EIP's class, leaf and filter on `dev`, after removing what the address had there. */
function shape(r: Run, dev: string, rule: string, direction: Direction, label: 'ingress' | 'egress'): void {
  const [ip = '', priority = '', rate = '', burst = ''] = fields(rule);
  deleteFilterAndClass(r, dev, ip, direction);
  const id = availableClassId(r, dev, classIdOf(r, ip));
  r.run(`tc class del dev ${dev} classid 1:${id}`, { quiet: true });
  const bytes = burstBytes(burst);
  r.execCmd(
    `tc class add dev ${dev} parent 1: classid 1:${id} htb rate ${rate}mbit ceil ${rate}mbit burst ${bytes} cburst ${bytes}`,
  );
  r.execCmd(`tc qdisc replace dev ${dev} parent 1:${id} fq_codel`);
  r.execCmd(
    `tc filter add dev ${dev} parent 1: protocol ip prio ${priority} handle ${id} u32 match ip ${direction} ${ip}/32 flowid 1:${id}`,
  );
  if (r.capture(`tc class show dev ${dev} classid 1:${id}`, { quiet: true }) === '') {
    r.warn(`ERROR: Class 1:${id} not found on ${dev}`);
    r.warn(`ERROR: Failed to verify ${label} class for ${ip} on ${dev}`);
  }
  if (!hasFilter(r.capture(`tc -p filter show dev ${dev} parent 1:`, { quiet: true }), direction, ip)) {
    r.warn(`ERROR: Filter for ${ip} (${direction}) NOT found on ${dev}`);
    r.warn(`ERROR: Failed to verify ${label} filter for ${ip} on ${dev}`);
  }
  r.status = 0;
}

export const eipIngressQosAdd: Op = (r, a) => {
  for (const rule of a.rules) {
    const ifb = setupIfb(r, r.extIf);
    shape(r, ifb, rule, 'dst', 'ingress');
  }
};

export const eipEgressQosAdd: Op = (r, a) => {
  const dev = r.extIf;
  for (const rule of a.rules) {
    r.run(`tc qdisc add dev ${dev} root handle 1: htb default 9999`, { quiet: true });
    r.run(`tc class add dev ${dev} parent 1: classid 1:9999 htb rate 10000mbit ceil 10000mbit`, {
      quiet: true,
    });
    shape(r, dev, rule, 'src', 'egress');
  }
};

function hasHtbRoot(r: Run, dev: string): boolean {
  return r.capture(`tc qdisc show dev ${dev}`).includes('htb 1:');
}

export const eipIngressQosDel: Op = (r, a) => {
  const ifb = `ifb-${r.extIf}`;
  for (const rule of a.rules) {
    const ip = fields(rule)[0] ?? '';
    if (r.run(`ip link show ${ifb}`, { silent: true }).code !== 0 || !hasHtbRoot(r, ifb)) continue;
    const id = classIdOf(r, ip);
    deleteFilterAndClass(r, ifb, ip, 'dst');
    deleteByClassId(r, ifb, id);
  }
  r.status = 0;
};

export const eipEgressQosDel: Op = (r, a) => {
  const dev = r.extIf;
  for (const rule of a.rules) {
    const ip = fields(rule)[0] ?? '';
    if (!hasHtbRoot(r, dev)) continue;
    const id = classIdOf(r, ip);
    deleteFilterAndClass(r, dev, ip, 'src');
    deleteByClassId(r, dev, id);
  }
  r.status = 0;
};
