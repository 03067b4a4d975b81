import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import type { NatGatewaySim } from '../../local/natgw/sim.js';
import { createK8sCluster, createK8sGateway } from '../../shared/adapters/k8s/index.js';
import {
  ClusterUnavailableError,
  GatewayCommandError,
  GatewayNotReadyError,
  InvalidSpecError,
} from '../../shared/domain/errors.js';
import { argBytes, MAX_EXEC_ARG_BYTES } from '../../shared/domain/nat-gateway-batch.js';
import type { Gateway, GatewayPod } from '../../shared/ports.js';
import { eventuallyValue } from '../support/eventually.js';
import { createGateway, createSubnets, gatewayPod, startWorld, type World } from './k8s-fixtures.js';

let w: World;
let standIns: StandIns;
let gateway: Gateway;
let pod: GatewayPod;
let sim: NatGatewaySim;

beforeAll(async () => {
  w = await startWorld({ kubeOvnRelease: '1.12' }); // 1.12's argument forms are exec'd below
  standIns = await startStandIns({ kubeConfig: w.kc, release: '1.12' });
  await createSubnets(w);
  await createGateway(w, 'gw1');
  const cluster = createK8sCluster({ kubeConfig: w.kc, namespace: 'kube-system' });
  pod = await eventuallyValue(async () => {
    const p = await cluster.findGatewayPod('gw1');
    return p?.phase === 'Running' && p.container?.ready ? p : undefined;
  });
  // The stand-in sets kube-ovn's init annotation only after every init exec (1.12 runs two), so no exec of its
  // own can land between the ones this suite counts.
  await eventuallyValue(async () => {
    const p = await gatewayPod(w, 'gw1');
    return p?.metadata?.annotations?.['ovn.kubernetes.io/vpc_nat_gw_init'] === 'true' ? p : undefined;
  });
  sim = await eventuallyValue(() => {
    const s = w.api.gateways.get('kube-system', pod.name);
    return s?.initialised ? s : undefined;
  });
  gateway = createK8sGateway({ kubeConfig: w.kc, timeoutMs: 2_000 });
});

afterAll(async () => {
  await standIns?.stop();
  await w?.close();
});

async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

const execRequests = () => w.api.requests.all().filter((r) => r.path.endsWith('/exec'));

describe('Gateway.run with many rules (ADR 0110)', () => {
  const many = (bytes: number, arg: (i: number) => string): string[] => {
    const args: string[] = [];
    let size = 0;
    for (let i = 0; size + argBytes(arg(i)) <= bytes; i++) {
      args.push(arg(i));
      size += argBytes(arg(i));
    }
    return args;
  };
  const address = (i: number) => `172.18.${100 + Math.floor(i / 250)}.${(i % 250) + 1}`;

  it('carries as many rules as one exec may (MAX_EXEC_ARG_BYTES) through the local API in one exec', async () => {
    // eip-del of addresses that are not there: the script loops over every rule and finds nothing to delete.
    const args = many(MAX_EXEC_ARG_BYTES, (i) => `${address(i)}/16`);
    expect(args.join('&command=').length).toBeGreaterThan(200_000);
    const before = execRequests().length;
    const out = await createK8sGateway({ kubeConfig: w.kc, timeoutMs: 30_000 }).run(pod, 'eip-del', args);
    expect(out.stdout.split('\n')[0]).toBe(`eip-del ${args.join(' ')}`);
    expect(execRequests().length - before).toBe(1);
  }, 60_000);

  it('adds a thousand addresses in one exec, beyond what a Node server takes by default (16 KiB)', async () => {
    const args = Array.from({ length: 1000 }, (_, i) => `${address(i)}/16,172.18.0.1`);
    expect(argBytes(args.join(' '))).toBeGreaterThan(16 * 1024);
    const g = createK8sGateway({ kubeConfig: w.kc, timeoutMs: 30_000 });
    await g.run(pod, 'eip-add', args);
    expect(sim.net1Addresses()).toEqual(expect.arrayContaining(args.map((a) => a.split(',')[0])));
    await g.run(
      pod,
      'eip-del',
      args.map((a) => a.split(',')[0]!),
    );
    expect(sim.net1Addresses().filter((a) => a.startsWith('172.18.1'))).toEqual([]);
  }, 60_000);
});

