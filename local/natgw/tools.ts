/**
 * The small programs of the gateway image besides ip, tc and iptables that the scripts call or a person types:
 * iputils `arping`, busybox `ipcalc`, `modprobe` and `lsmod`, `cat` of the container's files.
 */
import { formatIp, parseIp } from './addr.js';
import { fail, type NetState, ok, type ToolResult } from './state.js';

/** Who else on the external segment answers ARP for an address (undefined: nobody). */
export type ArpAnswerer = (ip: string) => string | undefined;

interface ArpingArgs {
  dev: string;
  count: number;
  dad: boolean;
  unsolicited: boolean;
  target?: string;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a simulated tool's argument parser: one branch per option or word, in the order the real tool reads them (ADR 0054)
function parseArping(args: readonly string[]): ArpingArgs | ToolResult {
  const a: ArpingArgs = { dev: 'eth0', count: 3, dad: false, unsolicited: false };
  for (let i = 0; i < args.length; i++) {
    const x = args[i]!;
    if (x === '-I') a.dev = args[++i] ?? '';
    else if (x === '-c' || x === '-w') {
      const v = args[++i] ?? '';
      if (!/^\d+$/.test(v)) return fail(`arping: invalid argument: '${v}'\n`, 2);
      if (x === '-c') a.count = Number(v);
    } else if (x === '-D') a.dad = true;
    else if (x === '-U' || x === '-A') a.unsolicited = true;
    else if (x === '-q' || x === '-f' || x === '-b') {
      // accepted
    } else if (x.startsWith('-')) return fail(`arping: invalid option -- '${x.slice(1)}'\n`, 2);
    else a.target = x;
  }
  return a;
}

/**
 * iputils arping, enough for `arping -I net1 -c 3 -D <ip>` (duplicate address detection: exit 1 when someone
 * answers) and the unsolicited `-U` / `-A` announcements (sent from the address itself, always exit 0).
 */
export function arping(net: NetState, args: readonly string[], answerer: ArpAnswerer): ToolResult {
  const a = parseArping(args);
  if ('code' in a) return a;
  if (a.target === undefined)
    return fail('Usage: arping [-AbDfhqUV] [-c count] [-w timeout] [-I device] destination\n', 2);
  const l = net.link(a.dev);
  if (!l) return fail(`arping: Device ${a.dev} not available.\n`, 2);
  const t = parseIp(a.target);
  if (t?.family !== 4) return fail(`arping: ${a.target}: Name or service not known\n`, 2);
  if (!l.up) return fail(`arping: Interface "${a.dev}" is down\n`, 2);
  const own = formatIp(4, l.addresses.find((x) => x.family === 4)?.value ?? 0n);
  const from = a.dad ? '0.0.0.0' : a.unsolicited ? a.target : own;
  const head = `ARPING ${a.target} from ${from} ${a.dev}\n`;
  const silence = `${head}Sent ${a.count} probes (${a.count} broadcast(s))\nReceived 0 response(s)\n`;
  if (a.unsolicited) return ok(silence);
  const answer = answerer(a.target);
  if (answer) {
    return {
      out: `${head}Unicast reply from ${a.target} [${answer.toUpperCase()}]  0.612ms\nSent 1 probes (1 broadcast(s))\nReceived 1 response(s)\n`,
      err: '',
      code: a.dad ? 1 : 0,
    };
  }
  return { out: silence, err: '', code: a.dad ? 0 : 1 };
}

const IPCALC_USAGE =
  'BusyBox v1.37.0 multi-call binary.\n\nUsage: ipcalc [-bnmphs] ADDRESS[/PREFIX] [NETMASK]\n\n' +
  'Calculate and display network settings from IP address\n\n\t-b\tBroadcast address\n\t-n\tNetwork address\n' +
  '\t-m\tDefault netmask for IP\n\t-p\tPrefix for IP/NETMASK\n\t-h\tResolved host name\n\t-s\tNo error messages\n';

/** busybox ipcalc -n / -p, for the complaints 1.12's eip-add lets through (its values are never used). */
export function ipcalc(args: readonly string[]): ToolResult {
  const flags = args.filter((a) => a.startsWith('-'));
  const [address] = args.filter((a) => !a.startsWith('-'));
  if (address === undefined) return fail(IPCALC_USAGE, 1);
  const [ip = '', prefix] = address.split('/');
  const v4 = parseIp(ip);
  if (v4?.family !== 4) return fail(`ipcalc: bad IP address: ${ip}\n`, 1);
  let len = 32;
  if (prefix !== undefined) {
    if (!/^\d+$/.test(prefix)) return fail(`ipcalc: invalid number '${prefix}'\n`, 1);
    len = Number(prefix);
    if (len > 32) return fail(`ipcalc: number ${len} is not in 0..32 range\n`, 1);
  }
  const mask = len === 0 ? 0n : (0xffffffffn << BigInt(32 - len)) & 0xffffffffn;
  const out: string[] = [];
  if (flags.includes('-n')) out.push(`NETWORK=${formatIp(4, v4.value & mask)}`);
  if (flags.includes('-p')) out.push(`PREFIX=${len}`);
  return ok(out.map((l) => `${l}\n`).join(''));
}

/** `cat <file>`: the container's files the scripts write (the env file from 1.15). */
export function cat(net: NetState, args: readonly string[]): ToolResult {
  let out = '';
  for (const f of args) {
    const text = net.files.get(f);
    if (text === undefined)
      return { out, err: `cat: can't open '${f}': No such file or directory\n`, code: 1 };
    out += text;
  }
  return ok(out);
}

/** busybox modprobe: the image carries no kernel modules. */
export function modprobe(args: readonly string[]): ToolResult {
  if (args.length === 0) return fail('modprobe: usage: modprobe [-alrqvsD] MODULE [SYMBOL=VALUE]...\n', 1);
  return fail("modprobe: can't change directory to '/lib/modules': No such file or directory\n", 1);
}

/** busybox lsmod: the node has not loaded the ifb module (no gateway on it has shaped ingress yet). */
export function lsmod(): ToolResult {
  return ok('Module                  Size  Used by    Not tainted\n');
}
