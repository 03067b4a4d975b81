/**
 * The small controllers a real control plane runs that the API's behaviour depends on: the CRD controller
 * (a created CRD becomes served, with Established status) and the namespace lifecycle (defaults, protected
 * namespaces, content removal on delete).
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ApiError, type FieldError, fieldInvalid, fieldRequired, status } from './errors.js';
import { clone, isObject, type JsonObject, type JsonValue, meta } from './json.js';
import type { KindHooks, Objects } from './objects.js';
import { type Registry, type ResourceDef, resourceKey, resourcesFromCrd } from './registry.js';

export const DEFAULT_NAMESPACES = ['default', 'kube-node-lease', 'kube-public', 'kube-system'];
const PROTECTED_NAMESPACES = new Set(['default', 'kube-public', 'kube-system']);

function spec(o: JsonObject): JsonObject {
  return isObject(o.spec) ? o.spec : {};
}

export function crdHooks(objects: Objects, registry: Registry, crdDef: ResourceDef): KindHooks {
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  const validate = (crd: JsonObject): FieldError[] => {
    const errors: FieldError[] = [];
    const s = spec(crd);
    const names = isObject(s.names) ? s.names : {};
    if (typeof s.group !== 'string' || s.group === '') errors.push(fieldRequired('spec.group', ''));
    if (typeof names.plural !== 'string' || names.plural === '')
      errors.push(fieldRequired('spec.names.plural', ''));
    if (typeof names.kind !== 'string' || names.kind === '')
      errors.push(fieldRequired('spec.names.kind', ''));
    if (s.scope !== 'Cluster' && s.scope !== 'Namespaced') {
      errors.push(fieldInvalid('spec.scope', s.scope ?? '', 'must be either Namespaced or Cluster'));
    }
    const versions = Array.isArray(s.versions) ? s.versions.filter(isObject) : [];
    if (versions.length === 0)
      errors.push(fieldRequired('spec.versions', 'must have exactly one version marked as storage version'));
    else if (versions.filter((v) => v.storage === true).length !== 1) {
      errors.push(
        fieldInvalid(
          'spec.versions',
          s.versions as JsonValue,
          'must have exactly one version marked as storage version',
        ),
      );
    }
    const name = String(meta(crd).name ?? '');
    if (
      typeof names.plural === 'string' &&
      typeof s.group === 'string' &&
      name !== `${names.plural}.${s.group}`
    ) {
      errors.push(fieldInvalid('metadata.name', name, 'must be spec.names.plural+"."+spec.group'));
    }
    for (const e of errors) e.detail = e.detail.replace(/: $/, '');
    return errors;
  };
  const serve = (crd: JsonObject): void => {
    registry.setCrd(String(meta(crd).name), resourcesFromCrd(crd));
  };
  const writeStatus = (crd: JsonObject): void => {
    const s = spec(crd);
    const versions = (Array.isArray(s.versions) ? s.versions.filter(isObject) : []) as JsonObject[];
    const storage = versions.find((v) => v.storage === true)?.name ?? '';
    const now = objects.now();
    const old = isObject(crd.status) ? crd.status : {};
    const stored = Array.isArray(old.storedVersions) ? old.storedVersions.map(String) : [];
    if (storage && !stored.includes(String(storage))) stored.push(String(storage));
    const next: JsonObject = {
      acceptedNames: clone(isObject(s.names) ? s.names : {}),
      conditions: [
        {
          type: 'NamesAccepted',
          status: 'True',
          lastTransitionTime: now,
          reason: 'NoConflicts',
          message: 'no conflicts found',
        },
        {
          type: 'Established',
          status: 'True',
          lastTransitionTime: now,
          reason: 'InitialNamesAccepted',
          message: 'the initial names have been accepted',
        },
      ],
      storedVersions: stored,
    };
    // Keep the transition times when nothing else changed, so a re-install is a no-op.
    const sameShape =
      JSON.stringify({ ...next, conditions: undefined }) ===
      JSON.stringify({ ...old, conditions: undefined });
    if (sameShape && Array.isArray(old.conditions) && old.conditions.length === 2) return;
    const updated = clone(crd);
    updated.status = next;
    objects.writeInternal(crdDef, updated);
  };
  return {
    prepareCreate: (crd) => validate(crd),
    validateUpdate: (crd, old) => {
      const errors = validate(crd);
      if (spec(crd).group !== spec(old).group)
        errors.push(fieldInvalid('spec.group', spec(crd).group ?? '', 'field is immutable'));
      if (spec(crd).scope !== spec(old).scope)
        errors.push(fieldInvalid('spec.scope', spec(crd).scope ?? '', 'field is immutable'));
      return errors;
    },
    afterCreate: (crd) => {
      serve(crd);
      writeStatus(crd);
    },
    afterUpdate: (crd) => {
      serve(crd);
      if (!meta(crd).deletionTimestamp) writeStatus(crd);
    },
    afterDelete: (crd) => {
      registry.removeCrd(String(meta(crd).name));
    },
    // Deleting a CRD removes every object of it at once (their finalizers are not waited for) and stops serving it.
    deleteWithoutFinalizers: (crd) => {
      const name = String(meta(crd).name);
      const served = registry.all().find((d) => d.crdName === name);
      if (served) {
        for (const o of objects.store.list(resourceKey(served.group, served.plural))) {
          const m = o.metadata as JsonObject;
          objects.store.delete(
            resourceKey(served.group, served.plural),
            m.namespace as string | undefined,
            String(m.name),
          );
        }
      }
      const response = objects.present(crdDef, crd);
      objects.remove(crdDef, crd);
      return response;
    },
  };
}

export function namespaceHooks(objects: Objects, registry: Registry, nsDef: ResourceDef): KindHooks {
  return {
    prepareCreate: (ns) => {
      const s = spec(ns);
      s.finalizers = ['kubernetes'];
      ns.spec = s;
      ns.status = { phase: 'Active' };
      const m = meta(ns);
      const labels = isObject(m.labels) ? m.labels : {};
      labels['kubernetes.io/metadata.name'] = String(m.name ?? '');
      m.labels = labels;
      return [];
    },
    checkDelete: (ns) => {
      const name = String(meta(ns).name);
      if (PROTECTED_NAMESPACES.has(name)) {
        throw new ApiError(
          status(403, 'Forbidden', `namespaces "${name}" is forbidden: this namespace may not be deleted`, {
            name,
            kind: 'namespaces',
          }),
        );
      }
    },
    // The namespace controller: Terminating, then everything in it removed, then the namespace itself.
    deleteWithoutFinalizers: (ns) => {
      const name = String(meta(ns).name);
      const marked = clone(ns);
      meta(marked).deletionTimestamp = objects.now();
      marked.status = { phase: 'Terminating' };
      const stored = objects.writeInternal(nsDef, marked);
      const response = objects.present(nsDef, stored);
      for (const def of registry.all()) {
        if (!def.namespaced) continue;
        for (const o of objects.store.list(resourceKey(def.group, def.plural), name)) objects.remove(def, o);
      }
      objects.remove(nsDef, stored);
      return response;
    },
  };
}

/** Reads every CustomResourceDefinition document of the *.yaml files in `dir` (sorted by file name). */
export async function readCrdManifests(dir: string): Promise<JsonObject[]> {
  let files: string[];
  try {
    files = (await readdir(dir)).filter((f) => f.endsWith('.yaml') || f.endsWith('.yml')).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const out: JsonObject[] = [];
  for (const f of files) {
    const text = await readFile(join(dir, f), 'utf8');
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length > 0) throw new Error(`${f}: ${doc.errors[0]?.message}`);
      const v = doc.toJS() as unknown;
      if (isObject(v) && v.kind === 'CustomResourceDefinition') out.push(v);
    }
  }
  return out;
}
