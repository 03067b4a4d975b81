/**
 * /version, aggregated and legacy discovery, and the minimal OpenAPI v3 kubectl needs. Documents are
 * built from the registry on each request, so a new CRD is discoverable at once.
 */
import { createHash } from 'node:crypto';
import { isObject, type JsonObject, type JsonValue } from './json.js';
import { CORE_VERBS, CR_VERBS, type Registry, type ResourceDef, storageVersionHash } from './registry.js';

export const VERSION_INFO = {
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.4',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2025-04-22T00:00:00Z',
  goVersion: 'go1.23.6',
  compiler: 'gc',
  platform: 'linux/amd64',
};

interface Sub {
  name: string;
  kind: string;
  group: string;
  version: string;
  verbs: string[];
}

function subresourcesOf(def: ResourceDef): Sub[] {
  const out: Sub[] = [];
  const same = { kind: def.kind, group: def.group, version: def.version };
  if (def.statusSubresource) out.push({ name: 'status', ...same, verbs: ['get', 'patch', 'update'] });
  if (def.exec) {
    out.push({ name: 'exec', kind: 'PodExecOptions', group: '', version: 'v1', verbs: ['create', 'get'] });
    out.push({ name: 'log', kind: 'Pod', group: '', version: 'v1', verbs: ['get'] });
  }
  return out;
}

function verbsOf(def: ResourceDef): string[] {
  if (def.verbs) return [...def.verbs];
  return def.custom ? CR_VERBS : CORE_VERBS;
}

function aggregatedResource(def: ResourceDef): JsonObject {
  const r: JsonObject = {
    resource: def.plural,
    responseKind: { group: def.group, version: def.version, kind: def.kind },
    scope: def.namespaced ? 'Namespaced' : 'Cluster',
    singularResource: def.singular,
    verbs: verbsOf(def),
  };
  if (def.shortNames.length > 0) r.shortNames = [...def.shortNames];
  if (def.categories.length > 0) r.categories = [...def.categories];
  const subs = subresourcesOf(def);
  if (subs.length > 0) {
    r.subresources = subs.map((s) => ({
      subresource: s.name,
      responseKind: { group: s.group, version: s.version, kind: s.kind },
      verbs: s.verbs,
    }));
  }
  return r;
}

/** The media type of an aggregated discovery answer for an Accept header, or undefined for legacy. */
export function aggregatedMediaType(accept: string): 'v2' | 'v2beta1' | undefined {
  let beta = false;
  for (const part of accept.split(',')) {
    const [type, ...params] = part.split(';').map((s) => s.trim());
    if (type !== 'application/json') continue;
    const p = new Map(params.map((x) => x.split('=').map((s) => s.trim()) as [string, string]));
    if (p.get('g') !== 'apidiscovery.k8s.io' || p.get('as') !== 'APIGroupDiscoveryList') continue;
    if (p.get('v') === 'v2') return 'v2';
    if (p.get('v') === 'v2beta1') beta = true;
  }
  return beta ? 'v2beta1' : undefined;
}

export function aggregatedContentType(v: 'v2' | 'v2beta1'): string {
  return `application/json;g=apidiscovery.k8s.io;v=${v};as=APIGroupDiscoveryList`;
}

function groupOrder(registry: Registry): string[] {
  return [...registry.groups().keys()].filter((g) => g !== '').sort();
}

export function aggregatedDiscovery(registry: Registry, core: boolean, v: 'v2' | 'v2beta1'): JsonObject {
  const groups = core ? [''] : groupOrder(registry);
  const items = groups.map((g) => {
    const versions = registry.groups().get(g) ?? [];
    return {
      metadata: g === '' ? { creationTimestamp: null } : { name: g, creationTimestamp: null },
      versions: versions.map((ver) => ({
        version: ver,
        resources: registry.inGroupVersion(g, ver).map(aggregatedResource),
        freshness: 'Current',
      })),
    };
  });
  return {
    kind: 'APIGroupDiscoveryList',
    apiVersion: `apidiscovery.k8s.io/${v}`,
    metadata: {},
    items,
  } as JsonObject;
}

export function apiVersions(hostPort: string): JsonObject {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: hostPort }],
  };
}

function apiGroup(registry: Registry, g: string): JsonObject {
  const versions = (registry.groups().get(g) ?? []).map((v) => ({ groupVersion: `${g}/${v}`, version: v }));
  return { name: g, versions, preferredVersion: versions[0] ?? null } as JsonObject;
}

export function apiGroupList(registry: Registry): JsonObject {
  return {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: groupOrder(registry).map((g) => apiGroup(registry, g)),
  };
}

export function apiGroupDoc(registry: Registry, g: string): JsonObject | undefined {
  if (!registry.groups().has(g) || g === '') return undefined;
  return { kind: 'APIGroup', apiVersion: 'v1', ...apiGroup(registry, g) };
}