describe('Gateway.run', () => {
  it('runs nat-gateway.sh as an argv array in the vpc-nat-gw container and resolves with its output', async () => {
    const out = await gateway.run(pod, 'eip-add', ['172.18.0.10/16,172.18.0.1']);
    expect(out.stdout).toContain('eip-add 172.18.0.10/16,172.18.0.1\n');
    expect(out.stderr).toBe('');
    expect(sim.net1Addresses()).toContain('172.18.0.10/16');
    const q = new URLSearchParams(execRequests().at(-1)?.query);
    expect(q.getAll('command')).toEqual([
      'bash',
      '/kube-ovn/nat-gateway.sh',
      'eip-add',
      '172.18.0.10/16,172.18.0.1',
    ]);
    expect(q.get('container')).toBe('vpc-nat-gw');
    expect([q.get('stdout'), q.get('stderr'), q.get('stdin'), q.get('tty')]).toEqual([
      'true',
      'true',
      'false',
      'false',
    ]);
  });

  it('rejects with GatewayCommandError carrying the exit code, stdout and stderr on a non-zero exit', async () => {
    const e = await thrown(() => gateway.run(pod, 'eip-add', ['172.18.0.11/16,10.9.9.1']));
    expect(e).toBeInstanceOf(GatewayCommandError);
    const g = e as GatewayCommandError;
    expect(g.exitCode).toBe(2);
    expect(g.stderr).toBe(
      'Error: Nexthop has invalid gateway.\nfailed to exec command "ip route replace default via 10.9.9.1 dev net1"\n',
    );
    expect(g.stdout).toContain('eip-add 172.18.0.11/16,10.9.9.1\n');
    // The message carries stderr's last line: the script's own.
    expect(g.message).toContain(
      'exit code 2: failed to exec command "ip route replace default via 10.9.9.1 dev net1"',
    );
  });

  it('reports an injected exit code as it is', async () => {
    w.api.faults.failExec({ command: 'eip-del', exitCode: 3, stderr: 'boom\n' });
    const e = (await thrown(() => gateway.run(pod, 'eip-del', ['172.18.0.99/16']))) as GatewayCommandError;
    expect([e.exitCode, e.stderr]).toEqual([3, 'boom\n']);
  });

  it('does not treat stderr output alone as a failure', async () => {
    w.api.faults.failExec({
      command: 'eip-del',
      exitCode: 0,
      stdout: 'eip-del 1.2.3.4/16\n',
      stderr: 'Warning: iptables-legacy tables present\n',
    });
    await expect(gateway.run(pod, 'eip-del', ['172.18.0.99/16'])).resolves.toEqual({
      stdout: 'eip-del 1.2.3.4/16\n',
      stderr: 'Warning: iptables-legacy tables present\n',
    });
  });

  it('rejects with GatewayCommandError without an exit code when the command could not be started', async () => {
    w.api.faults.errorExec({
      command: 'eip-del',
      message: 'error executing command in container: no such file',
    });
    const e = (await thrown(() => gateway.run(pod, 'eip-del', ['172.18.0.99/16']))) as GatewayCommandError;
    expect(e).toBeInstanceOf(GatewayCommandError);
    expect(e.exitCode).toBeUndefined();
    expect(e.message).toContain('no such file');
  });

  it('rejects when the stream closes without an exit status', async () => {
    w.api.faults.dropExecStatus({ command: 'eip-del' });
    const e = (await thrown(() => gateway.run(pod, 'eip-del', ['172.18.0.99/16']))) as GatewayCommandError;
    expect(e).toBeInstanceOf(GatewayCommandError);
    expect(e.message).toContain('closed before the command reported an exit status');
    expect(e.stdout).toContain('eip-del 172.18.0.99/16');
  });

  it('gives up after the hard timeout on a command that never answers', async () => {
    const quick = createK8sGateway({ kubeConfig: w.kc, timeoutMs: 150 });
    w.api.faults.hangExec({ command: 'eip-del' });
    const e = (await thrown(() => quick.run(pod, 'eip-del', ['172.18.0.99/16']))) as GatewayCommandError;
    expect(e).toBeInstanceOf(GatewayCommandError);
    expect(e.message).toContain('no exit status after 150 ms');
  });

  it('gives up when the caller aborts, and does not start at all with an aborted signal', async () => {
    w.api.faults.delayExec({ command: 'eip-del', ms: 1_000 });
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(new Error('deadline')), 50);
    const e = (await thrown(() =>
      gateway.run(pod, 'eip-del', ['172.18.0.99/16'], ctl.signal),
    )) as GatewayCommandError;
    expect(e).toBeInstanceOf(GatewayCommandError);
    expect(e.message).toContain('aborted');
    const before = execRequests().length;
    await expect(gateway.run(pod, 'eip-del', ['172.18.0.99/16'], AbortSignal.abort())).rejects.toBeInstanceOf(
      GatewayCommandError,
    );
    expect(execRequests().length).toBe(before);
  });

  it("refuses an unknown op or an argument with characters outside the script's formats, before any exec", async () => {
    const before = execRequests().length;
    await expect(gateway.run(pod, 'eip-add', ['172.18.0.12/16,172.18.0.1;reboot'])).rejects.toBeInstanceOf(
      InvalidSpecError,
    );
    await expect(gateway.run(pod, 'eip-add', ['172.18.0.12/16 172.18.0.13/16'])).rejects.toBeInstanceOf(
      InvalidSpecError,
    );
    await expect(gateway.run(pod, 'init' as never, ['10.96.0.0/12,10.0.1.1'])).rejects.toBeInstanceOf(
      InvalidSpecError,
    );
    expect(execRequests().length).toBe(before);
  });

  it('throws GatewayNotReadyError when the pod is gone', async () => {
    const ghost: GatewayPod = { ...pod, name: 'vpc-nat-gw-ghost-0' };
    await expect(gateway.run(ghost, 'eip-del', ['172.18.0.99/16'])).rejects.toBeInstanceOf(
      GatewayNotReadyError,
    );
  });

  it('throws ClusterUnavailableError when the API refuses the exec request itself', async () => {
    w.api.faults.apiError({ resource: 'pods/exec', code: 500 });
    const e = await thrown(() => gateway.run(pod, 'eip-del', ['172.18.0.99/16']));
    expect(e).toBeInstanceOf(ClusterUnavailableError);
    expect((e as ClusterUnavailableError).status).toBe(500);
  });

  it("runs the QoS ops with kube-ovn 1.12's argument format", async () => {
    await gateway.run(pod, 'eip-ingress-qos-add', ['172.18.0.10,1,10.5,2']);
    await gateway.run(pod, 'eip-egress-qos-add', ['172.18.0.10,1,3,3']);
    expect(sim.tcFilters().map((f) => [f.direction, f.ip, f.rate, f.burst])).toEqual([
      ['ingress', '172.18.0.10', '10500Kbit', '2Mb'],
      ['egress', '172.18.0.10', '3Mbit', '3Mb'],
    ]);
    await gateway.run(pod, 'eip-ingress-qos-del', ['172.18.0.10']);
    await gateway.run(pod, 'eip-egress-qos-del', ['172.18.0.10']);
    await gateway.run(pod, 'eip-del', ['172.18.0.10/16']);
    expect(sim.tcFilters()).toEqual([]);
    expect(sim.net1Addresses()).not.toContain('172.18.0.10/16');
  });
});
