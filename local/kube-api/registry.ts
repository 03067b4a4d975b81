/**
 * The resources the local API serves: the built-in ones it implements itself, and one entry per
 * served version of every CustomResourceDefinition in the store. Discovery, OpenAPI, routing and the
 * object rules all read from here, so creating or deleting a CRD changes what is served at once.
 */
import { createHash } from 'node:crypto';
import type { JsonObject, JsonSchema } from './json.js';

export interface PrinterColumn {
  name: string;
  type: string;
  format?: string;
  description?: string;
  priority?: number;
  jsonPath: string;
}

/** How list/get answers are turned into a Table. */
export type TableStyle = 'columns' | 'pod' | 'namespace' | 'configmap' | 'event' | 'crd' | 'binding';

export interface ResourceDef {
  group: string;
  version: string;
  plural: string;
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: readonly string[];
  categories: readonly string[];
  /** Has a /status subresource: the main endpoint ignores status, /status ignores everything else. */
  statusSubresource: boolean;
  /** Serves pods/exec. */
  exec: boolean;
  /** Served from a CustomResourceDefinition (CR rules: generation, status dropped on create, Status on delete). */
  custom: boolean;
  /** Keeps metadata.generation. */
  generation: boolean;
  /** DELETE without finalizers answers with the deleted object instead of a Status. */
  returnDeletedObject: boolean;
  /** Accepts application/strategic-merge-patch+json (built-in types only). */
  strategicMerge: boolean;
  table: TableStyle;
  /** Printer columns for `table: 'columns'` (after the implicit Name column). */
  columns: readonly PrinterColumn[];
  /** Structural schema of a CR version, for pruning and type checks. */
  schema?: JsonSchema;
  /** Field selector labels this resource supports. */
  fieldLabels: readonly string[];
  /** The CRD that defines it. */
  crdName?: string;
  /** Verbs discovery lists when not the usual eight (the create-only reviews). */
  verbs?: readonly string[];
  /** A review (SelfSubjectAccessReview, ...): answered on create, never stored. */
  review?: boolean;
}

export function apiVersionOf(def: Pick<ResourceDef, 'group' | 'version'>): string {
  return def.group ? `${def.group}/${def.version}` : def.version;
}

export function resourceKey(group: string, plural: string): string {
  return `${group}/${plural}`;
}

export const CORE_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
/** The order the apiextensions server lists a CR's verbs in. */
export const CR_VERBS = ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'];

const podFieldLabels = [
  'metadata.name',
  'metadata.namespace',
  'spec.nodeName',
  'spec.restartPolicy',
  'spec.schedulerName',
  'spec.serviceAccountName',
  'spec.hostNetwork',
  'status.phase',
  'status.podIP',
  'status.podIPs',
  'status.nominatedNodeName',
];

const eventFieldLabels = [
  'metadata.name',
  'metadata.namespace',
  'involvedObject.kind',
  'involvedObject.namespace',
  'involvedObject.name',
  'involvedObject.uid',
  'involvedObject.apiVersion',
  'involvedObject.resourceVersion',
  'involvedObject.fieldPath',
  'reason',
  'reportingComponent',
  'source',
  'type',
];

function builtin(
  partial: Partial<ResourceDef> & Pick<ResourceDef, 'plural' | 'singular' | 'kind'>,
): ResourceDef {
  return {
    group: '',
    version: 'v1',
    listKind: `${partial.kind}List`,
    namespaced: true,
    shortNames: [],
    categories: [],
    statusSubresource: false,
    exec: false,
    custom: false,
    generation: false,
    returnDeletedObject: false,
    strategicMerge: true,
    table: 'columns',
    columns: [],
    fieldLabels: partial.namespaced === false ? ['metadata.name'] : ['metadata.name', 'metadata.namespace'],
    ...partial,
  };
}

const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

/** rbac.authorization.k8s.io/v1: kubectl prints Name and Created At for roles, Role and Age for bindings. */
function rbacResources(): ResourceDef[] {
  const rbac = (plural: string, kind: string, namespaced: boolean, binding: boolean) =>
    builtin({
      group: 'rbac.authorization.k8s.io',
      plural,
      singular: kind.toLowerCase(),
      kind,
      namespaced,
      returnDeletedObject: false,
      table: binding ? 'binding' : 'crd',
    });
  return [
    rbac('clusterrolebindings', 'ClusterRoleBinding', false, true),
    rbac('clusterroles', 'ClusterRole', false, false),
    rbac('rolebindings', 'RoleBinding', true, true),
    rbac('roles', 'Role', true, false),
  ];
}

