/**
 * The three patch formats the apiserver applies, written to its libraries' semantics and error
 * texts: JSON merge patch (RFC 7386, evanphx/json-patch merge.go), JSON patch (RFC 6902 with evanphx v4's
 * quirks: negative indices, `test` with null passing on an absent key), and the subset of strategic merge
 * patch that built-in kinds need.
 */
import { ApiError, badRequest, patchApplyFailed, status } from './errors.js';
import { clone, deepEqual, isObject, type JsonObject, type JsonValue } from './json.js';

// ------------------------------------------------------------------ merge patch

function pruneNulls(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map((x) => (x === null ? x : pruneNulls(x)));
  if (isObject(v)) {
    const out: JsonObject = {};
    for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = pruneNulls(x);
    return out;
  }
  return v;
}

function mergeDocs(doc: JsonObject, patch: JsonObject): void {
  for (const [k, pv] of Object.entries(patch)) {
    if (pv === null) {
      delete doc[k];
      continue;
    }
    const dv = doc[k];
    if (isObject(dv) && isObject(pv)) mergeDocs(dv, pv);
    else doc[k] = pruneNulls(clone(pv));
  }
}

/** RFC 7386. `patch` is the parsed body; anything but an object is `Invalid JSON Patch` (400). */
export function applyMergePatch(doc: JsonObject, patch: unknown): JsonObject {
  if (!isObject(patch)) throw badRequest('Invalid JSON Patch');
  const out = clone(doc);
  mergeDocs(out, patch);
  return out;
}

// ------------------------------------------------------------------ JSON patch

class PatchError extends Error {}

const MISSING = 'missing value';
const INVALID_INDEX = 'invalid index referenced';

function decodeKey(k: string): string {
  return k.replace(/~1/g, '/').replace(/~0/g, '~');
}

function arrayIndex(key: string, len: number, forAdd: boolean): number {
  if (!/^-?\d+$/.test(key))
    throw new PatchError(`strconv.Atoi: parsing ${JSON.stringify(key)}: invalid syntax`);
  let idx = Number.parseInt(key, 10);
  const size = forAdd ? len + 1 : len;
  if (idx >= size) throw new PatchError(`Unable to access invalid index: ${idx}: ${INVALID_INDEX}`);
  if (idx < 0) {
    if (idx < -size) throw new PatchError(`Unable to access invalid index: ${idx}: ${INVALID_INDEX}`);
    idx += size;
  }
  return idx;
}

/** Walks to the parent of the pointer's last token. Undefined when an intermediate is missing. */
function findObject(
  root: { doc: JsonValue },
  path: string,
): { parent: JsonObject | JsonValue[]; key: string } | undefined {
  if (!path.startsWith('/')) return undefined;
  const parts = path.slice(1).split('/').map(decodeKey);
  const last = parts.pop() as string;
  let cur: JsonValue = root.doc;
  for (const p of parts) {
    if (isObject(cur)) {
      if (!Object.hasOwn(cur, p)) return undefined;
      cur = cur[p] as JsonValue;
    } else if (Array.isArray(cur)) {
      try {
        cur = cur[arrayIndex(p, cur.length, false)] as JsonValue;
      } catch {
        return undefined;
      }
    } else {
      return undefined;
    }
  }
  if (!isObject(cur) && !Array.isArray(cur)) return undefined;
  return { parent: cur, key: last };
}

function getAt(parent: JsonObject | JsonValue[], key: string): JsonValue | undefined {
  if (Array.isArray(parent)) return parent[arrayIndex(key, parent.length, false)];
  return Object.hasOwn(parent, key) ? parent[key] : undefined;
}

function addAt(parent: JsonObject | JsonValue[], key: string, value: JsonValue): void {
  if (Array.isArray(parent)) {
    if (key === '-') {
      parent.push(value);
      return;
    }
    if (!/^-?\d+$/.test(key))
      throw new PatchError(
        `value was not a proper array index: '${key}': strconv.Atoi: parsing ${JSON.stringify(key)}: invalid syntax`,
      );
    parent.splice(arrayIndex(key, parent.length, true), 0, value);
    return;
  }
  parent[key] = value;
}

function removeAt(parent: JsonObject | JsonValue[], key: string): void {
  if (Array.isArray(parent)) {
    parent.splice(arrayIndex(key, parent.length, false), 1);
    return;
  }
  if (!Object.hasOwn(parent, key))
    throw new PatchError(`Unable to remove nonexistent key: ${key}: ${MISSING}`);
  delete parent[key];
}

function setAt(parent: JsonObject | JsonValue[], key: string, value: JsonValue): void {
  if (Array.isArray(parent)) parent[arrayIndex(key, parent.length, false)] = value;
  else parent[key] = value;
}

export const MAX_JSON_PATCH_OPERATIONS = 10000;

