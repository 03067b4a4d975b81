/**
 * The bridge against the real local Kubernetes API over HTTP: informers, routing and the keyed queue end to end,
 * with a recording sink at the Sink seam. The point of these tests is that no change is lost — across dropped
 * watches, a compacted history (410), watch errors, and an API restart from its data directory on the same port —
 * and that the counters, health endpoints, resync and drain behave.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { kubeConfigFor } from '../../local/kube-api/testing.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { BLOCKER_REASONS, type Bridge, startBridge, watchPaths } from '../../shared/bridge/index.js';
import type { Sink } from '../../shared/bridge/sinks/sink.js';
import { FINALIZER, GROUP, Label, Plural, VERSION } from '../../shared/domain/kube-ovn.js';
import type { EipEvent } from '../../shared/events.js';
import { eventually } from '../support/eventually.js';

const NS = 'kube-system';

function recordingSink(delayMs = 0): Sink & { events: EipEvent[] } {
  const events: EipEvent[] = [];
  return {
    events,
    async send(e) {
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      events.push(e);
    },
  };
}

const summary = (events: EipEvent[]) => events.map((e) => `${e.handler}/${e.reason} ${e.object.name}`);

/** The update an EIP gets because another EIP's deletion released an address (ADR 0020). */
const RELEASED = `update/${BLOCKER_REASONS.addressReleased}`;
const isReleased = (e: EipEvent) => `${e.handler}/${e.reason}` === RELEASED && e.id.includes(':');
const withoutReleased = (events: EipEvent[]) => events.filter((e) => !isReleased(e));

class World {
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  constructor(readonly kc: KubeConfig) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
  }
  async eip(name: string, spec: Record<string, unknown> = { natGwDp: 'gw1' }, finalizers?: string[]) {
    await this.custom.createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: Plural.eip,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'IptablesEIP', metadata: { name, finalizers }, spec },
    });
  }
  async patch(name: string, body: object, status = false) {
    const req = { group: GROUP, version: VERSION, plural: Plural.eip, name, body };
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    if (status) await this.custom.patchClusterCustomObjectStatus(req, merge);
    else await this.custom.patchClusterCustomObject(req, merge);
  }
  async remove(name: string) {
    await this.custom.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: Plural.eip, name });
  }
  async fip(name: string, eip: string) {
    await this.custom.createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: Plural.fip,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'IptablesFIPRule',
        metadata: { name },
        spec: { eip, internalIp: '10.0.1.5' },
      },
    });
  }
  async gatewayPod(gw: string) {
    await this.core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: {
          name: `vpc-nat-gw-${gw}-0`,
          labels: { app: `vpc-nat-gw-${gw}`, [Label.vpcNatGw]: 'true' },
          annotations: { 'ovn.kubernetes.io/vpc_nat_gw': gw },
        },
        spec: { containers: [{ name: 'vpc-nat-gw', image: 'kubeovn/vpc-nat-gateway' }] },
      },
    });
  }
}

