/**
 * The host side of the network-namespace gateway: running a program as an argv (never a shell string), the
 * preflight that refuses the mode when it cannot work, the names of everything it creates (a recognisable prefix plus
 * the owning process id), and the removal of what a previous run left behind.
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/** Every namespace and state directory of this mode is named `eipgw-<pid>-…`. */
export const PREFIX = 'eipgw';

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  stdin?: string;
  timeoutMs?: number;
  /** Called with the child while it runs (so that a stop can kill it). */
  track?: (child: ReturnType<typeof spawn>, done: boolean) => void;
}

/** Runs `argv` (no shell) and collects its output; a signal death is exit 128+n, as a shell reports it. */
export function run(argv: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const [cmd, ...args] = argv;
  return new Promise((resolve) => {
    const child = spawn(cmd!, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: options.env ?? { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
    });
    options.track?.(child, false);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer =
      options.timeoutMs !== undefined
        ? setTimeout(() => {
            timedOut = true;
            child.kill('SIGKILL');
          }, options.timeoutMs)
        : undefined;
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.stdin.on('error', () => {});
    child.stdin.end(options.stdin ?? '');
    const finish = (exitCode: number, extra = ''): void => {
      clearTimeout(timer);
      options.track?.(child, true);
      resolve({
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString() + extra,
        exitCode,
      });
    };
    child.on('error', (e: NodeJS.ErrnoException) =>
      finish(e.code === 'ENOENT' ? 127 : 126, `${cmd}: ${e.code ?? e.message}\n`),
    );
    child.on('close', (code, signal) => {
      if (timedOut) finish(137, `${cmd}: killed after ${options.timeoutMs} ms\n`);
      else if (code !== null) finish(code);
      else finish(128 + (signal ? (SIGNALS[signal] ?? 1) : 1));
    });
  });
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

/** Runs `argv` and throws with its stderr unless it exits 0. */
export async function must(argv: readonly string[], options: RunOptions = {}): Promise<string> {
  const r = await run(argv, options);
  if (r.exitCode !== 0)
    throw new Error(`${argv.join(' ')} exited ${r.exitCode}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

/** The programs the mode needs on the host, and the busybox applets kube-ovn's image provides. */
export const REQUIRED_TOOLS = [
  'ip',
  'tc',
  'iptables',
  'iptables-save',
  'arping',
  'bash',
  'nsenter',
  'unshare',
  'mount',
  'umount',
  'sysctl',
] as const;

export function which(name: string, path = process.env.PATH ?? ''): string | undefined {
  for (const dir of [...path.split(delimiter), '/usr/sbin', '/sbin']) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Why the mode cannot run here (undefined when it can): not Linux, not root, a required program missing, or
 * --gateway-scripts missing or unreadable.
 */
export async function preflight(scripts: string | undefined): Promise<string | undefined> {
  if (process.platform !== 'linux')
    return `--gateway=netns needs Linux (network namespaces); this is ${process.platform}`;
  if (process.getuid?.() !== 0)
    return '--gateway=netns needs root (it creates network namespaces and mounts); run it as root';
  const missing = REQUIRED_TOOLS.filter((t) => which(t) === undefined);
  if (missing.length > 0)
    return `--gateway=netns needs ${missing.join(', ')} on PATH (Debian: apt-get install iproute2 iptables iputils-arping util-linux procps busybox)`;
  if (!scripts)
    return '--gateway=netns needs --gateway-scripts=DIR (one <release>/nat-gateway.sh per release)';
  try {
    await access(scripts, constants.R_OK | constants.X_OK);
  } catch (e) {
    return `--gateway-scripts ${scripts}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`;
  }
  return undefined;
}

export function alive(pid: number): boolean {
  return existsSync(`/proc/${pid}`);
}

/** The base name of backend instance `k` of process `pid`: its state directory and namespaces are named after it. */
export function instanceName(pid: number, k: number): string {
  return `${PREFIX}-${pid}-${k}`;
}

/** The state directory of an instance. */
export function stateDirOf(base: string): string {
  return join(tmpdir(), base);
}

const NAME = new RegExp(`^(${PREFIX}-(\\d+)-\\d+)(?:-|$)`);

/** The instance base name and owning process id encoded in a namespace or state directory name of this mode. */
export function ownerOf(name: string): { base: string; pid: number } | undefined {
  const m = name.match(NAME);
  return m ? { base: m[1]!, pid: Number(m[2]) } : undefined;
}

/** The network namespaces of this mode (`ip netns list`), by name. */
export function listNamespaces(): string[] {
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  return (r.stdout ?? '')
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => ownerOf(n) !== undefined);
}

/** Mount points under `dir` (deepest first), from /proc/self/mountinfo. */
function mountsUnder(dir: string): string[] {
  let text = '';
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/**
 * Removes, synchronously (it also runs from an exit handler), the namespaces and the state directory of instance
 * `base`: its mount namespaces are unmounted first (they hold its pods' network namespaces), then each network
 * namespace is deleted, then the directory. Returns the namespaces it deleted.
 */
export function removeInstance(base: string): string[] {
  const dir = stateDirOf(base);
  for (const m of mountsUnder(dir)) spawnSync('umount', ['-l', m]);
  const namespaces = listNamespaces().filter((n) => ownerOf(n)?.base === base);
  for (const n of namespaces) spawnSync('ip', ['netns', 'delete', n]);
  rmSync(dir, { recursive: true, force: true });
  return namespaces;
}

/** Removes what instances whose process is gone left behind (namespaces, state directories); returns the names. */
export function removeStale(): string[] {
  const bases = new Map<string, number>();
  for (const n of listNamespaces()) {
    const o = ownerOf(n)!;
    bases.set(o.base, o.pid);
  }
  let entries: string[] = [];
  try {
    entries = readdirSync(tmpdir());
  } catch {
    // no temporary directory to look in
  }
  for (const e of entries) {
    const o = ownerOf(e);
    if (o && o.base === e) bases.set(o.base, o.pid);
  }
  const removed: string[] = [];
  for (const [base, pid] of bases) {
    if (pid === process.pid || alive(pid)) continue;
    removed.push(...removeInstance(base));
  }
  return removed;
}
