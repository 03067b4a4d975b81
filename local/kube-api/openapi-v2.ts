/**
 * /openapi/v2: the Swagger 2.0 document of the custom resources, as JSON or in the protobuf encoding kubectl asks
 * for (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, gnostic's openapi_v2.Document).
 *
 * kubectl 1.32 validates an object on the client when the server's OpenAPI v3 does not say that the object's kind
 * supports server-side field validation — always the case for a `kind: List`, which is what `kubectl get -o yaml`
 * writes for several objects. It then downloads /openapi/v2 and checks each item against the definition whose
 * `x-kubernetes-group-version-kind` names the item's kind (unknown fields, types, required fields); items of kinds
 * the document does not define are not checked. So the document defines each custom resource from its CRD's
 * structural schema, as the real API server publishes it (apiVersion, kind and metadata added; preserve-unknown
 * and int-or-string fields left untyped), and leaves the built-in kinds out, which kubectl then does not check.
 */
import { isObject, type JsonObject, type JsonSchema, type JsonValue } from './json.js';
import type { Registry, ResourceDef } from './registry.js';

/** What kubectl asks for ('@' is not a token character, so the answer names the same type with a dot). */
export const OPENAPI_V2_PROTOBUF = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf';
export const OPENAPI_V2_PROTOBUF_ANSWER = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';

function definitionName(def: ResourceDef): string {
  const reversed = def.group.split('.').reverse().join('.');
  return `${reversed}.${def.version}.${def.kind}`;
}

/** A structural schema in Swagger 2.0 terms, as the API server converts CRD schemas for /openapi/v2. */
function toV2(schema: JsonSchema): JsonObject {
  if (schema['x-kubernetes-preserve-unknown-fields'] || schema['x-kubernetes-int-or-string']) return {};
  const out: JsonObject = {};
  if (typeof schema.type === 'string') out.type = schema.type;
  if (typeof schema.format === 'string') out.format = schema.format;
  if (schema.properties) {
    const props: JsonObject = {};
    for (const [k, v] of Object.entries(schema.properties)) props[k] = toV2(v);
    out.properties = props;
  }
  if (isObject(schema.items as JsonValue)) out.items = toV2(schema.items as JsonSchema);
  if (isObject(schema.additionalProperties as JsonValue))
    out.additionalProperties = toV2(schema.additionalProperties as JsonSchema);
  if (Array.isArray(schema.required) && schema.required.length > 0) out.required = [...schema.required];
  return out;
}

function definition(def: ResourceDef, schema: JsonSchema): JsonObject {
  const body = toV2(schema);
  const properties: JsonObject = {
    ...((body.properties as JsonObject | undefined) ?? {}),
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object' },
  };
  return {
    ...body,
    type: 'object',
    properties,
    'x-kubernetes-group-version-kind': [{ group: def.group, kind: def.kind, version: def.version }],
  };
}

export function openApiV2(registry: Registry, gitVersion: string): JsonObject {
  const definitions: JsonObject = {};
  for (const def of registry.all()) {
    if (def.group === '' || !def.schema) continue;
    definitions[definitionName(def)] = definition(def, def.schema);
  }
  return { swagger: '2.0', info: { title: 'Kubernetes', version: gitVersion }, paths: {}, definitions };
}

// ------------------------------------------------------------------------------------------ protobuf encoding

class Writer {
  private readonly parts: Buffer[] = [];

  private varint(n: number): void {
    const bytes: number[] = [];
    let v = n;
    while (v > 0x7f) {
      bytes.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    bytes.push(v);
    this.parts.push(Buffer.from(bytes));
  }

  bytes(field: number, data: Buffer): this {
    this.varint((field << 3) | 2);
    this.varint(data.length);
    this.parts.push(data);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, Buffer.from(s, 'utf8'));
  }

  message(field: number, w: Writer): this {
    return this.bytes(field, w.done());
  }

  done(): Buffer {
    return Buffer.concat(this.parts);
  }
}

/** openapi_v2.Schema (the fields this document uses). */
function encodeSchema(s: JsonObject): Writer {
  const w = new Writer();
  if (typeof s.format === 'string') w.string(2, s.format);
  if (Array.isArray(s.required)) for (const r of s.required) w.string(19, String(r));
  if (isObject(s.additionalProperties)) {
    w.message(21, new Writer().message(1, encodeSchema(s.additionalProperties)));
  }
  if (typeof s.type === 'string') w.message(22, new Writer().string(1, s.type));
  if (isObject(s.items)) w.message(23, new Writer().message(1, encodeSchema(s.items)));
  if (isObject(s.properties)) {
    const props = new Writer();
    for (const [name, sub] of Object.entries(s.properties))
      props.message(1, new Writer().string(1, name).message(2, encodeSchema(sub as JsonObject)));
    w.message(25, props);
  }
  for (const [name, value] of Object.entries(s)) {
    if (!name.startsWith('x-')) continue;
    // NamedAny{name, Any{yaml}}: JSON is YAML.
    w.message(31, new Writer().string(1, name).message(2, new Writer().string(2, JSON.stringify(value))));
  }
  return w;
}

/** gnostic's openapi_v2.Document in protobuf, from the JSON document above. */
export function encodeOpenApiV2(doc: JsonObject): Buffer {
  const info = doc.info as JsonObject;
  const defs = new Writer();
  for (const [name, schema] of Object.entries(doc.definitions as JsonObject))
    defs.message(1, new Writer().string(1, name).message(2, encodeSchema(schema as JsonObject)));
  return new Writer()
    .string(1, String(doc.swagger))
    .message(2, new Writer().string(1, String(info.title)).string(2, String(info.version)))
    .message(8, new Writer())
    .message(9, defs)
    .done();
}
