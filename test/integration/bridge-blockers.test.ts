/**
 * The bridge against the local Kubernetes API: EIPs that wait on something are sent again when it changes
 * (ADR 0020) and, while their conditions say they are blocked by something that may clear, after a backoff even
 * when nothing changes (ADR 0016); and a full queue pauses the watches without losing a change (ADR 0018). A
 * recording sink at the Sink seam: nothing handles the events, so the world changes only when the test says.
 */
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { kubeConfigFor } from '../../local/kube-api/testing.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { type Bridge, startBridge } from '../../shared/bridge/index.js';
import type { Sink } from '../../shared/bridge/sinks/sink.js';
import { GROUP, NatGwConfigMap, Plural, VERSION } from '../../shared/domain/kube-ovn.js';
import type { EipEvent } from '../../shared/events.js';
import { eventually } from '../support/eventually.js';

const NS = 'kube-system';

function recordingSink(gate?: { wait: Promise<void> }): Sink & { events: EipEvent[] } {
  const events: EipEvent[] = [];
  return {
    events,
    async send(e) {
      if (gate) await gate.wait;
      events.push(e);
    },
  };
}

const summary = (events: EipEvent[]) => events.map((e) => `${e.handler}/${e.reason} ${e.object.name}`);

describe('bridge re-routing and blocked retries on the local Kubernetes API', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setup(
    opts: { sink?: Sink & { events: EipEvent[] }; queueLimit?: number; concurrency?: number } = {},
  ) {
    const api: KubeApi = await startKubeApi();
    const kc = kubeConfigFor(api);
    const sink = opts.sink ?? recordingSink();
    const log = memoryLogger('info');
    const bridge: Bridge = await startBridge({
      kubeConfig: kc,
      namespace: NS,
      sink,
      log,
      resyncMs: 0,
      statsIntervalMs: 0,
      restartBackoffMs: 50,
      ...(opts.queueLimit !== undefined && { queueLimit: opts.queueLimit }),
      ...(opts.concurrency !== undefined && { concurrency: opts.concurrency }),
    });
    cleanups.push(async () => {
      await bridge.drain(1_000);
      await api.close();
    });
    await bridge.ready();
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const create = (plural: string, kind: string, name: string, spec: Record<string, unknown>) =>
      custom.createClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec },
      });
    return {
      api,
      bridge,
      sink,
      log,
      eip: (name: string, spec: Record<string, unknown>) => create(Plural.eip, 'IptablesEIP', name, spec),
      create,
      patch: (plural: string, name: string, body: object, status = false) => {
        const req = { group: GROUP, version: VERSION, plural, name, body };
        return status
          ? custom.patchClusterCustomObjectStatus(req, merge)
          : custom.patchClusterCustomObject(req, merge);
      },
      remove: (plural: string, name: string) =>
        custom.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural, name }),
      configMap: (name: string, data: Record<string, string>) =>
        core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name }, data } }),
      patchConfigMap: (name: string, data: Record<string, string>) =>
        core.patchNamespacedConfigMap({ namespace: NS, name, body: { data } }, merge),
    };
  }

  const blocked = (reason: string) => ({
    ready: false,
    conditions: [
      {
        type: 'Validated',
        status: 'False',
        reason,
        message: 'blocked',
        lastTransitionTime: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      },
    ],
  });

  it('sends waiting EIPs again when a subnet, a gateway or an address they wait on appears or is freed', async () => {
    const t = await setup();
    await t.eip('holder', { natGwDp: 'gw1', externalSubnet: 'ext' });
    await t.patch(Plural.eip, 'holder', { status: { ready: true, ip: '10.9.0.2' } }, true);
    await t.eip('wants-ext', { natGwDp: 'gw1', externalSubnet: 'ext' });
    await t.eip('wants-gw2', { natGwDp: 'gw2', externalSubnet: 'other' });
    await eventually(() => expect(t.sink.events).toHaveLength(3));
    const from = () => summary(t.sink.events.slice(3)).sort();

    await t.create(Plural.subnet, 'Subnet', 'ext', { cidrBlock: '10.9.0.0/24', protocol: 'IPv4' });
    await eventually(() => expect(from()).toEqual(['update/dependency-changed wants-ext']));

    await t.create(Plural.gateway, 'VpcNatGateway', 'gw2', {
      vpc: 'vpc1',
      subnet: 's1',
      lanIp: '10.0.1.254',
    });
    await eventually(() =>
      expect(from()).toEqual(['update/dependency-changed wants-ext', 'update/dependency-changed wants-gw2']),
    );

    await t.remove(Plural.eip, 'holder'); // its address goes back to the pool
    await eventually(() =>
      expect(from()).toEqual([
        'delete/deleted holder',
        'update/dependency-changed wants-ext',
        'update/dependency-changed wants-ext',
        'update/dependency-changed wants-gw2',
      ]),
    );
  });

  it('sends every EIP again when a nat-gw ConfigMap is created or its data changes', async () => {
    const t = await setup();
    await t.eip('e1', { natGwDp: 'gw1' });
    await t.eip('e2', { natGwDp: 'gw1' });
    await t.patch(Plural.eip, 'e2', { status: { ready: true, ip: '172.18.0.2' } }, true);
    await eventually(() => expect(t.sink.events).toHaveLength(2));
    await t.configMap('unrelated', { a: 'b' }); // not watched at all
    await t.configMap(NatGwConfigMap.enable, { [NatGwConfigMap.enableKey]: 'true' });
    await eventually(() =>
      expect(summary(t.sink.events.slice(2)).sort()).toEqual([
        'update/feature-changed e1',
        'update/feature-changed e2',
      ]),
    );
    await t.patchConfigMap(NatGwConfigMap.enable, { [NatGwConfigMap.enableKey]: 'false' });
    await eventually(() =>
      expect(t.sink.events.filter((e) => e.reason === 'feature-changed')).toHaveLength(4),
    );
    expect(t.sink.events.some((e) => e.object.name === 'unrelated')).toBe(false);
    expect(t.bridge.stats().watches.filter((w) => w.kind.startsWith('ConfigMap/'))).toHaveLength(2);
  });

  it('sends an EIP blocked by something that may clear again after its backoff, with nothing else happening', async () => {
    const t = await setup();
    await t.eip('conflicted', { natGwDp: 'gw1', v4ip: '172.18.0.9' });
    await t.eip('invalid', { natGwDp: 'gw1' });
    await eventually(() => expect(t.sink.events).toHaveLength(2));
    await t.patch(Plural.eip, 'conflicted', { status: blocked('AddressConflict') }, true);
    await t.patch(Plural.eip, 'invalid', { status: blocked('InvalidSpec') }, true); // only an edit fixes it
    // 1 s after the condition, then again (the delay grows with the time blocked)
    await eventually(() => {
      const retried = t.sink.events.filter((e) => e.reason === 'blocked-retry').map((e) => e.object.name);
      expect(retried.length).toBeGreaterThanOrEqual(2);
      expect(new Set(retried)).toEqual(new Set(['conflicted']));
    });
    expect(t.bridge.stats().blockedRetries).toBeGreaterThanOrEqual(2);
    // unblocked: the next scheduled retry is the last
    await t.patch(
      Plural.eip,
      'conflicted',
      { status: { ready: true, ip: '172.18.0.9', conditions: [] } },
      true,
    );
    await t.bridge.idle();
    const count = t.sink.events.filter((e) => e.reason === 'blocked-retry').length;
    await new Promise((r) => setTimeout(r, 2_500));
    expect(t.sink.events.filter((e) => e.reason === 'blocked-retry').length).toBeLessThanOrEqual(count + 1);
    expect(t.sink.events.some((e) => e.reason === 'blocked-retry' && e.object.name === 'invalid')).toBe(
      false,
    );
  });

  it('pauses its watches while the queue is full and loses no change', async () => {
    let open!: () => void;
    const gate = { wait: new Promise<void>((r) => (open = r)) };
    const sink = recordingSink(gate);
    const t = await setup({ sink, queueLimit: 4, concurrency: 1 });
    for (let i = 0; i < 6; i++) await t.eip(`p-${i}`, { natGwDp: 'gw1' }); // p-0 runs (held), 5 wait: full
    await eventually(() => expect(t.bridge.stats().queuePauses).toBe(1));
    expect(t.bridge.stats().watches.some((w) => w.paused)).toBe(true);
    expect(t.bridge.stats().ready).toBe(true); // paused on purpose is not unhealthy
    for (let i = 6; i < 10; i++) await t.eip(`p-${i}`, { natGwDp: 'gw1' }); // made while the watches are paused
    open();
    await eventually(() =>
      expect(summary(sink.events).sort()).toEqual(
        Array.from({ length: 10 }, (_, i) => `add/added p-${i}`).sort(),
      ),
    );
    await eventually(() => expect(t.bridge.stats().watches.every((w) => w.watching)).toBe(true));
    expect(t.log.lines.some((l) => l.message === 'queue full: pausing the watches')).toBe(true);
  });

  it('coalesces many edits of one EIP made while the sink is stuck into one event with the last state', async () => {
    let open!: () => void;
    const gate = { wait: new Promise<void>((r) => (open = r)) };
    const sink = recordingSink(gate);
    const t = await setup({ sink, concurrency: 1 });
    await t.eip('busy', { natGwDp: 'gw1' });
    await t.eip('other', { natGwDp: 'gw1' }); // waits behind busy's add, held at the sink until the gate opens
    await eventually(() => expect(t.bridge.stats().queueDepth).toBe(2));
    let last = '';
    for (let i = 0; i < 30; i++) {
      const r = (await t.patch(Plural.eip, 'busy', { spec: { natGwDp: `gw-${i}` } })) as {
        metadata: { resourceVersion: string };
      };
      last = r.metadata.resourceVersion;
    }
    await eventually(() => expect(t.bridge.stats().coalesced).toBeGreaterThanOrEqual(29));
    expect(t.bridge.stats().queueDepth).toBeLessThanOrEqual(3); // one running, add + one update waiting
    open();
    await t.bridge.idle();
    const busy = sink.events.filter((e) => e.object.name === 'busy');
    expect(summary(busy)).toEqual(['add/added busy', 'update/spec-changed busy']);
    expect(busy[1]!.object.resourceVersion).toBe(last);
  });
});
