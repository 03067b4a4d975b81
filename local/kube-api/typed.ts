/**
 * The typed decode of built-in kinds: a real API server decodes a built-in object's JSON into its Go struct
 * (k8s.io/api) before anything else, and refuses a value of the wrong type for a field there. This module walks an
 * object against a small table of those Go types (typed-kinds.ts) and gives the error text each of the server's
 * two decoders would give:
 *
 * - **sigs.k8s.io/json** (create, update, and the result of a JSON or merge patch): the first type error in
 *   document order, `json: cannot unmarshal <json type> into Go struct field <Struct>.<path> of type <go type>`,
 *   where `<Struct>` is the innermost Go struct holding the field and `<path>` the JSON field names from the top
 *   (map keys and list indices are not in it). The decoder keeps going after a type error and reports the first;
 *   a value a custom UnmarshalJSON refuses (metav1.Time: not a string) stops it at once and is reported instead,
 *   with the same context and the type `string` its UnmarshalJSON decoded into.
 * - **apimachinery's unstructured converter** (the result of a strategic merge patch): fields in Go declaration
 *   order, the first error only, in reflect's words (`unrecognized type: string`, `cannot convert int64 to string`,
 *   `cannot restore slice from string`, `cannot restore struct from: string`).
 *
 * What is checked is the table's fields; a field not in it is not checked (as an unknown field is not), and
 * neither are the values behind custom decoders (resource.Quantity, IntOrString, RawExtension, the JSON of a CRD
 * schema's default or items) nor a string's format (a timestamp's RFC 3339, base64 of binaryData).
 * docs/adr/0127-local-api-decodes-built-in-kinds-typed.md says why the table is small.
 */
import { isObject, type JsonValue } from './json.js';

/** How the decoders treat a Go type; `go` is the name reflect prints (`string`, `v1.FailurePolicyType`, `[]string`). */
export type GoType =
  | { kind: 'string' | 'bool' | 'float'; go: string }
  | { kind: 'int'; go: string; bits: 32 | 64 }
  /** metav1.Time and MicroTime: a JSON string (or null), read by their own UnmarshalJSON. */
  | { kind: 'time'; go: string }
  /** A type with its own decoder (Quantity, IntOrString, RawExtension, JSON, FieldsV1): not checked. */
  | { kind: 'any'; go: string }
  /** []byte: a base64 string. */
  | { kind: 'bytes'; go: string }
  | { kind: 'map' | 'slice'; go: string; elem: GoType }
  | { kind: 'struct'; go: string; fields: () => Fields };

/** A struct's fields by JSON name, in Go declaration order (inline embedded structs spread in place). */
export type Fields = Readonly<Record<string, GoType>>;

// ------------------------------------------------------------------ sigs.k8s.io/json

/** The JSON decoder's name for a value's type. */
function jsonKind(v: JsonValue): string {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'object';
  return typeof v === 'boolean' ? 'bool' : typeof v;
}

interface Context {
  /** The innermost struct's name (`Variable`), '' at the top. */
  struct: string;
  path: readonly string[];
}

interface DecodeState {
  /** The first type error, reported at the end (saveError). */
  saved?: string;
  /** An error that stopped the decoder (a custom UnmarshalJSON's). */
  fatal?: string;
}

function typeError(value: string, t: GoType, at: Context): string {
  if (at.struct === '' && at.path.length === 0)
    return `json: cannot unmarshal ${value} into Go value of type ${t.go}`;
  return `json: cannot unmarshal ${value} into Go struct field ${at.struct}.${at.path.join('.')} of type ${t.go}`;
}

function intFits(n: number, bits: 32 | 64): boolean {
  const limit = 2 ** (bits - 1);
  return Number.isInteger(n) && n >= -limit && n < limit;
}

/** The JSON values each kind of Go type takes (null aside); `bytes` is base64 text or a list of bytes. */
const FITS: Partial<Record<GoType['kind'], (v: JsonValue) => boolean>> = {
  map: isObject,
  struct: isObject,
  slice: Array.isArray,
  string: (v) => typeof v === 'string',
  bytes: (v) => typeof v === 'string' || Array.isArray(v),
  bool: (v) => typeof v === 'boolean',
  float: (v) => typeof v === 'number',
  int: (v) => typeof v === 'number',
};

/** What the decoder says of a value that does not fit `t` (literalStore, array, object), or undefined. */
function shapeProblem(v: JsonValue, t: GoType): string | undefined {
  if (FITS[t.kind]?.(v) === false) return jsonKind(v);
  // Go reads an integer's text with ParseInt: a fraction or an overflow is `number <text>`.
  if (t.kind === 'int' && !intFits(v as number, t.bits)) return `number ${String(v)}`;
  return undefined;
}

function decodeValue(v: JsonValue | undefined, t: GoType, at: Context, st: DecodeState): void {
  if (v === undefined || v === null || st.fatal !== undefined || t.kind === 'any') return;
  if (t.kind === 'time') {
    // Time.UnmarshalJSON decodes into a string with encoding/json and returns its error, which stops the decoder;
    // the decoder then adds its field context (its UnmarshalTypeError is encoding/json's), the type staying string.
    if (typeof v !== 'string') st.fatal = typeError(jsonKind(v), { kind: 'string', go: 'string' }, at);
    return;
  }
  const problem = shapeProblem(v, t);
  if (problem !== undefined) {
    st.saved ??= typeError(problem, t, at);
    return;
  }
  if (t.kind === 'map' || t.kind === 'slice') {
    // Map keys and list indices are not part of the error's field path.
    for (const x of Object.values(v as object) as JsonValue[]) decodeValue(x, t.elem, at, st);
  } else if (t.kind === 'struct') {
    decodeFields(v as Record<string, JsonValue>, t.fields(), t.go.slice(t.go.lastIndexOf('.') + 1), at, st);
  }
}

