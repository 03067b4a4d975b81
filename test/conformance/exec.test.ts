/**
 * Conformance (local/kube-api/README.md): pods/exec over WebSocket with kubectl 1.32 and client-node 1.4 — exit codes,
 * stdout/stderr, stdin with the v5 close signal, validation errors, SPDY refusal, a dropped status — and the
 * gateway pods behind the NAT gateway simulator: init containers, `kill 1` restarts, and exec faults.
 */
import { PassThrough, Readable } from 'node:stream';
import { Exec, type V1Pod, type V1Status, Watch } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ADMIN_TOKEN } from '../../local/kube-api/index.js';
import { eventually } from '../support/eventually.js';
import { kubectlSuite, useApi } from './harness.js';

const ADMIN_HEADERS = { authorization: `Bearer ${ADMIN_TOKEN.token}` };

const GW = 'vpc-nat-gw-gw1-0';

function gatewayPod(name: string, init: string[]): V1Pod {
  return {
    metadata: {
      name,
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
          name: 'vpc-nat-gw-init',
          image: 'kubeovn/vpc-nat-gateway:v1.14.0',
          command: ['bash', '/kube-ovn/nat-gateway.sh', ...init],
        },
      ],
      containers: [
        { name: 'vpc-nat-gw', image: 'kubeovn/vpc-nat-gateway:v1.14.0', command: ['sleep', 'infinity'] },
      ],
    },
  };
}

interface ExecResult {
  stdout: string;
  stderr: string;
  status?: V1Status;
  /** Set when exec() itself rejected (the upgrade was refused). */
  error?: { message: string };
  /** The socket closed without a status frame. */
  closedWithoutStatus?: boolean;
  protocol?: string;
}

