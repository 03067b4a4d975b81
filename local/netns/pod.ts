/**
 * One gateway pod as Linux namespaces (local/netns/README.md has the picture):
 *
 * - `<id>`: the pod's network namespace — eth0 and net1 with the addresses and routes the CNI gives them;
 * - `<id>-ext`: the external router — the other end of net1, holding the external subnet's gateway address, so it
 *   answers ARP there as the subnet's router does;
 * - `<id>-lan`: the VPC side — the other end of eth0, holding the VPC subnet's gateway address;
 * - a mount namespace (the container's view, bound to a file in the run's state directory): /run a private tmpfs
 *   that lists only the pod's own network namespace, /etc/kube-ovn a private directory, /kube-ovn the release's
 *   script directory, read-only.
 *
 * Every command runs as `nsenter --mount=<view> -- ip netns exec <id> <argv…>`: an argv, never a shell string.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { PodFacts, Route } from './facts.js';
import { must, type RunOptions, type RunResult, run } from './host.js';

export interface PodPaths {
  /** The pod's network namespace name; the router and LAN namespaces are `<id>-ext` and `<id>-lan`. */
  id: string;
  /** The pod's own directory in the run's state directory. */
  dir: string;
  /** The file its mount namespace is bound to (on a private mount of the state directory). */
  view: string;
  /** What /kube-ovn is inside the pod: the release's script directory. */
  scriptDir: string;
}

const prefixLen = (cidr: string): string => cidr.split('/')[1]!;
const address = (cidr: string): string => cidr.split('/')[0]!;

export class PodNet {
  readonly ext: string;
  readonly lan: string;

  constructor(
    readonly facts: PodFacts,
    readonly paths: PodPaths,
  ) {
    this.ext = `${paths.id}-ext`;
    this.lan = `${paths.id}-lan`;
  }

  /**
   * The namespaces as the CNI leaves them, and the container's mount namespace. iproute2's batch mode (one process
   * per namespace, one command per line) keeps this to a handful of processes; every value in it was checked to be
   * an IPv4 address, CIDR or MAC (facts.ts).
   */
  async create(): Promise<void> {
    const { id } = this.paths;
    const f = this.facts;
    const batch = (ns: string | undefined, commands: string[]): Promise<string> =>
      must(['ip', ...(ns ? ['-n', ns] : []), '-batch', '-'], { stdin: `${commands.join('\n')}\n` });
    await batch(
      undefined,
      [id, this.ext, this.lan].map((ns) => `netns add ${ns}`),
    );
    // net1 ↔ ext0 (router) and eth0 ↔ lan0, created inside the peers' namespaces: no name on the host.
    const side = (dev: string, peer: string, gateway: string, own: string): string[] => [
      'link set lo up',
      `link add ${dev} type veth peer name ${peer} netns ${id}`,
      `addr add ${gateway}/${prefixLen(own)} dev ${dev}`,
      `link set ${dev} up`,
    ];
    await batch(this.ext, side('ext0', 'net1', f.net1.gateway, f.net1.address));
    await batch(this.lan, side('lan0', 'eth0', f.eth0.gateway, f.eth0.address));
    // No IPv6 duplicate address detection: the link-local address is listed without "tentative" at once.
    await must([
      'ip',
      'netns',
      'exec',
      id,
      'sysctl',
      '-q',
      '-w',
      'net.ipv6.conf.eth0.accept_dad=0',
      'net.ipv6.conf.net1.accept_dad=0',
    ]);
    const route = (r: Route, dev: string): string =>
      `route replace ${r.dst === '0.0.0.0/0' ? 'default' : r.dst} via ${r.gw} dev ${dev}`;
    await batch(id, [
      'link set lo up',
      `link set eth0 address ${f.eth0.mac}`,
      `link set net1 address ${f.net1.mac}`,
      `addr add ${f.eth0.address} dev eth0`,
      'link set eth0 up',
      `addr add ${f.net1.address} dev net1`,
      'link set net1 up',
      ...f.routes.eth0.map((r) => route(r, 'eth0')),
      ...f.routes.net1.map((r) => route(r, 'net1')),
    ]);
    await this.createView();
  }

  /** The container's mount namespace: private /run (listing only its own netns), /etc/kube-ovn, /kube-ovn. */
  private async createView(): Promise<void> {
    const { id, dir, view, scriptDir } = this.paths;
    const etc = join(dir, 'etc-kube-ovn');
    const self = join(dir, 'netns');
    await mkdir(etc, { recursive: true });
    await writeFile(self, '');
    await writeFile(view, '');
    await must(['unshare', `--mount=${view}`, '--propagation', 'private', 'true']);
    const inView = (argv: string[]): Promise<string> => must(['nsenter', `--mount=${view}`, '--', ...argv]);
    await inView(['mount', '--bind', `/run/netns/${id}`, self]);
    await inView(['mount', '-t', 'tmpfs', '-o', 'mode=0755,size=8m', 'tmpfs', '/run']);
    await inView(['mkdir', '-p', '/run/netns']);
    await inView(['touch', `/run/netns/${id}`]);
    await inView(['mount', '--bind', self, `/run/netns/${id}`]);
    await inView(['mount', '--bind', etc, '/etc/kube-ovn']);
    await inView(['mount', '--bind', '-o', 'ro', scriptDir, '/kube-ovn']);
  }

  /** Runs `argv` inside the pod (its network namespace and container view). */
  exec(argv: readonly string[], options: RunOptions): Promise<RunResult> {
    return run(
      ['nsenter', `--mount=${this.paths.view}`, '--', 'ip', 'netns', 'exec', this.paths.id, ...argv],
      options,
    );
  }

  destroy(): Promise<void> {
    return destroyPod(this.paths);
  }

  /** What the pod is, for logs. */
  describe(): string {
    const f = this.facts;
    return `${f.namespace}/${f.name} (kube-ovn ${f.release}) as netns ${this.paths.id}: net1 ${f.net1.address} → router ${address(f.net1.gateway)} (${this.ext}), eth0 ${f.eth0.address} → ${f.eth0.gateway} (${this.lan})`;
  }
}

/** Removes a pod's container view first (it holds the pod's netns), then its three namespaces and its directory. */
export async function destroyPod(paths: Pick<PodPaths, 'id' | 'dir' | 'view'>): Promise<void> {
  await run(['umount', '-l', paths.view]);
  for (const ns of [paths.id, `${paths.id}-ext`, `${paths.id}-lan`]) await run(['ip', 'netns', 'delete', ns]);
  await rm(paths.dir, { recursive: true, force: true });
  await rm(paths.view, { force: true });
}
