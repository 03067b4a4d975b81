/**
 * Structural-schema handling of custom resources: unknown fields are pruned (and reported, so the
 * caller can warn or, with fieldValidation=Strict, refuse), nulls of non-nullable fields are dropped,
 * defaults are filled in, and types, enums and required fields are checked.
 */
import { type FieldError, goValue } from './errors.js';
import { clone, isObject, type JsonObject, type JsonSchema, type JsonValue } from './json.js';

export interface SchemaOutcome {
  /** Dotted paths of pruned fields, e.g. `spec.foo`. */
  unknown: string[];
  errors: FieldError[];
}

const OBJECT_META_FIELDS = new Set([
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
]);

function jsonType(v: JsonValue): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(schema: JsonSchema, v: JsonValue): boolean {
  if (schema['x-kubernetes-int-or-string'])
    return typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v));
  const t = schema.type;
  if (t === undefined) return true;
  const actual = jsonType(v);
  if (t === 'number') return actual === 'number' || actual === 'integer';
  return t === actual;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function walk(schema: JsonSchema, value: JsonValue, path: string, out: SchemaOutcome): JsonValue {
  if (!typeMatches(schema, value)) {
    const actual = jsonType(value);
    out.errors.push({
      reason: 'FieldValueTypeInvalid',
      field: path,
      detail: `Invalid value: ${goValue(actual)}: ${path} in body must be of type ${schema.type}: ${goValue(actual)}`,
    });
    return value;
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    out.errors.push({
      reason: 'FieldValueNotSupported',
      field: path,
      detail: `Unsupported value: ${goValue(value)}: supported values: ${schema.enum.map((e) => goValue(e)).join(', ')}`,
    });
  }
  if (isObject(value)) {
    const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
    const props = schema.properties ?? {};
    const extra = schema.additionalProperties;
    const result: JsonObject = {};
    for (const [k, v] of Object.entries(value)) {
      const childPath = path ? `${path}.${k}` : k;
      const childSchema = props[k] ?? (isObject(extra as JsonValue) ? (extra as JsonSchema) : undefined);
      if (childSchema === undefined) {
        if (preserve || extra === true) result[k] = v;
        else out.unknown.push(childPath);
        continue;
      }
      if (v === null && childSchema.nullable !== true) continue;
      result[k] = walk(childSchema, v, childPath, out);
    }
    for (const [k, s] of Object.entries(props)) {
      if (!Object.hasOwn(result, k) && s.default !== undefined) result[k] = clone(s.default as JsonValue);
    }
    for (const r of schema.required ?? []) {
      if (!Object.hasOwn(result, r)) {
        out.errors.push({
          reason: 'FieldValueRequired',
          field: path ? `${path}.${r}` : r,
          detail: 'Required value',
        });
      }
    }
    return result;
  }
  if (Array.isArray(value) && schema.items) {
    const items = schema.items;
    return value.map((v, i) =>
      v === null && items.nullable !== true ? v : walk(items, v, `${path}[${i}]`, out),
    );
  }
  return value;
}

/**
 * Prunes, defaults and validates every top-level field of a custom resource except apiVersion, kind and
 * metadata (metadata keeps ObjectMeta's fields only). Returns the cleaned object and what was found.
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
export function applySchema(
  obj: JsonObject,
  schema: JsonSchema | undefined,
): { object: JsonObject; outcome: SchemaOutcome } {
  const outcome: SchemaOutcome = { unknown: [], errors: [] };
  if (schema === undefined) return { object: obj, outcome };
  const result: JsonObject = {};
  const props = schema.properties ?? {};
  const preserveRoot = schema['x-kubernetes-preserve-unknown-fields'] === true;
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'apiVersion' || k === 'kind') {
      result[k] = v;
      continue;
    }
    if (k === 'metadata') {
      const m: JsonObject = {};
      if (isObject(v)) {
        for (const [mk, mv] of Object.entries(v)) {
          if (OBJECT_META_FIELDS.has(mk)) m[mk] = mv;
          else outcome.unknown.push(`metadata.${mk}`);
        }
      }
      result.metadata = m;
      continue;
    }
    const s = props[k];
    if (s === undefined) {
      if (preserveRoot) result[k] = v;
      else outcome.unknown.push(k);
      continue;
    }
    if (v === null && s.nullable !== true) continue;
    result[k] = walk(s, v, k, outcome);
  }
  for (const [k, s] of Object.entries(props)) {
    if (k === 'metadata' || Object.hasOwn(result, k)) continue;
    if (s.default !== undefined) result[k] = clone(s.default as JsonValue);
  }
  return { object: result, outcome };
}
