/**
 * Status objects, exactly as kube-apiserver shapes them. Every non-2xx answer of the local API is
 * one of these; handlers throw `ApiError` and the router serialises it.
 */

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** What an error needs to name its object: the plural resource and group, and the Kind for 422s. */
export interface ErrorTarget {
  plural: string;
  group: string;
  kind: string;
}

export class ApiError extends Error {
  readonly status: Status;
  /** Extra response headers (Retry-After for 429). */
  readonly headers: Record<string, string>;

  constructor(status: Status, headers: Record<string, string> = {}) {
    super(status.message ?? status.reason ?? `HTTP ${status.code}`);
    this.name = 'ApiError';
    this.status = status;
    this.headers = headers;
  }

  get code(): number {
    return this.status.code;
  }
}

export function status(code: number, reason: string, message: string, details?: StatusDetails): Status {
  const s: Status = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
  };
  if (details !== undefined) s.details = details;
  return s;
}

/** `iptables-eips.kubeovn.io` or `pods`: how the server names a resource in messages. */
export function qualifiedResource(t: ErrorTarget): string {
  return t.group ? `${t.plural}.${t.group}` : t.plural;
}

/** `IptablesEIP.kubeovn.io` or `Pod`: how validation errors name a kind. */
export function qualifiedKind(t: ErrorTarget): string {
  return t.group ? `${t.kind}.${t.group}` : t.kind;
}

function detailsFor(t: ErrorTarget, name: string): StatusDetails {
  const d: StatusDetails = { name };
  if (t.group) d.group = t.group;
  d.kind = t.plural;
  return d;
}

export function notFound(t: ErrorTarget, name: string): ApiError {
  return new ApiError(
    status(404, 'NotFound', `${qualifiedResource(t)} "${name}" not found`, detailsFor(t, name)),
  );
}

export function pathNotFound(): ApiError {
  return new ApiError(status(404, 'NotFound', 'the server could not find the requested resource', {}));
}

export function alreadyExists(t: ErrorTarget, name: string, terminating = false): ApiError {
  const prefix = terminating ? 'object is being deleted: ' : '';
  return new ApiError(
    status(
      409,
      'AlreadyExists',
      `${prefix}${qualifiedResource(t)} "${name}" already exists`,
      detailsFor(t, name),
    ),
  );
}

export const OPTIMISTIC_LOCK_MESSAGE =
  'the object has been modified; please apply your changes to the latest version and try again';

export function conflict(t: ErrorTarget, name: string, why = OPTIMISTIC_LOCK_MESSAGE): ApiError {
  return new ApiError(
    status(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualifiedResource(t)} "${name}": ${why}`,
      detailsFor(t, name),
    ),
  );
}

export function badRequest(message: string): ApiError {
  return new ApiError(status(400, 'BadRequest', message));
}

export function methodNotAllowed(method: string): ApiError {
  return new ApiError(
    status(
      405,
      'MethodNotAllowed',
      `the server does not allow this method on the requested resource (${method})`,
      {},
    ),
  );
}

export const ACCEPTED_PATCH_TYPES =
  'application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml';

export function unsupportedMediaType(accepted = ACCEPTED_PATCH_TYPES): ApiError {
  return new ApiError(
    status(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: ${accepted}`,
    ),
  );
}

export function notAcceptable(): ApiError {
  return new ApiError(
    status(
      406,
      'NotAcceptable',
      'only the following media types are accepted: application/json, application/yaml',
    ),
  );
}

export function expired(message: string): ApiError {
  return new ApiError(status(410, 'Expired', message));
}

export function internalError(message: string): ApiError {
  return new ApiError(
    status(500, 'InternalError', `Internal error occurred: ${message}`, { causes: [{ message }] }),
  );
}

/** One field problem of a 422, in apimachinery's field.Error form. */
export interface FieldError {
  /** `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`, `FieldValueNotSupported`, `FieldValueTypeInvalid`, ... */
  reason: string;
  field: string;
  /** The text after `<field>: `, e.g. `Invalid value: "x": must be ...`. */
  detail: string;
}

export function fieldInvalid(field: string, value: unknown, why: string): FieldError {
  return { reason: 'FieldValueInvalid', field, detail: `Invalid value: ${goValue(value)}: ${why}` };
}

export function fieldRequired(field: string, why: string): FieldError {
  return { reason: 'FieldValueRequired', field, detail: `Required value: ${why}` };
}

export function fieldForbidden(field: string, why: string): FieldError {
  return { reason: 'FieldValueForbidden', field, detail: `Forbidden: ${why}` };
}

/** How apimachinery's field errors print a value: strings quoted, numbers bare, others %#v-ish. */
export function goValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value === null || value === undefined) return 'null';
  return JSON.stringify(value);
}

/**
 * 422 Invalid. `asResource` reproduces a store quirk: some checks (the missing resourceVersion on update) name
 * the plural resource instead of the Kind, in the message and in `details.kind`.
 */
export function invalid(
  t: ErrorTarget,
  name: string,
  errors: readonly FieldError[],
  asResource = false,
): ApiError {
  const list = errors.map((e) => `${e.field}: ${e.detail}`);
  const joined = list.length === 1 ? list[0] : `[${list.join(', ')}]`;
  const kindName = asResource ? qualifiedResource(t) : qualifiedKind(t);
  const details: StatusDetails = { name };
  if (t.group) details.group = t.group;
  details.kind = asResource ? t.plural : t.kind;
  details.causes = errors.map((e) => ({ reason: e.reason, message: e.detail, field: e.field }));
  return new ApiError(status(422, 'Invalid', `${kindName} "${name}" is invalid: ${joined}`, details));
}

/** A JSON-patch that cannot be applied: 422 with the generic message and the cause. */
export function patchApplyFailed(message: string): ApiError {
  return new ApiError(
    status(422, 'Invalid', 'the server rejected our request due to an error in our request', {
      causes: [{ reason: 'UnexpectedServerResponse', message }],
    }),
  );
}

/**
 * 422 for a patch whose result does not decode into the kind's Go type: the patch handler's Invalid with no kind and
 * no name (` "" is invalid: patch: Invalid value: "<value>": <decode error>`, which kubectl prints as `The request is
 * invalid: patch: …`). `value` is the patched object's JSON (JSON and merge patch) or the patch as Go's %+v prints it
 * (strategic merge patch).
 */
export function patchNotDecodable(value: string, why: string): ApiError {
  const e = fieldInvalid('patch', value, why);
  return new ApiError(
    status(422, 'Invalid', ` "" is invalid: ${e.field}: ${e.detail}`, {
      causes: [{ reason: e.reason, message: e.detail, field: e.field }],
    }),
  );
}

export function tooManyRequests(retryAfterSeconds = 1): ApiError {
  return new ApiError(
    status(429, 'TooManyRequests', 'Too many requests, please try again later.', { retryAfterSeconds }),
    { 'Retry-After': String(retryAfterSeconds) },
  );
}

export function successStatus(details: StatusDetails): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details };
}
