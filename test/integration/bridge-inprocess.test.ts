/**
 * The bridge with the in-process sink and the real handlers on the real adapters (the local Kubernetes API with
 * kube-ovn's stand-ins, dynalite): bounded retries are backed by re-sends. An add that keeps failing is parked as a
 * dead letter, queued again with backoff, and succeeds once the fault clears; a container restart wipes the gateway
 * and the bridge's redo puts the address back; a drain lets a handler in the middle of an exec finish and release
 * its lease.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { CustomObjectsApi, Exec, type KubeConfig, KubernetesObjectApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { kubeConfigFor } from '../../local/kube-api/testing.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { buildDeps } from '../../shared/adapters/live.js';
import { type Bridge, type InProcessSink, inProcessSink, startBridge } from '../../shared/bridge/index.js';
import { loadConfig } from '../../shared/config/config.js';
import type { Outcome } from '../../shared/core/outcome.js';
import { GROUP, type IptablesEip, Plural, VERSION } from '../../shared/domain/kube-ovn.js';
import { leaseKey } from '../../shared/domain/lease.js';
import type { EipEvent } from '../../shared/events.js';
import type { Deps } from '../../shared/ports.js';
import { PRODUCT_RETRIES, startDynamoFixture } from '../support/dynamo.js';
import { eventually } from '../support/eventually.js';

const NS = 'kube-system';
const POD = 'vpc-nat-gw-gw1-0';
const TABLE = 'bridge-inprocess';

describe('bridge with the in-process sink and the real handlers', () => {
  let api: KubeApi;
  let kc: KubeConfig;
  let bridge: Bridge;
  let sink: InProcessSink;
  let deps: Deps;
  const stops: (() => Promise<unknown>)[] = [];
  const handled: { event: EipEvent; outcome: Outcome }[] = [];

  beforeAll(async () => {
    const dynamo = await startDynamoFixture();
    stops.push(() => dynamo.close());
    const client = await dynamo.table(TABLE, PRODUCT_RETRIES);
    api = await startKubeApi({ restartDelayMs: 100 });
    stops.push(() => api.close());
    kc = kubeConfigFor(api);
    const dir = mkdtempSync(join(tmpdir(), 'bridge-inprocess-'));
    stops.push(async () => rmSync(dir, { recursive: true, force: true }));
    const kubeconfig = join(dir, 'kubeconfig');
    await api.writeKubeconfig(kubeconfig);

    const objects = KubernetesObjectApi.makeApiClient(kc);
    for (const o of demoObjects(NS).filter((x) => x.kind !== 'IptablesEIP')) await objects.create(o);
    const standIns = await startStandIns({ kubeConfig: kc, namespace: NS });
    stops.push(() => standIns.stop());

    const log = memoryLogger('warn');
    const config = loadConfig({
      KUBECONFIG: kubeconfig,
      TABLE_NAME: TABLE,
      DYNAMODB_ENDPOINT: dynamo.endpoint,
    });
    deps = buildDeps(config, { kubeConfig: kc, dynamo: client, log });
    sink = inProcessSink({
      getDeps: async () => deps,
      retries: 1,
      backoffMs: 50,
      retryForMs: 0,
      log,
      onOutcome: (event, outcome) => handled.push({ event, outcome }),
    });
    bridge = await startBridge({
      kubeConfig: kc,
      namespace: NS,
      sink,
      log,
      resyncMs: 0,
      statsIntervalMs: 0,
      requeueBackoffMs: 200,
      maxRequeueBackoffMs: 400,
    });
    stops.push(() => bridge.drain(5_000));
    await bridge.ready();
    await eventually(() => expect(net1()).toBeDefined());
  });

  afterAll(async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
  });

  const net1 = () => {
    const sim = api.gateways.get(NS, POD);
    if (!sim) throw new Error('no gateway pod yet');
    return sim.net1Addresses();
  };
  const getEip = async (name: string) =>
    (await kc
      .makeApiClient(CustomObjectsApi)
      .getClusterCustomObject({ group: GROUP, version: VERSION, plural: Plural.eip, name })) as IptablesEip;
  const killGatewayContainer = async () => {
    const out = new PassThrough().resume();
    await new Promise<void>((resolve, reject) => {
      new Exec(kc)
        .exec(NS, POD, 'vpc-nat-gw', ['kill', '1'], out, out, null, false, () => resolve())
        .catch(reject);
    });
  };

  it('parks an add that keeps failing, queues it again with backoff, and it succeeds once the fault clears', async () => {
    const failing = api.faults.failExec({
      command: 'eip-add',
      times: Number.POSITIVE_INFINITY,
      stderr: 'RTNETLINK answers: busy\n',
    });
    await kc.makeApiClient(CustomObjectsApi).createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: Plural.eip,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'IptablesEIP',
        metadata: { name: 'eip-1' },
        spec: { natGwDp: 'gw1' },
      },
    });
    const [letter] = await eventually(() => {
      const l = sink.deadLetters();
      expect(l).toHaveLength(1);
      return l;
    });
    expect(letter).toMatchObject({
      attempts: 2,
      event: { handler: 'add', reason: 'added', object: { name: 'eip-1' } },
    });
    expect((await getEip('eip-1')).status?.ready).not.toBe(true);
    // not left for the resync (off here): the bridge sends it again, and again, with backoff
    await eventually(() => expect(bridge.stats().requeued).toBeGreaterThanOrEqual(2));
    expect(sink.deadLetters()).toHaveLength(1); // one letter per EIP and handler, the newest

    failing.cancel(); // nothing else changes: no watch event, no resync
    const eip = await eventually(async () => {
      const e = await getEip('eip-1');
      expect(e.status?.ready).toBe(true);
      return e;
    });
    expect(net1()).toContain(`${eip.status!.ip}/24`);
    await sink.idle(); // the outcome is recorded after the status write we just saw
    expect(
      handled.find((h) => h.event.reason === 'added' && h.event.object.name === 'eip-1')?.outcome,
    ).toMatchObject({ status: 'applied' });
    expect(sink.deadLetters()).toEqual([]); // the success cleared its letter
  });

  it('puts the address back after a container restart wiped the gateway (redo)', async () => {
    const ip = (await getEip('eip-1')).status!.ip!;
    const before = (await getEip('eip-1')).status!.redo;
    // Let the clock pass the second of the previous start, so that status.redo (one-second resolution) moves too.
    await new Promise((r) => setTimeout(r, 1_100));
    await killGatewayContainer();
    await eventually(async () => {
      expect(net1()).toContain(`${ip}/24`);
      const e = await getEip('eip-1');
      expect(e.status?.redo).not.toBe(before);
      expect(e.status?.ready).toBe(true);
    });
    // The status write lands before the handler returns and its outcome is recorded: wait for the sink first.
    await sink.idle();
    expect(
      handled.some(
        (h) =>
          h.event.reason === 'gateway-restarted' &&
          h.event.gateway === 'gw1' &&
          h.outcome.status === 'applied',
      ),
    ).toBe(true);
    expect(sink.deadLetters()).toEqual([]);
  });

  // Last: it drains the suite's bridge.
  it('a drain lets a handler in the middle of an exec finish and give its lease back', async () => {
    const held = api.faults.holdExec({ command: 'eip-add' });
    await kc.makeApiClient(CustomObjectsApi).createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: Plural.eip,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'IptablesEIP',
        metadata: { name: 'eip-drain' },
        spec: { natGwDp: 'gw1' },
      },
    });
    await eventually(() => expect(held.hits).toBe(1)); // the add is inside its exec, holding the EIP's lease
    const draining = bridge.drain(20_000);
    await new Promise((r) => setTimeout(r, 200));
    await expect(deps.leases.acquire(leaseKey('eip-drain'), 'probe', Date.now() + 1_000)).rejects.toThrow(
      /held/,
    ); // still running: the drain does not cut it off
    held.release();
    await draining;
    expect((await getEip('eip-drain')).status?.ready).toBe(true);
    // given back: a restarted stack takes it at once instead of waiting for it to expire
    const lease = await deps.leases.acquire(leaseKey('eip-drain'), 'probe', Date.now() + 1_000);
    await deps.leases.release(lease);
  });
});
