/**
 * Faults on the real adapters (dynalite + the local Kubernetes API, whose fault injection is local/kube-api/faults.ts;
 * DynamoDB faults at the SDK client seam of test/fault/lab.ts). Each fault hits a fresh EIP on its way to Ready, or a
 * Ready EIP on its way out; the event is then delivered as Lambda does (retryable errors retried). Every case must
 * converge — the EIP Ready with its one allocation on net1, or gone with nothing left — and a permanent error must
 * end in the EIP's status.conditions.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessSink } from '../../shared/bridge/sinks/in-process.js';
import { SinkGaveUp } from '../../shared/bridge/sinks/sink.js';
import {
  ClusterUnavailableError,
  GatewayCommandError,
  StoreUnavailableError,
} from '../../shared/domain/errors.js';
import type { Deps } from '../../shared/ports.js';
import { eventuallyValue } from '../support/eventually.js';
import { type Lab, NS, POD, startLab } from './lab.js';

let lab: Lab;
const faults: string[] = [];

beforeAll(async () => {
  lab = await startLab('faults', { execTimeoutMs: 1_000 });
}, 60_000);

afterAll(async () => {
  console.log(`faults covered: ${faults.length}\n${faults.map((f) => `  ${f}`).join('\n')}`);
  await lab?.close();
});

/** The EIP is Ready with exactly one allocation, which is on net1 once and on no other EIP. */
async function expectConverged(name: string): Promise<string> {
  const eip = (await lab.getEip(name))!;
  expect(eip.status, name).toMatchObject({ ready: true });
  const ip = eip.status!.ip!;
  const held = await lab.deps.ipam.findByOwner(eip.metadata.uid);
  expect(held.map((a) => a.address)).toEqual([ip]);
  expect(
    lab
      .sim()
      .net1Addresses()
      .filter((c) => c.startsWith(`${ip}/`)),
  ).toHaveLength(1);
  expect(eip.metadata.finalizers).toContain('kubeovn.io/kube-ovn-controller');
  expect(eip.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
  return ip;
}

/** The EIP is gone, its allocation released and its address off the gateway. */
async function expectGone(name: string, uid: string, ip: string): Promise<void> {
  expect(await lab.getEip(name)).toBeUndefined();
  expect(await lab.deps.ipam.findByOwner(uid)).toEqual([]);
  expect(
    lab
      .sim()
      .net1Addresses()
      .filter((c) => c.startsWith(`${ip}/`)),
  ).toEqual([]);
  expect(
    lab
      .sim()
      .tcFilters()
      .filter((f) => f.ip === ip),
  ).toEqual([]);
}

/** The fault, if it returned a handle, must have fired: a fault that never hit proves nothing. */
function expectFired(handle: unknown): void {
  if (handle && typeof handle === 'object' && 'hits' in handle)
    expect((handle as { hits: number }).hits, 'the injected fault fired').toBeGreaterThan(0);
}

async function addThrough(name: string, fault: () => unknown, expectError?: new (...a: never[]) => Error) {
  await lab.createEip(name, { natGwDp: 'gw1', qosPolicy: 'qos-demo' });
  const event = await lab.event('add', name, 'added');
  const handle = fault();
  if (expectError) await expect(lab.invoke(event)).rejects.toBeInstanceOf(expectError);
  await lab.deliver(event);
  expectFired(handle);
  return expectConverged(name);
}

async function readyEip(name: string) {
  await lab.createEip(name, { natGwDp: 'gw1', qosPolicy: 'qos-demo' });
  await lab.deliver(await lab.event('add', name, 'added'));
  const ip = await expectConverged(name);
  const uid = (await lab.getEip(name))!.metadata.uid;
  return { ip, uid };
}

async function deleteThrough(name: string, fault: () => unknown, expectError?: new (...a: never[]) => Error) {
  const { ip, uid } = await readyEip(name);
  await lab.deleteEip(name);
  const event = await lab.event('update', name, 'deletion-requested');
  const handle = fault();
  if (expectError) await expect(lab.invoke(event)).rejects.toBeInstanceOf(expectError);
  await lab.deliver(event);
  expectFired(handle);
  await expectGone(name, uid, ip);
}

describe('gateway exec faults', () => {
  it('eip-add exits non-zero: thrown, retried, converges without a second allocation', async () => {
    await addThrough(
      'f-exec-fail',
      () => lab.api.faults.failExec({ command: 'eip-add', exitCode: 1 }),
      GatewayCommandError,
    );
    faults.push('exec exits 1 (eip-add)');
  });

  it('a QoS exec cannot start (InternalError status)', async () => {
    await addThrough(
      'f-exec-error',
      () => lab.api.faults.errorExec({ command: 'qos-add' }),
      GatewayCommandError,
    );
    faults.push('exec cannot start (qos add)');
  });

  it('eip-add hangs past the exec timeout', async () => {
    await addThrough(
      'f-exec-hang',
      () => lab.api.faults.hangExec({ command: 'eip-add' }),
      GatewayCommandError,
    );
    faults.push('exec hangs past its timeout (eip-add)');
  });

  it('eip-add runs but its exit status is lost', async () => {
    await addThrough(
      'f-exec-nostatus',
      () => lab.api.faults.dropExecStatus({ command: 'eip-add' }),
      GatewayCommandError,
    );
    faults.push('exec status lost after the command ran (eip-add)');
  });

  it('eip-del fails on deletion: the finalizer stays until the retry removes the address', async () => {
    await deleteThrough(
      'f-del-fail',
      () => lab.api.faults.failExec({ command: 'eip-del' }),
      GatewayCommandError,
    );
    faults.push('exec exits 1 (eip-del)');
  });
});

describe('Kubernetes API faults', () => {
  for (const code of [409, 429, 500, 503]) {
    it(`${code} on the status write`, async () => {
      await addThrough(`f-api-status-${code}`, () =>
        lab.api.faults.apiError({
          code,
          verb: 'patch',
          resource: 'iptables-eips/status',
          times: 1,
          retryAfterSeconds: 0,
        }),
      );
      faults.push(`API ${code} on the status patch`);
    });
  }

  for (const code of [409, 500, 503]) {
    it(`${code} on the finalizer write of a deletion`, async () => {
      await deleteThrough(`f-api-fin-${code}`, () =>
        lab.api.faults.apiError({ code, verb: ['patch', 'update'], resource: 'iptables-eips', times: 1 }),
      );
      faults.push(`API ${code} on the finalizer removal`);
    });
  }

  for (const code of [500, 503]) {
    it(`${code} on the exec request itself (pods/exec)`, async () => {
      await addThrough(`f-api-exec-${code}`, () =>
        lab.api.faults.apiError({ code, resource: 'pods/exec', times: 1 }),
      );
      faults.push(`API ${code} on pods/exec`);
    });
  }

  it('429 on the finalizer write of an add', async () => {
    await addThrough('f-api-add-429', () =>
      lab.api.faults.apiError({
        code: 429,
        verb: ['patch', 'update'],
        resource: 'iptables-eips',
        times: 1,
        retryAfterSeconds: 0,
      }),
    );
    faults.push('API 429 on the finalizer write');
  });

  it('503 on every read for a while: thrown as unavailable, converges once the API answers', async () => {
    await addThrough(
      'f-api-get-503',
      () => lab.api.faults.apiError({ code: 503, verb: 'get', resource: 'iptables-eips', times: 3 }),
      ClusterUnavailableError,
    );
    faults.push('API 503 on EIP reads (several in a row)');
  });
});

describe('DynamoDB faults (at the SDK client seam)', () => {
  it('a throttled write is absorbed by the retries', async () => {
    const f = lab.failDynamo('PutItem', 'throttle', 1);
    await addThrough('f-ddb-throttle-1', () => undefined);
    expect(f.hits).toBe(1);
    faults.push('DynamoDB throttling (one request)');
  });

  it('throttling longer than the retries: thrown, redelivered, converges with one allocation', async () => {
    await lab.createEip('f-ddb-throttle-many', { natGwDp: 'gw1', qosPolicy: 'qos-demo' });
    const event = await lab.event('add', 'f-ddb-throttle-many', 'added');
    const f = lab.failDynamo('*', 'throttle', Number.POSITIVE_INFINITY);
    await expect(lab.invoke(event)).rejects.toBeInstanceOf(StoreUnavailableError);
    f.times = f.hits; // DynamoDB answers again
    expect(f.hits).toBeGreaterThan(1);
    await lab.deliver(event);
    await expectConverged('f-ddb-throttle-many');
    faults.push('DynamoDB throttling (every request, past the retries)');
  });

  it('500s on the allocation writes', async () => {
    let f: ReturnType<Lab['failDynamo']> | undefined;
    await addThrough('f-ddb-500', () => {
      // An add's writes are PutItems since ADR 0041 (the lease, the claim with its placement): the first ones fail.
      f = lab.failDynamo('PutItem', 'server-error', 3);
    });
    expect(f!.hits).toBeGreaterThan(0);
    faults.push('DynamoDB 500 (InternalServerError) on writes');
  });

  it('500s on the release of a deletion', async () => {
    await deleteThrough('f-ddb-500-release', () => lab.failDynamo('*', 'server-error', 3));
    faults.push('DynamoDB 500 during a release');
  });
});

describe('leases and dying gateways', () => {
  it('a lease held by a stuck invocation: the event waits (LeaseHeld) and converges once the lease expires', async () => {
    await lab.createEip('f-lease', { natGwDp: 'gw1' });
    await lab.deps.leases.acquire('eip#f-lease', 'stuck-invocation', lab.clock.now() + 120_000);
    const event = await lab.event('add', 'f-lease', 'added');
    await expect(lab.invoke(event)).rejects.toMatchObject({ name: 'LeaseHeldError' });
    expect(await lab.deps.ipam.findByOwner((await lab.getEip('f-lease'))!.metadata.uid)).toEqual([]);
    await lab.deliver(event);
    await expectConverged('f-lease');
    faults.push('lease held by a stuck invocation');
  });

  it('an invocation stuck inside eip-add holds off a sibling; both end with one allocation', async () => {
    await lab.createEip('f-stuck', { natGwDp: 'gw1' });
    const hold = lab.api.faults.holdExec({ command: 'eip-add' });
    const event = await lab.event('add', 'f-stuck', 'added');
    const first = lab.invoke(event);
    await eventuallyValue(() => hold.hits === 1);
    await expect(lab.invoke(await lab.event('update', 'f-stuck', 'resync'))).rejects.toMatchObject({
      name: 'LeaseHeldError',
    });
    hold.release();
    expect(await first).toMatchObject({ status: 'applied' });
    await expectConverged('f-stuck');
    faults.push('invocation stuck in an exec while a sibling arrives');
  });

  it('the gateway pod dies between eip-add and the status write: the re-created pod gets the address back', async () => {
    await lab.createEip('f-gw-dies', { natGwDp: 'gw1' });
    const core = lab.kc.makeApiClient(CoreV1Api);
    const before = await core.readNamespacedPod({ name: POD, namespace: NS });
    let killed = false;
    const deps: Deps = {
      ...lab.deps,
      gateway: {
        async run(pod, op, args, signal) {
          const out = await lab.deps.gateway.run(pod, op, args, signal);
          if (op === 'eip-add' && !killed) {
            killed = true;
            await core.deleteNamespacedPod({ name: POD, namespace: NS });
            await eventuallyValue(async () => {
              const p = await core.readNamespacedPod({ name: POD, namespace: NS }).catch(() => undefined);
              return p?.metadata?.uid !== before.metadata?.uid && p?.status?.phase === 'Running' && p;
            });
            await eventuallyValue(() => lab.api.gateways.get(NS, POD)?.initialised);
          }
          return out;
        },
      },
    };
    const event = await lab.event('add', 'f-gw-dies', 'added');
    await lab.invoke(event, deps);
    expect(killed).toBe(true);
    // The bridge sees the new pod become ready and sends gateway-ready to the gateway's EIPs.
    await lab.deliver(await lab.event('update', 'f-gw-dies', 'gateway-ready'));
    await expectConverged('f-gw-dies');
    faults.push('gateway pod re-created between eip-add and the status write');
  });
});

describe('permanent errors end in status.conditions', () => {
  it('a missing QoS policy: rejected, with a Validated=False condition naming it', async () => {
    await lab.createEip('f-perm-qos', { natGwDp: 'gw1', qosPolicy: 'no-such-policy' });
    const out = await lab.deliver(await lab.event('add', 'f-perm-qos', 'added'));
    expect(out).toMatchObject({ status: 'rejected' });
    const eip = await lab.getEip('f-perm-qos');
    const cond = eip?.status?.conditions?.find((c) => c.status === 'False');
    expect(cond?.message).toContain('no-such-policy');
    expect(await lab.deps.ipam.findByOwner(eip!.metadata.uid)).toEqual([]);
    faults.push('permanent: missing QoS policy → condition');
  });
});

describe('no dead letter without a condition on the EIP', () => {
  // A retryable failure of an EIP with no address yet is written on it (Ready=False, under the lease) before the
  // error goes back to be retried, so the dead letter's EIP says why it is not Ready.
  it('an exec that fails every retry: the sink parks the event, and the EIP says why it is not Ready', async () => {
    await lab.createEip('f-dead', { natGwDp: 'gw1' });
    const fault = lab.api.faults.failExec({
      command: 'eip-add',
      times: Number.POSITIVE_INFINITY,
      stderr: 'RTNETLINK answers: Operation not permitted\n',
    });
    const sink = inProcessSink({
      getDeps: async () => lab.deps,
      retries: 2,
      backoffMs: 1,
      maxBackoffMs: 1,
      retryForMs: 0,
    });
    try {
      await expect(sink.send(await lab.event('add', 'f-dead', 'added'))).rejects.toBeInstanceOf(SinkGaveUp);
      expect(sink.deadLetters().map((d) => d.event.object.name)).toEqual(['f-dead']);
    } finally {
      fault.cancel();
      await sink.close();
    }
    const eip = await lab.getEip('f-dead');
    const notReady = eip?.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'False');
    expect(notReady, 'a Ready=False condition on the dead-lettered EIP').toBeDefined();
    expect(notReady?.message).toMatch(/eip-add|exit/);
    faults.push('retries exhausted → dead letter with a condition on the EIP');
  });
});
