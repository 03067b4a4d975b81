/**
 * Conformance (local/kube-api/README.md): list and watch as client-node's informer and kubectl get -w use them — header
 * flush, event sequence, no-op writes, 410 after compaction and the relist it causes, dropped watches,
 * selector transitions, bookmarks and Table events.
 */
import { type KubernetesObject, makeInformer, type V1ObjectMeta, Watch } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { adminFetch } from '../../local/kube-api/testing.js';
import { eventually } from '../support/eventually.js';
import { EIP, eip, kubectlSuite, manifest, useApi } from './harness.js';

type Obj = KubernetesObject & { metadata: V1ObjectMeta & { name: string; resourceVersion: string } };

/** A watch event as the tests read it (objects, Tables and Status share the stream). */
interface RawEvent {
  type: string;
  object: {
    kind?: string;
    metadata: { name?: string; resourceVersion?: string };
    rows: { cells: unknown[]; object: { kind: string } }[];
    columnDefinitions?: unknown;
    [field: string]: unknown;
  };
}

/** Reads a raw watch stream until it ends or `until` holds; returns the parsed events. */
async function readWatch(
  url: string,
  headers: Record<string, string> = {},
  until?: (events: unknown[]) => boolean,
): Promise<RawEvent[]> {
  const controller = new AbortController();
  const res = await adminFetch(url, { headers, signal: controller.signal });
  const events: RawEvent[] = [];
  const reader = res.body!.getReader();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += Buffer.from(value).toString();
      let nl = buf.indexOf('\n');
      while (nl >= 0) {
        events.push(JSON.parse(buf.slice(0, nl)));
        buf = buf.slice(nl + 1);
        nl = buf.indexOf('\n');
      }
      if (until?.(events)) {
        controller.abort();
        break;
      }
    }
  } catch (e) {
    if ((e as Error).name !== 'AbortError') throw e;
  }
  return events;
}

