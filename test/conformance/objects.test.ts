/**
 * Conformance (local/kube-api/README.md): create/apply, the status subresource, optimistic concurrency, JSON patch, the
 * finalizer/deletion lifecycle and the Status error shapes, each written by one client and read by the other.
 */
import {
  ApiextensionsV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { adminFetch } from '../../local/kube-api/testing.js';
import { eventually } from '../support/eventually.js';
import { apiError, EIP, eip, kubectlSuite, manifest, useApi } from './harness.js';

type Obj = {
  metadata: {
    name: string;
    resourceVersion: string;
    generation?: number;
    uid: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    labels?: Record<string, string>;
    creationTimestamp: string;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

kubectlSuite('objects', () => {
  const env = useApi();
  const get = (name: string) => env.co.getClusterCustomObject({ ...EIP, name }) as Promise<Obj>;

  describe('create and apply', () => {
    it('creates with kubectl apply, then answers the same apply with unchanged and no PATCH request', async () => {
      const m = manifest(eip('ap-1'));
      const first = await env.kWith({ stdin: m }, 'apply', '-f', '-');
      expect(first.stdout.trim(), first.stderr).toBe('iptableseip.kubeovn.io/ap-1 created');
      env.api.requests.clear();
      const second = await env.kWith({ stdin: m }, 'apply', '-f', '-');
      expect(second.stdout.trim()).toBe('iptableseip.kubeovn.io/ap-1 unchanged');
      expect(env.api.requests.all().filter((r) => r.method === 'PATCH')).toEqual([]);
      const obj = await get('ap-1');
      expect(obj.metadata.generation).toBe(1);
      expect(obj.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
      expect(obj.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    });

    it('configures a changed spec with a merge patch and bumps generation from 1 to 2', async () => {
      env.api.requests.clear();
      const r = await env.kWith(
        { stdin: manifest(eip('ap-1', { spec: { natGwDp: 'gw2' } })) },
        'apply',
        '-f',
        '-',
      );
      expect(r.stdout.trim(), r.stderr).toBe('iptableseip.kubeovn.io/ap-1 configured');
      const patch = env.api.requests.all().find((x) => x.method === 'PATCH');
      expect(patch?.headers['content-type']).toBe('application/merge-patch+json');
      expect(patch?.query).toContain('fieldValidation=Strict');
      const obj = await get('ap-1');
      expect(obj.spec?.natGwDp).toBe('gw2');
      expect(obj.metadata.generation).toBe(2);
    });

    it('drops the status of a created custom resource, whoever sends it', async () => {
      await env.co.createClusterCustomObject({
        ...EIP,
        body: { ...eip('ap-status'), status: { ready: true, ip: '1.2.3.4' } },
      });
      const r = await env.k('get', 'eip', 'ap-status', '-o', 'json');
      expect(JSON.parse(r.stdout).status).toBeUndefined();
    });

    it('prunes unknown fields with a warning, and refuses them under fieldValidation=Strict', async () => {
      const created = await env.kWith(
        { stdin: manifest(eip('ap-prune', { spec: { bogus: 1 } })) },
        'create',
        '--validate=warn',
        '-f',
        '-',
      );
      expect(created.code, created.stderr).toBe(0);
      expect(created.stderr).toContain('unknown field "spec.bogus"');
      expect((await get('ap-prune')).spec).toEqual({
        natGwDp: 'gw1',
        externalSubnet: 'ovn-vpc-external-network',
      });
      const strict = await env.kWith(
        { stdin: manifest(eip('ap-strict', { spec: { bogus: 1 } })) },
        'apply',
        '-f',
        '-',
      );
      expect(strict.code).toBe(1);
      expect(strict.stderr).toContain('strict decoding error: unknown field "spec.bogus"');
    });

    it('refuses a wrongly typed field with 422 naming the field', async () => {
      const e = await apiError(
        env.co.createClusterCustomObject({ ...EIP, body: eip('ap-type', { spec: { v4ip: 5 } }) }),
      );
      expect(e.code).toBe(422);
      expect(e.body.message).toBe(
        'IptablesEIP.kubeovn.io "ap-type" is invalid: spec.v4ip: Invalid value: "integer": spec.v4ip in body must be of type string: "integer"',
      );
    });

    it('names an object from generateName with five random characters', async () => {
      const created = (await env.co.createClusterCustomObject({
        ...EIP,
        body: {
          apiVersion: 'kubeovn.io/v1',
          kind: 'IptablesEIP',
          metadata: { generateName: 'gen-' },
          spec: {},
        },
      })) as Obj;
      expect(created.metadata.name).toMatch(/^gen-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    });

    it('answers a second create of the same name with AlreadyExists', async () => {
      const r = await env.kWith({ stdin: manifest(eip('ap-1')) }, 'create', '-f', '-');
      expect(r.stderr.trim()).toBe(
        'Error from server (AlreadyExists): error when creating "STDIN": iptables-eips.kubeovn.io "ap-1" already exists',
      );
      const e = await apiError(env.co.createClusterCustomObject({ ...EIP, body: eip('ap-1') }));
      expect([e.code, e.body.reason]).toEqual([409, 'AlreadyExists']);
    });
  });

  describe('status subresource', () => {
    it('shows a status written by client-node through /status to kubectl', async () => {
      await env.co.createClusterCustomObject({ ...EIP, body: eip('st-1') });
      await env.co.patchClusterCustomObjectStatus(
        { ...EIP, name: 'st-1', body: { status: { ready: true, ip: '172.18.0.5' } } },
        merge,
      );
      const r = await env.k('get', 'eip', 'st-1', '-o', 'jsonpath={.status.ready} {.status.ip}');
      expect(r.stdout).toBe('true 172.18.0.5');
    });

    it('ignores a status change through the main endpoint: kubectl prints (no change) and the RV stays', async () => {
      const before = await get('st-1');
      const r = await env.k('patch', 'eip', 'st-1', '--type=merge', '-p', '{"status":{"ready":false}}');
      expect(r.stdout.trim()).toBe('iptableseip.kubeovn.io/st-1 patched (no change)');
      const after = await get('st-1');
      expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
      expect(after.status?.ready).toBe(true);
    });

    it('ignores everything but status through /status, and never bumps generation there', async () => {
      const r = await env.k(
        'patch',
        'eip',
        'st-1',
        '--subresource=status',
        '--type=merge',
        '-p',
        '{"metadata":{"labels":{"x":"y"}},"spec":{"natGwDp":"other"},"status":{"nat":"fip"}}',
      );
      expect(r.code, r.stderr).toBe(0);
      const after = await get('st-1');
      expect(after.metadata.labels).toBeUndefined();
      expect(after.spec?.natGwDp).toBe('gw1');
      expect(after.status?.nat).toBe('fip');
      expect(after.metadata.generation).toBe(1);
    });
  });

  describe('optimistic concurrency', () => {
    it('refuses kubectl replace with a stale resourceVersion with Conflict', async () => {
      await env.co.createClusterCustomObject({ ...EIP, body: eip('cc-1') });
      const stale = await get('cc-1');
      await env.co.patchClusterCustomObject(
        { ...EIP, name: 'cc-1', body: { spec: { v4ip: '172.18.0.7' } } },
        merge,
      );
      const r = await env.kWith({ stdin: JSON.stringify(stale) }, 'replace', '-f', '-');
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toBe(
        'Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on iptables-eips.kubeovn.io "cc-1": the object has been modified; please apply your changes to the latest version and try again',
      );
    });

    it('refuses a client-node replace without resourceVersion with 422', async () => {
      const e = await apiError(
        env.co.replaceClusterCustomObject({ ...EIP, name: 'cc-1', body: eip('cc-1') }),
      );
      expect(e.code).toBe(422);
      expect(e.body.message).toBe(
        'iptables-eips.kubeovn.io "cc-1" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update',
      );
      expect((e.body.details as { kind: string }).kind).toBe('iptables-eips');
    });

    it('lets a patch without resourceVersion through, and refuses one that carries a stale resourceVersion', async () => {
      const current = await get('cc-1');
      await env.co.patchClusterCustomObject(
        { ...EIP, name: 'cc-1', body: { metadata: { labels: { a: 'b' } } } },
        merge,
      );
      const e = await apiError(
        env.co.patchClusterCustomObject(
          {
            ...EIP,
            name: 'cc-1',
            body: {
              metadata: { resourceVersion: current.metadata.resourceVersion },
              spec: { v4ip: '172.18.0.8' },
            },
          },
          merge,
        ),
      );
      expect([e.code, e.body.reason]).toEqual([409, 'Conflict']);
    });

    it('replaces through kubectl when the resourceVersion is current', async () => {
      const cur = await get('cc-1');
      const next = { ...cur, spec: { ...cur.spec, macAddress: '00:00:00:00:00:01' } };
      const r = await env.kWith({ stdin: JSON.stringify(next) }, 'replace', '-f', '-');
      expect(r.stdout.trim(), r.stderr).toBe('iptableseip.kubeovn.io/cc-1 replaced');
      expect((await get('cc-1')).metadata.generation).toBe(cur.metadata.generation! + 1);
    });
  });

  describe('patch formats', () => {
    it('runs a JSON-patch test on an escaped label key, passing and failing as the apiserver does', async () => {
      await env.co.createClusterCustomObject({
        ...EIP,
        body: eip('jp-1', { metadata: { labels: { 'ovn.kubernetes.io/eip_v4_ip': '172.18.0.5' } } }),
      });
      const ok = await env.k(
        'patch',
        'eip',
        'jp-1',
        '--type=json',
        '-p',
        '[{"op":"test","path":"/metadata/labels/ovn.kubernetes.io~1eip_v4_ip","value":"172.18.0.5"},{"op":"replace","path":"/spec/natGwDp","value":"gw9"}]',
      );
      expect(ok.stdout.trim(), ok.stderr).toBe('iptableseip.kubeovn.io/jp-1 patched');
      const bad = await env.k(
        'patch',
        'eip',
        'jp-1',
        '--type=json',
        '-p',
        '[{"op":"test","path":"/metadata/labels/ovn.kubernetes.io~1eip_v4_ip","value":"10.0.0.1"}]',
      );
      expect(bad.code).toBe(1);
      // kubectl prints "<field>: <message>" per cause; this cause has no field, as on a real server.
      expect(bad.stderr.trim()).toBe(
        'The request is invalid: : testing value /metadata/labels/ovn.kubernetes.io~1eip_v4_ip failed: test failed',
      );
      const e = await apiError(
        env.co.patchClusterCustomObject(
          { ...EIP, name: 'jp-1', body: [{ op: 'test', path: '/spec/natGwDp', value: 'nope' }] },
          jsonPatch,
        ),
      );
      expect(e.code).toBe(422);
      expect(e.body.details).toEqual({
        causes: [
          { reason: 'UnexpectedServerResponse', message: 'testing value /spec/natGwDp failed: test failed' },
        ],
      });
    });

    it('passes a JSON-patch test of null on an absent key, usable as an "absent" precondition', async () => {
      const r = await env.co.patchClusterCustomObject(
        {
          ...EIP,
          name: 'jp-1',
          body: [
            { op: 'test', path: '/metadata/labels/absent', value: null },
            { op: 'add', path: '/metadata/labels/absent', value: 'now' },
          ],
        },
        jsonPatch,
      );
      expect((r as Obj).metadata.labels?.absent).toBe('now');
    });

    it('refuses a JSON-patch add under a missing parent with the library error text', async () => {
      await env.co.createClusterCustomObject({ ...EIP, body: eip('jp-nolabels') });
      const e = await apiError(
        env.co.patchClusterCustomObject(
          { ...EIP, name: 'jp-nolabels', body: [{ op: 'add', path: '/metadata/labels/x', value: 'y' }] },
          jsonPatch,
        ),
      );
      expect((e.body.details as { causes: { message: string }[] }).causes[0]?.message).toBe(
        'add operation does not apply: doc is missing path: "/metadata/labels/x": missing value',
      );
    });

    // A kind whose spec keeps any shape (the kube-ovn schemas would prune these test fields).
    beforeAll(async () => {
      await env.kc.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({
        body: {
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: 'things.example.com' },
          spec: {
            group: 'example.com',
            scope: 'Namespaced',
            names: { plural: 'things', singular: 'thing', kind: 'Thing' },
            versions: [
              {
                name: 'v1',
                served: true,
                storage: true,
                schema: {
                  openAPIV3Schema: {
                    type: 'object',
                    properties: { spec: { type: 'object', x_kubernetes_preserve_unknown_fields: true } },
                  },
                },
              },
            ],
          },
        },
      });
    });

    const jsonPatchCases: [string, unknown[], number, string | Record<string, unknown>][] = [
      [
        'inserts at an index',
        [{ op: 'add', path: '/spec/list/1', value: 'x' }],
        200,
        { list: ['a', 'x', 'b', 'c'] },
      ],
      [
        'appends with -',
        [{ op: 'add', path: '/spec/list/-', value: 'z' }],
        200,
        { list: ['a', 'b', 'c', 'z'] },
      ],
      [
        'counts a negative index from the end',
        [{ op: 'remove', path: '/spec/list/-1' }],
        200,
        { list: ['a', 'b'] },
      ],
      [
        'unescapes ~0 and ~1 in keys',
        [{ op: 'add', path: '/spec/m/a~1b~0c', value: 1 }],
        200,
        { m: { 'a/b~c': 1, k: 'v' } },
      ],
      [
        'moves a member',
        [{ op: 'move', from: '/spec/m/k', path: '/spec/moved' }],
        200,
        { m: {}, moved: 'v' },
      ],
      ['copies a member', [{ op: 'copy', from: '/spec/list/0', path: '/spec/first' }], 200, { first: 'a' }],
      [
        'applies nothing when a later operation fails',
        [
          { op: 'add', path: '/spec/new', value: 1 },
          { op: 'remove', path: '/spec/none' },
        ],
        422,
        "error in remove for path: '/spec/none': Unable to remove nonexistent key: none: missing value",
      ],
      [
        'refuses to replace a missing member',
        [{ op: 'replace', path: '/spec/none', value: 1 }],
        422,
        'replace operation does not apply: doc is missing key: /spec/none: missing value',
      ],
      [
        'refuses an index past the end',
        [{ op: 'add', path: '/spec/list/9', value: 'x' }],
        422,
        "error in add for path: '/spec/list/9': Unable to access invalid index: 9: invalid index referenced",
      ],
      [
        'refuses an unknown operation',
        [{ op: 'frob', path: '/spec/list' }],
        422,
        'Unexpected kind: frob: unknown object type',
      ],
    ];

    it.each(jsonPatchCases)('JSON patch %s', async (_name, ops, code, expected) => {
      const name = `jpc-${Math.random().toString(36).slice(2, 8)}`;
      await env.co.createNamespacedCustomObject({
        group: 'example.com',
        version: 'v1',
        namespace: 'default',
        plural: 'things',
        body: {
          apiVersion: 'example.com/v1',
          kind: 'Thing',
          metadata: { name },
          spec: { list: ['a', 'b', 'c'], m: { k: 'v' } },
        },
      });
      const r = await adminFetch(`${env.api.url}/apis/example.com/v1/namespaces/default/things/${name}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json-patch+json' },
        body: JSON.stringify(ops),
      });
      const body = (await r.json()) as {
        spec: Record<string, unknown>;
        details?: { causes: { message: string }[] };
      };
      expect(r.status).toBe(code);
      if (typeof expected === 'string') expect(body.details?.causes[0]?.message).toBe(expected);
      else expect(body.spec).toMatchObject(expected);
      if (code !== 200) {
        const still = (await env.co.getNamespacedCustomObject({
          group: 'example.com',
          version: 'v1',
          namespace: 'default',
          plural: 'things',
          name,
        })) as { spec: unknown };
        expect(still.spec).toEqual({ list: ['a', 'b', 'c'], m: { k: 'v' } });
      }
    });

    it("answers client-node's default patch content type with an object body with 400", async () => {
      const e = await apiError(
        env.co.patchClusterCustomObject({ ...EIP, name: 'jp-1', body: { spec: { natGwDp: 'x' } } }),
      );
      expect(e.code).toBe(400);
      expect(e.body.message).toBe('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
    });

    it('refuses strategic merge patch on custom resources with 415, from kubectl and from KubernetesObjectApi', async () => {
      const r = await env.k('patch', 'eip', 'jp-1', '-p', '{"spec":{"natGwDp":"x"}}');
      expect(r.stderr.trim()).toBe(
        'error: application/strategic-merge-patch+json is not supported by kubeovn.io/v1, Kind=IptablesEIP: the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
      );
      const objects = KubernetesObjectApi.makeApiClient(env.kc);
      const e = await apiError(
        objects.patch({
          apiVersion: 'kubeovn.io/v1',
          kind: 'IptablesEIP',
          metadata: { name: 'jp-1' },
          spec: { natGwDp: 'y' },
        }),
      );
      expect([e.code, e.body.reason]).toEqual([415, 'UnsupportedMediaType']);
    });

    it('refuses server-side apply, so kubectl apply --server-side says it is not available', async () => {
      const r = await env.kWith({ stdin: manifest(eip('jp-1')) }, 'apply', '--server-side', '-f', '-');
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('Server-side apply not available on the server');
    });
  });

  describe('finalizers and deletion', () => {
    it('keeps an object with a finalizer until the finalizer goes, with the events a real server sends', async () => {
      const created = await env.kWith(
        { stdin: manifest(eip('fin-1', { metadata: { finalizers: ['kubeovn.io/kube-ovn-controller'] } })) },
        'apply',
        '-f',
        '-',
      );
      expect(created.code, created.stderr).toBe(0);
      const start = await get('fin-1');
      const events: string[] = [];
      const deletedObjects: Obj[] = [];
      const abort = await new Watch(env.kc).watch(
        '/apis/kubeovn.io/v1/iptables-eips',
        { resourceVersion: start.metadata.resourceVersion, fieldSelector: 'metadata.name=fin-1' },
        (type, obj: Obj) => {
          events.push(`${type}:${obj.metadata.generation}:${obj.metadata.deletionTimestamp ? 'T' : '-'}`);
          if (type === 'DELETED') deletedObjects.push(obj);
        },
        () => {},
      );
      try {
        const del = await env.k('delete', 'eip', 'fin-1', '--wait=false');
        expect(del.stdout.trim(), del.stderr).toBe('iptableseip.kubeovn.io "fin-1" deleted');
        await eventually(() => expect(events).toEqual(['MODIFIED:2:T']));
        const terminating = await get('fin-1');
        expect(terminating.metadata.deletionTimestamp).toMatch(/Z$/);
        expect(await env.k('delete', 'eip', 'fin-1', '--wait=false').then((r) => r.code)).toBe(0); // already terminating: no event

        const added = await apiError(
          env.co.patchClusterCustomObject(
            { ...EIP, name: 'fin-1', body: [{ op: 'add', path: '/metadata/finalizers/-', value: 'x.io/y' }] },
            jsonPatch,
          ),
        );
        expect(added.code).toBe(422);
        expect(added.body.message).toBe(
          'IptablesEIP.kubeovn.io "fin-1" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"x.io/y"}',
        );

        env.api.requests.clear();
        const blocking = env.k('delete', 'eip', 'fin-1', '--timeout=20s');
        // kubectl waits with a watch on metadata.name (and bookmarks, which client-node's watch above does not ask for).
        await eventually(() =>
          expect(
            env.api.requests
              .all()
              .some(
                (r) =>
                  r.query.includes('allowWatchBookmarks=true') &&
                  r.query.includes('fieldSelector=metadata.name%3Dfin-1'),
              ),
          ).toBe(true),
        );
        const removed = (await env.co.patchClusterCustomObject(
          { ...EIP, name: 'fin-1', body: [{ op: 'remove', path: '/metadata/finalizers/0' }] },
          jsonPatch,
        )) as Obj;
        expect(removed.metadata.finalizers).toBeUndefined();
        expect(removed.metadata.resourceVersion).toBe(terminating.metadata.resourceVersion);
        const waited = await blocking;
        expect(waited.code, waited.stderr).toBe(0);
        await eventually(() => expect(events).toEqual(['MODIFIED:2:T', 'DELETED:2:T']));
        expect(deletedObjects[0]?.metadata.finalizers).toEqual(['kubeovn.io/kube-ovn-controller']);
        expect(Number(deletedObjects[0]?.metadata.resourceVersion)).toBeGreaterThan(
          Number(terminating.metadata.resourceVersion),
        );
        expect((await apiError(get('fin-1'))).code).toBe(404);
      } finally {
        abort.abort();
      }
    });

    it('answers a client-node delete of an object without finalizers with a Status naming its uid', async () => {
      const created = (await env.co.createClusterCustomObject({ ...EIP, body: eip('del-1') })) as Obj;
      const r = await env.co.deleteClusterCustomObject({ ...EIP, name: 'del-1' });
      expect(r).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Success',
        details: { name: 'del-1', group: 'kubeovn.io', kind: 'iptables-eips', uid: created.metadata.uid },
      });
    });

    it('refuses to recreate a name whose object is still terminating', async () => {
      await env.co.createClusterCustomObject({
        ...EIP,
        body: eip('del-2', { metadata: { finalizers: ['a.io/b'] } }),
      });
      await env.co.deleteClusterCustomObject({ ...EIP, name: 'del-2' });
      const e = await apiError(env.co.createClusterCustomObject({ ...EIP, body: eip('del-2') }));
      expect(e.body.message).toBe('object is being deleted: iptables-eips.kubeovn.io "del-2" already exists');
    });

    it('checks delete preconditions on resourceVersion', async () => {
      const e = await apiError(
        env.co.deleteClusterCustomObject({
          ...EIP,
          name: 'ap-1',
          body: { preconditions: { resourceVersion: '1' } },
        }),
      );
      expect(e.code).toBe(409);
      expect(String(e.body.message)).toMatch(
        /the ResourceVersion in the precondition \(1\) does not match the ResourceVersion in record \(\d+\)\. The object might have been modified$/,
      );
    });
  });

  describe('errors', () => {
    it('prints NotFound the same way for kubectl and client-node', async () => {
      const r = await env.k('get', 'eip', 'missing');
      expect(r.stderr.trim()).toBe(
        'Error from server (NotFound): iptables-eips.kubeovn.io "missing" not found',
      );
      const e = await apiError(get('missing'));
      expect(e).toEqual({
        code: 404,
        body: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: 'iptables-eips.kubeovn.io "missing" not found',
          reason: 'NotFound',
          details: { name: 'missing', group: 'kubeovn.io', kind: 'iptables-eips' },
          code: 404,
        },
      });
      const pod = await apiError(env.core.readNamespacedPod({ namespace: 'default', name: 'nope' }));
      expect(pod.body.details).toEqual({ name: 'nope', kind: 'pods' });
    });

    it('refuses an invalid name with 422 and the RFC 1123 message', async () => {
      const r = await env.kWith({ stdin: manifest(eip('Bad_Name')) }, 'create', '-f', '-');
      expect(r.stderr).toContain(
        `The IptablesEIP "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      );
      const e = await apiError(env.co.createClusterCustomObject({ ...EIP, body: eip('Bad_Name') }));
      expect([e.code, e.body.reason]).toEqual([422, 'Invalid']);
      expect((e.body.details as { causes: { field: string; reason: string }[] }).causes[0]).toMatchObject({
        field: 'metadata.name',
        reason: 'FieldValueInvalid',
      });
    });

    it('refuses an unsupported field selector on a custom resource with 400', async () => {
      const r = await env.k('get', 'eip', '--field-selector', 'spec.natGwDp=gw1');
      expect(r.stderr.trim()).toBe(
        'Error from server (BadRequest): Unable to find "kubeovn.io/v1, Resource=iptables-eips" that match label selector "", field selector "spec.natGwDp=gw1": field label not supported: spec.natGwDp',
      );
      const e = await apiError(env.co.listClusterCustomObject({ ...EIP, fieldSelector: 'spec.natGwDp=gw1' }));
      expect([e.code, e.body.message]).toEqual([400, 'field label not supported: spec.natGwDp']);
    });

    it('answers an unknown resource path with 404 and empty details', async () => {
      const r = await adminFetch(`${env.api.url}/apis/kubeovn.io/v1/nothing`);
      expect(r.status).toBe(404);
      expect(await r.json()).toMatchObject({
        reason: 'NotFound',
        message: 'the server could not find the requested resource',
        details: {},
      });
      const post = await adminFetch(`${env.api.url}/apis/kubeovn.io/v1/iptables-eips/ap-1`, {
        method: 'POST',
        body: '{}',
      });
      expect([post.status, ((await post.json()) as { reason: string }).reason]).toEqual([
        405,
        'MethodNotAllowed',
      ]);
    });

    it('refuses a body that is not JSON with 400 BadRequest', async () => {
      const r = await adminFetch(`${env.api.url}/apis/kubeovn.io/v1/iptables-eips`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"apiVersion":',
      });
      expect(r.status).toBe(400);
      expect(r.headers.get('content-type')).toBe('application/json');
      expect(await r.json()).toMatchObject({
        kind: 'Status',
        status: 'Failure',
        reason: 'BadRequest',
        code: 400,
      });
    });

    it('refuses a pod in a namespace that does not exist', async () => {
      const e = await apiError(
        env.core.createNamespacedPod({
          namespace: 'nowhere',
          body: { metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'i' }] } },
        }),
      );
      expect([e.code, e.body.message]).toEqual([404, 'namespaces "nowhere" not found']);
    });
  });

  describe('built-in kinds', () => {
    it('decodes the protobuf bodies of kubectl create namespace and kubectl create configmap', async () => {
      const [ns, cm] = await Promise.all([
        env.k('create', 'namespace', 'team-a'),
        env.k(
          'create',
          'configmap',
          'settings',
          '-n',
          'default',
          '--from-literal=mode=fast',
          '--from-literal=empty=',
        ),
      ]);
      expect([ns.stdout.trim(), cm.stdout.trim()], `${ns.stderr}${cm.stderr}`).toEqual([
        'namespace/team-a created',
        'configmap/settings created',
      ]);
      const got = await env.core.readNamespacedConfigMap({ namespace: 'default', name: 'settings' });
      expect(got.data).toEqual({ mode: 'fast', empty: '' });
      expect(got.metadata?.generateName).toBeUndefined();
      const table = await env.k('get', 'cm', 'settings', '-n', 'default');
      expect(table.stdout).toMatch(/^NAME\s+DATA\s+AGE\nsettings\s+2\s+\d+s\n$/);
      const namespace = await env.core.readNamespace({ name: 'team-a' });
      expect([namespace.status?.phase, namespace.spec?.finalizers]).toEqual(['Active', ['kubernetes']]);
    });

    it('deletes a namespace with everything in it, and refuses to delete kube-system', async () => {
      await env.core.createNamespacedConfigMap({
        namespace: 'team-a',
        body: { metadata: { name: 'inside' } },
      });
      const r = await env.k('delete', 'namespace', 'team-a', '--timeout=10s');
      expect(r.stdout.trim(), r.stderr).toBe('namespace "team-a" deleted');
      expect(
        (await apiError(env.core.readNamespacedConfigMap({ namespace: 'team-a', name: 'inside' }))).code,
      ).toBe(404);
      const sys = await env.k('delete', 'namespace', 'kube-system');
      expect(sys.stderr.trim()).toBe(
        'Error from server (Forbidden): namespaces "kube-system" is forbidden: this namespace may not be deleted',
      );
    });

    it('shows events about an object in kubectl get events and kubectl describe', async () => {
      const subject = (await env.co.createClusterCustomObject({ ...EIP, body: eip('ev-1') })) as Obj;
      await env.core.createNamespacedEvent({
        namespace: 'default',
        body: {
          metadata: { name: 'ev-1.1' },
          involvedObject: {
            apiVersion: 'kubeovn.io/v1',
            kind: 'IptablesEIP',
            name: 'ev-1',
            uid: subject.metadata.uid,
          },
          reason: 'EipAdded',
          message: 'added 172.18.0.5 to gw1',
          type: 'Normal',
          source: { component: 'eip-lambdas' },
          count: 1,
        },
      });
      const events = await env.k('get', 'events', '-n', 'default');
      expect(events.stdout).toMatch(
        /LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE\n\S+\s+Normal\s+EipAdded\s+iptableseip\/ev-1\s+added 172\.18\.0\.5 to gw1/,
      );
      const described = await env.k('describe', 'eip', 'ev-1');
      expect(described.stdout).toMatch(/Normal\s+EipAdded\s+\S+\s+eip-lambdas\s+added 172\.18\.0\.5 to gw1/);
    });
  });

  describe('pods', () => {
    it('runs a created pod: Running, ready, restartCount 0, a start time', async () => {
      await env.core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: 'p1', labels: { app: 'a' } },
          spec: {
            containers: [
              { name: 'c', image: 'busybox' },
              { name: 'd', image: 'busybox' },
            ],
          },
        },
      });
      const pod = await env.core.readNamespacedPod({ namespace: 'default', name: 'p1' });
      expect(pod.status?.phase).toBe('Running');
      expect(pod.spec?.nodeName).toBeTruthy();
      expect(
        pod.status?.containerStatuses?.map((c) => [
          c.name,
          c.ready,
          c.restartCount,
          Boolean(c.state?.running?.startedAt),
        ]),
      ).toEqual([
        ['c', true, 0, true],
        ['d', true, 0, true],
      ]);
      expect(pod.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    });

    it('merges containers by name and appends finalizers under a strategic merge patch', async () => {
      const r = await env.k(
        'patch',
        'pod',
        'p1',
        '-p',
        '{"metadata":{"finalizers":["x.io/a"]},"spec":{"containers":[{"name":"d","image":"busybox:2"}]}}',
      );
      expect(r.stdout.trim(), r.stderr).toBe('pod/p1 patched');
      await env.k('patch', 'pod', 'p1', '-p', '{"metadata":{"finalizers":["x.io/b"]}}');
      const pod = await env.core.readNamespacedPod({ namespace: 'default', name: 'p1' });
      expect(pod.spec?.containers.map((c) => `${c.name}=${c.image}`)).toEqual(['c=busybox', 'd=busybox:2']);
      expect(pod.metadata?.finalizers).toEqual(['x.io/a', 'x.io/b']);
      await env.k('patch', 'pod', 'p1', '--type=merge', '-p', '{"metadata":{"finalizers":null}}');
    });

    it('refuses a change to a pod field other than images', async () => {
      const r = await env.k('patch', 'pod', 'p1', '-p', '{"spec":{"restartPolicy":"Never"}}');
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('pod updates may not change fields other than `spec.containers[*].image`');
    });

    it('lists pods without kind on the items, and watch events with kind', async () => {
      const list = (await (await adminFetch(`${env.api.url}/api/v1/namespaces/default/pods`)).json()) as {
        kind: string;
        items: Record<string, unknown>[];
      };
      expect(list.kind).toBe('PodList');
      expect(list.items[0]?.kind).toBeUndefined();
      const eips = (await (await adminFetch(`${env.api.url}/apis/kubeovn.io/v1/iptables-eips`)).json()) as {
        items: Record<string, unknown>[];
      };
      expect(eips.items[0]?.kind).toBe('IptablesEIP');
    });

    it('deletes a pod gracefully and returns the pod object', async () => {
      const r = await env.k('delete', 'pod', 'p1', '--timeout=10s');
      expect(r.stdout.trim(), r.stderr).toBe('pod "p1" deleted');
      const e = await apiError(env.core.readNamespacedPod({ namespace: 'default', name: 'p1' }));
      expect(e.code).toBe(404);
    });
  });

  describe('managedFields', () => {
    it('records who wrote which fields: the fieldManager parameter, else the User-Agent prefix; a no-op write records nothing', async () => {
      type Entry = {
        manager: string;
        operation: string;
        subresource?: string;
        fieldsV1: Record<string, unknown>;
      };
      const entries = async () =>
        ((await get('mf-1')) as unknown as { metadata: { managedFields?: Entry[] } }).metadata
          .managedFields ?? [];
      const k = await env.kWith({ stdin: manifest(eip('mf-1')) }, 'create', '-f', '-');
      expect(k.code, k.stderr).toBe(0);
      expect((await entries()).map((e) => [e.manager, e.operation])).toEqual([['kubectl-create', 'Update']]);
      const status = { status: { ready: true, ip: '172.18.0.9' } };
      await env.co.patchClusterCustomObjectStatus(
        { ...EIP, name: 'mf-1', body: status, fieldManager: 'kube-ovn-controller' },
        merge,
      );
      const rv = (await get('mf-1')).metadata.resourceVersion;
      // The same status again changes nothing, so no new write and no new entry.
      await env.co.patchClusterCustomObjectStatus(
        { ...EIP, name: 'mf-1', body: status, fieldManager: 'someone-else' },
        merge,
      );
      expect((await get('mf-1')).metadata.resourceVersion).toBe(rv);
      await env.co.patchClusterCustomObject(
        {
          ...EIP,
          name: 'mf-1',
          body: { metadata: { finalizers: ['kubeovn.io/kube-ovn-controller'] } },
          fieldManager: 'kube-ovn-controller',
        },
        merge,
      );
      const all = await entries();
      expect(all.map((e) => [e.manager, e.subresource ?? ''])).toEqual([
        ['kubectl-create', ''],
        ['kube-ovn-controller', 'status'],
        ['kube-ovn-controller', ''],
      ]);
      expect(all[1]?.fieldsV1).toEqual({ 'f:status': { 'f:ready': {}, 'f:ip': {} } });
      expect(all[2]?.fieldsV1).toEqual({ 'f:metadata': { 'f:finalizers': {} } });
      // kubectl leaves them out of its output unless asked.
      const yaml = await env.k('get', 'eip', 'mf-1', '-o', 'yaml');
      expect(yaml.stdout).not.toContain('managedFields');
    });
  });

  describe('size limits', () => {
    it('refuses annotations over 256 KiB in total with the API server message, for both clients', async () => {
      const big = (n: number) => ({ a: 'x'.repeat(n), b: 'y'.repeat(n) });
      // 2 × (1 + 131072) bytes = 262146 > 262144.
      const e = await apiError(
        env.co.createClusterCustomObject({
          ...EIP,
          body: eip('size-ann', { metadata: { annotations: big(131072) } }),
        }),
      );
      expect(e.code).toBe(422);
      expect(e.body.message).toBe(
        'IptablesEIP.kubeovn.io "size-ann" is invalid: metadata.annotations: Too long: must have at most 262144 bytes',
      );
      expect((e.body.details as { causes: unknown[] }).causes).toEqual([
        {
          reason: 'FieldValueTooLong',
          message: 'Too long: must have at most 262144 bytes',
          field: 'metadata.annotations',
        },
      ]);
      const k = await env.kWith(
        { stdin: manifest(eip('size-ann', { metadata: { annotations: big(131072) } })) },
        'create',
        '-f',
        '-',
      );
      expect(k.stderr.trim()).toBe(
        'The IptablesEIP "size-ann" is invalid: metadata.annotations: Too long: must have at most 262144 bytes',
      );
      // Exactly at the limit is accepted.
      await env.co.createClusterCustomObject({
        ...EIP,
        body: eip('size-ann', { metadata: { annotations: big(131071) } }),
      });
      // And an update that crosses it is refused.
      const u = await apiError(
        env.co.patchClusterCustomObject(
          { ...EIP, name: 'size-ann', body: { metadata: { annotations: { c: 'z'.repeat(10) } } } },
          merge,
        ),
      );
      expect([u.code, u.body.reason]).toEqual([422, 'Invalid']);
    });

    it('refuses a request body over 3 MiB with 413 before reading it all', async () => {
      const body = JSON.stringify(eip('size-body', { spec: { macAddress: 'm'.repeat(3 * 1024 * 1024) } }));
      const res = await adminFetch(`${env.api.url}/apis/kubeovn.io/v1/iptables-eips`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(res.status).toBe(413);
      expect(((await res.json()) as { message: string }).message).toBe(
        'Request entity too large: limit is 3145728',
      );
    });

    it('refuses JSON nested too deep with 400 and the decoder error, on create and on patch, instead of failing', async () => {
      let nested = '{}';
      for (let i = 0; i < 3000; i++) nested = `{"a":${nested}}`;
      const post = await adminFetch(`${env.api.url}/apis/kubeovn.io/v1/iptables-eips`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"apiVersion":"kubeovn.io/v1","kind":"IptablesEIP","metadata":{"name":"deep"},"spec":${nested}}`,
      });
      const message = "couldn't get version/kind; json parse error: invalid character '{' exceeded max depth";
      expect([post.status, ((await post.json()) as { message: string }).message]).toEqual([400, message]);
      await env.co.createClusterCustomObject({ ...EIP, body: eip('shallow') });
      const patch = await adminFetch(`${env.api.url}/apis/kubeovn.io/v1/iptables-eips/shallow`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/merge-patch+json' },
        body: `{"spec":${nested}}`,
      });
      expect(patch.status).toBe(400);
      const k = await env.kWith(
        {
          stdin: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep","annotations":${nested}}}`,
        },
        'create',
        '-f',
        '-',
      );
      expect(k.code).not.toBe(0);
    });

    it("refuses an object over etcd's 1.5 MiB request limit as the API server passes it on, and stores nothing", async () => {
      const huge = eip('size-etcd', { spec: { macAddress: 'm'.repeat(1.6 * 1024 * 1024) } });
      const e = await apiError(env.co.createClusterCustomObject({ ...EIP, body: huge }));
      expect([e.code, e.body.message, e.body.reason]).toEqual([
        500,
        'etcdserver: request is too large',
        undefined,
      ]);
      const k = await env.kWith({ stdin: manifest(huge) }, 'create', '-f', '-');
      expect(k.stderr.trim()).toBe(
        'Error from server: error when creating "STDIN": etcdserver: request is too large',
      );
      expect((await apiError(get('size-etcd'))).code).toBe(404);
    });
  });
});
