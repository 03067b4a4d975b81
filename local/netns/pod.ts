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

function routeArgv(ns: string, r: Route, dev: string): string[] {
  return [
    'ip',
    '-n',
    ns,
    'route',
    'replace',
    r.dst === '0.0.0.0/0' ? 'default' : r.dst,
    'via',
    r.gw,
    'dev',
    dev,
  ];
}

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

  /** The namespaces as the CNI leaves them, and the container's mount namespace. */
  async create(): Promise<void> {
    const { id } = this.paths;
    const f = this.facts;
    for (const ns of [id, this.ext, this.lan]) {
      await must(['ip', 'netns', 'add', ns]);
      await must(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
    }
    // net1 ↔ ext0 (router) and eth0 ↔ lan0, created inside the peers' namespaces: no name on the host.
    await must([
      'ip',
      '-n',
      this.ext,
      'link',
      'add',
      'ext0',
      'type',
      'veth',
      'peer',
      'name',
      'net1',
      'netns',
      id,
    ]);
    await must([
      'ip',
      '-n',
      this.lan,
      'link',
      'add',
      'lan0',
      'type',
      'veth',
      'peer',
      'name',
      'eth0',
      'netns',
      id,
    ]);
    for (const [dev, mac] of [
      ['eth0', f.eth0.mac],
      ['net1', f.net1.mac],
    ] as const) {
      await must(['ip', '-n', id, 'link', 'set', dev, 'address', mac]);
      // No IPv6 duplicate address detection: the link-local address is listed without "tentative" at once.
      await must(['ip', 'netns', 'exec', id, 'sysctl', '-q', '-w', `net.ipv6.conf.${dev}.accept_dad=0`]);
    }
    const ends: [string, string, string][] = [
      [this.ext, 'ext0', `${f.net1.gateway}/${prefixLen(f.net1.address)}`],
      [this.lan, 'lan0', `${f.eth0.gateway}/${prefixLen(f.eth0.address)}`],
      [id, 'eth0', f.eth0.address],
      [id, 'net1', f.net1.address],
    ];
    for (const [ns, dev, cidr] of ends) {
      await must(['ip', '-n', ns, 'addr', 'add', cidr, 'dev', dev]);
      await must(['ip', '-n', ns, 'link', 'set', dev, 'up']);
    }
    for (const r of f.routes.eth0) await must(routeArgv(id, r, 'eth0'));
    for (const r of f.routes.net1) await must(routeArgv(id, r, 'net1'));
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
