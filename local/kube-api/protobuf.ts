/**
 * The Kubernetes protobuf request encoding, for the few built-in kinds kubectl's typed commands send that
 * way (`kubectl create namespace`, `kubectl create configmap`): the `k8s\0` envelope (runtime.Unknown) and a
 * schema-driven decoder of the proto messages into the JSON the rest of the API works with. Any field this
 * schema does not know makes the request fail with 415 instead of being dropped silently.
 */
import { ApiError, status } from './errors.js';
import type { JsonObject, JsonValue } from './json.js';

export const PROTOBUF = 'application/vnd.kubernetes.protobuf';

type FieldType =
  | 'string'
  | 'bytes'
  | 'bool'
  | 'int64'
  | 'int32'
  | 'time'
  | { message: Schema }
  | { map: 'string' | 'bytes' };

interface Field {
  name: string;
  type: FieldType;
  repeated?: boolean;
  /** Decoded but left out of the JSON (the API drops it anyway). */
  skip?: boolean;
}

type Schema = Record<number, Field>;

const ownerReference: Schema = {
  1: { name: 'kind', type: 'string' },
  3: { name: 'name', type: 'string' },
  4: { name: 'uid', type: 'string' },
  5: { name: 'apiVersion', type: 'string' },
  6: { name: 'controller', type: 'bool' },
  7: { name: 'blockOwnerDeletion', type: 'bool' },
};

const objectMeta: Schema = {
  1: { name: 'name', type: 'string' },
  2: { name: 'generateName', type: 'string' },
  3: { name: 'namespace', type: 'string' },
  4: { name: 'selfLink', type: 'string' },
  5: { name: 'uid', type: 'string' },
  6: { name: 'resourceVersion', type: 'string' },
  7: { name: 'generation', type: 'int64' },
  8: { name: 'creationTimestamp', type: 'time' },
  9: { name: 'deletionTimestamp', type: 'time' },
  10: { name: 'deletionGracePeriodSeconds', type: 'int64' },
  11: { name: 'labels', type: { map: 'string' } },
  12: { name: 'annotations', type: { map: 'string' } },
  13: { name: 'ownerReferences', type: { message: ownerReference }, repeated: true },
  14: { name: 'finalizers', type: 'string', repeated: true },
  17: { name: 'managedFields', type: 'bytes', repeated: true, skip: true },
};

const namespaceCondition: Schema = {
  1: { name: 'type', type: 'string' },
  2: { name: 'status', type: 'string' },
  4: { name: 'lastTransitionTime', type: 'time' },
  5: { name: 'reason', type: 'string' },
  6: { name: 'message', type: 'string' },
};

const selectorRequirement: Schema = {
  1: { name: 'key', type: 'string' },
  2: { name: 'operator', type: 'string' },
  3: { name: 'values', type: 'string', repeated: true },
};
const selectorAttributes: Schema = {
  1: { name: 'rawSelector', type: 'string' },
  2: { name: 'requirements', type: { message: selectorRequirement }, repeated: true },
};
const accessReviewSpec: Schema = {
  1: {
    name: 'resourceAttributes',
    type: {
      message: {
        1: { name: 'namespace', type: 'string' },
        2: { name: 'verb', type: 'string' },
        3: { name: 'group', type: 'string' },
        4: { name: 'version', type: 'string' },
        5: { name: 'resource', type: 'string' },
        6: { name: 'subresource', type: 'string' },
        7: { name: 'name', type: 'string' },
        8: { name: 'fieldSelector', type: { message: selectorAttributes } },
        9: { name: 'labelSelector', type: { message: selectorAttributes } },
      },
    },
  },
  2: {
    name: 'nonResourceAttributes',
    type: { message: { 1: { name: 'path', type: 'string' }, 2: { name: 'verb', type: 'string' } } },
  },
};
/** A review's status is the server's answer: decoded and dropped. */
const ignoredStatus: Field = { name: 'status', type: 'bytes', skip: true };

/** Message schemas by Kind (core/v1, authorization/v1 and authentication/v1 generated.proto field numbers). */
const KINDS: Record<string, Schema> = {
  Namespace: {
    1: { name: 'metadata', type: { message: objectMeta } },
    2: { name: 'spec', type: { message: { 1: { name: 'finalizers', type: 'string', repeated: true } } } },
    3: {
      name: 'status',
      type: {
        message: {
          1: { name: 'phase', type: 'string' },
          2: { name: 'conditions', type: { message: namespaceCondition }, repeated: true },
        },
      },
    },
  },
  ConfigMap: {
    1: { name: 'metadata', type: { message: objectMeta } },
    2: { name: 'data', type: { map: 'string' } },
    3: { name: 'binaryData', type: { map: 'bytes' } },
    4: { name: 'immutable', type: 'bool' },
  },
  // What kubectl auth can-i, can-i --list and whoami send.
  SelfSubjectAccessReview: {
    1: { name: 'metadata', type: { message: objectMeta } },
    2: { name: 'spec', type: { message: accessReviewSpec } },
    3: ignoredStatus,
  },
  SelfSubjectRulesReview: {
    1: { name: 'metadata', type: { message: objectMeta } },
    2: { name: 'spec', type: { message: { 1: { name: 'namespace', type: 'string' } } } },
    3: ignoredStatus,
  },
  SelfSubjectReview: {
    1: { name: 'metadata', type: { message: objectMeta } },
    2: ignoredStatus,
  },
};

