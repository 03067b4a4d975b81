/**
 * kube-ovn release lines and their nat-gateway.sh: which release a gateway pod is (its vpc-nat-gateway image tag),
 * where that release's script is in --gateway-scripts, and how each release sets its gateway pod up (which routes
 * the CNI gives it, its container environment, its postStart hook, the init exec the controller sends). The facts
 * are kube-ovn's pod template and controller at each release tag; local/netns/README.md lists them.
 */
import { constants } from 'node:fs';
import { access, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { NAT_GATEWAY_SCRIPT } from '../../shared/domain/kube-ovn.js';

export const RELEASE_LINES = ['1.12', '1.13', '1.14', '1.15', '1.16', 'master'] as const;
export type ReleaseLine = (typeof RELEASE_LINES)[number];

export function isReleaseLine(v: string): v is ReleaseLine {
  return (RELEASE_LINES as readonly string[]).includes(v);
}

/** [major, minor] of a numbered line; master sorts after every numbered one. */
function order(line: string): number {
  if (line === 'master') return Number.POSITIVE_INFINITY;
  const [a, b] = line.split('.').map(Number);
  return (a ?? 0) * 1000 + (b ?? 0);
}

/** Whether `line` is `since` or newer (master is newer than every numbered line). */
export function atLeast(line: ReleaseLine, since: ReleaseLine): boolean {
  return order(line) >= order(since);
}

/**
 * The release line of a gateway image (`…/vpc-nat-gateway:v1.15.2` → 1.15, `:master` → master); a numbered tag newer
 * than the newest numbered line is master's. Undefined when the image carries no such tag.
 */
export function releaseOfImage(image: string | undefined): ReleaseLine | undefined {
  const tag = image?.match(/:([^:/@]+)(?:@.*)?$/)?.[1];
  if (!tag) return undefined;
  if (tag === 'master') return 'master';
  const m = tag.match(/^v?(\d+)\.(\d+)(?:\.|$|-)/);
  if (!m) return undefined;
  const line = `${Number(m[1])}.${Number(m[2])}`;
  if (isReleaseLine(line)) return line;
  return order(line) > order('1.16') ? 'master' : undefined;
}

function versionKey(dir: string): number[] {
  return (dir.match(/\d+/g) ?? []).map(Number);
}

function newer(a: string, b: string): boolean {
  const x = versionKey(a);
  const y = versionKey(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? -1) !== (y[i] ?? -1)) return (x[i] ?? -1) > (y[i] ?? -1);
  }
  return false;
}

/** Whether a directory of --gateway-scripts serves `line`: `master`, or `v1.13.0`, `1.13`, `v1.13` for 1.13. */
function serves(dir: string, line: ReleaseLine): boolean {
  if (line === 'master') return dir === 'master';
  return dir === line || dir === `v${line}` || dir.startsWith(`v${line}.`) || dir.startsWith(`${line}.`);
}

export interface ScriptSet {
  /** The directory given as --gateway-scripts. */
  root: string;
  /** The directory holding each release line's nat-gateway.sh (the newest one when several serve a line). */
  dirs: Partial<Record<ReleaseLine, string>>;
}

/**
 * Reads --gateway-scripts: `<dir>/<release>/nat-gateway.sh`, one per release. Throws with the reason when the
 * directory is missing or unreadable or holds no readable script.
 */
export async function readScriptSet(root: string): Promise<ScriptSet> {
  let entries: string[];
  try {
    entries = await readdir(root);
  } catch (e) {
    throw new Error(`--gateway-scripts ${root}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  const dirs: Partial<Record<ReleaseLine, string>> = {};
  for (const name of entries.sort()) {
    const script = join(root, name, 'nat-gateway.sh');
    const readable = await access(script, constants.R_OK).then(
      () => true,
      () => false,
    );
    if (!readable) continue;
    for (const line of RELEASE_LINES) {
      const have = dirs[line];
      if (serves(name, line) && (have === undefined || newer(name, have.split('/').pop()!)))
        dirs[line] = join(root, name);
    }
  }
  if (Object.keys(dirs).length === 0)
    throw new Error(
      `--gateway-scripts ${root}: no readable <release>/nat-gateway.sh (expected directories such as v1.12.35, v1.16.0, master)`,
    );
  return { root, dirs };
}

/**
 * A copy of `dir`'s nat-gateway.sh in `into` with the fq_codel leaf qdisc of its HTB classes swapped for pfifo (the
 * one substitution), for kernels without fq_codel. Returns the copy's directory and how many lines changed.
 */
export async function pfifoCopy(dir: string, into: string): Promise<{ dir: string; changed: number }> {
  const text = await readFile(join(dir, 'nat-gateway.sh'), 'utf8');
  let changed = 0;
  const swapped = text.replace(
    /(tc qdisc replace dev \S+ parent 1:\$classid) fq_codel"/g,
    (_m, head: string) => {
      changed++;
      return `${head} pfifo"`;
    },
  );
  await mkdir(into, { recursive: true });
  await writeFile(join(into, 'nat-gateway.sh'), swapped, { mode: 0o555 });
  return { dir: into, changed };
}

/** What kube-ovn's controller of each release sends to initialise a running gateway pod. */
export function controllerInitExecs(
  line: ReleaseLine,
  facts: { serviceCidr: string; lanGateway: string; externalCidr: string; externalGateway: string },
): string[][] {
  const shell = (args: string): string[] => ['/bin/bash', '-c', `bash ${NAT_GATEWAY_SCRIPT} ${args}`];
  if (line === '1.12')
    return [
      shell(`init ${facts.serviceCidr},${facts.lanGateway}`),
      shell(`ext-subnet-route-add ${facts.externalCidr},${facts.externalGateway}`),
    ];
  if (line === 'master') return [['bash', NAT_GATEWAY_SCRIPT, 'init']];
  return [shell('init ')];
}

/** The container environment kube-ovn gives the gateway container (1.15+: the external gateway addresses). */
export function releaseEnv(line: ReleaseLine, externalGateway: string): Record<string, string> {
  return atLeast(line, '1.15') ? { GATEWAY_V4: externalGateway, GATEWAY_V6: '' } : {};
}

/** The postStart hook of the gateway container (1.15+). */
export function releasePostStart(line: ReleaseLine): string[] | undefined {
  return atLeast(line, '1.15') ? ['sysctl', '-w', 'net.ipv4.ip_forward=1'] : undefined;
}