describe('bridge against the local Kubernetes API', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(
    opts: { dataDir?: string; port?: number; resyncMs?: number; healthPort?: number } = {},
  ) {
    let api = await startKubeApi({
      ...(opts.dataDir && { dataDir: opts.dataDir }),
      ...(opts.port && { port: opts.port }),
    });
    const kc = kubeConfigFor(api);
    const sink = recordingSink();
    const log = memoryLogger('info');
    const bridge = await startBridge({
      kubeConfig: kc,
      namespace: NS,
      sink,
      log,
      resyncMs: opts.resyncMs ?? 0,
      restartBackoffMs: 50,
      statsIntervalMs: 0,
      ...(opts.healthPort !== undefined && { healthPort: opts.healthPort }),
    });
    cleanups.push(async () => {
      await bridge.drain(2_000);
      await api.close();
    });
    await bridge.ready();
    return {
      get api() {
        return api;
      },
      set api(a: KubeApi) {
        api = a;
      },
      kc,
      sink,
      log,
      bridge,
      world: new World(kc),
    };
  }

  it('routes a created EIP to add as soon as every watch is listening', async () => {
    const t = await setup();
    expect(t.bridge.stats().ready).toBe(true);
    await t.world.eip('eip-1');
    await eventually(() => expect(summary(t.sink.events)).toEqual(['add/added eip-1']));
    const [e] = t.sink.events;
    expect(e!.object.uid).toBeTruthy();
    expect(Date.parse(e!.emittedAt!)).not.toBeNaN();
    await t.bridge.idle();
    expect(t.bridge.stats()).toMatchObject({ eventsIn: { add: 1 }, eventsOut: { add: 1 }, queueDepth: 0 });
  });

  it('loses no change while its watches are dropped again and again', async () => {
    const t = await setup();
    await t.world.eip('keep', { natGwDp: 'gw1' }, [FINALIZER]);
    await eventually(() => expect(summary(t.sink.events)).toContain('add/added keep'));
    for (let i = 0; i < 5; i++) {
      t.api.faults.dropWatches();
      await t.world.eip(`eip-${i}`);
      t.api.faults.dropWatches();
    }
    await t.world.remove('keep'); // terminating: finalizer holds it
    t.api.faults.dropWatches();
    await t.world.patch('keep', { metadata: { finalizers: null } }); // gone
    await eventually(() => {
      expect(summary(withoutReleased(t.sink.events))).toEqual([
        'add/added keep',
        ...[0, 1, 2, 3, 4].map((i) => `add/added eip-${i}`),
        'update/deletion-requested keep',
        'delete/deleted keep',
      ]);
      // keep's address went back to the pool: every waiting EIP on its subnet is told
      expect(summary(t.sink.events.filter(isReleased)).sort()).toEqual(
        [0, 1, 2, 3, 4].map((i) => `${RELEASED} eip-${i}`),
      );
    });
    expect(t.bridge.stats().watches.every((w) => w.watching)).toBe(true);
  });

  it('relists after a 410 and delivers what changed while its watches were failing (added, changed, deleted)', async () => {
    const t = await setup();
    await t.world.eip('stays');
    await t.world.eip('goes');
    await t.world.eip('spec', { natGwDp: 'gw1' });
    await eventually(() => expect(t.sink.events).toHaveLength(3));
    // Every watch request now fails; the open ones are cut, so the informers stop and the bridge restarts them.
    const failing = t.api.faults.apiError({ verb: 'watch', code: 503, times: Number.POSITIVE_INFINITY });
    t.api.faults.dropWatches();
    await eventually(() => expect(t.bridge.stats().watches.some((w) => !w.watching)).toBe(true));
    await t.world.eip('new');
    await t.world.remove('goes');
    await t.world.patch('spec', { spec: { natGwDp: 'gw2' } });
    await t.world.fip('fip-1', 'stays');
    t.api.faults.compact(); // the missed history is gone: the restart will get 410 and relist
    failing.cancel();
    await eventually(() => {
      expect(summary(withoutReleased(t.sink.events.slice(3))).sort()).toEqual(
        [
          'add/added new',
          'delete/deleted goes',
          'update/spec-changed spec',
          'reset/nat-rule-changed stays',
        ].sort(),
      );
      // goes's deletion released an address: the waiting EIPs the bridge knew of then are told
      expect(summary(t.sink.events.filter(isReleased))).toEqual(
        expect.arrayContaining([`${RELEASED} spec`, `${RELEASED} stays`]),
      );
    });
    const deleted = t.sink.events.find((e) => e.handler === 'delete')!;
    expect(deleted.old?.metadata?.name).toBe('goes');
    expect(deleted.object.uid).toBe(deleted.old?.metadata?.uid);
    await eventually(() => expect(t.bridge.stats().ready).toBe(true));
    const restarts = t.bridge.stats().watches.map((w) => w.restarts);
    expect(Math.min(...restarts)).toBeGreaterThan(0);
    expect(t.log.lines.some((l) => l.message === 'watch failed; restarting')).toBe(true);
  });

  it('survives an API restart from its data directory on the same port, catching up on changes made meanwhile', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'bridge-api-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const t = await setup({ dataDir });
    const port = Number(new URL(t.api.url).port);
    await t.world.eip('configured');
    await t.world.patch('configured', { status: { ready: true, ip: '172.18.0.5' } }, true);
    await t.world.eip('doomed');
    await eventually(() => expect(t.sink.events).toHaveLength(2));
    await t.world.gatewayPod('gw1');
    await eventually(() => expect(summary(t.sink.events)).toContain('update/gateway-restarted configured'));
    const before = t.sink.events.length;

    await t.api.close(); // the bridge's watches now fail with connection refused
    // Meanwhile, another API process on the same data (as if kubectl reached the restarted server first).
    const other = await startKubeApi({ dataDir });
    const w2 = new World(kubeConfigFor(other));
    await w2.eip('born-while-away');
    await w2.remove('doomed');
    await other.close();
    t.api = await startKubeApi({ dataDir, port });

    // Seen on reconnect: the new EIP, the deleted one, and — because the restarted API restarts gateway
    // containers as a node reboot would — a redo for the configured EIP.
    await eventually(() =>
      expect(summary(t.sink.events.slice(before))).toEqual(
        expect.arrayContaining([
          'add/added born-while-away',
          'delete/deleted doomed',
          'update/gateway-restarted configured',
        ]),
      ),
    );
    await t.world.eip('after');
    await eventually(() => expect(summary(t.sink.events)).toContain('add/added after'));
    await eventually(() => expect(t.bridge.stats().ready).toBe(true));
  });

  it('re-sends every known EIP to update on resync, dropping a resync event whose twin is still waiting', async () => {
    const t = await setup();
    for (const n of ['a', 'b', 'c']) await t.world.eip(n);
    await eventually(() => expect(t.sink.events).toHaveLength(3));
    await t.bridge.idle();
    // First resync: one event per EIP starts at once. Second: each waits behind its twin (a running event is
    // not a duplicate — the object may have changed since it started). Third: all three already waiting.
    await Promise.all([t.bridge.resyncNow(), t.bridge.resyncNow(), t.bridge.resyncNow()]);
    await t.bridge.idle();
    expect(summary(t.sink.events.slice(3)).sort()).toEqual(
      ['a', 'a', 'b', 'b', 'c', 'c'].map((n) => `update/resync ${n}`),
    );
    expect(t.bridge.stats()).toMatchObject({ resyncs: 3, duplicates: 3, eventsIn: { update: 6 } });
  });

  it('resyncs on its own timer', async () => {
    const t = await setup({ resyncMs: 100 });
    await t.world.eip('a');
    await eventually(() =>
      expect(t.sink.events.filter((e) => e.reason === 'resync').length).toBeGreaterThanOrEqual(2),
    );
  });
});