/** A create-only review resource: discoverable, authorized as `create`, answered from the request, never stored. */
function review(group: string, plural: string, kind: string): ResourceDef {
  return builtin({
    group,
    plural,
    singular: plural.replace(/s$/, ''),
    kind,
    namespaced: false,
    strategicMerge: false,
    verbs: ['create'],
    review: true,
  });
}

export const BUILTIN_RESOURCES: readonly ResourceDef[] = [
  builtin({
    plural: 'namespaces',
    singular: 'namespace',
    kind: 'Namespace',
    namespaced: false,
    shortNames: ['ns'],
    statusSubresource: true,
    returnDeletedObject: true,
    table: 'namespace',
    fieldLabels: ['metadata.name', 'status.phase'],
  }),
  builtin({
    plural: 'pods',
    singular: 'pod',
    kind: 'Pod',
    shortNames: ['po'],
    categories: ['all'],
    statusSubresource: true,
    exec: true,
    returnDeletedObject: true,
    table: 'pod',
    fieldLabels: podFieldLabels,
  }),
  builtin({
    plural: 'configmaps',
    singular: 'configmap',
    kind: 'ConfigMap',
    shortNames: ['cm'],
    table: 'configmap',
  }),
  builtin({
    plural: 'events',
    singular: 'event',
    kind: 'Event',
    shortNames: ['ev'],
    table: 'event',
    fieldLabels: eventFieldLabels,
  }),
  builtin({
    plural: 'serviceaccounts',
    singular: 'serviceaccount',
    kind: 'ServiceAccount',
    shortNames: ['sa'],
    columns: [AGE],
  }),
  ...rbacResources(),
  builtin({
    group: 'admissionregistration.k8s.io',
    plural: 'validatingadmissionpolicies',
    singular: 'validatingadmissionpolicy',
    kind: 'ValidatingAdmissionPolicy',
    namespaced: false,
    categories: ['api-extensions'],
    statusSubresource: true,
    generation: true,
    columns: [AGE],
  }),
  builtin({
    group: 'admissionregistration.k8s.io',
    plural: 'validatingadmissionpolicybindings',
    singular: 'validatingadmissionpolicybinding',
    kind: 'ValidatingAdmissionPolicyBinding',
    namespaced: false,
    categories: ['api-extensions'],
    generation: true,
    columns: [AGE],
  }),
  review('authorization.k8s.io', 'selfsubjectaccessreviews', 'SelfSubjectAccessReview'),
  review('authorization.k8s.io', 'selfsubjectrulesreviews', 'SelfSubjectRulesReview'),
  review('authorization.k8s.io', 'subjectaccessreviews', 'SubjectAccessReview'),
  review('authentication.k8s.io', 'selfsubjectreviews', 'SelfSubjectReview'),
  builtin({
    group: 'apiextensions.k8s.io',
    plural: 'customresourcedefinitions',
    singular: 'customresourcedefinition',
    kind: 'CustomResourceDefinition',
    namespaced: false,
    shortNames: ['crd', 'crds'],
    categories: ['api-extensions'],
    statusSubresource: true,
    generation: true,
    returnDeletedObject: true,
    strategicMerge: false,
    table: 'crd',
  }),
];