function unsupported(why: string): ApiError {
  return new ApiError(
    status(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - ${why}; the local Kubernetes API decodes ${PROTOBUF} only for ${Object.keys(KINDS).join(', ')}: send JSON instead (for example kubectl apply -f)`,
    ),
  );
}

class Reader {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.buf.length) throw unsupported('truncated varint');
      const b = this.buf[this.pos++] as number;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 70n) throw unsupported('varint too long');
    }
  }

  bytes(): Buffer {
    const len = Number(this.varint());
    if (this.pos + len > this.buf.length) throw unsupported('truncated field');
    const out = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }

  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.pos += 4;
    else throw unsupported(`wire type ${wire}`);
  }
}

function rfc3339(seconds: bigint): string {
  return `${new Date(Number(seconds) * 1000).toISOString().slice(0, 19)}Z`;
}

function decodeValue(type: FieldType, r: Reader, wire: number, path: string): JsonValue {
  if (typeof type === 'string') {
    switch (type) {
      case 'string':
        return r.bytes().toString('utf8');
      case 'bytes':
        return r.bytes().toString('base64');
      case 'bool':
        return r.varint() !== 0n;
      case 'int64':
      case 'int32':
        return Number(BigInt.asIntN(64, r.varint()));
      case 'time': {
        const t = decodeMessage(
          { 1: { name: 'seconds', type: 'int64' }, 2: { name: 'nanos', type: 'int32' } },
          r.bytes(),
          path,
        );
        return rfc3339(BigInt(Number(t.seconds ?? 0)));
      }
    }
  }
  if ('message' in type) return decodeMessage(type.message, r.bytes(), path);
  if (wire !== 2) throw unsupported(`${path}: unexpected wire type`);
  return decodeMessage(
    { 1: { name: 'key', type: 'string' }, 2: { name: 'value', type: type.map } },
    r.bytes(),
    path,
  );
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function decodeMessage(schema: Schema, buf: Buffer, path: string): JsonObject {
  const r = new Reader(buf);
  const out: JsonObject = {};
  while (!r.done) {
    const tag = Number(r.varint());
    const num = tag >> 3;
    const wire = tag & 7;
    const f = schema[num];
    if (!f) throw unsupported(`${path || 'object'}: field number ${num} is not known here`);
    const fieldPath = path ? `${path}.${f.name}` : f.name;
    const value = decodeValue(f.type, r, wire, fieldPath);
    if (f.skip) continue;
    // Go writes every scalar, empty or not; its JSON form leaves the empty ones out (omitempty).
    if (
      !f.repeated &&
      typeof f.type === 'string' &&
      (value === '' || value === 0 || value === false || value === '1970-01-01T00:00:00Z')
    )
      continue;
    if (typeof f.type === 'object' && 'map' in f.type) {
      const entry = value as JsonObject;
      const m = (out[f.name] as JsonObject | undefined) ?? {};
      m[String(entry.key ?? '')] = entry.value ?? '';
      out[f.name] = m;
    } else if (f.repeated) {
      const list = (out[f.name] as JsonValue[] | undefined) ?? [];
      list.push(value);
      out[f.name] = list;
    } else {
      out[f.name] = value;
    }
  }
  return out;
}

/** Decodes a `k8s\0` protobuf request body into the object's JSON form. Throws 415 on anything unknown. */
export function decodeProtobufObject(body: Buffer): JsonObject {
  if (body.length < 4 || body.subarray(0, 4).toString('latin1') !== 'k8s\u0000')
    throw unsupported('missing the k8s protobuf envelope');
  const unknown = decodeMessage(
    {
      1: {
        name: 'typeMeta',
        type: { message: { 1: { name: 'apiVersion', type: 'string' }, 2: { name: 'kind', type: 'string' } } },
      },
      2: { name: 'raw', type: 'bytes' },
      3: { name: 'contentEncoding', type: 'string' },
      4: { name: 'contentType', type: 'string' },
    },
    body.subarray(4),
    '',
  );
  const typeMeta = (unknown.typeMeta ?? {}) as JsonObject;
  const kind = String(typeMeta.kind ?? '');
  const schema = KINDS[kind];
  if (!schema) throw unsupported(`kind ${kind || '(none)'}`);
  if (unknown.contentEncoding) throw unsupported(`content encoding ${String(unknown.contentEncoding)}`);
  const obj = decodeMessage(schema, Buffer.from(String(unknown.raw ?? ''), 'base64'), '');
  return { apiVersion: String(typeMeta.apiVersion ?? 'v1'), kind, ...obj };
}
