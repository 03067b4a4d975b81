/**
 * Several rules in one nat-gateway.sh call. Every release's script loops over its arguments (`<op> rule1 rule2 …`)
 * and stops at the first rule whose command fails (its `exec_cmd` exits the script), so a batch is the same work as
 * the rules' own calls one after another — minus an exec and the script's preamble per rule
 * (docs/adr/0110-gateway-work-batched-per-pod.md). What is pure about it lives here: the size one exec may carry,
 * how arguments are split into execs, and which rule a failed command names.
 */

/**
 * The most percent-encoded argument bytes one exec carries. The arguments travel in the exec request's URL
 * (`?command=…&command=…`) to the API server and on to the kubelet, whose HTTP servers take at most 1 MiB of request
 * line and headers (Go's http.Server with MaxHeaderBytes 1 << 20 in both); the container then starts them as one argv,
 * within ARG_MAX (2 MiB on the Linux machines measured). A quarter of the smaller limit leaves room for the path, the
 * bearer token and the WebSocket headers.
 */
export const MAX_EXEC_ARG_BYTES = 256 * 1024;

/** The bytes one argument adds to the exec request's URL: `&command=` and the argument, percent-encoded. */
export function argBytes(arg: string): number {
  return '&command='.length + encodeURIComponent(arg).length;
}

/**
 * Splits arguments into runs of at most `maxBytes` (argBytes) and `maxCount` each, in order; an argument larger than
 * `maxBytes` alone still gets a run of its own.
 */
export function chunkArgs(args: readonly string[], maxBytes: number, maxCount: number): string[][] {
  const out: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const a of args) {
    const b = argBytes(a);
    if (current.length > 0 && (bytes + b > maxBytes || current.length >= maxCount)) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(a);
    bytes += b;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/** The address a rule is about: every EIP op's argument starts with it (`<ip>/<len>…`, `<ip>,<priority>,…`, `<ip>`). */
export function ruleAddress(arg: string): string {
  return arg.split(/[/,]/, 1)[0] ?? '';
}

const FAILED_COMMAND = /^failed to exec command "(.*)"$/gm;

/** The commands the script reports as failed (`exec_cmd`'s line on stderr), in the order printed. */
export function failedCommands(stderr: string): string[] {
  return [...stderr.matchAll(FAILED_COMMAND)].map((m) => m[1] ?? '');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * The index of the one argument whose address a failed command names (as a whole address: 10.0.0.5 is not named by
 * a line about 10.0.0.50); -1 when it names none or more than one. The script's per-rule commands carry the rule's
 * address (`ip addr replace <ip>/<len>`, `arping … <ip>`, `tc filter add … match ip dst <ip>`, the hairpin SNAT rule).
 */
export function ruleNamedBy(command: string, args: readonly string[]): number {
  let found = -1;
  for (const [i, arg] of args.entries()) {
    const ip = ruleAddress(arg);
    if (!ip) continue;
    const named = new RegExp(`(^|[^0-9A-Za-z.])${escapeRegExp(ip)}(?![0-9A-Za-z]|\\.[0-9])`).test(command);
    if (!named) continue;
    if (found >= 0 && ruleAddress(args[found]!) !== ip) return -1;
    if (found < 0) found = i;
  }
  return found;
}
