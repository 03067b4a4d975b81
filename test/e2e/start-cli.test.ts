/**
 * The README's first command, as a newcomer runs it: `npm start` (here: scripts/start.ts as a child process), kubectl
 * against the kubeconfig it writes (the administrator's) and the components' own beside it (their identities, under
 * infra/rbac's RBAC and exec policy), `npm run invoke` against the running stack, Ctrl-C, and a restart that keeps
 * its state in --data-dir.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_RELEASE } from '../../local/natgw/releases.js';
import { eventually, eventuallyValue, GiveUp } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';

const { skip } = kubectlOrSkip();
const root = join(import.meta.dirname, '../..');
const tsx = join(root, 'node_modules/tsx/dist/cli.mjs');
const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'eip-start-'));
const kubeconfig = join(dir, 'kubeconfig');
const children: ChildProcess[] = [];

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function start(...args: string[]): Started {
  const child = spawn(
    process.execPath,
    [tsx, join(root, 'scripts/start.ts'), '--kubeconfig', kubeconfig, ...args],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let out = '';
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr!.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/** The first match of `pattern` in the output; gives up at once when npm start exits. */
function waitFor(s: Started, pattern: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
  return eventuallyValue(
    () => {
      const m = s.output().match(pattern);
      if (!m && s.child.exitCode !== null)
        throw new GiveUp(`npm start exited ${s.child.exitCode}:\n${s.output()}`);
      return m;
    },
    { timeoutMs, stepMs: 100, what: `${pattern} in the output of npm start` },
  ).catch((e: unknown) => {
    if (e instanceof GiveUp) throw e;
    throw new Error(`${(e as Error).message}\n${s.output()}`);
  });
}

const kubectl = (...args: string[]) =>
  run('kubectl', ['--kubeconfig', kubeconfig, ...args], { env: { ...process.env, HOME: dir } });

/** What a person types to look at the gateway: `kubectl exec … -- ip -o addr show dev net1`. */
const net1ViaKubectl = async (): Promise<string> =>
  (
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
    )
  ).stdout;

/**
 * What npm start set up for its components: the kubeconfig ready: names is the administrator's; the handlers', the
 * bridge's and kube-ovn's beside it are their own identities, under infra/rbac's RBAC and exec policy as applied.
 */
