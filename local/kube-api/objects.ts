/**
 * Create, read, update, patch and delete with kube-apiserver's object rules: uid,
 * resourceVersion, generation, the status subresource, finalizers and deletionTimestamp, optimistic
 * concurrency, no-op writes, schema pruning and field validation. Kind-specific behaviour (pods, namespaces,
 * CRDs) plugs in through `KindHooks`.
 */
import { randomUUID } from 'node:crypto';
import {
  ApiError,
  alreadyExists,
  badRequest,
  conflict,
  type FieldError,
  fieldForbidden,
  fieldInvalid,
  fieldRequired,
  invalid,
  notFound,
  qualifiedResource,
  status,
  successStatus,
  unsupportedMediaType,
} from './errors.js';
import { clone, deepEqual, isObject, type JsonObject, type JsonValue, meta, rfc3339 } from './json.js';
import { applyJsonPatch, applyMergePatch, applyStrategicMergePatch, decodeJsonPatch } from './patch.js';
import { apiVersionOf, type Registry, type ResourceDef, resourceKey } from './registry.js';
import { applySchema } from './schema.js';
import { type Filter, matches } from './selectors.js';
import type { Store } from './store.js';
import { checkBuiltinDecodes, checkPatchedBuiltinDecodes } from './typed-kinds.js';
import {
  dns1123LabelProblems,
  dns1123SubdomainProblems,
  labelKeyProblem,
  labelValueProblem,
  pathSegmentProblems,
  qualifiedNameProblems,
} from './validation.js';

/** Per-kind behaviour. Each hook runs synchronously inside the write. */
export interface KindHooks {
  /** Extra create-time validation and defaulting (after the generic rules). */
  prepareCreate?(obj: JsonObject): FieldError[] | undefined;
  /** Extra update-time validation (main endpoint). */
  validateUpdate?(obj: JsonObject, old: JsonObject): FieldError[] | undefined;
  afterCreate?(obj: JsonObject): void;
  afterUpdate?(obj: JsonObject, old: JsonObject): void;
  afterDelete?(obj: JsonObject): void;
  /**
   * Replaces the generic delete of an object without finalizers (pods: graceful deletion; namespaces:
   * content removal). Returns the response body.
   */
  deleteWithoutFinalizers?(obj: JsonObject, options: DeleteOptions): JsonObject;
  /** Refuses a delete before anything happens (e.g. protected namespaces). */
  checkDelete?(obj: JsonObject): void;
}

export interface DeleteOptions {
  gracePeriodSeconds?: number;
  propagationPolicy?: string;
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun?: boolean;
  /** Validating admission of the delete (client requests only). */
  admit?: Admit;
}

/** A write as validating admission sees it, after the API's own rules and before it is stored. Throws to refuse. */
export interface AdmittedWrite {
  operation: 'CREATE' | 'UPDATE' | 'DELETE';
  def: ResourceDef;
  namespace?: string;
  name: string;
  subresource?: string;
  object: JsonObject | null;
  oldObject: JsonObject | null;
}

export type Admit = (write: AdmittedWrite) => void;

export interface WriteOutcome {
  code: number;
  body: JsonObject;
}

export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

export interface WriteContext {
  fieldValidation: FieldValidation;
  dryRun: boolean;
  /** Collected `Warning` header texts. */
  warnings: string[];
  /** Who writes (recorded in metadata.managedFields); internal writes have none. */
  fieldManager?: string;
  /** Validating admission (client requests only; internal writes are not admitted). */
  admit?: Admit;
}

/** The API server's limit on the annotations of one object, keys and values together. */
export const MAX_ANNOTATIONS_BYTES = 256 * 1024;

const PROTECTED_SYSTEM_FIELDS = [
  'uid',
  'resourceVersion',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'generation',
  'selfLink',
  'managedFields',
];
const GENERATE_NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

export class Objects {
  private readonly hooks = new Map<string, KindHooks>();

