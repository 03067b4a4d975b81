/**
 * Conformance (local/kube-api/README.md): discovery, OpenAPI and Table output, as kubectl 1.32 and client-node 1.4 use them.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, KubernetesObjectApi } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { adminFetch } from '../../local/kube-api/testing.js';
import { eip, kubectlSuite, manifest, table, useApi } from './harness.js';

kubectlSuite('discovery and tables', () => {
  const env = useApi();

  it('reports v1.32.4 so that the kubectl dispatcher runs kubectl 1.32', async () => {
    const r = await env.k('version', '-o', 'json');
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout) as {
      serverVersion: { gitVersion: string };
      clientVersion: { gitVersion: string };
    };
    expect(v.serverVersion.gitVersion).toBe('v1.32.4');
    expect(v.clientVersion.gitVersion).toMatch(/^v1\.32\./);
  });

  it('lists the seven kube-ovn kinds with their short names as cluster-scoped in kubectl api-resources', async () => {
    const r = await env.k('api-resources', '--api-group=kubeovn.io');
    expect(r.code, r.stderr).toBe(0);
    const { header, rows } = table(r.stdout);
    expect(header).toEqual(['NAME', 'SHORTNAMES', 'APIVERSION', 'NAMESPACED', 'KIND']);
    expect(rows).toEqual([
      ['iptables-dnat-rules', 'dnat', 'kubeovn.io/v1', 'false', 'IptablesDnatRule'],
      ['iptables-eips', 'eip', 'kubeovn.io/v1', 'false', 'IptablesEIP'],
      ['iptables-fip-rules', 'fip', 'kubeovn.io/v1', 'false', 'IptablesFIPRule'],
      ['iptables-snat-rules', 'snat', 'kubeovn.io/v1', 'false', 'IptablesSnatRule'],
      ['qos-policies', 'qos', 'kubeovn.io/v1', 'false', 'QoSPolicy'],
      ['subnets', 'subnet', 'kubeovn.io/v1', 'false', 'Subnet'],
      ['vpc-nat-gateways', 'vpc-nat-gw', 'kubeovn.io/v1', 'false', 'VpcNatGateway'],
    ]);
  });

  // A bare Kind only resolves for core kinds in kubectl's RESTMapper; a CR's Kind needs its group.
  it('resolves eip, iptables-eip, iptables-eips.kubeovn.io and IptablesEIP.kubeovn.io to the same resource in kubectl', async () => {
    await env.co.createClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-eips',
      body: eip('disc-1'),
    });
    const names = await Promise.all(
      ['eip', 'iptables-eip', 'iptables-eips.kubeovn.io', 'IptablesEIP.kubeovn.io'].map((n) =>
        env.k('get', n, 'disc-1', '-o', 'name'),
      ),
    );
    for (const r of names) expect(r.stdout.trim(), r.stderr).toBe('iptableseip.kubeovn.io/disc-1');
  });

  it('lets client-node KubernetesObjectApi read an IptablesEIP at its main URL through legacy discovery', async () => {
    const applied = await env.kWith({ stdin: manifest(eip('disc-2')) }, 'apply', '-f', '-');
    expect(applied.code, applied.stderr).toBe(0);
    env.api.requests.clear();
    const objects = KubernetesObjectApi.makeApiClient(env.kc);
    const got = await objects.read({
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: { name: 'disc-2' },
    });
    expect(got.metadata?.name).toBe('disc-2');
    const paths = env.api.requests.all().map((r) => r.path);
    expect(paths).toContain('/apis/kubeovn.io/v1');
    expect(paths).toContain('/apis/kubeovn.io/v1/iptables-eips/disc-2');
  });

  it('answers aggregated discovery with its media type only to clients that ask for it', async () => {
    const get = (path: string, accept: string) =>
      adminFetch(`${env.api.url}${path}`, { headers: { accept } });
    const v2 = await get(
      '/apis',
      'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json',
    );
    expect(v2.headers.get('content-type')).toBe(
      'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
    );
    const body = (await v2.json()) as { kind: string; items: { metadata: { name: string } }[] };
    expect(body.kind).toBe('APIGroupDiscoveryList');
    expect(body.items.map((i) => i.metadata.name)).toEqual([
      'admissionregistration.k8s.io',
      'apiextensions.k8s.io',
      'authentication.k8s.io',
      'authorization.k8s.io',
      'kubeovn.io',
      'rbac.authorization.k8s.io',
    ]);
    const beta = await get(
      '/api',
      'application/json;v=v2beta1;g=apidiscovery.k8s.io;as=APIGroupDiscoveryList',
    );
    expect(beta.headers.get('content-type')).toBe(
      'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList',
    );
    expect(((await beta.json()) as { apiVersion: string }).apiVersion).toBe('apidiscovery.k8s.io/v2beta1');
    const legacy = await get('/apis', 'application/json');
    expect(legacy.headers.get('content-type')).toBe('application/json');
    expect(((await legacy.json()) as { kind: string }).kind).toBe('APIGroupList');
  });

  it('lists each resource before its subresources in the legacy APIResourceList', async () => {
    const r = (await (await adminFetch(`${env.api.url}/api/v1`)).json()) as {
      resources: { name: string; kind: string }[];
    };
    const names = r.resources.map((x) => x.name);
    expect(names.indexOf('pods')).toBeLessThan(names.indexOf('pods/status'));
    expect(r.resources.find((x) => x.name === 'pods/exec')?.kind).toBe('PodExecOptions');
  });

  it('serves a minimal OpenAPI v3 with a PATCH operation per kind', async () => {
    const root = (await (await adminFetch(`${env.api.url}/openapi/v3`)).json()) as {
      paths: Record<string, { serverRelativeURL: string }>;
    };
    const url = root.paths['apis/kubeovn.io/v1']?.serverRelativeURL;
    expect(url).toMatch(/^\/openapi\/v3\/apis\/kubeovn\.io\/v1\?hash=[0-9A-F]+$/);
    const doc = (await (await adminFetch(`${env.api.url}${url}`)).json()) as {
      paths: Record<
        string,
        { patch?: { 'x-kubernetes-group-version-kind': unknown; parameters: { name: string }[] } }
      >;
    };
    const patch = doc.paths['/apis/kubeovn.io/v1/iptables-eips/{name}']?.patch;
    expect(patch?.['x-kubernetes-group-version-kind']).toEqual({
      group: 'kubeovn.io',
      version: 'v1',
      kind: 'IptablesEIP',
    });
    expect(patch?.parameters.map((p) => p.name)).toContain('fieldValidation');
  });

  it('serves /openapi/v2 with each custom resource defined from its CRD schema, in JSON and in protobuf', async () => {
    const json = (await (await adminFetch(`${env.api.url}/openapi/v2`)).json()) as {
      swagger: string;
      definitions: Record<
        string,
        { properties: Record<string, unknown>; 'x-kubernetes-group-version-kind': unknown }
      >;
    };
    expect(json.swagger).toBe('2.0');
    const def = json.definitions['io.kubeovn.v1.IptablesEIP'];
    expect(def?.['x-kubernetes-group-version-kind']).toEqual([
      { group: 'kubeovn.io', kind: 'IptablesEIP', version: 'v1' },
    ]);
    expect(Object.keys(def?.properties ?? {})).toEqual(
      expect.arrayContaining(['apiVersion', 'kind', 'metadata', 'spec', 'status']),
    );
    const pb = await adminFetch(`${env.api.url}/openapi/v2`, {
      headers: { accept: 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf' },
    });
    expect(pb.headers.get('content-type')).toBe('application/com.github.proto-openapi.spec.v2.v1.0+protobuf');
    const bytes = Buffer.from(await pb.arrayBuffer());
    // Field 1 (swagger) first: tag 0x0a, length 3, "2.0".
    expect([...bytes.subarray(0, 5)]).toEqual([0x0a, 3, 0x32, 0x2e, 0x30]);
    expect(bytes.includes(Buffer.from('io.kubeovn.v1.IptablesEIP'))).toBe(true);
  });

  it('lets kubectl validate and apply a kind: List, and refuses an unknown field in one of its items', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'list-'));
    const item = (name: string, spec: Record<string, unknown>) => ({
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: { name },
      spec,
    });
    const bad = join(dir, 'bad.json');
    writeFileSync(
      bad,
      manifest({
        apiVersion: 'v1',
        kind: 'List',
        items: [item('list-a', {}), item('list-b', { bogus: 'x' })],
      }),
    );
    const refused = await env.k('apply', '-f', bad);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('unknown field "bogus" in io.kubeovn.v1.IptablesEIP.spec');
    const good = join(dir, 'good.json');
    const cm = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'list-cm', namespace: 'default' },
      data: { a: 'b' },
    };
    writeFileSync(
      good,
      manifest({
        apiVersion: 'v1',
        kind: 'List',
        items: [item('list-a', { natGwDp: 'gw1' }), item('list-b', {}), cm],
      }),
    );
    const applied = await env.k('apply', '-f', good);
    expect([applied.code, applied.stderr]).toEqual([0, '']);
    expect(applied.stdout.split('\n').filter(Boolean)).toEqual([
      'iptableseip.kubeovn.io/list-a created',
      'iptableseip.kubeovn.io/list-b created',
      'configmap/list-cm created',
    ]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('round-trips kubectl get iptables-eips -o yaml through kubectl apply -f', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'roundtrip-'));
    for (const name of ['rt-1', 'rt-2', 'rt-3']) {
      const r = await env.kWith(
        { stdin: manifest(eip(name, { spec: { qosPolicy: 'q' } })) },
        'apply',
        '-f',
        '-',
      );
      expect(r.code, r.stderr).toBe(0);
    }
    const got = await env.k('get', 'iptables-eips', '-o', 'yaml');
    expect(got.stdout).toMatch(/^apiVersion: v1\nitems:/);
    const file = join(dir, 'eips.yaml');
    writeFileSync(file, got.stdout);
    const applied = await env.k('apply', '-f', file);
    // Objects of other tests here were created without apply: kubectl warns that it adds the annotation.
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stderr).not.toMatch(/error/i);
    expect(applied.stdout).toMatch(/iptableseip\.kubeovn\.io\/rt-1 (configured|unchanged)/);
    const again = await env.k('get', 'iptables-eips', 'rt-2', '-o', 'jsonpath={.spec.qosPolicy}');
    expect(again.stdout).toBe('q');
    rmSync(dir, { recursive: true, force: true });
  });

  it('gives every response a Content-Type, errors included', async () => {
    for (const path of [
      '/version',
      '/api',
      '/apis/kubeovn.io',
      '/apis/kubeovn.io/v1/iptables-eips/nope',
      '/nowhere',
      '/healthz',
    ]) {
      const r = await adminFetch(`${env.api.url}${path}`);
      expect(r.headers.get('content-type'), path).toBeTruthy();
    }
  });

  it("prints kube-ovn's printer columns for iptables-eips, with no AGE column", async () => {
    const r = await env.k('get', 'iptables-eips');
    expect(r.code, r.stderr).toBe(0);
    expect(table(r.stdout).header).toEqual([
      'NAME',
      'NAMESPACE',
      'EXTERNALSUBNET',
      'IP',
      'MAC',
      'NAT',
      'NATGWDP',
      'READY',
    ]);
  });

  it('ends the vpc-nat-gateways table with the AGE column kube-ovn declares', async () => {
    await env.co.createClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'vpc-nat-gateways',
      body: {
        apiVersion: 'kubeovn.io/v1',
        kind: 'VpcNatGateway',
        metadata: { name: 'gw1' },
        spec: { vpc: 'vpc1', subnet: 'sn1', lanIp: '10.0.1.254', replicas: 1, bfd: { enabled: false } },
      },
    });
    const r = await env.k('get', 'vpc-nat-gw');
    const t = table(r.stdout);
    expect(t.header).toEqual([
      'NAME',
      'NAMESPACE',
      'VPC',
      'SUBNET',
      'IPS',
      'REPLICAS',
      'READY',
      'BFD',
      'AGE',
    ]);
    expect(t.rows[0]?.slice(0, 3)).toEqual(['gw1', 'vpc1', 'sn1']);
    expect(t.rows[0]?.at(-1)).toMatch(/^\d+s$/);
  });

  it('shows label values with --show-labels and -L, from the PartialObjectMetadata in each Table row', async () => {
    await env.co.createClusterCustomObject({
      ...{ group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips' },
      body: eip('disc-labels', { metadata: { labels: { 'ovn.kubernetes.io/eip_v4_ip': '172.18.0.9' } } }),
    });
    const [shown, column] = await Promise.all([
      env.k('get', 'eip', 'disc-labels', '--show-labels'),
      env.k('get', 'eip', 'disc-labels', '-L', 'ovn.kubernetes.io/eip_v4_ip'),
    ]);
    expect(table(shown.stdout).rows[0]?.at(-1)).toBe('ovn.kubernetes.io/eip_v4_ip=172.18.0.9');
    expect(table(column.stdout).header.at(-1)).toBe('EIP_V4_IP');
    expect(table(column.stdout).rows[0]?.at(-1)).toBe('172.18.0.9');
  });

  it('fills the NAMESPACE column of kubectl get pods -A', async () => {
    await env.core.createNamespacedPod({
      namespace: 'kube-system',
      body: { metadata: { name: 'disc-pod' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    });
    const r = await env.k('get', 'pods', '-A');
    const t = table(r.stdout);
    expect(t.header).toEqual(['NAMESPACE', 'NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE']);
    expect(t.rows.find((row) => row[1] === 'disc-pod')?.slice(0, 4)).toEqual([
      'kube-system',
      'disc-pod',
      '1/1',
      'Running',
    ]);
  });

  it('serves a newly created CRD at once, with its printer columns, and stops serving it when it is deleted', async () => {
    const ext = env.kc.makeApiClient(ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({
      body: {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'widgets.example.com' },
        spec: {
          group: 'example.com',
          scope: 'Namespaced',
          names: { plural: 'widgets', singular: 'widget', kind: 'Widget', shortNames: ['wd'] },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              additionalPrinterColumns: [{ name: 'Size', type: 'integer', jsonPath: '.spec.size' }],
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: { spec: { type: 'object', properties: { size: { type: 'integer' } } } },
                },
              },
            },
          ],
        },
      },
    });
    const created = await env.kWith(
      {
        stdin: manifest({
          apiVersion: 'example.com/v1',
          kind: 'Widget',
          metadata: { name: 'w1', namespace: 'default' },
          spec: { size: 3 },
        }),
      },
      'apply',
      '-f',
      '-',
    );
    expect(created.code, created.stderr).toBe(0);
    const got = await env.k('get', 'wd', '-n', 'default');
    expect(table(got.stdout)).toEqual({ header: ['NAME', 'SIZE'], rows: [['w1', '3']] });
    const crd = await ext.readCustomResourceDefinition({ name: 'widgets.example.com' });
    expect(crd.status?.conditions?.find((c) => c.type === 'Established')?.status).toBe('True');
    const watch = await adminFetch(
      `${env.api.url}/apis/example.com/v1/widgets?watch=true&resourceVersion=${env.api.resourceVersion()}`,
    );
    const deleted = await env.k('delete', 'crd', 'widgets.example.com');
    expect(deleted.code, deleted.stderr).toBe(0);
    // The open watch sees its objects go, then ends.
    const events = (await watch.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; object: { metadata: { name: string } } });
    expect(events.map((e) => `${e.type}:${e.object.metadata.name}`)).toEqual(['DELETED:w1']);
    expect((await adminFetch(`${env.api.url}/apis/example.com/v1/namespaces/default/widgets`)).status).toBe(
      404,
    );
  });
});