/** APIResourceList. The main resource comes before its subresources (client-node takes the first match). */
export function apiResourceList(registry: Registry, g: string, v: string): JsonObject | undefined {
  const defs = registry.inGroupVersion(g, v);
  if (defs.length === 0) return undefined;
  const resources: JsonValue[] = [];
  for (const d of defs) {
    const r: JsonObject = {
      name: d.plural,
      singularName: d.singular,
      namespaced: d.namespaced,
      kind: d.kind,
      verbs: verbsOf(d),
    };
    if (d.shortNames.length > 0) r.shortNames = [...d.shortNames];
    if (d.categories.length > 0) r.categories = [...d.categories];
    r.storageVersionHash = storageVersionHash(d);
    resources.push(r);
    for (const s of subresourcesOf(d)) {
      const sr: JsonObject = {
        name: `${d.plural}/${s.name}`,
        singularName: '',
        namespaced: d.namespaced,
        kind: s.kind,
        verbs: s.verbs,
      };
      if (s.group !== d.group || s.version !== d.version) {
        sr.group = s.group;
        sr.version = s.version;
      }
      resources.push(sr);
    }
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: g ? `${g}/${v}` : v, resources };
}

// ---------------------------------------------------------------- OpenAPI v3

const param = (name: string, type: string): JsonObject => ({ name, in: 'query', schema: { type } });

function schemaName(def: ResourceDef): string {
  if (def.group === '') return `io.k8s.api.core.v1.${def.kind}`;
  const reversed = def.group.split('.').reverse().join('.');
  return `${reversed}.${def.version}.${def.kind}`;
}

function componentSchema(def: ResourceDef): JsonObject {
  const gvk = [{ group: def.group, version: def.version, kind: def.kind }];
  const base: JsonObject = {
    type: 'object',
    'x-kubernetes-group-version-kind': gvk,
    properties: {
      apiVersion: { type: 'string' },
      kind: { type: 'string' },
      metadata: { type: 'object' },
      spec: { type: 'object' },
      status: { type: 'object' },
    },
  };
  if (def.schema && isObject(def.schema as unknown as JsonValue)) {
    const props = (def.schema.properties ?? {}) as Record<string, JsonValue>;
    const merged: JsonObject = { ...(base.properties as JsonObject) };
    for (const [k, v] of Object.entries(props)) if (k !== 'metadata') merged[k] = v;
    base.properties = merged;
    if (typeof def.schema.description === 'string') base.description = def.schema.description;
  }
  return base;
}

function operations(def: ResourceDef): Record<string, JsonObject> {
  const gvk = { group: def.group, version: def.version, kind: def.kind };
  const ref = { $ref: `#/components/schemas/${schemaName(def)}` };
  const ok = { '200': { description: 'OK', content: { 'application/json': { schema: ref } } } };
  const patchTypes: JsonObject = {
    'application/json-patch+json': { schema: { type: 'object' } },
    'application/merge-patch+json': { schema: { type: 'object' } },
    'application/apply-patch+yaml': { schema: { type: 'object' } },
  };
  // Strategic merge is accepted for built-in kinds but not advertised here: kubectl would then look for the
  // full built-in schema in this document (which it does not carry) and warn. Without it kubectl uses its
  // compiled-in Pod schema for the same strategic merge patch.
  const writeParams = [
    param('dryRun', 'string'),
    param('fieldManager', 'string'),
    param('fieldValidation', 'string'),
  ];
  const base = def.group ? `/apis/${def.group}/${def.version}` : `/api/${def.version}`;
  const coll = def.namespaced ? `${base}/namespaces/{namespace}/${def.plural}` : `${base}/${def.plural}`;
  const ext = (action: string): JsonObject => ({
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': gvk,
  });
  const item: JsonObject = {
    get: { ...ext('get'), responses: ok },
    put: {
      ...ext('put'),
      parameters: writeParams,
      requestBody: { content: { '*/*': { schema: ref } } },
      responses: ok,
    },
    patch: {
      ...ext('patch'),
      parameters: [...writeParams, param('force', 'boolean')],
      requestBody: { content: patchTypes },
      responses: ok,
    },
    delete: { ...ext('delete'), responses: ok },
  };
  const paths: Record<string, JsonObject> = {
    [coll]: {
      get: { ...ext('list'), responses: ok },
      post: {
        ...ext('post'),
        parameters: writeParams,
        requestBody: { content: { '*/*': { schema: ref } } },
        responses: ok,
      },
    },
    [`${coll}/{name}`]: item,
  };
  if (def.statusSubresource) {
    paths[`${coll}/{name}/status`] = {
      get: { ...ext('get'), responses: ok },
      put: item.put as JsonValue,
      patch: item.patch as JsonValue,
    };
  }
  return paths;
}

export function openApiGroupVersion(registry: Registry, g: string, v: string): JsonObject | undefined {
  const defs = registry.inGroupVersion(g, v);
  if (defs.length === 0) return undefined;
  const paths: JsonObject = {};
  const schemas: JsonObject = {};
  for (const d of defs) {
    Object.assign(paths, operations(d));
    schemas[schemaName(d)] = componentSchema(d);
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: VERSION_INFO.gitVersion },
    paths,
    components: { schemas },
  };
}

function gvPath(g: string, v: string): string {
  return g ? `apis/${g}/${v}` : `api/${v}`;
}

export function openApiHash(doc: JsonObject): string {
  return createHash('sha256').update(JSON.stringify(doc)).digest('hex').slice(0, 32).toUpperCase();
}

export function openApiRoot(registry: Registry): JsonObject {
  const paths: JsonObject = {};
  for (const [g, versions] of registry.groups()) {
    for (const v of versions) {
      const doc = openApiGroupVersion(registry, g, v);
      if (!doc) continue;
      paths[gvPath(g, v)] = { serverRelativeURL: `/openapi/v3/${gvPath(g, v)}?hash=${openApiHash(doc)}` };
    }
  }
  return { paths };
}