  constructor(
    readonly registry: Registry,
    readonly store: Store,
    readonly clock: () => Date = () => new Date(),
  ) {}

  setHooks(group: string, plural: string, hooks: KindHooks): void {
    this.hooks.set(resourceKey(group, plural), hooks);
  }

  private hooksOf(def: ResourceDef): KindHooks {
    return this.hooks.get(resourceKey(def.group, def.plural)) ?? {};
  }

  now(): string {
    return rfc3339(this.clock());
  }

  /** A copy of a stored object as the client sees it through `def`'s version. */
  present(def: ResourceDef, obj: JsonObject): JsonObject {
    const { apiVersion: _a, kind: _k, ...rest } = clone(obj);
    return { apiVersion: apiVersionOf(def), kind: def.kind, ...rest };
  }

  key(def: ResourceDef): string {
    return resourceKey(def.group, def.plural);
  }

  getStored(def: ResourceDef, namespace: string | undefined, name: string): JsonObject {
    const o = this.store.get(this.key(def), def.namespaced ? namespace : undefined, name);
    if (!o) throw notFound(def, name);
    return o;
  }

  get(def: ResourceDef, namespace: string | undefined, name: string): JsonObject {
    return this.present(def, this.getStored(def, namespace, name));
  }

  /** Matching stored objects (not copies), sorted by namespace/name. */
  select(def: ResourceDef, filter: Filter): JsonObject[] {
    return this.store
      .list(this.key(def), def.namespaced ? filter.namespace : undefined)
      .filter((o) => matches({ ...filter, namespace: undefined }, o));
  }

  // ---------------------------------------------------------------- validation helpers

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private metadataErrors(def: ResourceDef, obj: JsonObject, ctx: WriteContext): FieldError[] {
    const m = meta(obj);
    const errors: FieldError[] = [];
    const name = m.name;
    if (typeof name !== 'string' || name === '') {
      errors.push(fieldRequired('metadata.name', 'name or generateName is required'));
    } else {
      const problems =
        def.plural === 'namespaces'
          ? dns1123LabelProblems(name)
          : def.plural === 'events' || def.group === 'rbac.authorization.k8s.io'
            ? pathSegmentProblems(name)
            : dns1123SubdomainProblems(name);
      for (const p of problems) errors.push(fieldInvalid('metadata.name', name, p));
    }
    if (m.labels !== undefined && m.labels !== null) {
      if (!isObject(m.labels)) {
        errors.push(fieldInvalid('metadata.labels', m.labels, 'must be a map of strings'));
      } else {
        for (const [k, v] of Object.entries(m.labels)) {
          const kp = labelKeyProblem(k);
          if (kp) errors.push(fieldInvalid('metadata.labels', k, kp));
          if (typeof v !== 'string') errors.push(fieldInvalid('metadata.labels', v, 'must be a string'));
          else {
            const vp = labelValueProblem(v);
            if (vp) errors.push(fieldInvalid('metadata.labels', v, vp));
          }
        }
      }
    }
    if (m.annotations !== undefined && m.annotations !== null) {
      if (!isObject(m.annotations))
        errors.push(fieldInvalid('metadata.annotations', m.annotations, 'must be a map of strings'));
      else {
        let total = 0;
        for (const [k, v] of Object.entries(m.annotations)) {
          const kp = qualifiedNameProblems(k.toLowerCase())[0];
          if (kp) errors.push(fieldInvalid('metadata.annotations', k, kp));
          if (typeof v !== 'string') errors.push(fieldInvalid(`metadata.annotations`, v, 'must be a string'));
          else total += Buffer.byteLength(k) + Buffer.byteLength(v);
        }
        // The API server's limit on all annotations of an object together (keys and values, in bytes).
        if (total > MAX_ANNOTATIONS_BYTES)
          errors.push({
            reason: 'FieldValueTooLong',
            field: 'metadata.annotations',
            detail: `Too long: must have at most ${MAX_ANNOTATIONS_BYTES} bytes`,
          });
      }
    }
    if (m.finalizers !== undefined && m.finalizers !== null) {
      if (!Array.isArray(m.finalizers)) {
        errors.push(fieldInvalid('metadata.finalizers', m.finalizers, 'must be a list of strings'));
      } else {
        m.finalizers.forEach((f, i) => {
          if (typeof f !== 'string') {
            errors.push(fieldInvalid(`metadata.finalizers[${i}]`, f, 'must be a string'));
            return;
          }
          for (const p of qualifiedNameProblems(f))
            errors.push(fieldInvalid(`metadata.finalizers[${i}]`, f, p));
          if (!f.includes('/') && !['kubernetes', 'orphan', 'foregroundDeletion'].includes(f)) {
            ctx.warnings.push(
              `metadata.finalizers: "${f}": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers`,
            );
          }
        });
      }
    }
    return errors;
  }

