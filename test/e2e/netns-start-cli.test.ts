/**
 * `npm start -- --gateway=netns` as a person runs it (scripts/start.ts as a child process): the options refused with
 * exit 2 and the reason, and — as root with kube-ovn's scripts in EIP_KUBE_OVN_SCRIPTS — the whole stack on real
 * namespaces: the demo EIP's address lands on the gateway's net1 through kube-ovn's own script, and Ctrl-C (SIGTERM)
 * leaves no namespace behind.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { listNamespaces, preflight } from '../../local/netns/host.js';
import { kubectlOrSkip } from '../support/kubectl.js';

const root = join(import.meta.dirname, '../..');
const tsx = join(root, 'node_modules/tsx/dist/cli.mjs');
const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'eip-netns-start-'));
const kubeconfig = join(dir, 'kubeconfig');
const children: ChildProcess[] = [];
const SCRIPTS = process.env.EIP_KUBE_OVN_SCRIPTS ? resolve(process.env.EIP_KUBE_OVN_SCRIPTS) : undefined;
const { skip: noKubectl } = kubectlOrSkip();
const why = SCRIPTS
  ? await preflight(SCRIPTS)
  : "EIP_KUBE_OVN_SCRIPTS is unset (a directory with kube-ovn's nat-gateway.sh of each release)";
if (why) console.log(`netns-start-cli.test.ts: the stack on real namespaces is skipped: ${why}`);

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function start(...args: string[]) {
  const child = spawn(
    process.execPath,
    [tsx, join(root, 'scripts/start.ts'), '--kubeconfig', kubeconfig, ...args],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, EIP_KUBE_OVN_SCRIPTS: '' },
    },
  );
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return { child, out: () => out, err: () => err, exited };
}

async function waitFor(s: ReturnType<typeof start>, pattern: RegExp, timeoutMs = 40_000) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const m = s.out().match(pattern);
    if (m) return m;
    if (s.child.exitCode !== null)
      throw new Error(`npm start exited ${s.child.exitCode}:\n${s.out()}${s.err()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${pattern}:\n${s.out()}`);
}

describe('npm start -- --gateway', () => {
  it.concurrent.each([
    [['--gateway=bogus'], '--gateway must be sim or netns, got "bogus"'],
    [['--gateway-scripts=/tmp'], '--gateway-scripts needs --gateway=netns'],
    [['--gateway-netns-pfifo'], '--gateway-netns-pfifo needs --gateway=netns'],
    [
      ['--gateway=netns', '--gateway-release=1.11'],
      '--gateway-release must be one of 1.12, 1.13, 1.14, 1.15, 1.16, master',
    ],
  ])('%j exits 2: %s', async (args, message) => {
    const s = start(...args);
    expect(await s.exited).toBe(2);
    expect(s.err()).toContain(`start: ${message}`);
    expect(s.out()).not.toContain('ready:');
  });

  it('--gateway=netns refuses with the reason when it cannot run: here, scripts that are not there', async () => {
    const s = start(
      '--gateway=netns',
      `--gateway-scripts=${join(dir, 'missing')}`,
      '--no-demo',
      '--no-dashboard',
    );
    expect(await s.exited).toBe(2);
    // Not root, not Linux or a tool missing say so first; else the missing directory.
    expect(s.err()).toMatch(/^start: --gateway(=netns needs|-scripts \S+missing: ENOENT)/m);
    expect(s.out()).not.toContain('ready:');
  });

  it.skipIf(why !== undefined || noKubectl)(
    "runs the stack on namespaces: the demo EIP on net1 by kube-ovn 1.12's own script, nothing left after Ctrl-C",
    async () => {
      const s = start('--gateway=netns', `--gateway-scripts=${SCRIPTS}`, '--no-dashboard');
      const [, base] = (await waitFor(s, /^gateway: .* network namespaces (eipgw-\d+-\d+)-\*/m)) as string[];
      await waitFor(s, /^ready: /m);
      const kubectl = (...args: string[]) =>
        run('kubectl', ['--kubeconfig', kubeconfig, ...args], { env: { ...process.env, HOME: dir } });
      const end = Date.now() + 30_000;
      let net1 = '';
      while (Date.now() < end && !/secondary net1/.test(net1)) {
        net1 = (
          await kubectl(
            'exec',
            '-n',
            'kube-system',
            'vpc-nat-gw-gw1-0',
            '-c',
            'vpc-nat-gw',
            '--',
            'ip',
            '-o',
            'addr',
            'show',
            'dev',
            'net1',
          ).catch(() => ({ stdout: '' }))
        ).stdout;
        await new Promise((r) => setTimeout(r, 300));
      }
      // The pod's own address and the demo EIP's, added by `nat-gateway.sh eip-add` in the pod's namespace.
      expect(net1).toMatch(/inet 172\.18\.0\.254\/24 scope global net1/);
      expect(net1).toMatch(/inet 172\.18\.0\.\d+\/24 scope global secondary net1/);
      expect(listNamespaces().filter((n) => n.startsWith(`${base}-`))).toHaveLength(3);
      s.child.kill('SIGTERM');
      expect(await s.exited).toBe(0);
      expect(s.out()).toContain('stopped');
      expect(listNamespaces().filter((n) => n.startsWith(`${base}-`))).toEqual([]);
    },
    90_000,
  );
});