async function expectIdentities(s: Started, ip: string): Promise<void> {
  const env = { env: { ...process.env, HOME: dir } };
  const as = (kc: string, ...args: string[]) => run('kubectl', ['--kubeconfig', kc, ...args], env);
  const whoami = async (kc: string) =>
    (await as(kc, 'auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}')).stdout;
  expect(await whoami(kubeconfig)).toBe('eip-admin');
  const handlers = (await waitFor(s, /^as: +kubectl --kubeconfig (\S+) auth can-i --list/m))[1]!;
  expect(handlers).toBe(`${kubeconfig}-handlers`);
  expect(await whoami(handlers)).toBe(
    'arn:aws:sts::000000000000:assumed-role/eip-lambdas-local-handlers/eip-lambdas-local',
  );
  expect(await whoami(`${kubeconfig}-bridge`)).toBe('system:serviceaccount:eip-lambdas:eip-lambdas-bridge');
  expect(await whoami(`${kubeconfig}-kube-ovn`)).toBe('system:serviceaccount:kube-system:ovn');

  const policies = await kubectl(
    'get',
    'validatingadmissionpolicies,validatingadmissionpolicybindings',
    '-o',
    'name',
  );
  expect(policies.stdout.split('\n').filter(Boolean).sort()).toEqual([
    'validatingadmissionpolicy.admissionregistration.k8s.io/eip-lambdas-exec-gateway-pods-only',
    'validatingadmissionpolicybinding.admissionregistration.k8s.io/eip-lambdas-exec-gateway-pods-only',
  ]);
  const exec = (...command: string[]) =>
    as(handlers, 'exec', '-n', 'kube-system', 'vpc-nat-gw-gw1-0', '-c', 'vpc-nat-gw', '--', ...command);
  expect((await exec('ip', '-o', 'addr', 'show', 'dev', 'net1')).stdout).toContain(`inet ${ip}/24`);
  const shell = await exec('sh', '-c', 'id').catch((e: { code: number; stderr: string }) => e);
  expect(shell).toMatchObject({
    code: 1,
    stderr: expect.stringContaining(
      "ValidatingAdmissionPolicy 'eip-lambdas-exec-gateway-pods-only' with binding 'eip-lambdas-exec-gateway-pods-only' denied request",
    ),
  });
  const del = await as(handlers, 'auth', 'can-i', 'delete', 'iptables-eips.kubeovn.io').catch(
    (e: { code: number; stdout: string }) => e,
  );
  expect(del).toMatchObject({ code: 1, stdout: 'no\n' });
  const refused = await as(handlers, 'delete', 'iptables-eips', 'demo-eip').catch(
    (e: { code: number; stderr: string }) => e,
  );
  expect(refused).toMatchObject({
    code: 1,
    stderr: expect.stringContaining(
      'iptables-eips.kubeovn.io "demo-eip" is forbidden: User "arn:aws:sts::000000000000:assumed-role/eip-lambdas-local-handlers/eip-lambdas-local" cannot delete resource "iptables-eips" in API group "kubeovn.io" at the cluster scope',
    ),
  });
}

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(skip)('npm start', () => {
  let firstIp = '';

  it('prints a ready: line, makes the demo EIP Ready, answers kubectl and npm run invoke, and drains on Ctrl-C', async () => {
    const s = start('--data-dir', join(dir, 'data'));
    const ready = await waitFor(s, /^ready: kubeconfig=(\S+) api=(\S+) dynamodb=(\S+).*$/m);
    expect(ready[1]).toBe(kubeconfig);
    expect(ready[0]).toContain(` kube-ovn=${DEFAULT_RELEASE}`);
    firstIp = (await waitFor(s, /demo: iptables-eip demo-eip is Ready with (\S+) on gateway gw1/))[1]!;

    const get = await kubectl(
      'get',
      'iptables-eips',
      'demo-eip',
      '-o',
      'jsonpath={.status.ip} {.status.ready}',
    );
    expect(get.stdout).toBe(`${firstIp} true`);
    expect(await net1ViaKubectl()).toContain(`inet ${firstIp}/24`);
    await expectIdentities(s, firstIp);

    const invoke = await run(
      process.execPath,
      [
        tsx,
        join(root, 'scripts/invoke.ts'),
        'update',
        join(root, 'events/update.json'),
        '--stack',
        join(dir, 'stack.json'),
      ],
      {
        cwd: root,
        env: { ...process.env, LOG_LEVEL: 'error' },
      },
    );
    expect(JSON.parse(invoke.stdout)).toEqual({ status: 'unchanged', eip: 'demo-eip' });

    const gc = async (...flags: string[]) =>
      JSON.parse(
        (
          await run(
            process.execPath,
            [tsx, join(root, 'scripts/gc.ts'), ...flags, '--stack', join(dir, 'stack.json')],
            {
              cwd: root,
              env: { ...process.env, LOG_LEVEL: 'error' },
            },
          )
        ).stdout,
      );
    // demo-eip is held and alive; the gateway pod's own address was reserved by the stack's own collection before
    // `ready:`, as the hourly gc function does on AWS (ADR 0042): nothing left to do.
    const noOrphans = { orphans: [], released: [], gatewayPods: [{ status: 'already' }] };
    expect(await gc('--dry-run')).toMatchObject({ scanned: 2, ...noOrphans });
    expect(await gc()).toMatchObject({ scanned: 2, ...noOrphans });

    s.child.kill('SIGINT');
    expect(await s.exited).toBe(0);
    expect(s.output()).toMatch(/SIGINT: draining the bridge and stopping\n[\s\S]*stopped\n$/);
  }, 90_000);

  it('keeps objects and allocations in --data-dir: after a restart the demo EIP has the same address, back on the gateway', async () => {
    const s = start('--data-dir', join(dir, 'data'), '--no-demo');
    await waitFor(s, /^ready: /m);
    expect(s.output()).not.toMatch(/demo: created/);
    // The restarted API is a node reboot for the gateway: its state is gone until the redo puts the address back.
    await eventually(async () => expect(await net1ViaKubectl()).toContain(`inet ${firstIp}/24`), {
      timeoutMs: 20_000,
      stepMs: 200,
      what: 'the demo address back on net1',
    });
    const get = await kubectl('get', 'iptables-eips', 'demo-eip', '-o', 'jsonpath={.status.ip}');
    expect(get.stdout).toBe(firstIp);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  }, 90_000);

  it('documents the kube-ovn controller model in --help; the fictional workers-off mode is gone', async () => {
    const help = await run(process.execPath, [tsx, join(root, 'scripts/start.ts'), '--help'], { cwd: root });
    expect(help.stdout).toContain('--with-kube-ovn-eip-controller');
    expect(help.stdout).not.toContain('workers-off');
  });

  it("--with-kube-ovn-eip-controller: the model beside the product as docs/deploy-eks.md step 2 sets it up (the fence, a range in excludeIps); the demo EIP is the product's, kube-ovn's writes refused", async () => {
    const s = start('--with-kube-ovn-eip-controller', '--no-dashboard');
    await waitFor(s, /^kube-ovn: the fence infra\/kube-ovn-fence applied/m);
    await waitFor(s, /^kube-ovn: a MODEL of an unmodified kube-ovn-controller/m);
    const ip = (await waitFor(s, /demo: iptables-eip demo-eip is Ready with (\S+) on gateway gw1/))[1]!;
    // The demo's dedicated range, 172.18.0.100..172.18.0.200 (local/stack.ts).
    expect(ip).toMatch(/^172\.18\.0\.\d+$/);
    expect(Number(ip.split('.')[3])).toBeGreaterThanOrEqual(100);
    expect(Number(ip.split('.')[3])).toBeLessThanOrEqual(200);
    const managers = await kubectl(
      'get',
      'iptables-eip',
      'demo-eip',
      '-o',
      'jsonpath={.metadata.managedFields[*].manager}',
    );
    expect(managers.stdout.split(' ')).not.toContain('kube-ovn-controller');
    const asKubeOvn = await run(
      'kubectl',
      [
        '--kubeconfig',
        `${kubeconfig}-kube-ovn`,
        'patch',
        'iptables-eip',
        'demo-eip',
        '--subresource=status',
        '--type=merge',
        '-p',
        '{"status":{"ip":"172.18.0.11"}}',
        '--dry-run=server',
      ],
      { env: { ...process.env, HOME: dir } },
    ).catch((e: { code: number; stderr: string }) => e);
    expect(asKubeOvn).toMatchObject({
      code: 1,
      stderr: expect.stringContaining("ValidatingAdmissionPolicy 'eip-lambdas-fence-kube-ovn-eip-writes'"),
    });
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  }, 90_000);

  it('plays the kube-ovn release --kube-ovn-version names: on ready:, in the header, in the gateway pod', async () => {
    const s = start('--kube-ovn-version=1.16');
    const ready = await waitFor(s, /^ready: .* kube-ovn=1\.16 .*dashboard=(\S+)$/m);
    const page = await (await fetch(ready[1]!)).text();
    expect(page).toContain('<span class="sub" id="kube-ovn">kube-ovn 1.16</span>');
    const image = await kubectl(
      'get',
      'pod',
      '-n',
      'kube-system',
      'vpc-nat-gw-gw1-0',
      '-o',
      'jsonpath={.spec.containers[0].image} {.spec.containers[0].env[0].name}={.spec.containers[0].env[0].value}',
    );
    expect(image.stdout).toBe('docker.io/kubeovn/vpc-nat-gateway:v1.16.0 GATEWAY_V4=172.18.0.1');
    // The stand-in's init exec (kube-ovn 1.15+) writes the env file once the pod runs.
    const env = await eventuallyValue(
      async () =>
        (
          await kubectl(
            'exec',
            '-n',
            'kube-system',
            'vpc-nat-gw-gw1-0',
            '-c',
            'vpc-nat-gw',
            '--',
            'cat',
            '/etc/kube-ovn/nat-gateway.env',
          ).catch(() => ({ stdout: '' }))
        ).stdout,
      { timeoutMs: 15_000, what: 'the env file of the 1.16 gateway' },
    );
    expect(env).toBe('VPC_INTERFACE=eth0\nEXTERNAL_INTERFACE=net1\n');
    s.child.kill('SIGINT');
    expect(await s.exited).toBe(0);
  }, 90_000);

  it('lists the releases in --help and refuses an unknown one with exit status 2', async () => {
    const help = await run(process.execPath, [tsx, join(root, 'scripts/start.ts'), '--help'], { cwd: root });
    expect(help.stdout).toMatch(
      /--kube-ovn-version V .*\n.*1\.12, 1\.13, 1\.14, 1\.15, 1\.16, master \(default: 1\.\d+\)/,
    );
    const r = await run(
      process.execPath,
      [tsx, join(root, 'scripts/start.ts'), '--kube-ovn-version', '1.11'],
      {
        cwd: root,
      },
    ).catch((e: { code: number; stderr: string }) => e);
    expect(r).toMatchObject({
      code: 2,
      stderr: expect.stringContaining(
        'start: --kube-ovn-version must be one of 1.12, 1.13, 1.14, 1.15, 1.16, master (a patch release such as 1.15.2 also reads as its line), got "1.11"',
      ),
    });
  });

  it("documents the gateway's exec costs and the read cache in --help, and refuses a bad exec option", async () => {
    const start = (arg: string) =>
      run(process.execPath, [tsx, join(root, 'scripts/start.ts'), arg], { cwd: root }).catch(
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
    const bad = [
      ['--exec-latency=soon', '--exec-latency must be a whole number of ms'],
      ['--exec-commands=cheap', '--exec-commands must be measured, none or a whole number of ms'],
      ['--xtables-lock=maybe', '--xtables-lock must be wait, fail or none'],
    ] as const;
    const [help, ...refused] = await Promise.all([start('--help'), ...bad.map(([arg]) => start(arg))]);
    expect(help.stdout).toMatch(/--exec-latency MS[\s\S]*default\s+60[\s\S]*moby\/moby#45624/);
    expect(help.stdout).toContain('--exec-commands C');
    expect(help.stdout).toContain('--xtables-lock L');
    expect(help.stdout).toContain('EIP_READ_CACHE_MS=0 npm start');
    refused.forEach((r, i) => {
      expect(r).toMatchObject({ code: 2, stderr: expect.stringContaining(bad[i]![1]) });
    });
  }, 120_000);

  it('refuses a bad argument with usage and exit status 2', async () => {
    const r = await run(process.execPath, [tsx, join(root, 'scripts/start.ts'), '--port', 'eighty'], {
      cwd: root,
    }).catch((e: { code: number; stderr: string }) => e);
    expect(r).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/--port must be a port number[\s\S]*usage: npm start/),
    });
  });
});