  /** Prunes unknown fields of a CR; warns or fails per fieldValidation. `forPatch` changes the Strict error. */
  private prune(def: ResourceDef, obj: JsonObject, ctx: WriteContext, patchText?: string): JsonObject {
    if (!def.custom || !def.schema) return obj;
    const { object, outcome } = applySchema(obj, def.schema);
    const name = String(meta(obj).name ?? '');
    if (outcome.unknown.length > 0) {
      const texts = outcome.unknown.map((u) => `unknown field "${u}"`);
      if (ctx.fieldValidation === 'Strict') {
        if (patchText !== undefined) {
          throw invalid(def, name, [
            fieldInvalid('patch', patchText, `strict decoding error: ${texts.join(', ')}`),
          ]);
        }
        throw badRequest(
          `${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}: strict decoding error: ${texts.join(', ')}`,
        );
      }
      if (ctx.fieldValidation === 'Warn') ctx.warnings.push(...texts);
    }
    if (outcome.errors.length > 0) throw invalid(def, name, outcome.errors);
    return object;
  }

  private checkTypeMeta(def: ResourceDef, body: JsonObject): void {
    // Built-in kinds decode with the endpoint's kind as default; CRs (unstructured) must name theirs.
    if (!def.custom) {
      if (body.kind === undefined || body.kind === '') body.kind = def.kind;
      if (body.apiVersion === undefined || body.apiVersion === '') body.apiVersion = apiVersionOf(def);
    }
    const kind = body.kind;
    const apiVersion = body.apiVersion;
    if (kind === undefined || kind === '') {
      throw badRequest(`Object 'Kind' is missing in '${JSON.stringify(body)}'`);
    }
    if (kind !== def.kind || (apiVersion !== undefined && apiVersion !== apiVersionOf(def))) {
      throw badRequest(
        `the API version in the data (${String(apiVersion)}) does not match the expected API version (${apiVersionOf(def)})`,
      );
    }
  }

