/**
 * Running the local API as a product: `npm run cluster` (usage, argument errors, the ready line, a kubeconfig
 * kubectl accepts, clean stop on a signal), the data directory across restarts (objects and resourceVersion
 * kept; gateway pods restarted like after a node reboot), and fault injection through the programmatic API
 * and the /_emulator admin endpoints.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { CoreV1Api, CustomObjectsApi, Exec, KubeConfig, type V1Status } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { startKubeApi } from '../../local/kube-api/index.js';
import {
  adminFetch,
  forgetKubectlWorkspace,
  kubeConfigFor,
  kubectl,
  kubectlWith,
} from '../../local/kube-api/testing.js';
import { DEFAULT_RELEASE } from '../../local/natgw/releases.js';
import { eventuallyValue } from '../support/eventually.js';
import { apiError, EIP, eip, kubectlSuite, manifest, useApi } from './harness.js';

const ROOT = join(import.meta.dirname, '..', '..');

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/**
 * `npm run cluster -- args`, or (direct) the command the script runs, `tsx scripts/cluster.ts args`, whose
 * exit code is the cluster's own (npm itself dies of the signal it is sent). Each run is its own process
 * group, signalled as a terminal's Ctrl-C would.
 */
function npmCluster(args: string[], direct = false): Run {
  const [cmd, argv] = direct
    ? [join(ROOT, 'node_modules', '.bin', 'tsx'), ['scripts/cluster.ts', ...args]]
    : ['npm', ['run', '--silent', 'cluster', '--', ...args]];
  const child = spawn(cmd, argv, { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

async function waitFor(check: () => boolean, ms: number): Promise<void> {
  await eventuallyValue(check, { timeoutMs: ms, stepMs: 50 });
}

function execStatus(
  kc: ReturnType<typeof kubeConfigFor>,
  ns: string,
  pod: string,
  command: string[],
): Promise<V1Status> {
  return new Promise((resolve, reject) => {
    new Exec(kc)
      .exec(ns, pod, 'vpc-nat-gw', command, new PassThrough(), new PassThrough(), null, false, resolve)
      .catch(reject);
  });
}

const gatewayPod = {
  metadata: {
    name: 'vpc-nat-gw-gw1-0',
    labels: { app: 'vpc-nat-gw-gw1', 'ovn.kubernetes.io/vpc-nat-gw': 'true' },
    annotations: {
      'k8s.v1.cni.cncf.io/networks': 'kube-system/ovn-vpc-external-network',
      'ovn-vpc-external-network.kube-system.kubernetes.io/ip_address': '172.18.0.254',
      'ovn-vpc-external-network.kube-system.kubernetes.io/cidr': '172.18.0.0/16',
    },
  },
  spec: {
    initContainers: [
      {
        name: 'init',
        image: 'i',
        command: ['bash', '/kube-ovn/nat-gateway.sh', 'init', '10.96.0.0/12,10.0.1.1'],
      },
    ],
    containers: [{ name: 'vpc-nat-gw', image: 'i' }],
  },
};

kubectlSuite('running the local API', () => {
  const dirs: string[] = [];
  const tmp = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'kube-api-life-'));
    dirs.push(d);
    return d;
  };
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  describe('npm run cluster', () => {
    it('prints usage for --help and refuses bad arguments with exit 2', async () => {
      const help = npmCluster(['--help']);
      const badPort = npmCluster(['--port', 'eighty']);
      const unknown = npmCluster(['--frobnicate']);
      expect(await help.exited).toBe(0);
      expect(help.stdout()).toContain('Usage: npm run cluster -- [options]');
      expect(await badPort.exited).toBe(2);
      expect(badPort.stderr()).toContain('cluster: --port must be a number from 0 to 65535, got "eighty"');
      expect(await unknown.exited).toBe(2);
      expect(unknown.stderr()).toContain('cluster: unknown argument "--frobnicate"');
    });

    it('serves kubectl and client-node with the kubeconfig it writes, keeps objects in its data dir, and stops on SIGINT', async () => {
      const dir = tmp();
      const kubeconfig = join(dir, 'kubeconfig');
      const dataDir = join(dir, 'data');
      const first = npmCluster(
        ['--port', '0', '--kubeconfig', kubeconfig, '--data-dir', dataDir, '--quiet'],
        true,
      );
      try {
        await waitFor(() => first.stdout().includes('\n'), 20_000);
        const line = first.stdout().trim();
        expect(line).toMatch(
          new RegExp(
            `^ready: https://127\\.0\\.0\\.1:\\d+ kubeconfig=${kubeconfig} kube-ovn=${DEFAULT_RELEASE}$`,
          ),
        );
        const url = line.split(' ')[1] as string;
        // The URL kubectl uses (it sends credentials only to an https server): the kubeconfig names the same.
        expect(readFileSync(kubeconfig, 'utf8')).toContain(`server: ${url}`);
        const created = await kubectlWith({ url }, { stdin: manifest(eip('kept')) }, 'apply', '-f', '-');
        expect(created.code, created.stderr).toBe(0);
        const kc = new KubeConfig();
        kc.loadFromFile(kubeconfig);
        const listed = (await kc.makeApiClient(CustomObjectsApi).listClusterCustomObject(EIP)) as {
          items: { metadata: { name: string } }[];
        };
        expect(listed.items.map((i) => i.metadata.name)).toEqual(['kept']);
        forgetKubectlWorkspace({ url });
      } finally {
        if (first.child.pid) process.kill(-first.child.pid, 'SIGINT');
      }
      expect(await first.exited).toBe(0);

      const second = npmCluster(['--kubeconfig', kubeconfig, '--data-dir', dataDir, '--quiet'], true);
      try {
        await waitFor(() => second.stdout().includes('\n'), 20_000);
        const url = second.stdout().trim().split(' ')[1] as string;
        const got = await kubectl({ url }, 'get', 'eip', 'kept', '-o', 'name');
        expect(got.stdout.trim(), got.stderr).toBe('iptableseip.kubeovn.io/kept');
        forgetKubectlWorkspace({ url });
      } finally {
        if (second.child.pid) process.kill(-second.child.pid, 'SIGTERM');
      }
      expect(await second.exited).toBe(0);
    });
  });

  describe('data directory', () => {
    it('keeps objects and the resourceVersion counter, and restarts gateway pods like a node reboot', async () => {
      const dataDir = tmp();
      const api1 = await startKubeApi({ dataDir, kubeOvnRelease: '1.12' }); // the 1.12 eip-add form below
      const kc1 = kubeConfigFor(api1);
      const co1 = kc1.makeApiClient(CustomObjectsApi);
      const created = (await co1.createClusterCustomObject({
        ...EIP,
        body: eip('persist', { metadata: { finalizers: ['kubeovn.io/kube-ovn-controller'] } }),
      })) as {
        metadata: { uid: string };
      };
      await co1.patchClusterCustomObjectStatus({
        ...EIP,
        name: 'persist',
        body: [{ op: 'add', path: '/status', value: { ready: true, ip: '172.18.0.5' } }],
      });
      await kc1.makeApiClient(CoreV1Api).createNamespacedPod({ namespace: 'kube-system', body: gatewayPod });
      const st = await execStatus(kc1, 'kube-system', 'vpc-nat-gw-gw1-0', [
        'bash',
        '/kube-ovn/nat-gateway.sh',
        'eip-add',
        '172.18.0.5/16,172.18.0.1',
      ]);
      expect(st.status).toBe('Success');
      const rvBefore = api1.resourceVersion();
      await api1.close();

      const api2 = await startKubeApi({ dataDir, kubeOvnRelease: '1.12' });
      try {
        const kc2 = kubeConfigFor(api2);
        const co2 = kc2.makeApiClient(CustomObjectsApi);
        const kept = (await co2.getClusterCustomObject({ ...EIP, name: 'persist' })) as {
          metadata: { uid: string; finalizers: string[] };
          status: { ip: string };
        };
        expect(kept.metadata.uid).toBe(created.metadata.uid);
        expect(kept.metadata.finalizers).toEqual(['kubeovn.io/kube-ovn-controller']);
        expect(kept.status.ip).toBe('172.18.0.5');
        const next = (await co2.createClusterCustomObject({ ...EIP, body: eip('after') })) as {
          metadata: { resourceVersion: string };
        };
        expect(Number(next.metadata.resourceVersion)).toBeGreaterThan(rvBefore);

        const pod = await kc2
          .makeApiClient(CoreV1Api)
          .readNamespacedPod({ namespace: 'kube-system', name: 'vpc-nat-gw-gw1-0' });
        const cs = pod.status?.containerStatuses?.[0];
        expect([pod.status?.phase, cs?.ready, cs?.restartCount]).toEqual(['Running', true, 1]);
        expect(cs?.lastState?.terminated).toBeDefined();
        const sim = api2.gateways.get('kube-system', 'vpc-nat-gw-gw1-0');
        expect(sim?.initialised).toBe(true);
        expect(sim?.net1Addresses()).toEqual(['172.18.0.254/16']);

        const watch = await adminFetch(
          `${api2.url}/apis/kubeovn.io/v1/iptables-eips?watch=true&resourceVersion=${rvBefore - 1}`,
        );
        expect((await watch.text()).trim()).toContain('"code":410');
      } finally {
        await api2.close();
      }
    });
  });

  describe('durability', () => {
    it('keeps every write it acknowledged when killed with SIGKILL in the middle of a burst', async () => {
      const dir = tmp();
      const kubeconfig = join(dir, 'kubeconfig');
      const dataDir = join(dir, 'data');
      const first = npmCluster(['--kubeconfig', kubeconfig, '--data-dir', dataDir, '--quiet'], true);
      const acknowledged = new Map<string, string>();
      try {
        await waitFor(() => first.stdout().includes('\n'), 20_000);
        const kc = new KubeConfig();
        kc.loadFromFile(kubeconfig);
        const co = kc.makeApiClient(CustomObjectsApi);
        let killed = false;
        const burst = Array.from({ length: 300 }, async (_, i) => {
          const name = `burst-${i}`;
          try {
            const o = (await co.createClusterCustomObject({ ...EIP, body: eip(name) })) as {
              metadata: { uid: string };
            };
            acknowledged.set(name, o.metadata.uid);
            // The kill lands while the rest of the burst is still in flight.
            if (acknowledged.size === 100 && !killed && first.child.pid) {
              killed = true;
              process.kill(-first.child.pid, 'SIGKILL');
            }
          } catch {
            // refused or cut off by the kill: not acknowledged
          }
        });
        await Promise.all(burst);
        expect(killed).toBe(true);
      } finally {
        if (first.child.pid) {
          try {
            process.kill(-first.child.pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      }
      await first.exited;
      expect(acknowledged.size).toBeGreaterThanOrEqual(100);

      const second = npmCluster(['--kubeconfig', kubeconfig, '--data-dir', dataDir, '--quiet'], true);
      try {
        await waitFor(() => second.stdout().includes('\n'), 20_000);
        const kc = new KubeConfig();
        kc.loadFromFile(kubeconfig);
        const listed = (await kc.makeApiClient(CustomObjectsApi).listClusterCustomObject(EIP)) as {
          items: { metadata: { name: string; uid: string } }[];
        };
        const kept = new Map(listed.items.map((i) => [i.metadata.name, i.metadata.uid]));
        const lost = [...acknowledged].filter(([name, uid]) => kept.get(name) !== uid).map(([n]) => n);
        console.log(
          `[durability] ${acknowledged.size} creates acknowledged before SIGKILL, ${kept.size} objects after restart, ${lost.length} acknowledged writes lost`,
        );
        expect(lost).toEqual([]);
      } finally {
        if (second.child.pid) process.kill(-second.child.pid, 'SIGTERM');
      }
      expect(await second.exited).toBe(0);
    });
  });

  describe('fault injection', () => {
    const env = useApi();

    it('answers the next matching request with the injected 409, then serves normally', async () => {
      await env.co.createClusterCustomObject({ ...EIP, body: eip('f1') });
      const fault = env.api.faults.apiError({ verb: 'patch', resource: 'iptables-eips/status', code: 409 });
      const body = [{ op: 'add', path: '/status', value: { ready: true } }];
      const e = await apiError(env.co.patchClusterCustomObjectStatus({ ...EIP, name: 'f1', body }));
      expect([e.code, e.body.reason, e.body.message]).toEqual([
        409,
        'Conflict',
        'Operation cannot be fulfilled on iptables-eips.kubeovn.io "f1": the object has been modified; please apply your changes to the latest version and try again',
      ]);
      expect(fault.remaining).toBe(0);
      await env.co.patchClusterCustomObjectStatus({ ...EIP, name: 'f1', body });
    });

    it('lets kubectl retry an injected 429 after Retry-After and succeed', async () => {
      env.api.requests.clear();
      env.api.faults.apiError({ verb: 'list', resource: 'iptables-eips', code: 429, retryAfterSeconds: 1 });
      const r = await env.k('get', 'eip', '-o', 'name');
      expect(r.code, r.stderr).toBe(0);
      const lists = env.api.requests
        .all()
        .filter((x) => x.path === '/apis/kubeovn.io/v1/iptables-eips' && x.method === 'GET');
      expect(lists.map((x) => x.status)).toEqual([429, 200]);
    });

    it('shows an injected 500 on create to kubectl as an InternalError', async () => {
      env.api.faults.apiError({ verb: 'create', code: 500 });
      const r = await env.kWith({ stdin: manifest(eip('f2')) }, 'create', '-f', '-');
      expect(r.stderr.trim()).toBe(
        'Error from server (InternalError): error when creating "STDIN": Internal error occurred: injected fault',
      );
    });

    it('takes faults over HTTP under /_emulator and reports requests there', async () => {
      const post = (path: string, body: unknown) =>
        adminFetch(`${env.api.url}/_emulator/${path}`, { method: 'POST', body: JSON.stringify(body) }).then(
          (r) => r.json(),
        );
      expect(
        await post('faults/api', { verb: 'get', resource: 'iptables-eips', name: 'f1', code: 503, times: 1 }),
      ).toEqual({ remaining: 1, hits: 0 });
      const e = await apiError(env.co.getClusterCustomObject({ ...EIP, name: 'f1' }));
      expect([e.code, e.body.reason]).toEqual([503, 'ServiceUnavailable']);
      expect(await post('faults/exec', { effect: 'fail', command: 'eip-add', exitCode: 2 })).toEqual({
        remaining: 1,
        hits: 0,
      });
      await adminFetch(`${env.api.url}/_emulator/faults`, { method: 'DELETE' });
      await env.co.getClusterCustomObject({ ...EIP, name: 'f1' });
      const compacted = (await post('compact', {})) as { compactedRevision: number };
      expect(compacted.compactedRevision).toBe(env.api.resourceVersion());
      expect(await post('watches/drop', {})).toEqual({ dropped: 0 });
      const log = (await (await adminFetch(`${env.api.url}/_emulator/requests`)).json()) as {
        method: string;
        path: string;
        status: number;
      }[];
      expect(log.some((r) => r.path === '/apis/kubeovn.io/v1/iptables-eips/f1' && r.status === 503)).toBe(
        true,
      );
    });
  });
});