/** Reads a CRD object into one ResourceDef per served version. Throws on a CRD the server would reject. */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
export function resourcesFromCrd(crd: JsonObject): ResourceDef[] {
  const spec = (crd.spec ?? {}) as JsonObject;
  const names = (spec.names ?? {}) as JsonObject;
  const group = String(spec.group ?? '');
  const plural = String(names.plural ?? '');
  const kind = String(names.kind ?? '');
  const namespaced = spec.scope === 'Namespaced';
  const versions = Array.isArray(spec.versions) ? (spec.versions as JsonObject[]) : [];
  const out: ResourceDef[] = [];
  for (const v of versions) {
    if (v.served === false) continue;
    const columnsRaw = Array.isArray(v.additionalPrinterColumns)
      ? (v.additionalPrinterColumns as JsonObject[])
      : [];
    const columns: PrinterColumn[] =
      columnsRaw.length > 0
        ? columnsRaw.map((c) => {
            const col: PrinterColumn = {
              name: String(c.name),
              type: String(c.type ?? 'string'),
              jsonPath: String(c.jsonPath),
            };
            if (typeof c.format === 'string') col.format = c.format;
            if (typeof c.description === 'string') col.description = c.description;
            if (typeof c.priority === 'number') col.priority = c.priority;
            return col;
          })
        : // apiextensions adds an Age column only when the CRD declares none.
          [{ name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }];
    const selectable = Array.isArray(v.selectableFields)
      ? (v.selectableFields as JsonObject[]).map((f) => String(f.jsonPath).replace(/^\./, ''))
      : [];
    const subresources = (v.subresources ?? {}) as JsonObject;
    const schema = ((v.schema ?? {}) as JsonObject).openAPIV3Schema as JsonSchema | undefined;
    const def: ResourceDef = {
      group,
      version: String(v.name),
      plural,
      singular: String(names.singular ?? kind.toLowerCase()),
      kind,
      listKind: String(names.listKind ?? `${kind}List`),
      namespaced,
      shortNames: Array.isArray(names.shortNames) ? names.shortNames.map(String) : [],
      categories: Array.isArray(names.categories) ? names.categories.map(String) : [],
      statusSubresource: subresources.status !== undefined && subresources.status !== null,
      exec: false,
      custom: true,
      generation: true,
      returnDeletedObject: false,
      strategicMerge: false,
      table: 'columns',
      columns,
      fieldLabels: [
        ...(namespaced ? ['metadata.name', 'metadata.namespace'] : ['metadata.name']),
        ...selectable,
      ],
      crdName: String(((crd.metadata ?? {}) as JsonObject).name ?? ''),
    };
    if (schema !== undefined) def.schema = schema;
    out.push(def);
  }
  return out;
}

export class Registry {
  private readonly defs = new Map<string, ResourceDef>();
  private readonly removedListeners: ((def: ResourceDef) => void)[] = [];

  constructor(initial: readonly ResourceDef[] = BUILTIN_RESOURCES) {
    for (const d of initial) this.add(d);
  }

  add(def: ResourceDef): void {
    this.defs.set(`${def.group}/${def.version}/${def.plural}`, def);
  }

  /** Replaces every version served from `crdName` with `defs`. */
  setCrd(crdName: string, defs: readonly ResourceDef[]): void {
    const before = this.detach(crdName);
    for (const d of defs) this.add(d);
    this.notifyGone(before);
  }

  removeCrd(crdName: string): void {
    this.notifyGone(this.detach(crdName));
  }

  private detach(crdName: string): ResourceDef[] {
    const removed: ResourceDef[] = [];
    for (const [k, d] of this.defs) {
      if (d.crdName !== crdName) continue;
      this.defs.delete(k);
      removed.push(d);
    }
    return removed;
  }

  private notifyGone(removed: readonly ResourceDef[]): void {
    for (const d of removed) {
      // A version that is served again (a CRD update) is not gone.
      if (this.get(d.group, d.version, d.plural)) continue;
      for (const l of this.removedListeners) l(d);
    }
  }

  /** Called when a resource stops being served (its CRD was deleted). */
  onRemoved(listener: (def: ResourceDef) => void): void {
    this.removedListeners.push(listener);
  }

  get(group: string, version: string, plural: string): ResourceDef | undefined {
    return this.defs.get(`${group}/${version}/${plural}`);
  }

  /** Any served version of a resource (watchers and storage are per group/plural, not per version). */
  anyVersion(group: string, plural: string): ResourceDef | undefined {
    for (const d of this.defs.values()) if (d.group === group && d.plural === plural) return d;
    return undefined;
  }

  all(): ResourceDef[] {
    return [...this.defs.values()];
  }

  /** Group → versions (in insertion order), core group as ''. */
  groups(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const d of this.defs.values()) {
      const vs = out.get(d.group) ?? [];
      if (!vs.includes(d.version)) vs.push(d.version);
      out.set(d.group, vs);
    }
    return out;
  }

  inGroupVersion(group: string, version: string): ResourceDef[] {
    return this.all()
      .filter((d) => d.group === group && d.version === version)
      .sort((a, b) => a.plural.localeCompare(b.plural));
  }
}

/** Discovery's storageVersionHash: any stable base64 of 8 bytes. */
export function storageVersionHash(def: ResourceDef): string {
  return createHash('sha256')
    .update(`${def.group}/${def.version}/${def.kind}`)
    .digest()
    .subarray(0, 8)
    .toString('base64');
}
