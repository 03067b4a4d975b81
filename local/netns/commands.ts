/**
 * Which commands the network-namespace gateway runs for real, and which it refuses. A gateway pod here is a network
 * namespace on the host, not a container: whatever it runs runs as root on the host's filesystem. So pods/exec, the
 * pod's init containers and its postStart hook may only run what kube-ovn's gateway is driven with — its
 * nat-gateway.sh (as an argv, or the `bash -c "bash /kube-ovn/nat-gateway.sh …"` string kube-ovn's controllers up to
 * 1.16 send), the inspection tools (ip, tc, iptables-save, …) and `kill 1` — and every word must be made of the
 * characters those commands use. Anything else is refused with exit 126, before a process starts
 * (local/netns/README.md, docs/adr/0070-netns-gateway-mode.md).
 */
import { NAT_GATEWAY_SCRIPT } from '../../shared/domain/kube-ovn.js';

export type Verdict =
  | { kind: 'run'; argv: string[] }
  /** `kill 1`: the container's PID 1 dies; the caller restarts the container. */
  | { kind: 'restart' }
  | { kind: 'refuse'; stderr: string; exitCode: number };

/** Characters of every word the gateway is driven with: addresses, CIDRs, rates, device names, option names. */
const WORD = /^[A-Za-z0-9.,:/_+=@%-]*$/;
/** A `bash -c` string: words of WORD separated by spaces (no quotes, no expansions, no operators). */
const SHELL_STRING = /^[A-Za-z0-9.,:/_+=@%\- ]*$/;

const DIRS = ['', '/bin/', '/usr/bin/', '/sbin/', '/usr/sbin/', '/usr/local/bin/', '/usr/local/sbin/'];

/** `name` when `cmd` is `name` or one of the usual absolute paths to it. */
export function programName(cmd: string, names: readonly string[]): string | undefined {
  for (const n of names) if (DIRS.some((d) => cmd === `${d}${n}`)) return n;
  return undefined;
}

const refuse = (what: string, why: string): Verdict => ({
  kind: 'refuse',
  stderr: `${what}: refused by the lab's network-namespace gateway: ${why}\n`,
  exitCode: 126,
});

const SHELLS = ['bash', 'sh'];
const TOOLS = [
  'ip',
  'tc',
  'iptables',
  'iptables-save',
  'iptables-legacy',
  'iptables-legacy-save',
  'arping',
  'sysctl',
  'cat',
  'true',
  'false',
  'kill',
];

/** iproute2 objects that only read or change this namespace's own links, addresses, routes and neighbours. */
const IP_OBJECTS = new Set([
  'a',
  'addr',
  'address',
  'l',
  'link',
  'r',
  'ro',
  'route',
  'n',
  'neigh',
  'neighbor',
  'neighbour',
  'ru',
  'rule',
]);
const TC_OBJECTS = new Set(['q', 'qdisc', 'c', 'class', 'f', 'filter']);
/** Global options of ip and tc that only change how output is printed. */
const PRINT_OPTIONS = new Set([
  '-o',
  '-oneline',
  '-4',
  '-6',
  '-d',
  '-details',
  '-s',
  '-stats',
  '-statistics',
  '-j',
  '-json',
  '-p',
  '-pretty',
  '-br',
  '-brief',
  '-c',
  '-color',
  '-r',
  '-resolve',
]);
/** The only kernel settings a gateway's postStart hook changes (per network namespace), and that can be read. */
const SYSCTLS = new Set(['net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1']);
const SYSCTL_KEYS = new Set([...SYSCTLS].map((s) => s.split('=')[0]!));

function sysctl(args: readonly string[]): string | undefined {
  if (args.length === 2 && args[0] === '-w' && SYSCTLS.has(args[1]!)) return undefined;
  const keys = args[0] === '-n' ? args.slice(1) : args;
  if (keys.length > 0 && keys.every((k) => SYSCTL_KEYS.has(k))) return undefined;
  return `only -w ${[...SYSCTLS].join(' or -w ')}, or reading ${[...SYSCTL_KEYS].join(' or ')}`;
}

/** ip/tc: print options, then an object from `objects`; words that leave the namespace or run programs refused. */
function iproute(name: string, args: readonly string[], objects: ReadonlySet<string>): string | undefined {
  let i = 0;
  for (; i < args.length && args[i]!.startsWith('-'); i++) {
    const opt = args[i]!.replace(/^--/, '-');
    if (!PRINT_OPTIONS.has(opt)) return `option ${args[i]} is not allowed`;
  }
  const object = args[i];
  if (object === undefined) return `${name} needs an object`;
  if (!objects.has(object)) return `object ${object} is not allowed`;
  const leaves = args.slice(i + 1).find((a) => ['netns', 'exec', 'vrf', 'batch'].includes(a));
  return leaves === undefined ? undefined : `${leaves} is not allowed`;
}