kubectlSuite('pods/exec', () => {
  const env = useApi({ restartDelayMs: 100, kubeOvnRelease: '1.12' }); // its pods and execs are 1.12's

  /** client-node's Exec wrapped in one promise: resolves on the status, a refused upgrade, or a bare close. */
  function nodeExec(
    namespace: string,
    pod: string,
    container: string,
    command: string[],
    stdin?: string,
  ): Promise<ExecResult> {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = '';
    let err = '';
    stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    return new Promise((resolve) => {
      let settled = false;
      let protocol: string | undefined;
      const done = (extra: Partial<ExecResult>) => {
        if (settled) return;
        settled = true;
        resolve({ stdout: out, stderr: err, ...(protocol ? { protocol } : {}), ...extra });
      };
      new Exec(env.kc)
        .exec(
          namespace,
          pod,
          container,
          command,
          stdout,
          stderr,
          stdin === undefined ? null : Readable.from([stdin]),
          false,
          (status) => setImmediate(() => done({ status })),
        )
        .then(
          (ws) => {
            protocol = ws.protocol;
            ws.on('close', () => setTimeout(() => done({ closedWithoutStatus: true }), 50));
          },
          (e: { message: string }) => done({ error: { message: e.message } }),
        );
    });
  }

  beforeAll(async () => {
    await env.core.createNamespacedPod({
      namespace: 'kube-system',
      body: gatewayPod(GW, ['init', '10.96.0.0/12,10.0.1.1']),
    });
    await env.core.createNamespacedPod({
      namespace: 'default',
      body: { metadata: { name: 'plain' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    });
  });

  describe('ordinary pods', () => {
    it('exits 0 and prints stdout for both clients', async () => {
      const [k, n] = await Promise.all([
        env.k('exec', 'plain', '--', 'echo', 'hello', 'world'),
        nodeExec('default', 'plain', 'c', ['echo', 'hello', 'world']),
      ]);
      expect([k.code, k.stdout]).toEqual([0, 'hello world\n']);
      expect(n).toEqual({
        stdout: 'hello world\n',
        stderr: '',
        status: { metadata: {}, status: 'Success' },
        protocol: 'v5.channel.k8s.io',
      });
    });

    it('passes exit code 3 to kubectl and to the client-node status', async () => {
      const [k, n] = await Promise.all([
        env.k('exec', 'plain', '--', 'sh', '-c', 'echo hi; exit 3'),
        nodeExec('default', 'plain', 'c', ['sh', '-c', 'echo hi; exit 3']),
      ]);
      expect([k.code, k.stdout, k.stderr.trim()]).toEqual([3, 'hi\n', 'command terminated with exit code 3']);
      expect(n.stdout).toBe('hi\n');
      expect(n.status).toEqual({
        metadata: {},
        status: 'Failure',
        message: 'command terminated with non-zero exit code: command terminated with exit code 3',
        reason: 'NonZeroExitCode',
        details: { causes: [{ reason: 'ExitCode', message: '3' }] },
      });
    });

    it('routes stderr to stderr', async () => {
      const [k, n] = await Promise.all([
        env.k('exec', 'plain', '--', 'sh', '-c', 'echo out; echo err >&2'),
        nodeExec('default', 'plain', 'c', ['sh', '-c', 'echo out; echo err >&2']),
      ]);
      expect([k.stdout, k.stderr]).toEqual(['out\n', 'err\n']);
      expect([n.stdout, n.stderr]).toEqual(['out\n', 'err\n']);
    });

    it('reads stdin until the client half-closes it (ff 00 on v5)', async () => {
      const [k, n] = await Promise.all([
        env.kWith({ stdin: 'input\n\u00ff\u0000' }, 'exec', '-i', 'plain', '--', 'cat'),
        nodeExec('default', 'plain', 'c', ['cat'], 'from client-node\n'),
      ]);
      expect([k.code, k.stdout]).toEqual([0, 'input\n\u00ff\u0000']);
      expect(n.stdout).toBe('from client-node\n');
      expect(n.status?.status).toBe('Success');
    });

    it('answers a command the pod does not have with exit 127 and says that nothing runs on the host', async () => {
      const k = await env.k('exec', 'plain', '--', 'rm', '-rf', '/');
      expect(k.code).toBe(127);
      expect(k.stderr).toContain('nothing runs on the host');
    });
  });

  it('answers kubectl logs with the empty log of a container that writes nothing', async () => {
    const [ok, bad] = await Promise.all([
      env.k('logs', '-n', 'kube-system', GW, '-c', 'vpc-nat-gw'),
      env.k('logs', '-n', 'kube-system', GW, '-c', 'nope'),
    ]);
    expect([ok.code, ok.stdout]).toEqual([0, '']);
    expect(bad.stderr.trim()).toBe(`error: container nope is not valid for pod ${GW}`);
  });

  describe('validation', () => {
    it('refuses an unknown container with the server message for kubectl and a bare 400 for client-node', async () => {
      const [k, n] = await Promise.all([
        env.k('exec', '-n', 'kube-system', GW, '-c', 'nope', '--', 'true'),
        nodeExec('kube-system', GW, 'nope', ['true']),
      ]);
      expect(k.stderr.trim()).toBe(
        `Error from server (BadRequest): container nope is not valid for pod ${GW}`,
      );
      expect(n.error?.message).toBe('Unexpected server response: 400');
    });

    it('refuses a pod without a node', async () => {
      await env.core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: 'unscheduled' },
          spec: { schedulerName: 'nobody', containers: [{ name: 'c', image: 'i' }] },
        },
      });
      const k = await env.k('exec', 'unscheduled', '--', 'true');
      expect(k.stderr.trim()).toBe(
        'Error from server (BadRequest): pod unscheduled does not have a host assigned',
      );
    });

    it('refuses SPDY after the same validation, so kubectl shows why', async () => {
      const spdy = { env: { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' } };
      const [ok, bad] = await Promise.all([
        env.kWith(spdy, 'exec', 'plain', '--', 'true'),
        env.kWith(spdy, 'exec', '-n', 'kube-system', GW, '-c', 'nope', '--', 'true'),
      ]);
      expect(ok.stderr.trim()).toBe(
        'Error from server (BadRequest): SPDY/3.1 is not supported by this local Kubernetes API; use WebSocket with subprotocol v5.channel.k8s.io (kubectl 1.30+ does by default)',
      );
      expect(bad.stderr.trim()).toBe(
        `Error from server (BadRequest): container nope is not valid for pod ${GW}`,
      );
    });

    it('speaks v4.channel.k8s.io and its base64 variant to clients that only offer those', async () => {
      const talk = (protocol: string) =>
        new Promise<{ protocol: string; frames: (string | number[])[] }>((resolve, reject) => {
          const ws = new WebSocket(
            `${env.api.url.replace('http', 'ws')}/api/v1/namespaces/default/pods/plain/exec?command=echo&command=hi&stdout=true`,
            [protocol],
            { headers: ADMIN_HEADERS },
          );
          const frames: (string | number[])[] = [];
          ws.on('message', (data, isBinary) =>
            frames.push(isBinary ? [...(data as Buffer)] : data.toString()),
          );
          ws.on('close', (code) =>
            code === 1000 ? resolve({ protocol: ws.protocol, frames }) : reject(new Error(`close ${code}`)),
          );
          ws.on('error', reject);
        });
      const v4 = await talk('v4.channel.k8s.io');
      expect(v4.protocol).toBe('v4.channel.k8s.io');
      expect(v4.frames).toEqual([
        [1],
        [1, 104, 105, 10],
        [3, ...Buffer.from('{"metadata":{},"status":"Success"}')],
      ]);
      const b64 = await talk('v4.base64.channel.k8s.io');
      expect(b64.frames).toEqual([
        '1',
        '1aGkK',
        `3${Buffer.from('{"metadata":{},"status":"Success"}').toString('base64')}`,
      ]);
    });

    it('refuses a handshake that offers no supported subprotocol, without upgrading', async () => {
      const status = await new Promise<number>((resolve) => {
        const ws = new WebSocket(
          `${env.api.url.replace('http', 'ws')}/api/v1/namespaces/default/pods/plain/exec?command=true&stdout=true`,
          ['channel.k8s.io'],
          { headers: ADMIN_HEADERS },
        );
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.on('error', () => {});
      });
      expect(status).toBe(400);
    });
  });

  describe('gateway pods', () => {
    it('ran the init container through the simulator before the pod became Running', async () => {
      const sim = env.api.gateways.get('kube-system', GW);
      expect(sim?.initialised).toBe(true);
      expect(sim?.history().map((h) => h.argv.join(' '))).toEqual([
        'bash /kube-ovn/nat-gateway.sh init 10.96.0.0/12,10.0.1.1',
      ]);
      const pod = await env.core.readNamespacedPod({ namespace: 'kube-system', name: GW });
      expect(pod.status?.phase).toBe('Running');
    });

    it('shows the net1 address of the pod annotations with kubectl exec ip -o addr show dev net1', async () => {
      const k = await env.k(
        'exec',
        '-n',
        'kube-system',
        GW,
        '-c',
        'vpc-nat-gw',
        '--',
        'ip',
        '-o',
        'addr',
        'show',
        'dev',
        'net1',
      );
      expect(k.code, k.stderr).toBe(0);
      expect(k.stdout).toContain('inet 172.18.0.254/16');
    });

    it('configures an EIP through client-node exec that kubectl exec then shows', async () => {
      const n = await nodeExec('kube-system', GW, 'vpc-nat-gw', [
        'bash',
        '/kube-ovn/nat-gateway.sh',
        'eip-add',
        '172.18.0.5/16,172.18.0.1',
      ]);
      expect(n.status?.status, n.stderr).toBe('Success');
      const k = await env.k(
        'exec',
        '-n',
        'kube-system',
        GW,
        '-c',
        'vpc-nat-gw',
        '--',
        'ip',
        '-o',
        'addr',
        'show',
        'dev',
        'net1',
      );
      expect(k.stdout).toContain('inet 172.18.0.5/16');
      expect(env.api.gateways.get('kube-system', GW)?.net1Addresses()).toContain('172.18.0.5/16');
    });

    it('restarts the container on kill 1: exit 137, not ready, then Running with restartCount 1 and a fresh initialised gateway', async () => {
      const before = await env.core.readNamespacedPod({ namespace: 'kube-system', name: GW });
      const seen: string[] = [];
      const abort = await new Watch(env.kc).watch(
        '/api/v1/namespaces/kube-system/pods',
        { fieldSelector: `metadata.name=${GW}`, resourceVersion: before.metadata?.resourceVersion },
        (type, pod: V1Pod) => {
          const cs = pod.status?.containerStatuses?.[0];
          seen.push(
            `${type}:${cs?.ready}:${cs?.restartCount}:${cs?.state?.running ? 'running' : 'terminated'}`,
          );
        },
        () => {},
      );
      try {
        const k = await env.k('exec', '-n', 'kube-system', GW, '-c', 'vpc-nat-gw', '--', 'kill', '1');
        expect([k.code, k.stderr.trim()]).toEqual([137, 'command terminated with exit code 137']);
        await eventually(() =>
          expect(seen).toEqual(['MODIFIED:false:0:terminated', 'MODIFIED:true:1:running']),
        );
      } finally {
        abort.abort();
      }
      const pod = await env.core.readNamespacedPod({ namespace: 'kube-system', name: GW });
      const cs = pod.status?.containerStatuses?.[0];
      expect(cs?.lastState?.terminated?.exitCode).toBe(137);
      expect(String(cs?.state?.running?.startedAt)).not.toBe(
        String(before.status?.containerStatuses?.[0]?.state?.running?.startedAt),
      );
      const sim = env.api.gateways.get('kube-system', GW);
      expect(sim?.initialised).toBe(true);
      expect(sim?.net1Addresses()).toEqual(['172.18.0.254/16']);
      const table = await env.k('get', 'pod', '-n', 'kube-system', GW);
      expect(table.stdout).toMatch(/1\/1\s+Running\s+1 \(\d+s ago\)/);
    });

    it('leaves a pod whose init container fails Pending with Init:Error, and refuses exec into it', async () => {
      await env.core.createNamespacedPod({
        namespace: 'kube-system',
        body: gatewayPod('vpc-nat-gw-bad-0', ['no-such-op']),
      });
      const pod = await env.core.readNamespacedPod({ namespace: 'kube-system', name: 'vpc-nat-gw-bad-0' });
      expect(pod.status?.phase).toBe('Pending');
      const t = await env.k('get', 'pod', '-n', 'kube-system', 'vpc-nat-gw-bad-0');
      expect(t.stdout).toMatch(/0\/1\s+Init:Error\s+0/);
      const k = await env.k(
        'exec',
        '-n',
        'kube-system',
        'vpc-nat-gw-bad-0',
        '-c',
        'vpc-nat-gw',
        '--',
        'true',
      );
      expect(k.stderr).toContain('container not found ("vpc-nat-gw")');
    });

    it('discards the simulator of a deleted gateway pod', async () => {
      expect(env.api.gateways.get('kube-system', 'vpc-nat-gw-bad-0')).toBeDefined();
      await env.core.deleteNamespacedPod({ namespace: 'kube-system', name: 'vpc-nat-gw-bad-0' });
      expect(env.api.gateways.get('kube-system', 'vpc-nat-gw-bad-0')).toBeUndefined();
    });
  });

  describe('exec faults', () => {
    const eipAdd = ['bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.6/16,172.18.0.1'];

    it('fails only the execs whose argv matches, without running them', async () => {
      const fault = env.api.faults.failExec({ command: 'eip-add', exitCode: 4, stderr: 'boom\n' });
      const [other, failed] = await Promise.all([
        nodeExec('kube-system', GW, 'vpc-nat-gw', ['ip', 'route']),
        nodeExec('kube-system', GW, 'vpc-nat-gw', eipAdd),
      ]);
      expect(other.status?.status).toBe('Success');
      expect(failed.stderr).toBe('boom\n');
      expect(failed.status?.details?.causes).toEqual([{ reason: 'ExitCode', message: '4' }]);
      expect([fault.hits, fault.remaining]).toEqual([1, 0]);
      expect(env.api.gateways.get('kube-system', GW)?.net1Addresses()).not.toContain('172.18.0.6/16');
      const again = await nodeExec('kube-system', GW, 'vpc-nat-gw', eipAdd);
      expect(again.status?.status).toBe('Success');
    });

    it('delays a matching exec by the given time before it runs', async () => {
      env.api.faults.delayExec({ pod: 'plain', ms: 300 });
      const started = Date.now();
      const n = await nodeExec('default', 'plain', 'c', ['echo', 'late']);
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect([n.stdout, n.status?.status]).toEqual(['late\n', 'Success']);
    });

    it('ends an exec with an InternalError status when asked to, which kubectl prints', async () => {
      env.api.faults.errorExec({
        pod: 'plain',
        message: 'error executing command in container: runtime gone',
      });
      const k = await env.k('exec', 'plain', '--', 'true');
      expect([k.code, k.stderr.trim()]).toEqual([
        1,
        'error: Internal error occurred: error executing command in container: runtime gone',
      ]);
    });

    it('drops the status frame, so client-node sees the socket close without a status', async () => {
      env.api.faults.dropExecStatus({ pod: 'plain' });
      const n = await nodeExec('default', 'plain', 'c', ['echo', 'partial']);
      expect(n.status).toBeUndefined();
      expect(n.closedWithoutStatus).toBe(true);
      expect(n.stdout).toBe('partial\n');
    });

    it('hangs a matching exec: no output and no status while the client waits', async () => {
      env.api.faults.hangExec({ pod: 'plain' });
      const n = await Promise.race([
        nodeExec('default', 'plain', 'c', ['echo', 'never']),
        new Promise<'waiting'>((r) => setTimeout(() => r('waiting'), 400)),
      ]);
      expect(n).toBe('waiting');
    });

    it('refuses the exec upgrade with an injected API error', async () => {
      env.api.faults.apiError({ resource: 'pods/exec', code: 500, message: 'kubelet unreachable' });
      const n = await nodeExec('default', 'plain', 'c', ['true']);
      expect(n.error?.message).toBe('Unexpected server response: 500');
    });
  });
});