describe('bridge health, counters and drain', () => {
  it('serves /healthz, /readyz and /metrics, and drains within its deadline', async () => {
    const api = await startKubeApi();
    try {
      const sink = recordingSink(200); // slow: each event takes 200 ms to be accepted
      const log = memoryLogger('info');
      const bridge: Bridge = await startBridge({
        kubeConfig: kubeConfigFor(api),
        namespace: NS,
        sink,
        log,
        healthPort: 0,
        resyncMs: 0,
        statsIntervalMs: 0,
        concurrency: 1,
      });
      expect(bridge.healthUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const health = await fetch(`${bridge.healthUrl}/healthz`);
      expect(health.status).toBe(200);
      await bridge.ready();
      const ready = await fetch(`${bridge.healthUrl}/readyz`);
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { watches: unknown[] }).watches).toHaveLength(watchPaths(NS).length);

      const w = new World(kubeConfigFor(api));
      for (const n of ['a', 'b', 'c', 'd', 'e']) await w.eip(n);
      let metrics = '';
      await eventually(async () => {
        metrics = await (await fetch(`${bridge.healthUrl}/metrics`)).text();
        expect(metrics).toMatch(/eip_bridge_events_in_total\{handler="add"\} 5/);
      });
      expect(metrics).toContain('# TYPE eip_bridge_events_in_total counter');
      expect(metrics).toMatch(/eip_bridge_queue_depth [1-5]/); // 200 ms per event, one at a time
      expect(metrics).toContain('eip_bridge_watch_up{kind="IptablesEIP"} 1');
      expect(metrics).toContain('eip_bridge_lag_seconds_count');

      // The queue needs about a second; the drain stops at its 300 ms deadline and drops the rest.
      await bridge.drain(300);
      const drained = log.lines.find((l) => l.message === 'drained');
      expect(drained).toMatchObject({ outcome: 'deadline' });
      expect(drained!.dropped).toBeGreaterThan(0);
      const delivered = sink.events.length;
      expect(delivered).toBeLessThan(5);
      await w.eip('after-drain');
      await new Promise((r) => setTimeout(r, 300));
      expect(sink.events.length).toBeLessThanOrEqual(delivered + 1); // at most the one in flight at the deadline
      expect(sink.events.map((e) => e.object.name)).not.toContain('after-drain');
      await expect(fetch(`${bridge.healthUrl}/healthz`)).rejects.toThrow();
    } finally {
      await api.close();
    }
  });

  it('answers /readyz with 503 until every watch has listed', async () => {
    const api = await startKubeApi();
    try {
      const failing = api.faults.apiError({ verb: 'list', resource: Plural.qos, code: 503, times: 3 });
      const bridge = await startBridge({
        kubeConfig: kubeConfigFor(api),
        namespace: NS,
        sink: recordingSink(),
        log: memoryLogger('error'),
        healthPort: 0,
        resyncMs: 0,
        statsIntervalMs: 0,
        restartBackoffMs: 100,
      });
      try {
        await eventually(() => expect(failing.hits).toBeGreaterThanOrEqual(1));
        const early = await fetch(`${bridge.healthUrl}/readyz`);
        expect(early.status).toBe(503);
        const body = (await early.json()) as {
          watches: { kind: string; watching: boolean; lastError?: string }[];
        };
        expect(body.watches.find((w) => w.kind === 'QoSPolicy')).toMatchObject({ watching: false });
        await bridge.ready();
        expect((await fetch(`${bridge.healthUrl}/readyz`)).status).toBe(200);
      } finally {
        await bridge.drain(1_000);
      }
    } finally {
      await api.close();
    }
  });
});