/** A struct's fields in document order; a key that is not a field (unknown, or not in the table) is skipped. */
function decodeFields(
  v: Record<string, JsonValue>,
  fields: Fields,
  struct: string,
  at: Context,
  st: DecodeState,
): void {
  for (const [k, x] of Object.entries(v)) {
    const ft = Object.hasOwn(fields, k) ? fields[k] : undefined;
    if (ft) decodeValue(x, ft, { struct, path: [...at.path, k] }, st);
  }
}

/** The error sigs.k8s.io/json's UnmarshalCaseSensitivePreserveInts gives for `obj` as `t`, or undefined. */
export function jsonDecodeError(obj: JsonValue, t: GoType): string | undefined {
  const st: DecodeState = {};
  decodeValue(obj, t, { struct: '', path: [] }, st);
  return st.fatal ?? st.saved;
}

// ------------------------------------------------------------------ runtime.DefaultUnstructuredConverter

/** reflect's Kind of an unstructured value: JSON integers are int64 (decoded preserving ints), others float64. */
function unstructuredKind(v: JsonValue): string {
  if (Array.isArray(v)) return 'slice';
  if (typeof v === 'object') return 'map';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int64' : 'float64';
  return typeof v === 'boolean' ? 'bool' : 'string';
}

function reflectKind(t: GoType): string {
  if (t.kind === 'int') return `int${t.bits}`;
  return t.kind === 'float' ? 'float64' : t.kind;
}

/** fromUnstructured's first switch: a scalar destination. */
function convertScalar(v: JsonValue, t: GoType): string | undefined {
  const src = unstructuredKind(v);
  const dst = reflectKind(t);
  if (src === dst || (src === 'int64' && (t.kind === 'int' || t.kind === 'float'))) return undefined;
  if (src === 'float64' && t.kind === 'float') return undefined;
  // Convertible in Go but not across JSON's groups: an integer to a string type, a fraction to an integer type.
  if ((src === 'int64' && t.kind === 'string') || (src === 'float64' && t.kind === 'int'))
    return `cannot convert ${src} to ${t.go}`;
  return `unrecognized type: ${dst}`;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: one branch per Go kind, as converter.go's fromUnstructured and its map/slice/struct helpers
function convertValue(v: JsonValue | undefined, t: GoType): string | undefined {
  if (v === undefined || v === null || t.kind === 'any') return undefined;
  const src = unstructuredKind(v);
  switch (t.kind) {
    case 'time':
      // A json.Unmarshaler: the value goes through json.Marshal and Time.UnmarshalJSON.
      return typeof v === 'string'
        ? undefined
        : `json: cannot unmarshal ${jsonKind(v)} into Go value of type string`;
    case 'bytes':
      return src === 'string' || src === 'slice' ? undefined : `cannot restore slice from ${src}`;
    case 'map': {
      if (!isObject(v)) return `cannot restore map from ${src}`;
      for (const x of Object.values(v)) {
        const e = convertValue(x, t.elem);
        if (e) return e;
      }
      return undefined;
    }
    case 'slice': {
      if (!Array.isArray(v)) return `cannot restore slice from ${src}`;
      for (const x of v) {
        const e = convertValue(x, t.elem);
        if (e) return e;
      }
      return undefined;
    }
    case 'struct': {
      if (!isObject(v)) return `cannot restore struct from: ${src}`;
      for (const [k, ft] of Object.entries(t.fields())) {
        const e = Object.hasOwn(v, k) ? convertValue(v[k], ft) : undefined;
        if (e) return e;
      }
      return undefined;
    }
    default:
      return convertScalar(v, t);
  }
}

/** The error runtime.DefaultUnstructuredConverter.FromUnstructured gives for `obj` as `t`, or undefined. */
export function convertError(obj: JsonValue, t: GoType): string | undefined {
  return convertValue(obj, t);
}

// ------------------------------------------------------------------ fmt's %+v

/** strconv.FormatFloat(f, 'g', -1, 64), as fmt's %v prints a float64. */
export function goFloat(f: number): string {
  if (f === 0) return Object.is(f, -0) ? '-0' : '0';
  const sign = f < 0 ? '-' : '';
  const [mantissa = '', exponent = '0'] = Math.abs(f).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exp = Number(exponent);
  const point = exp + 1;
  // %e when the exponent is < -4 or >= the precision, which is 6 for the shortest form (strconv's ftoa.go).
  if (exp < -4 || exp >= 6) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  if (digits.length <= point) return `${sign}${digits}${'0'.repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** How fmt's %+v prints a decoded JSON value (maps with sorted keys, `<nil>`, strings bare). */
export function goPrint(v: JsonValue): string {
  if (v === null) return '<nil>';
  if (Array.isArray(v)) return `[${v.map(goPrint).join(' ')}]`;
  if (typeof v === 'object') {
    const keys = Object.keys(v).sort();
    return `map[${keys.map((k) => `${k}:${goPrint(v[k] as JsonValue)}`).join(' ')}]`;
  }
  // An integer's text decodes to an int64 (preserving ints), anything else to a float64.
  if (typeof v === 'number')
    return Number.isInteger(v) && Math.abs(v) < 2 ** 63 ? BigInt(v).toString() : goFloat(v);
  return String(v);
}
