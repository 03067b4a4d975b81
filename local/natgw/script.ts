/**
 * The machinery every release's nat-gateway.sh runs on, re-expressed over the simulated tools: commands built as
 * strings and word-split exactly where the script lets bash do it, then handed to the simulated tool, so
 * malformed arguments fail the way the real tools fail; `exec_cmd`'s failure line, `check_inited`, grep over a
 * tool's output. Nothing is ever evaluated. What each release does with it is in dialects/ (one module per
 * release line difference); runScript dispatches an op through one of them.
 */
import type { KubeOvnRelease } from './releases.js';
import { type NetState, type ToolResult, words } from './state.js';

export type Shell = (argv: string[]) => ToolResult;

export const SCRIPT_PATH = '/kube-ovn/nat-gateway.sh';

/** `exit N` inside the script. */
export class Exit {
  constructor(readonly code: number) {}
}

/** grep -w: the pattern occurs delimited by non-word characters (or the line ends). */
export function grepWord(line: string, pattern: string): boolean {
  if (pattern === '') return false;
  const isWord = (c: string | undefined): boolean => c !== undefined && /[A-Za-z0-9_]/.test(c);
  for (let at = line.indexOf(pattern); at >= 0; at = line.indexOf(pattern, at + 1)) {
    if (!isWord(line[at - 1]) && !isWord(line[at + pattern.length])) return true;
  }
  return false;
}

/** `arr=(${rule//,/ })`: comma fields, empty ones dropped by word splitting. */
export const fields = (rule: string): string[] => words(rule.replaceAll(',', ' '));
/** `x=(${v//\// })` then `$x`: the part before the first slash. */
export const beforeSlash = (v: string | undefined): string => words((v ?? '').replaceAll('/', ' '))[0] ?? '';
export const lines = (text: string): string[] => text.split('\n').filter((l) => l !== '');

export class Run {
  out = '';
  err = '';
  /** Exit status of the last command, which becomes the script's status when it runs off the end. */
  status = 0;
  /** The interfaces the script works on: fixed before 1.15, from /etc/kube-ovn/nat-gateway.env since. */
  vpcIf = 'eth0';
  extIf = 'net1';

  constructor(
    private readonly sh: Shell,
    readonly net: NetState,
    /** The container's environment (GATEWAY_V4, GATEWAY_V6 from the pod spec on 1.15+). */
    readonly env: Readonly<Record<string, string>>,
  ) {}

  echo(text: string): void {
    this.out += `${text}\n`;
  }

  /** `>&2 echo …` */
  warn(text: string): void {
    this.err += `${text}\n`;
  }

  /** A plain command: its output goes to the script's output (`quiet`: `2>/dev/null`). */
  run(cmdline: string, opts: { quiet?: boolean; silent?: boolean } = {}): ToolResult {
    const r = this.sh(words(cmdline));
    if (!opts.silent) this.out += r.out;
    if (!opts.quiet && !opts.silent) this.err += r.err;
    this.status = r.code;
    return r;
  }

  /** `$(cmd)`: stdout captured, stderr still reaches the script's stderr (unless `quiet`). */
  capture(cmdline: string, opts: { quiet?: boolean } = {}): string {
    const r = this.sh(words(cmdline));
    if (!opts.quiet) this.err += r.err;
    return r.out;
  }

  /** `cmd | grep …`: prints the matching lines; true if any matched. */
  grep(cmdline: string, keep: (line: string) => boolean): boolean {
    const hit = lines(this.capture(cmdline)).filter(keep);
    for (const l of hit) this.echo(l);
    this.status = hit.length > 0 ? 0 : 1;
    return hit.length > 0;
  }

  /** exec_cmd: on failure prints `failed to exec command "<cmd>"` on stderr and exits with the command's code. */
  execCmd(cmdline: string): void {
    const r = this.run(cmdline);
    if (r.code !== 0) {
      this.warn(`failed to exec command "${cmdline}"`);
      throw new Exit(r.code);
    }
  }

  /** exec_cmd inside a pipeline's subshell: the failure ends the subshell only. */
  execCmdInSubshell(cmdline: string): number {
    try {
      this.execCmd(cmdline);
      return 0;
    } catch (e) {
      if (e instanceof Exit) return e.code;
      throw e;
    }
  }

  /** check_inited: the SNAT_FILTER → SHARED_SNAT jump must be there. */
  checkInited(): void {
    const found = this.grep(
      'iptables-save -t nat',
      (l) => l.includes('SNAT_FILTER') && l.includes('SHARED_SNAT'),
    );
    if (!found) {
      this.warn('nat gateway not initialized');
      throw new Exit(1);
    }
  }
}

/** The arguments of one op, as the script's functions see them. */
export interface OpArgs {
  /** The words after the op joined by spaces (`$rules`, `$*`): what the echo line shows. */
  joined: string;
  /** `for rule in $@` over the word-split rules. */
  rules: string[];
  /** `for rule in "$@"`: the split words before master, the exec's arguments as given on master. */
  quoted: string[];
}

export type Op = (r: Run, a: OpArgs) => void;

/** One release's script: its ops and what differs around them. */
export interface Dialect {
  release: KubeOvnRelease;
  /** master passes `"$@"` to its functions; before, `$rules` (the joined words, split again). */
  argv: boolean;
  ops: Readonly<Record<string, Op>>;
  /** Ops whose case branch does not echo `<op> <rules>` first (init on 1.15+, help). */
  silent: ReadonlySet<string>;
  /** What the script does before the case statement (1.15+: sources the env file). */
  prelude?: (r: Run) => void;
  /** The `*)` branch; the script then exits 1. */
  unknown: (r: Run, op: string) => void;
}

export function runScript(
  dialect: Dialect,
  sh: Shell,
  net: NetState,
  env: Readonly<Record<string, string>>,
  args: readonly string[],
): ToolResult {
  const [opt = '', ...rest] = args;
  const joined = rest.join(' ');
  const split = words(joined);
  const r = new Run(sh, net, env);
  try {
    dialect.prelude?.(r);
    const op = Object.hasOwn(dialect.ops, opt) ? dialect.ops[opt] : undefined;
    if (!op) {
      dialect.unknown(r, opt);
      throw new Exit(1);
    }
    if (!dialect.silent.has(opt)) r.echo(`${opt} ${joined}`);
    r.status = 0;
    op(r, { joined, rules: split, quoted: dialect.argv ? [...rest] : split });
    return { out: r.out, err: r.err, code: r.status };
  } catch (e) {
    if (e instanceof Exit) return { out: r.out, err: r.err, code: e.code };
    throw e;
  }
}
