/**
 * The network-namespace gateway backend (`npm start -- --gateway=netns`): every gateway pod of the local API becomes
 * Linux namespaces (pod.ts) and pods/exec runs kube-ovn's own nat-gateway.sh of the pod's release in them, for real,
 * with the machine's iproute2, iptables and arping. Pods are set up as their release does (facts.ts, release.ts):
 * the CNI's addresses and routes, the init containers, the postStart hook, the controller's init exec.
 *
 * Namespaces are named `eipgw-<pid>-<instance>-<n>` and removed on close, at process exit (also after an uncaught
 * exception) and on SIGINT/SIGTERM when nobody else handles them; what a killed run left behind is removed when the
 * next one starts. See local/netns/README.md and docs/adr/0070-netns-gateway-mode.md.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { BackendOutcome, GatewayBackend } from '../kube-api/backend.js';
import { isObject, type JsonObject } from '../kube-api/json.js';
import { judge, kernelLimited } from './commands.js';
import { type PodFacts, podFacts } from './facts.js';
import {
  instanceName,
  listNamespaces,
  must,
  preflight,
  removeInstance,
  removeStale,
  stateDirOf,
  which,
} from './host.js';
import { destroyPod, PodNet, type PodPaths } from './pod.js';
import { pfifoCopy, type ReleaseLine, readScriptSet, type ScriptSet } from './release.js';

export interface NetnsBackendOptions {
  /** --gateway-scripts: one `<release>/nat-gateway.sh` per release (v1.12.35, v1.13.0, …, master). */
  scripts: string | undefined;
  /** The release of a gateway pod whose image carries no `vX.Y` tag (default 1.12). */
  defaultRelease?: ReleaseLine;
  /** Run 1.16+'s QoS with pfifo instead of the fq_codel leaf qdisc this kernel may lack (--gateway-netns-pfifo). */
  pfifo?: boolean;
  /** The cluster's service CIDR (default 10.96.0.0/12, as the kube-ovn stand-ins). */
  serviceCidr?: string;
  /** Longest a single exec may run before it is killed (default 60 s). */
  execTimeoutMs?: number;
  /** What it does (namespaces made, scripts used). */
  log?: (line: string) => void;
  /** What goes wrong or is limited (kernel-limited ops, failed init execs, busybox missing); default: log. */
  warn?: (line: string) => void;
}

export interface KernelLimit {
  pod: string;
  argv: string[];
  message: string;
}

export interface NetnsBackend extends GatewayBackend {
  /** `eipgw-<pid>-<instance>`: the state directory's and every namespace's prefix. */
  readonly base: string;
  /** The pod's network namespace (its router and LAN sides are `<it>-ext` and `<it>-lan`), while it exists. */
  namespaceOf(namespace: string, name: string): string | undefined;
  /** Every namespace of this backend that exists now. */
  namespaces(): string[];
  /** Every exec so far that failed only because this kernel lacks a tc module, with the kernel's message. */
  kernelLimits(): readonly KernelLimit[];
  /** Removes every pod's namespaces and the state directory. */
  close(): Promise<void>;
}

/** The mode cannot run here; the CLI exits 2 with the message. */
export class NetnsRefused extends Error {}

const BUSYBOX_APPLETS = ['ipcalc', 'lsmod', 'modprobe'];
let instances = 0;

interface Slot {
  net?: PodNet;
  ready: Promise<PodNet | undefined>;
  n: number;
}

const keyOf = (pod: JsonObject): string => {
  const m = isObject(pod.metadata) ? pod.metadata : {};
  return `${String(m.namespace)}/${String(m.name)}/${String(m.uid ?? '')}`;
};

class Backend implements NetnsBackend {
  private readonly slots = new Map<string, Slot>();
  private readonly limits: KernelLimit[] = [];
  private readonly running = new Set<ChildProcess>();
  private next = 0;
  private closed = false;

  constructor(
    readonly base: string,
    private readonly dir: string,
    private readonly scriptDirs: Partial<Record<ReleaseLine, string>>,
    private readonly o: Required<
      Pick<NetnsBackendOptions, 'defaultRelease' | 'serviceCidr' | 'execTimeoutMs'>
    > & {
      log: (line: string) => void;
      warn: (line: string) => void;
      root: string;
    },
    private readonly onClose: () => void,
  ) {}