kubectlSuite('list and watch', () => {
  const env = useApi();
  const stops: (() => void)[] = [];
  afterEach(() => {
    for (const s of stops.splice(0)) s();
  });

  it('resolves informer.start() on an empty collection, because watch headers are flushed at once', async () => {
    const list = () =>
      env.co.listClusterCustomObject({ group: 'kubeovn.io', version: 'v1', plural: 'iptables-snat-rules' });
    const inf = makeInformer(env.kc, '/apis/kubeovn.io/v1/iptables-snat-rules', list as never);
    inf.on('error', () => {});
    await inf.start();
    stops.push(() => void inf.stop());
    expect(inf.list()).toEqual([]);
  });

  it('delivers add, update, no event for a no-op, the deletion update and one delete to an informer, as written by kubectl', async () => {
    const events: string[] = [];
    const list = () => env.co.listClusterCustomObject(EIP);
    const inf = makeInformer<Obj>(env.kc, '/apis/kubeovn.io/v1/iptables-eips', list as never);
    inf.on('add', (o) => events.push(`add:${o.metadata.generation}`));
    inf.on('update', (o) =>
      events.push(`update:${o.metadata.generation}:${o.metadata.deletionTimestamp ? 'T' : '-'}`),
    );
    inf.on('delete', (o) => events.push(`delete:${(o.metadata.finalizers ?? []).length}`));
    inf.on('error', () => {});
    await inf.start();
    stops.push(() => void inf.stop());
    const w = (...args: string[]) => env.k(...args).then((r) => expect(r.code, r.stderr).toBe(0));
    await env.kWith(
      { stdin: manifest(eip('e', { metadata: { finalizers: ['kubeovn.io/kube-ovn-controller'] } })) },
      'apply',
      '-f',
      '-',
    );
    await w('patch', 'eip', 'e', '--type=merge', '-p', '{"spec":{"natGwDp":"gw2"}}');
    await w('patch', 'eip', 'e', '--type=merge', '-p', '{"status":{"ready":true}}');
    await w('delete', 'eip', 'e', '--wait=false');
    // client-node's default patch content type is json-patch.
    await env.co.patchClusterCustomObject({
      ...EIP,
      name: 'e',
      body: [{ op: 'remove', path: '/metadata/finalizers' }],
    });
    await eventually(() => expect(events).toEqual(['add:1', 'update:2:-', 'update:3:T', 'delete:1']));
  });

  it('gives list responses the current global resourceVersion, at or above every item, rising across kinds', async () => {
    await env.co.createClusterCustomObject({ ...EIP, body: eip('rv-a') });
    const pod = await env.core.createNamespacedPod({
      namespace: 'default',
      body: { metadata: { name: 'rv-p' }, spec: { containers: [{ name: 'c', image: 'i' }] } },
    });
    const list = (await env.co.listClusterCustomObject(EIP)) as {
      metadata: { resourceVersion: string };
      items: Obj[];
    };
    const listRv = Number(list.metadata.resourceVersion);
    for (const item of list.items) expect(Number(item.metadata.resourceVersion)).toBeLessThanOrEqual(listRv);
    expect(Number(pod.metadata?.resourceVersion)).toBeGreaterThan(
      Number(list.items.find((i) => i.metadata.name === 'rv-a')?.metadata.resourceVersion),
    );
    const empty = (await env.co.listClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-fip-rules',
    })) as { metadata: { resourceVersion: string } };
    expect(Number(empty.metadata.resourceVersion)).toBeGreaterThanOrEqual(listRv);
  });

  it('answers a watch from a compacted resourceVersion with one 410 ERROR event and ends the stream', async () => {
    const before = env.api.resourceVersion();
    await env.co.createClusterCustomObject({ ...EIP, body: eip('cmp-1') });
    env.api.faults.compact();
    const events = await readWatch(
      `${env.api.url}/apis/kubeovn.io/v1/iptables-eips?watch=true&resourceVersion=${before}`,
    );
    expect(events).toEqual([
      {
        type: 'ERROR',
        object: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `too old resource version: ${before} (${env.api.resourceVersion()})`,
          reason: 'Expired',
          code: 410,
        },
      },
    ]);
  });

  it('makes an informer relist after compaction: watch, 410, list, watch', async () => {
    const seen: string[] = [];
    const list = () =>
      env.co.listClusterCustomObject({ group: 'kubeovn.io', version: 'v1', plural: 'qos-policies' });
    const inf = makeInformer<Obj>(env.kc, '/apis/kubeovn.io/v1/qos-policies', list as never);
    inf.on('add', (o) => seen.push(o.metadata.name));
    inf.on('error', () => {});
    await inf.start();
    stops.push(() => void inf.stop());
    const qos = (name: string) => ({
      apiVersion: 'kubeovn.io/v1',
      kind: 'QoSPolicy',
      metadata: { name },
      spec: { shared: true },
    });
    await env.co.createClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'qos-policies',
      body: qos('q1'),
    });
    await eventually(() => expect(seen).toEqual(['q1']));
    // Another write after q1, so that the informer's resourceVersion is older than the compaction point.
    await env.core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'bump' } } });
    env.api.requests.clear();
    env.api.faults.compact();
    expect(env.api.faults.dropWatches()).toBeGreaterThan(0);
    await env.co.createClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'qos-policies',
      body: qos('q2'),
    });
    await eventually(() => expect(seen).toEqual(['q1', 'q2']));
    await eventually(() => {
      const calls = env.api.requests
        .all()
        .filter((r) => r.path === '/apis/kubeovn.io/v1/qos-policies' && r.method === 'GET')
        .map((r) => (r.query.includes('watch=true') ? `watch:${r.status}` : `list:${r.status}`));
      expect(calls.slice(0, 3)).toEqual(['watch:200', 'list:200', 'watch:200']);
    });
  });

  it('lets an informer resume from its resourceVersion after its watch is dropped, without a relist', async () => {
    const seen: string[] = [];
    const list = () =>
      env.co.listClusterCustomObject({ group: 'kubeovn.io', version: 'v1', plural: 'subnets' });
    const inf = makeInformer<Obj>(env.kc, '/apis/kubeovn.io/v1/subnets', list as never);
    inf.on('add', (o) => seen.push(o.metadata.name));
    inf.on('error', () => {});
    await inf.start();
    stops.push(() => void inf.stop());
    env.api.requests.clear();
    env.api.faults.dropWatches();
    await env.co.createClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'subnets',
      body: {
        apiVersion: 'kubeovn.io/v1',
        kind: 'Subnet',
        metadata: { name: 'ext' },
        spec: { cidrBlock: '172.18.0.0/16' },
      },
    });
    await eventually(() => expect(seen).toEqual(['ext']));
    const lists = env.api.requests
      .all()
      .filter(
        (r) =>
          r.method === 'GET' && r.path === '/apis/kubeovn.io/v1/subnets' && !r.query.includes('watch=true'),
      );
    expect(lists).toEqual([]);
  });

  it('sends ADDED and DELETED when a relabel moves an object into and out of a label-filtered watch', async () => {
    await env.co.createClusterCustomObject({
      ...EIP,
      body: eip('sel-1', { metadata: { labels: { tier: 'b' } } }),
    });
    const events: string[] = [];
    const abort = await new Watch(env.kc).watch(
      '/apis/kubeovn.io/v1/iptables-eips',
      { labelSelector: 'tier=a', resourceVersion: String(env.api.resourceVersion()) },
      (type, o: Obj) => events.push(`${type}:${o.metadata.labels?.tier}:${o.metadata.resourceVersion}`),
      () => {},
    );
    stops.push(() => abort.abort());
    // Beside it, an unfiltered watch of the same events: each event is written once per resource version and type,
    // so this one gets its MODIFIED lines while the filtered one gets ADDED and DELETED for the same events.
    const all: string[] = [];
    const abortAll = await new Watch(env.kc).watch(
      '/apis/kubeovn.io/v1/iptables-eips',
      { resourceVersion: String(env.api.resourceVersion()) },
      (type, o: Obj) => all.push(`${type}:${o.metadata.labels?.tier}:${o.metadata.resourceVersion}`),
      () => {},
    );
    stops.push(() => abortAll.abort());
    await env.k('label', 'eip', 'sel-1', 'tier=a', '--overwrite');
    const rvIn = env.api.resourceVersion();
    await env.k('annotate', 'eip', 'sel-1', 'note=x');
    const rvMod = env.api.resourceVersion();
    await env.k('label', 'eip', 'sel-1', 'tier=c', '--overwrite');
    const rvOut = env.api.resourceVersion();
    // The DELETED object is the old state (still tier=a) with the new resourceVersion.
    await eventually(() =>
      expect(events).toEqual([`ADDED:a:${rvIn}`, `MODIFIED:a:${rvMod}`, `DELETED:a:${rvOut}`]),
    );
    await eventually(() =>
      expect(all).toEqual([`MODIFIED:a:${rvIn}`, `MODIFIED:a:${rvMod}`, `MODIFIED:c:${rvOut}`]),
    );
  });

  it('prints rows under one header as kubectl get -w receives Table events', async () => {
    await env.co.createClusterCustomObject({ ...EIP, body: eip('tw-1') });
    const controller = new AbortController();
    const watching = env.kWith(
      { signal: controller.signal },
      'get',
      'eip',
      'tw-1',
      '-w',
      '--output-watch-events',
    );
    await eventually(() =>
      expect(
        env.api.requests
          .all()
          .some(
            (r) => r.query.includes('fieldSelector=metadata.name%3Dtw-1') && r.query.includes('watch=true'),
          ),
      ).toBe(true),
    );
    await env.co.patchClusterCustomObjectStatus({
      ...EIP,
      name: 'tw-1',
      body: [{ op: 'add', path: '/status', value: { ready: true, ip: '172.18.0.33' } }],
    });
    await new Promise((r) => setTimeout(r, 300));
    controller.abort();
    const out = (await watching).stdout.trim().split('\n');
    expect(out[0]?.split(/\s{2,}/)).toEqual([
      'EVENT',
      'NAME',
      'NAMESPACE',
      'EXTERNALSUBNET',
      'IP',
      'MAC',
      'NAT',
      'NATGWDP',
      'READY',
    ]);
    expect(out.slice(1).map((l) => l.trim().split(/\s{2,}/))).toEqual([
      ['ADDED', 'tw-1', 'ovn-vpc-external-network', 'gw1'],
      ['MODIFIED', 'tw-1', 'ovn-vpc-external-network', '172.18.0.33', 'gw1', 'true'],
    ]);
  });

  it('carries column definitions only on the first Table event of a watch', async () => {
    const accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';
    const rv = env.api.resourceVersion();
    const pending = readWatch(
      `${env.api.url}/apis/kubeovn.io/v1/iptables-eips?watch=true&resourceVersion=${rv}`,
      { accept },
      (e) => e.length >= 2,
    );
    await new Promise((r) => setTimeout(r, 50));
    await env.co.createClusterCustomObject({ ...EIP, body: eip('tbl-1') });
    await env.co.createClusterCustomObject({ ...EIP, body: eip('tbl-2') });
    const events = await pending;
    expect(
      events.map((e) => [
        e.type,
        e.object.kind,
        e.object.rows[0]?.cells[0],
        Array.isArray(e.object.columnDefinitions),
      ]),
    ).toEqual([
      ['ADDED', 'Table', 'tbl-1', true],
      ['ADDED', 'Table', 'tbl-2', false],
    ]);
    expect(events[0]?.object.rows[0]?.object.kind).toBe('PartialObjectMetadata');
  });

  it('sends a BOOKMARK before ending a watch at its timeout when bookmarks are allowed', async () => {
    const events = await readWatch(
      `${env.api.url}/apis/kubeovn.io/v1/iptables-dnat-rules?watch=true&allowWatchBookmarks=true&timeoutSeconds=1`,
    );
    expect(events.map((e) => e.type)).toEqual(['BOOKMARK']);
    expect(events[0]?.object).toEqual({
      kind: 'IptablesDnatRule',
      apiVersion: 'kubeovn.io/v1',
      metadata: { resourceVersion: String(env.api.resourceVersion()) },
    });
  });

  it('starts a watch without resourceVersion with synthetic ADDED events for what exists', async () => {
    const events = await readWatch(`${env.api.url}/api/v1/namespaces?watch=true`, {}, (e) => e.length >= 4);
    expect(events.map((e) => `${e.type}:${e.object.metadata.name}`)).toEqual([
      'ADDED:default',
      'ADDED:kube-node-lease',
      'ADDED:kube-public',
      'ADDED:kube-system',
    ]);
    expect(events[0]?.object.kind).toBe('Namespace');
  });

  it('answers a watch from a resourceVersion the server has not reached with 504', async () => {
    const r = await adminFetch(
      `${env.api.url}/apis/kubeovn.io/v1/iptables-eips?watch=true&resourceVersion=${env.api.resourceVersion() + 100}`,
    );
    expect(r.status).toBe(504);
    expect(((await r.json()) as { reason: string }).reason).toBe('Timeout');
  });

  it('pages a list with limit and continue', async () => {
    const first = (await env.co.listClusterCustomObject({ ...EIP, limit: 2 })) as {
      metadata: { continue?: string; remainingItemCount?: number };
      items: Obj[];
    };
    expect(first.items).toHaveLength(2);
    expect(first.metadata.continue).toBeTruthy();
    const rest = (await env.co.listClusterCustomObject({ ...EIP, _continue: first.metadata.continue })) as {
      items: Obj[];
    };
    const all = (await env.co.listClusterCustomObject(EIP)) as { items: Obj[] };
    expect([...first.items, ...rest.items].map((i) => i.metadata.name)).toEqual(
      all.items.map((i) => i.metadata.name),
    );
    expect(first.metadata.remainingItemCount).toBe(all.items.length - 2);
  });
});