/** What a tool may be given; undefined = allowed. */
function toolProblem(name: string, args: readonly string[]): string | undefined {
  switch (name) {
    case 'ip':
      return iproute(name, args, IP_OBJECTS);
    case 'tc':
      return iproute(name, args, TC_OBJECTS);
    case 'iptables':
    case 'iptables-save':
    case 'iptables-legacy':
    case 'iptables-legacy-save': {
      // --modprobe names a program iptables would run.
      const bad = args.find((a) => a === '-M' || a.startsWith('--modprobe'));
      return bad === undefined ? undefined : `${bad} is not allowed`;
    }
    case 'sysctl':
      return sysctl(args);
    case 'cat':
      // What kube-ovn's script keeps there (nat-gateway.env): the pod's private /etc/kube-ovn only.
      return args.length > 0 &&
        args.every((a) => /^\/etc\/kube-ovn\/[A-Za-z0-9._-]+$/.test(a) && !a.includes('..'))
        ? undefined
        : 'only files in /etc/kube-ovn';
    default:
      return undefined;
  }
}

/** `kill [-SIG] 1` restarts the container; no other process can be signalled from a gateway pod here. */
function kill(args: readonly string[]): Verdict {
  const pids = args.filter((a) => !a.startsWith('-'));
  const signal = args.find((a) => a.startsWith('-'));
  if (signal !== undefined && !/^-(\d+|[A-Z]+)$/.test(signal))
    return { kind: 'refuse', stderr: `kill: bad signal name '${signal.slice(1)}'\n`, exitCode: 1 };
  if (pids.length === 0)
    return { kind: 'refuse', stderr: 'kill: usage: kill [-s sigspec] pid ...\n', exitCode: 2 };
  const other = pids.find((p) => p !== '1');
  if (other !== undefined)
    return { kind: 'refuse', stderr: `kill: (${other}) - No such process\n`, exitCode: 1 };
  return { kind: 'restart' };
}

/** A `bash -c` string allowed only when it is `bash|sh <script> <words>`: kube-ovn ≤ 1.16's exec form. */
function shellString(shell: string, text: string): Verdict {
  if (!SHELL_STRING.test(text))
    return refuse(shell, '-c is only run with plain words (no quotes, expansions or operators)');
  const words = text.split(' ').filter((w) => w !== '');
  if (programName(words[0] ?? '', SHELLS) === undefined || words[1] !== NAT_GATEWAY_SCRIPT)
    return refuse(shell, `-c is only run for "bash ${NAT_GATEWAY_SCRIPT} …"`);
  return { kind: 'run', argv: [shell, '-c', text] };
}

/** The verdict on one argv, as pods/exec, an init container or a postStart hook would run it. */
export function judge(argv: readonly string[]): Verdict {
  const [cmd, ...args] = argv;
  if (cmd === undefined || cmd === '')
    return { kind: 'refuse', stderr: 'bash: : command not found\n', exitCode: 127 };
  const bad = argv.find((a) => !WORD.test(a));
  const shell = programName(cmd, SHELLS);
  if (shell !== undefined && args[0] === '-c' && args.length === 2) return shellString(cmd, args[1]!);
  if (bad !== undefined) return refuse(cmd, `the word ${JSON.stringify(bad)} has characters outside ${WORD}`);
  if (shell !== undefined) {
    if (args[0] !== NAT_GATEWAY_SCRIPT) return refuse(cmd, `only ${NAT_GATEWAY_SCRIPT} is run by a shell`);
    return { kind: 'run', argv: [...argv] };
  }
  if (cmd === NAT_GATEWAY_SCRIPT) return { kind: 'run', argv: [...argv] };
  const tool = programName(cmd, TOOLS);
  if (tool === undefined)
    return { kind: 'refuse', stderr: `bash: ${cmd}: command not found\n`, exitCode: 127 };
  if (tool === 'kill') return kill(args);
  const problem = toolProblem(tool, args);
  return problem === undefined ? { kind: 'run', argv: [...argv] } : refuse(cmd, problem);
}

/** The kernel messages of a tc operation this machine's kernel cannot do (no police action, fq_codel, matchall). */
const KERNEL_LIMITS = [
  'Error: Failed to load TC action module.',
  'Error: Specified qdisc kind is unknown.',
  'Error: TC classifier not found.',
];

/**
 * The kernel's message when a failed command failed only because this kernel lacks a tc module: its stderr carries
 * one of the kernel's messages, and every command the script reports as failed is a tc command using police,
 * fq_codel or matchall. Undefined for a success or any other failure.
 */
export function kernelLimited(outcome: { exitCode: number; stderr: string }): string | undefined {
  if (outcome.exitCode === 0) return undefined;
  const message = KERNEL_LIMITS.find((m) => outcome.stderr.includes(m));
  if (!message) return undefined;
  const failed = [...outcome.stderr.matchAll(/failed to exec command "([^"]*)"/g)].map((m) => m[1]!);
  const onlyTc = failed.every((c) => /^tc .*\b(police|fq_codel|matchall)\b/.test(c));
  return onlyTc ? message : undefined;
}