  private env(f: PodFacts): NodeJS.ProcessEnv {
    return {
      PATH: `${join(this.dir, 'bin')}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
      HOME: '/root',
      HOSTNAME: f.name,
      ...f.env,
    };
  }

  /** Runs one argv in the pod after the same checks pods/exec gets (commands.ts). */
  private async runIn(net: PodNet, argv: readonly string[], env: NodeJS.ProcessEnv, stdin = '') {
    const verdict = judge(argv);
    if (verdict.kind === 'restart') return { stdout: '', stderr: '', exitCode: 0, restart: true };
    if (verdict.kind === 'refuse') return { stdout: '', stderr: verdict.stderr, exitCode: verdict.exitCode };
    const r = await net.exec(verdict.argv, {
      env,
      stdin,
      timeoutMs: this.o.execTimeoutMs,
      track: (c, done) => (done ? this.running.delete(c) : this.running.add(c)),
    });
    const limited = kernelLimited(r);
    if (limited) {
      const pod = `${net.facts.namespace}/${net.facts.name}`;
      this.limits.push({ pod, argv: [...argv], message: limited });
      this.o.warn(`netns gateway ${pod}: ${argv.join(' ')}: limited by this kernel: ${limited}`);
    }
    return r;
  }

  private async bringUp(pod: JsonObject, n: number): Promise<{ net: PodNet; inits: BackendOutcome[] }> {
    const facts = podFacts(pod, { defaultRelease: this.o.defaultRelease, serviceCidr: this.o.serviceCidr });
    const scriptDir = this.scriptDirs[facts.release];
    if (!scriptDir)
      throw new Error(
        `pod ${facts.namespace}/${facts.name}: no nat-gateway.sh for kube-ovn ${facts.release} in ${this.o.root}`,
      );
    const net = new PodNet(facts, { ...this.pathsOf(n), scriptDir });
    await net.create();
    this.o.log(
      `netns gateway: ${net.describe()}${facts.releaseFromImage ? '' : ' (release: the default, the image has no vX.Y tag)'}`,
    );
    const env = this.env(facts);
    const inits: BackendOutcome[] = [];
    for (const argv of facts.initContainers) {
      const r = await this.runIn(net, argv, { PATH: env.PATH, HOME: '/root', HOSTNAME: facts.name });
      inits.push(r);
      if (r.exitCode !== 0) return { net, inits };
    }
    // The container runs: its postStart hook, then the controller's init exec (kube-ovn's handleInitVpcNatGw).
    for (const argv of [...(facts.postStart ? [facts.postStart] : []), ...facts.controllerInit]) {
      const r = await this.runIn(net, argv, env);
      if (r.exitCode !== 0)
        this.o.warn(
          `netns gateway ${facts.namespace}/${facts.name}: ${argv.join(' ')} exited ${r.exitCode}: ${(r.stderr || r.stdout).trim()}`,
        );
    }
    return { net, inits };
  }

  async start(pod: JsonObject, restart: boolean): Promise<BackendOutcome[]> {
    if (this.closed) throw new Error('the netns gateway backend is closed');
    const key = keyOf(pod);
    const before = this.slots.get(key);
    // A container restart: the pod's network goes back to what the CNI gave it (its namespaces are made anew).
    if (restart && before) {
      await (await before.ready)?.destroy();
      // Deleted (or closed) while its old namespaces went: nothing to bring up again.
      if (this.closed || this.slots.get(key) !== before) throw new Error(`pod ${key} is gone`);
    }
    const n = before?.n ?? ++this.next;
    const up = this.bringUp(pod, n);
    const slot: Slot = { n, ready: Promise.resolve(undefined) };
    // ready never rejects: a pod that could not be set up has nothing left behind and no network.
    slot.ready = up.then(
      ({ net }) => {
        slot.net = net;
        return net;
      },
      () => destroyPod(this.pathsOf(n)).then(() => undefined),
    );
    this.slots.set(key, slot);
    await slot.ready;
    return (await up).inits;
  }

  private pathsOf(n: number): PodPaths {
    return {
      id: `${this.base}-${n}`,
      dir: join(this.dir, String(n)),
      view: join(this.dir, 'views', `${n}.mnt`),
      scriptDir: '',
    };
  }

  async exec(pod: JsonObject, argv: readonly string[], stdin: string): Promise<BackendOutcome> {
    const net = await this.slots.get(keyOf(pod))?.ready;
    if (!net) return { stdout: '', stderr: 'the gateway pod has no network namespace\n', exitCode: 126 };
    return this.runIn(net, argv, this.env(net.facts), stdin);
  }

  async remove(pod: JsonObject): Promise<void> {
    const key = keyOf(pod);
    const slot = this.slots.get(key);
    if (!slot) return;
    this.slots.delete(key);
    await (await slot.ready)?.destroy();
  }

  namespaceOf(namespace: string, name: string): string | undefined {
    for (const [key, slot] of this.slots)
      if (key.startsWith(`${namespace}/${name}/`) && slot.net) return slot.net.paths.id;
    return undefined;
  }

  namespaces(): string[] {
    return listNamespaces().filter((n) => n === this.base || n.startsWith(`${this.base}-`));
  }

  kernelLimits(): readonly KernelLimit[] {
    return this.limits;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.running) c.kill('SIGKILL');
    await Promise.all([...this.slots.values()].map((s) => s.ready));
    this.slots.clear();
    removeInstance(this.base);
    this.onClose();
  }
}

/** Host directories the container view mounts over; created empty when missing, never written to on the host. */
const MOUNT_POINTS = ['/etc/kube-ovn', '/kube-ovn'];

/**
 * Starts the backend, or throws NetnsRefused with the reason (not Linux, not root, a tool missing, no usable
 * --gateway-scripts). First removes what runs of dead processes left behind.
 */
export async function startNetnsBackend(options: NetnsBackendOptions): Promise<NetnsBackend> {
  const log = options.log ?? (() => {});
  const why = await preflight(options.scripts);
  if (why) throw new NetnsRefused(why);
  let set: ScriptSet;
  try {
    set = await readScriptSet(options.scripts!);
  } catch (e) {
    throw new NetnsRefused((e as Error).message);
  }
  const stale = removeStale();
  if (stale.length > 0)
    log(`netns gateway: removed ${stale.length} namespace(s) left by a run that is gone: ${stale.join(' ')}`);
  const base = instanceName(process.pid, ++instances);
  const dir = stateDirOf(base);
  let dirs: Partial<Record<ReleaseLine, string>>;
  try {
    dirs = await prepare(set, dir, options.pfifo === true, { info: log, warn: options.warn ?? log });
  } catch (e) {
    removeInstance(base);
    throw e;
  }
  const onExit = (): void => {
    removeInstance(base);
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    // Only when no one else handles the signal (npm start does: it stops the stack, which closes this backend).
    if (process.listenerCount(signal) > 1) return;
    removeInstance(base);
    process.off(signal, onSignal);
    process.kill(process.pid, signal);
  };
  process.on('exit', onExit);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  log(
    `netns gateway: kube-ovn's nat-gateway.sh from ${set.root} for ${Object.keys(dirs).join(', ')}; state in ${dir}`,
  );
  return new Backend(
    base,
    dir,
    dirs,
    {
      defaultRelease: options.defaultRelease ?? '1.12',
      serviceCidr: options.serviceCidr ?? '10.96.0.0/12',
      execTimeoutMs: options.execTimeoutMs ?? 60_000,
      log,
      warn: options.warn ?? log,
      root: set.root,
    },
    () => {
      process.off('exit', onExit);
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  );
}

/** The state directory (a private mount for the pods' views, busybox applets), the mount points, pfifo copies. */
async function prepare(
  set: ScriptSet,
  dir: string,
  pfifo: boolean,
  log: { info: (line: string) => void; warn: (line: string) => void },
): Promise<Partial<Record<ReleaseLine, string>>> {
  const views = join(dir, 'views');
  await mkdir(views, { recursive: true });
  await mkdir(join(dir, 'bin'), { recursive: true });
  // A mount namespace can only be bound to a file on a private mount.
  await must(['mount', '--bind', views, views]);
  await must(['mount', '--make-private', views]);
  const busybox = which('busybox');
  if (busybox) for (const a of BUSYBOX_APPLETS) await symlink(busybox, join(dir, 'bin', a));
  else
    log.warn(
      `netns gateway: busybox not found: ${BUSYBOX_APPLETS.join(', ')} (busybox applets in kube-ovn's image) will be missing`,
    );
  for (const m of MOUNT_POINTS) await mkdir(m, { recursive: true });
  const dirs = { ...set.dirs };
  if (!pfifo) return dirs;
  for (const line of ['1.16', 'master'] as const) {
    const from = dirs[line];
    if (!from) continue;
    const copy = await pfifoCopy(from, join(dir, 'pfifo', line));
    dirs[line] = copy.dir;
    log.info(
      `netns gateway: kube-ovn ${line} runs a copy of ${from}/nat-gateway.sh with pfifo for fq_codel (${copy.changed} line(s))`,
    );
  }
  return dirs;
}