/** Decodes a json-patch body the way the apiserver does (400 for anything but an array of operations). */
export function decodeJsonPatch(body: unknown): JsonObject[] {
  if (!Array.isArray(body)) {
    const t = body === null ? 'null' : isObject(body) ? 'object' : typeof body;
    throw badRequest(`json: cannot unmarshal ${t} into Go value of type jsonpatch.Patch`);
  }
  if (body.length > MAX_JSON_PATCH_OPERATIONS) {
    throw new ApiError(
      status(
        413,
        'RequestEntityTooLarge',
        `Request entity too large: The allowed operations in a JSON patch are limited to ${MAX_JSON_PATCH_OPERATIONS}, got ${body.length}`,
      ),
    );
  }
  return body.map((op) => (isObject(op) ? op : {}));
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function applyOp(root: { doc: JsonValue }, op: JsonObject): void {
  const kind = typeof op.op === 'string' ? op.op : '';
  const path = typeof op.path === 'string' ? op.path : undefined;
  const hasValue = Object.hasOwn(op, 'value');
  const value = (op.value ?? null) as JsonValue;
  const needPath = (): string => {
    if (path === undefined) throw new PatchError(`${kind} operation failed to decode path: ${MISSING}`);
    return path;
  };
  switch (kind) {
    case 'add': {
      const p = needPath();
      const c = findObject(root, p);
      if (!c) throw new PatchError(`add operation does not apply: doc is missing path: "${p}": ${MISSING}`);
      try {
        addAt(c.parent, c.key, clone(value));
      } catch (e) {
        throw new PatchError(`error in add for path: '${p}': ${(e as Error).message}`);
      }
      return;
    }
    case 'remove': {
      const p = needPath();
      const c = findObject(root, p);
      if (!c)
        throw new PatchError(`remove operation does not apply: doc is missing path: "${p}": ${MISSING}`);
      try {
        removeAt(c.parent, c.key);
      } catch (e) {
        throw new PatchError(`error in remove for path: '${p}': ${(e as Error).message}`);
      }
      return;
    }
    case 'replace': {
      const p = needPath();
      const c = findObject(root, p);
      if (!c) throw new PatchError(`replace operation does not apply: doc is missing path: ${p}: ${MISSING}`);
      let current: JsonValue | undefined;
      try {
        current = getAt(c.parent, c.key);
      } catch {
        current = undefined;
      }
      if (current === undefined)
        throw new PatchError(`replace operation does not apply: doc is missing key: ${p}: ${MISSING}`);
      setAt(c.parent, c.key, clone(value));
      return;
    }
    case 'test': {
      const p = needPath();
      const c = findObject(root, p);
      if (!c) throw new PatchError(`test operation does not apply: is missing path: ${p}: ${MISSING}`);
      let current: JsonValue | undefined;
      try {
        current = getAt(c.parent, c.key);
      } catch (e) {
        throw new PatchError(`error in test for path: '${p}': ${(e as Error).message}`);
      }
      // evanphx v4: a null (or absent) test value passes when the member is absent.
      if (current === undefined) {
        if (!hasValue || op.value === null) return;
        throw new PatchError(`testing value ${p} failed: test failed`);
      }
      if (!hasValue) throw new PatchError(`testing value ${p} failed: test failed`);
      if (!deepEqual(current, value)) throw new PatchError(`testing value ${p} failed: test failed`);
      return;
    }
    case 'move':
    case 'copy': {
      const from = typeof op.from === 'string' ? op.from : undefined;
      if (from === undefined) throw new PatchError(`${kind} operation failed to decode from: ${MISSING}`);
      const src = findObject(root, from);
      if (!src)
        throw new PatchError(
          `${kind} operation does not apply: doc is missing from path: ${from}: ${MISSING}`,
        );
      let v: JsonValue | undefined;
      try {
        v = getAt(src.parent, src.key);
      } catch (e) {
        throw new PatchError(`error in ${kind} for path: '${src.key}': ${(e as Error).message}`);
      }
      if (v === undefined)
        throw new PatchError(
          `error in ${kind} for path: '${src.key}': Unable to get nonexistent key: ${src.key}: ${MISSING}`,
        );
      if (kind === 'move') {
        try {
          removeAt(src.parent, src.key);
        } catch (e) {
          throw new PatchError(`error in move for path: '${src.key}': ${(e as Error).message}`);
        }
      }
      const p = needPath();
      const dst = findObject(root, p);
      if (!dst)
        throw new PatchError(
          `${kind} operation does not apply: doc is missing destination path: ${p}: ${MISSING}`,
        );
      try {
        addAt(dst.parent, dst.key, kind === 'copy' ? clone(v) : v);
      } catch (e) {
        throw new PatchError(`error in ${kind} for path: '${p}': ${(e as Error).message}`);
      }
      return;
    }
    default:
      throw new PatchError(`Unexpected kind: ${kind}: unknown object type`);
  }
}

/** RFC 6902 on a copy of `doc`; all operations or none. A failing operation is a 422. */
export function applyJsonPatch(doc: JsonObject, ops: readonly JsonObject[]): JsonObject {
  const root = { doc: clone(doc) as JsonValue };
  for (const op of ops) {
    try {
      applyOp(root, op);
    } catch (e) {
      if (e instanceof PatchError) throw patchApplyFailed(e.message);
      throw e;
    }
  }
  if (!isObject(root.doc)) throw patchApplyFailed('the patched document is not a JSON object');
  return root.doc;
}

// ------------------------------------------------------------------ strategic merge patch (subset)

/** Lists merged by a key instead of replaced, by field name (the parent's name for `ports`). */
function mergeKeyFor(field: string, parentField: string | undefined): string | undefined {
  switch (field) {
    case 'containers':
    case 'initContainers':
    case 'ephemeralContainers':
    case 'volumes':
    case 'imagePullSecrets':
    case 'env':
    case 'resourceClaims':
    case 'schedulingGates':
    case 'matchConditions': // ValidatingAdmissionPolicySpec (patchMergeKey name)
      return 'name';
    case 'ports':
      return parentField === 'containers' ||
        parentField === 'initContainers' ||
        parentField === 'ephemeralContainers'
        ? 'containerPort'
        : undefined;
    case 'volumeMounts':
      return 'mountPath';
    case 'volumeDevices':
      return 'devicePath';
    case 'ownerReferences':
      return 'uid';
    case 'conditions':
      return 'type';
    case 'podIPs':
    case 'hostIPs':
    case 'hostAliases':
      return 'ip';
    default:
      return undefined;
  }
}

/** Lists of scalars whose patch strategy is `merge` (items are added, not replaced). */
const PRIMITIVE_MERGE_LISTS = new Set(['finalizers']);

function smpError(message: string): ApiError {
  return badRequest(message);
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function smpMergeList(
  field: string,
  parentField: string | undefined,
  original: JsonValue[] | undefined,
  patch: JsonValue[],
): JsonValue[] {
  if (PRIMITIVE_MERGE_LISTS.has(field)) {
    const out = [...(original ?? [])];
    for (const v of patch) if (!out.some((o) => deepEqual(o, v))) out.push(clone(v));
    return out;
  }
  const key = mergeKeyFor(field, parentField);
  if (key === undefined) {
    return patch.filter((p) => !(isObject(p) && p.$patch !== undefined)).map((p) => clone(p));
  }
  if (patch.some((p) => isObject(p) && p.$patch === 'replace')) {
    return patch
      .filter((p) => !(isObject(p) && p.$patch === 'replace'))
      .map((p) => smpMap(field, {}, p as JsonObject));
  }
  const out = (original ?? []).map((o) => clone(o));
  for (const p of patch) {
    if (!isObject(p))
      throw smpError(`unable to find api field in struct ${field} for the json field "${String(p)}"`);
    const id = p[key];
    const at = out.findIndex((o) => isObject(o) && deepEqual(o[key], id));
    if (p.$patch === 'delete') {
      if (at >= 0) out.splice(at, 1);
      continue;
    }
    if (p.$patch !== undefined)
      throw smpError(`Unknown patch type: ${String(p.$patch)} in map: ${JSON.stringify(p)}`);
    if (at >= 0) out[at] = smpMap(field, out[at] as JsonObject, p);
    else out.push(smpMap(field, {}, p));
  }
  return out;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function smpMap(field: string | undefined, original: JsonObject, patch: JsonObject): JsonObject {
  if (patch.$patch === 'replace') {
    const { $patch: _, ...rest } = patch;
    return clone(rest);
  }
  if (patch.$patch !== undefined && patch.$patch !== 'merge') {
    throw smpError(`Unknown patch type: ${String(patch.$patch)} in map: ${JSON.stringify(patch)}`);
  }
  const out = clone(original);
  let retain: string[] | undefined;
  for (const [k, v] of Object.entries(patch)) {
    if (k === '$patch') continue;
    if (k === '$retainKeys') {
      if (!Array.isArray(v)) throw smpError('$retainKeys must be a list');
      retain = v.map(String);
      continue;
    }
    if (k.startsWith('$setElementOrder/')) continue;
    if (k.startsWith('$deleteFromPrimitiveList/')) {
      const target = k.slice('$deleteFromPrimitiveList/'.length);
      const list = out[target];
      if (Array.isArray(list) && Array.isArray(v))
        out[target] = list.filter((x) => !v.some((d) => deepEqual(d, x)));
      continue;
    }
    if (k.startsWith('$')) throw smpError(`unknown patch directive ${k}`);
    if (v === null) {
      delete out[k];
      continue;
    }
    const cur = out[k];
    if (isObject(v)) {
      if (v.$patch === 'delete') {
        delete out[k];
        continue;
      }
      out[k] = smpMap(k, isObject(cur) ? cur : {}, v);
    } else if (Array.isArray(v)) {
      out[k] = smpMergeList(k, field, Array.isArray(cur) ? cur : undefined, v);
    } else {
      out[k] = v;
    }
  }
  if (retain !== undefined) {
    for (const k of Object.keys(out)) if (!retain.includes(k) && !Object.hasOwn(patch, k)) delete out[k];
  }
  return out;
}

/** Strategic merge patch on a built-in object. */
export function applyStrategicMergePatch(doc: JsonObject, patch: unknown): JsonObject {
  if (!isObject(patch)) throw badRequest('Invalid JSON Patch');
  return smpMap(undefined, doc, patch);
}