  private checkNamespace(def: ResourceDef, obj: JsonObject, namespace: string | undefined): void {
    const m = meta(obj);
    if (!def.namespaced) {
      delete m.namespace;
      return;
    }
    if (m.namespace === undefined || m.namespace === '') m.namespace = namespace as string;
    else if (m.namespace !== namespace) {
      throw badRequest(
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
  }

  private namespaceMustExist(def: ResourceDef, namespace: string | undefined): void {
    if (!def.namespaced || namespace === undefined) return;
    const ns = this.store.get(resourceKey('', 'namespaces'), undefined, namespace);
    if (!ns) {
      throw new ApiError(
        status(404, 'NotFound', `namespaces "${namespace}" not found`, {
          name: namespace,
          kind: 'namespaces',
        }),
      );
    }
    if (isObject(ns.metadata) && ns.metadata.deletionTimestamp) {
      throw new ApiError(
        status(
          403,
          'Forbidden',
          `unable to create new content in namespace ${namespace} because it is being terminated`,
          { name: namespace, kind: 'namespaces' },
        ),
      );
    }
  }

  // ---------------------------------------------------------------- create

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  create(def: ResourceDef, namespace: string | undefined, body: unknown, ctx: WriteContext): WriteOutcome {
    if (!isObject(body)) throw badRequest('the body of the request must be a JSON object');
    let obj = clone(body);
    this.checkTypeMeta(def, obj);
    checkBuiltinDecodes(def, obj);
    this.checkNamespace(def, obj, namespace);
    const m = meta(obj);
    if (
      (m.name === undefined || m.name === '') &&
      typeof m.generateName === 'string' &&
      m.generateName !== ''
    ) {
      let suffix = '';
      for (let i = 0; i < 5; i++)
        suffix += GENERATE_NAME_ALPHABET[Math.floor(Math.random() * GENERATE_NAME_ALPHABET.length)];
      m.name = `${m.generateName}${suffix}`;
    }
    obj = this.prune(def, obj, ctx);
    const om = meta(obj);
    for (const f of PROTECTED_SYSTEM_FIELDS) delete om[f];
    if (def.statusSubresource) delete obj.status;
    const errors = this.metadataErrors(def, obj, ctx);
    const extra = this.hooksOf(def).prepareCreate?.(obj);
    if (extra) errors.push(...extra);
    const name = String(om.name ?? '');
    if (errors.length > 0) throw invalid(def, name, errors);
    this.namespaceMustExist(def, om.namespace as string | undefined);
    om.uid = randomUUID();
    om.creationTimestamp = this.now();
    if (def.generation) om.generation = 1;
    obj.apiVersion = apiVersionOf(def);
    obj.kind = def.kind;
    if (ctx.fieldManager) {
      const fields = changedFields({}, obj);
      if (fields) om.managedFields = [managedEntry(ctx.fieldManager, apiVersionOf(def), this.now(), fields)];
    }
    // As the store's Create: BeforeCreate (uid, timestamps), validating admission, then the write (AlreadyExists).
    ctx.admit?.({
      operation: 'CREATE',
      def,
      ...(def.namespaced && { namespace: om.namespace as string }),
      name,
      object: this.present(def, obj),
      oldObject: null,
    });
    const existing = this.store.get(this.key(def), om.namespace as string | undefined, name);
    if (existing)
      throw alreadyExists(
        def,
        name,
        Boolean(isObject(existing.metadata) && existing.metadata.deletionTimestamp),
      );
    if (ctx.dryRun) return { code: 201, body: this.present(def, obj) };
    const stored = this.store.create(this.key(def), this.ordered(obj));
    const response = this.present(def, stored);
    this.hooksOf(def).afterCreate?.(stored);
    return { code: 201, body: response };
  }

  /** apiVersion, kind, metadata, spec, ... status: the order the apiserver prints fields in. */
  private ordered(obj: JsonObject): JsonObject {
    const { apiVersion, kind, metadata, status: st, ...rest } = obj;
    const out: JsonObject = {};
    if (apiVersion !== undefined) out.apiVersion = apiVersion;
    if (kind !== undefined) out.kind = kind;
    if (metadata !== undefined) out.metadata = metadata;
    Object.assign(out, rest);
    if (st !== undefined) out.status = st;
    return out;
  }

  // ---------------------------------------------------------------- update (PUT) and patch

  replace(
    def: ResourceDef,
    namespace: string | undefined,
    name: string,
    subresource: string | undefined,
    body: unknown,
    ctx: WriteContext,
  ): WriteOutcome {
    if (!isObject(body)) throw badRequest('the body of the request must be a JSON object');
    const obj = clone(body);
    this.checkTypeMeta(def, obj);
    checkBuiltinDecodes(def, obj);
    const m = meta(obj);
    if (m.name !== name) {
      throw badRequest(
        `the name of the object (${String(m.name ?? '')}) does not match the name on the URL (${name})`,
      );
    }
    this.checkNamespace(def, obj, namespace);
    const existing = this.getStored(def, namespace, name);
    const rv = m.resourceVersion;
    if (rv === undefined || rv === '') {
      if (def.custom || def.plural === 'customresourcedefinitions') {
        throw invalid(
          def,
          name,
          [
            {
              reason: 'FieldValueInvalid',
              field: 'metadata.resourceVersion',
              detail: 'Invalid value: 0x0: must be specified for an update',
            },
          ],
          true,
        );
      }
    } else if (rv !== (existing.metadata as JsonObject).resourceVersion) {
      throw conflict(def, name);
    }
    return this.commit(def, existing, obj, subresource, ctx);
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  patch(
    def: ResourceDef,
    namespace: string | undefined,
    name: string,
    subresource: string | undefined,
    contentType: string,
    rawBody: string,
    ctx: WriteContext,
  ): WriteOutcome {
    const type = contentType.split(';')[0]?.trim().toLowerCase() ?? '';
    const accepted = def.strategicMerge
      ? 'application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml'
      : undefined;
    if (
      type !== 'application/json-patch+json' &&
      type !== 'application/merge-patch+json' &&
      !(type === 'application/strategic-merge-patch+json' && def.strategicMerge)
    ) {
      // Server-side apply is refused like on a server without it, and SMP on CRs is a 415.
      throw unsupportedMediaType(accepted);
    }
    const existing = this.getStored(def, namespace, name);
    let parsed: unknown;
    try {
      parsed = JSON.parse(rawBody);
    } catch (e) {
      if (type === 'application/json-patch+json') throw badRequest((e as Error).message);
      throw badRequest('Invalid JSON Patch');
    }
    const current = this.present(def, existing);
    let patched: JsonObject;
    if (type === 'application/json-patch+json') patched = applyJsonPatch(current, decodeJsonPatch(parsed));
    else if (type === 'application/merge-patch+json') patched = applyMergePatch(current, parsed);
    else patched = applyStrategicMergePatch(current, parsed);
    // The patched object is decoded into the kind's Go type before the name and namespace checks (patcher.applyPatch).
    checkPatchedBuiltinDecodes(
      def,
      type === 'application/strategic-merge-patch+json',
      patched,
      parsed as JsonValue,
    );
    const pm = meta(patched);
    if (pm.name !== name) {
      throw badRequest(
        `the name of the object (${String(pm.name ?? '')}) does not match the name on the URL (${name})`,
      );
    }
    if (def.namespaced && pm.namespace !== namespace) {
      throw badRequest(
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    const rv = pm.resourceVersion;
    if (
      rv !== undefined &&
      rv !== null &&
      rv !== '' &&
      rv !== (existing.metadata as JsonObject).resourceVersion
    ) {
      throw conflict(def, name);
    }
    return this.commit(def, existing, patched, subresource, ctx, rawBody);
  }

  /** The shared second half of PUT and PATCH: system fields, status rules, generation, finalizers, no-op. */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  private commit(
    def: ResourceDef,
    existing: JsonObject,
    incoming: JsonObject,
    subresource: string | undefined,
    ctx: WriteContext,
    patchText?: string,
  ): WriteOutcome {
    const name = String((existing.metadata as JsonObject).name);
    let next: JsonObject;
    if (subresource === 'status') {
      next = clone(existing);
      if (incoming.status !== undefined) next.status = clone(incoming.status);
      else delete next.status;
      if (def.custom) next = this.prune(def, next, ctx, patchText);
    } else {
      next = this.prune(def, clone(incoming), ctx, patchText);
      if (def.statusSubresource) {
        if (existing.status !== undefined) next.status = clone(existing.status);
        else delete next.status;
      }
    }
    next.apiVersion = existing.apiVersion as JsonValue;
    next.kind = existing.kind as JsonValue;
    const nm = meta(next);
    const om = existing.metadata as JsonObject;
    const errors: FieldError[] = [];
    // rest.BeforeUpdate: generation, uid, creationTimestamp and deletion fields come from the stored object.
    if (om.generation !== undefined) nm.generation = om.generation;
    else delete nm.generation;
    if (nm.uid === undefined || nm.uid === '') nm.uid = om.uid as JsonValue;
    else if (nm.uid !== om.uid) errors.push(fieldInvalid('metadata.uid', nm.uid, 'field is immutable'));
    nm.creationTimestamp = om.creationTimestamp as JsonValue;
    if (om.deletionTimestamp) {
      nm.deletionTimestamp = om.deletionTimestamp;
      if (om.deletionGracePeriodSeconds !== undefined && nm.deletionGracePeriodSeconds === undefined) {
        nm.deletionGracePeriodSeconds = om.deletionGracePeriodSeconds;
      }
    } else if (nm.deletionTimestamp) {
      errors.push(
        fieldInvalid(
          'metadata.deletionTimestamp',
          nm.deletionTimestamp,
          'field is immutable; may only be changed via deletion',
        ),
      );
    }
    if (def.namespaced) nm.namespace = om.namespace as JsonValue;
    delete nm.managedFields;
    delete nm.selfLink;
    nm.resourceVersion = om.resourceVersion as JsonValue;
    errors.push(...this.metadataErrors(def, next, ctx));
    if (om.deletionTimestamp) {
      const before = new Set(Array.isArray(om.finalizers) ? om.finalizers : []);
      const added = (Array.isArray(nm.finalizers) ? nm.finalizers : []).filter((f) => !before.has(f));
      if (added.length > 0) {
        errors.push(
          fieldForbidden(
            'metadata.finalizers',
            `no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(', ')}}`,
          ),
        );
      }
    }
    if (subresource !== 'status') {
      const extra = this.hooksOf(def).validateUpdate?.(next, existing);
      if (extra) errors.push(...extra);
    }
    if (errors.length > 0) {
      // Warnings gathered on the way do not survive a refusal.
      ctx.warnings.length = 0;
      throw invalid(def, name, errors);
    }
    if (def.generation && subresource !== 'status' && typeof om.generation === 'number') {
      const strip = (o: JsonObject): JsonObject => {
        const { metadata: _m, status: st, ...rest } = o;
        return def.statusSubresource ? rest : { ...rest, status: st ?? null };
      };
      if (!deepEqual(strip(next), strip(existing))) nm.generation = om.generation + 1;
    }
    if (Array.isArray(nm.finalizers) && nm.finalizers.length === 0) delete nm.finalizers;
    next = this.ordered(next);
    ctx.admit?.({
      operation: 'UPDATE',
      def,
      ...(def.namespaced && { namespace: om.namespace as string }),
      name,
      ...(subresource && { subresource }),
      object: this.present(def, next),
      oldObject: this.present(def, existing),
    });
    // A terminating object left without finalizers is deleted instead of stored (store.go ShouldDeleteDuringUpdate).
    if (om.deletionTimestamp && !(Array.isArray(nm.finalizers) && nm.finalizers.length > 0)) {
      if (!ctx.dryRun) {
        this.store.delete(this.key(def), om.namespace as string | undefined, name);
        this.hooksOf(def).afterDelete?.(existing);
      }
      return { code: 200, body: this.present(def, next) };
    }
    // managedFields are the server's: never taken from the request, recomputed from what changed.
    delete meta(next).managedFields;
    const { managedFields: previousFields, ...existingMeta } = existing.metadata as JsonObject;
    if (deepEqual(next, { ...existing, metadata: existingMeta }))
      return { code: 200, body: this.present(def, existing) };
    const managed = recordManagedFields(
      previousFields,
      ctx.fieldManager,
      apiVersionOf(def),
      this.now(),
      subresource,
      changedFields(existing, next),
    );
    if (managed) meta(next).managedFields = managed;
    next = this.ordered(next);
    if (ctx.dryRun) return { code: 200, body: this.present(def, next) };
    const stored = this.store.update(this.key(def), next);
    this.hooksOf(def).afterUpdate?.(stored, existing);
    return { code: 200, body: this.present(def, stored) };
  }

  /** An internal write (controllers in the local API: kubelet, CRD status). Skips client-facing checks. */
  writeInternal(def: ResourceDef, next: JsonObject): JsonObject {
    const stored = this.store.update(this.key(def), this.ordered(next));
    return stored;
  }

  // ---------------------------------------------------------------- delete

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  delete(
    def: ResourceDef,
    namespace: string | undefined,
    name: string,
    options: DeleteOptions,
  ): WriteOutcome {
    const existing = this.getStored(def, namespace, name);
    const om = existing.metadata as JsonObject;
    const pre = options.preconditions;
    if (pre?.uid !== undefined && pre.uid !== om.uid) {
      throw conflict(
        def,
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${String(om.uid)}`,
      );
    }
    if (pre?.resourceVersion !== undefined && pre.resourceVersion !== om.resourceVersion) {
      throw conflict(
        def,
        name,
        `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${String(om.resourceVersion)}). The object might have been modified`,
      );
    }
    const hooks = this.hooksOf(def);
    hooks.checkDelete?.(existing);
    options.admit?.({
      operation: 'DELETE',
      def,
      ...(def.namespaced && { namespace: om.namespace as string }),
      name,
      object: null,
      oldObject: this.present(def, existing),
    });
    const finalizers = Array.isArray(om.finalizers) ? om.finalizers : [];
    if (finalizers.length > 0) {
      if (om.deletionTimestamp) return { code: 200, body: this.present(def, existing) };
      const next = clone(existing);
      const nm = meta(next);
      nm.deletionTimestamp = this.now();
      nm.deletionGracePeriodSeconds = 0;
      if (typeof nm.generation === 'number' && nm.generation > 0) nm.generation += 1;
      if (options.dryRun) return { code: 200, body: this.present(def, next) };
      const stored = this.store.update(this.key(def), next);
      hooks.afterUpdate?.(stored, existing);
      return { code: 200, body: this.present(def, stored) };
    }
    if (options.dryRun) {
      return {
        code: 200,
        body: def.returnDeletedObject ? this.present(def, existing) : this.deletedStatus(def, existing),
      };
    }
    if (hooks.deleteWithoutFinalizers)
      return { code: 200, body: hooks.deleteWithoutFinalizers(existing, options) };
    this.remove(def, existing);
    return {
      code: 200,
      body: def.returnDeletedObject ? this.present(def, existing) : this.deletedStatus(def, existing),
    };
  }

  /** Removes an object from the store now (DELETED) and runs the kind's afterDelete. */
  remove(def: ResourceDef, existing: JsonObject): JsonObject | undefined {
    const om = existing.metadata as JsonObject;
    const last = this.store.delete(this.key(def), om.namespace as string | undefined, String(om.name));
    if (last) this.hooksOf(def).afterDelete?.(existing);
    return last;
  }

  deletedStatus(def: ResourceDef, obj: JsonObject): JsonObject {
    const om = obj.metadata as JsonObject;
    const details: JsonObject = { name: om.name as JsonValue };
    if (def.group) details.group = def.group;
    details.kind = def.plural;
    details.uid = om.uid as JsonValue;
    return successStatus(details) as JsonObject;
  }

  deleteCollection(def: ResourceDef, filter: Filter, options: DeleteOptions): JsonObject {
    const items: JsonValue[] = [];
    for (const o of this.select(def, filter)) {
      const om = o.metadata as JsonObject;
      try {
        const r = this.delete(def, om.namespace as string | undefined, String(om.name), {
          ...options,
          preconditions: {},
        });
        items.push(r.body.kind === 'Status' ? this.present(def, o) : r.body);
      } catch (e) {
        if (!(e instanceof ApiError && e.code === 404)) throw e;
      }
    }
    return {
      apiVersion: apiVersionOf(def),
      kind: def.listKind,
      metadata: { resourceVersion: String(this.store.resourceVersion) },
      items,
    };
  }

  describe(def: ResourceDef): string {
    return qualifiedResource(def);
  }
}

// ---------------------------------------------------------------- managedFields

const TRACKED_META = new Set(['labels', 'annotations', 'finalizers', 'ownerReferences']);

/**
 * The fields a write changed, in the FieldsV1 form (`{"f:status": {"f:ready": {}}}`): spec, status and any other
 * top-level field, and the labels, annotations, finalizers and ownerReferences of metadata, three levels deep.
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function changedFields(before: JsonObject, after: JsonObject): JsonObject | undefined {
  const diff = (a: JsonValue | undefined, b: JsonValue | undefined, depth: number): JsonObject => {
    if (depth === 0 || !isObject(a ?? {}) || !isObject(b ?? {}) || a === null || b === null) return {};
    const out: JsonObject = {};
    const ao = (a ?? {}) as JsonObject;
    const bo = (b ?? {}) as JsonObject;
    for (const k of new Set([...Object.keys(ao), ...Object.keys(bo)])) {
      if (k in bo && !deepEqual(ao[k], bo[k])) out[`f:${k}`] = diff(ao[k], bo[k], depth - 1);
    }
    return out;
  };
  const out: JsonObject = {};
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (k === 'apiVersion' || k === 'kind') continue;
    if (k === 'metadata') {
      const bm = (before.metadata ?? {}) as JsonObject;
      const am = (after.metadata ?? {}) as JsonObject;
      const m: JsonObject = {};
      for (const mk of TRACKED_META)
        if (mk in am && !deepEqual(bm[mk], am[mk])) m[`f:${mk}`] = diff(bm[mk], am[mk], 2);
      if (Object.keys(m).length > 0) out['f:metadata'] = m;
      continue;
    }
    if (k in after && !deepEqual(before[k], after[k])) out[`f:${k}`] = diff(before[k], after[k], 3);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function mergeFields(a: JsonObject, b: JsonObject): JsonObject {
  const out: JsonObject = { ...a };
  for (const [k, v] of Object.entries(b))
    out[k] = isObject(out[k]) && isObject(v) ? mergeFields(out[k] as JsonObject, v) : v;
  return out;
}

function managedEntry(
  manager: string,
  apiVersion: string,
  time: string,
  fieldsV1: JsonObject,
  subresource?: string,
): JsonObject {
  return {
    manager,
    operation: 'Update',
    apiVersion,
    time,
    fieldsType: 'FieldsV1',
    fieldsV1,
    ...(subresource ? { subresource } : {}),
  };
}

/**
 * The managedFields after a write by `manager` (one entry per manager and subresource; its fields are the union of
 * what it has written). Simplified: fields another manager wrote before stay in its entry too.
 */
function recordManagedFields(
  previous: JsonValue | undefined,
  manager: string | undefined,
  apiVersion: string,
  time: string,
  subresource: string | undefined,
  fields: JsonObject | undefined,
): JsonObject[] | undefined {
  const list = (Array.isArray(previous) ? previous : []).filter(isObject) as JsonObject[];
  if (!manager || !fields) return list.length > 0 ? list : undefined;
  const i = list.findIndex((e) => e.manager === manager && (e.subresource ?? '') === (subresource ?? ''));
  const old = i >= 0 && isObject(list[i]?.fieldsV1) ? (list[i]?.fieldsV1 as JsonObject) : {};
  const entry = managedEntry(manager, apiVersion, time, mergeFields(old, fields), subresource);
  return i >= 0 ? list.map((e, j) => (j === i ? entry : e)) : [...list, entry];
}
