/**
 * ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io/v1), evaluated as
 * kube-apiserver's validating dispatcher does: matchConstraints (resourceRules and excludeResourceRules with
 * operations including CONNECT, scope, resourceNames, namespaceSelector, objectSelector), the binding's
 * matchResources, matchConditions, variables, validations with message and messageExpression, failurePolicy, and
 * the binding's validationActions (Deny, Warn, Audit). CEL runs on @bufbuild/cel (a CEL implementation tested against
 * the cel-spec conformance suite), with its strings extension. local/kube-api/README.md says what is not here.
 */
import { type CelEnv, celEnv, isCelError, parse, plan } from '@bufbuild/cel';
import { strings } from '@bufbuild/cel/ext';
import { RE2JS } from '@bufbuild/re2';
import type { UserInfo } from './auth.js';
import { ApiError, type FieldError, fieldInvalid, fieldRequired, status } from './errors.js';
import { isObject, type JsonObject, type JsonValue, labelsOf, meta } from './json.js';
import type { KindHooks } from './objects.js';
import { labelSelectorMatcher } from './rbac.js';
import type { Store } from './store.js';

export const ADMISSION_GROUP = 'admissionregistration.k8s.io';
const POLICIES = `${ADMISSION_GROUP}/validatingadmissionpolicies`;
const BINDINGS = `${ADMISSION_GROUP}/validatingadmissionpolicybindings`;

export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

/** admission.Attributes: one request as the admission chain sees it. */
export interface AdmissionRequest {
  operation: Operation;
  group: string;
  version: string;
  /** Plural resource, without the subresource. */
  resource: string;
  subresource: string;
  kind: { group: string; version: string; kind: string };
  namespace: string;
  name: string;
  /** The object after the write (PodExecOptions for CONNECT); null for DELETE. */
  object: JsonObject | null;
  /** The stored object before an UPDATE or DELETE; null otherwise. */
  oldObject: JsonObject | null;
  /** The operation's options (CreateOptions, UpdateOptions, DeleteOptions), when there are any. */
  options?: JsonObject;
  user: UserInfo;
  dryRun: boolean;
}

/** What admission adds to a request it lets through. */
export interface AdmissionOutcome {
  warnings: string[];
  /** Audit annotations (validation.policy.admission.k8s.io/validation_failure), by key. */
  audit: Record<string, string>;
}

// ---------------------------------------------------------------------------------------------- CEL

/**
 * CEL's `matches` with the same RE2 engine, its compiled patterns kept: the library compiles the pattern on every
 * call, which was half the cost of admitting an exec under infra/rbac/exec-policy.yaml (a `matches` per argv word).
 * Patterns come from policies, so they are few; the map is emptied should they not be.
 */
const regexes = new Map<string, RE2JS>();
const re2 = {
  compile(pattern: string): RE2JS {
    let r = regexes.get(pattern);
    if (!r) {
      r = RE2JS.compile(pattern);
      if (regexes.size >= 256) regexes.clear();
      regexes.set(pattern, r);
    }
    return r;
  },
};

const env: CelEnv = celEnv({ funcs: strings, re2 });

type Program = (vars: Record<string, unknown>) => unknown;

interface Compiled {
  source: string;
  program?: Program;
  error?: string;
}

const cache = new Map<string, Compiled>();

function compile(source: string): Compiled {
  const hit = cache.get(source);
  if (hit) return hit;
  let out: Compiled;
  try {
    const run = plan(env, parse(source));
    out = { source, program: (vars) => run(vars as never) };
  } catch (e) {
    out = { source, error: `ERROR: ${(e as Error).message}` };
  }
  cache.set(source, out);
  return out;
}

/** How an object reaches CEL: maps and lists as they are, integers as CEL ints, other numbers as doubles. */
function celValue(v: JsonValue | undefined): unknown {
  if (v === undefined) return null;
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(celValue);
  if (isObject(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = celValue(x);
    return out;
  }
  return v;
}

/** cel-go's wording for the errors users meet most (unstructured objects are maps: a missing field is a key). */
function celError(message: string): string {
  return message.replace(/^field not found: /, 'no such key: ');
}

type Result = { value: unknown } | { error: string };

function evaluate(c: Compiled, vars: Record<string, unknown>, failedVariables: Map<string, string>): Result {
  if (c.error !== undefined) return { error: `compilation error: ${c.error}` };
  const value = (c.program as Program)(vars);
  if (!isCelError(value)) return { value };
  for (const [name, why] of failedVariables)
    if (new RegExp(`\\bvariables\\.${name}\\b`).test(c.source))
      return {
        error: `expression '${c.source}' resulted in error: composited variable "${name}" fails to evaluate: ${why}`,
      };
  return { error: `expression '${c.source}' resulted in error: ${celError(value.message)}` };
}

// ---------------------------------------------------------------------------------------------- matching

const strings_ = (v: JsonValue | undefined): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];

function ruleMatches(rule: JsonObject, r: AdmissionRequest): boolean {
  const has = (field: string, value: string) => {
    const list = strings_(rule[field]);
    return list.includes('*') || list.includes(value);
  };
  if (!has('operations', r.operation) || !has('apiGroups', r.group) || !has('apiVersions', r.version))
    return false;
  const resourceOk = strings_(rule.resources).some((res) => {
    const [name = '', sub = ''] = res.split('/');
    return (name === '*' || name === r.resource) && (sub === '*' || sub === r.subresource);
  });
  if (!resourceOk) return false;
  const names = strings_(rule.resourceNames);
  if (names.length > 0 && !names.includes(r.name)) return false;
  const scope = typeof rule.scope === 'string' ? rule.scope : '*';
  const cluster = r.namespace === '' || (r.group === '' && r.resource === 'namespaces');
  return scope === '*' || (scope === 'Cluster' ? cluster : !cluster);
}

function selectorMatches(sel: JsonValue | undefined, labels: Record<string, string>): boolean {
  if (sel === undefined || sel === null) return true;
  return labelSelectorMatcher(sel)(labels);
}

/** The resource rules of matchConstraints or matchResources: one of resourceRules (when given), none excluded. */
function resourceRulesMatch(m: JsonObject, r: AdmissionRequest): boolean {
  const rules = Array.isArray(m.resourceRules) ? m.resourceRules.filter(isObject) : [];
  if (m.resourceRules !== undefined && !rules.some((x) => ruleMatches(x, r))) return false;
  const excluded = Array.isArray(m.excludeResourceRules) ? m.excludeResourceRules.filter(isObject) : [];
  return !excluded.some((x) => ruleMatches(x, r));
}

/** namespaceSelector: a namespace's own labels, a namespaced object's namespace's; cluster-scoped ones match. */
function namespaceMatches(m: JsonObject, r: AdmissionRequest, store: Store): boolean {
  if (r.group === '' && r.resource === 'namespaces')
    return selectorMatches(m.namespaceSelector, labelsOf(r.object ?? r.oldObject ?? {}));
  if (r.namespace === '') return true;
  const ns = store.get('/namespaces', undefined, r.namespace);
  return selectorMatches(m.namespaceSelector, ns ? labelsOf(ns) : {});
}

/** objectSelector: the object or the old object matches. */
function objectMatches(m: JsonObject, r: AdmissionRequest): boolean {
  if (m.objectSelector === undefined || m.objectSelector === null) return true;
  const candidates = [r.object, r.oldObject].filter((o): o is JsonObject => o !== null);
  return candidates.some((o) => selectorMatches(m.objectSelector, labelsOf(o)));
}

/** matchConstraints of a policy, or matchResources of a binding (absent: everything). */
function resourcesMatch(m: JsonValue | undefined, r: AdmissionRequest, store: Store): boolean {
  if (!isObject(m)) return true;
  return resourceRulesMatch(m, r) && namespaceMatches(m, r, store) && objectMatches(m, r);
}

// ---------------------------------------------------------------------------------------------- dispatch

interface Decision {
  policy: string;
  binding: string;
  message: string;
  reason: string;
  index: number;
}

/** The `request` variable: admissionv1.AdmissionRequest as unstructured (empty fields left out, as Go does). */
function requestVariable(r: AdmissionRequest): JsonObject {
  const gvr = { group: r.group, version: r.version, resource: r.resource };
  const userInfo: JsonObject = {};
  if (r.user.username) userInfo.username = r.user.username;
  if (r.user.uid) userInfo.uid = r.user.uid;
  if (r.user.groups.length > 0) userInfo.groups = r.user.groups;
  if (r.user.extra && Object.keys(r.user.extra).length > 0) userInfo.extra = r.user.extra;
  const out: JsonObject = {
    uid: '',
    kind: r.kind,
    resource: gvr,
    requestKind: r.kind,
    requestResource: gvr,
    operation: r.operation,
    userInfo,
    dryRun: r.dryRun,
  };
  if (r.subresource) {
    out.subResource = r.subresource;
    out.requestSubResource = r.subresource;
  }
  if (r.name) out.name = r.name;
  if (r.namespace) out.namespace = r.namespace;
  if (r.options) out.options = r.options;
  return out;
}

function reasonCode(reason: string): number {
  return { Forbidden: 403, Unauthorized: 401, RequestEntityTooLarge: 413 }[reason] ?? 422;
}

const objects = (v: JsonValue | undefined): JsonObject[] => (Array.isArray(v) ? v.filter(isObject) : []);

/**
 * matchConditions: false when one is false (the request is not matched), the error (one, or all in brackets) when
 * none is false and some fail or are not bool, true otherwise.
 */
function conditionsOutcome(
  spec: JsonObject,
  vars: Record<string, unknown>,
  failed: Map<string, string>,
): boolean | string {
  const errors: string[] = [];
  for (const c of objects(spec.matchConditions)) {
    const res = evaluate(compile(String(c.expression ?? '')), vars, failed);
    if ('error' in res) errors.push(res.error);
    else if (res.value === false) return false;
    else if (res.value !== true) errors.push(`matchCondition ${String(c.name)} must evaluate to bool`);
  }
  if (errors.length === 0) return true;
  return errors.length === 1 ? (errors[0] as string) : `[${errors.join(', ')}]`;
}

const byName = (a: JsonObject, b: JsonObject) => String(meta(a).name).localeCompare(String(meta(b).name));

export class Admission {
  /** The policies and bindings sorted by name, as of the store's generations of the two resources. */
  private sorted: { generation: number; policies: JsonObject[]; bindings: JsonObject[] } | undefined;

  constructor(private readonly store: Store) {}

  /** Every policy and binding by name, sorted again only after one of them was written. */
  private policiesAndBindings(): { policies: JsonObject[]; bindings: JsonObject[] } {
    const generation = this.store.generation(POLICIES) + this.store.generation(BINDINGS);
    if (this.sorted?.generation !== generation)
      this.sorted = {
        generation,
        policies: this.store.list(POLICIES).sort(byName),
        bindings: this.store.list(BINDINGS).sort(byName),
      };
    return this.sorted;
  }

  /** Runs every matching policy binding; throws the first denial, returns warnings and audit annotations. */
  validate(r: AdmissionRequest): AdmissionOutcome {
    const outcome: AdmissionOutcome = { warnings: [], audit: {} };
    const denied: Decision[] = [];
    const auditFailures: JsonObject[] = [];
    for (const { policy, binding, spec, bspec } of this.matching(r)) {
      const actions = strings_(bspec.validationActions);
      for (const d of this.decide(policy, binding, spec, bspec, r)) {
        if (actions.includes('Deny')) denied.push(d);
        if (actions.includes('Warn'))
          outcome.warnings.push(
            `Validation failed for ValidatingAdmissionPolicy '${d.policy}' with binding '${d.binding}': ${d.message}`,
          );
        if (actions.includes('Audit'))
          auditFailures.push({
            message: d.message,
            policy: d.policy,
            binding: d.binding,
            expressionIndex: d.index,
            validationActions: actions,
          });
      }
    }
    if (auditFailures.length > 0)
      outcome.audit['validation.policy.admission.k8s.io/validation_failure'] = JSON.stringify(auditFailures);
    const first = denied[0];
    if (first) throw this.denial(first, r);
    return outcome;
  }

  /** The (policy, binding) pairs whose matchConstraints and matchResources match, by name. */
  private matching(
    r: AdmissionRequest,
  ): { policy: string; binding: string; spec: JsonObject; bspec: JsonObject }[] {
    const specOf = (o: JsonObject) => (isObject(o.spec) ? o.spec : {});
    const { policies, bindings } = this.policiesAndBindings();
    return policies
      .filter((p) => resourcesMatch(specOf(p).matchConstraints, r, this.store))
      .flatMap((p) =>
        bindings
          .filter(
            (b) =>
              specOf(b).policyName === meta(p).name &&
              resourcesMatch(specOf(b).matchResources, r, this.store),
          )
          .map((b) => ({
            policy: String(meta(p).name),
            binding: String(meta(b).name),
            spec: specOf(p),
            bspec: specOf(b),
          })),
      );
  }

  /** admission.NewForbidden with the policy's reason and code. */
  private denial(d: Decision, r: AdmissionRequest): ApiError {
    const message = `ValidatingAdmissionPolicy '${d.policy}' with binding '${d.binding}' denied request: ${d.message}`;
    const name = r.name || String((r.object && meta(r.object).name) ?? '');
    const gr = r.group ? `${r.resource}.${r.group}` : r.resource;
    const details: Record<string, unknown> = {};
    if (name) details.name = name;
    if (r.group) details.group = r.group;
    details.kind = r.resource;
    details.causes = [{ message }];
    const text = name ? `${gr} "${name}" is forbidden: ${message}` : `${gr} is forbidden: ${message}`;
    return new ApiError(status(reasonCode(d.reason), d.reason, text, details));
  }

  /** One binding's decisions: the failed validations (and errors, under failurePolicy Fail). */
  private decide(
    policy: string,
    binding: string,
    spec: JsonObject,
    bspec: JsonObject,
    r: AdmissionRequest,
  ): Decision[] {
    const failClosed = spec.failurePolicy !== 'Ignore';
    const error = (message: string, index = 0): Decision[] =>
      failClosed ? [{ policy, binding, message, reason: 'Invalid', index }] : [];
    if (spec.paramKind !== undefined && bspec.paramRef !== undefined)
      return error(
        'failed to configure binding: paramKind and paramRef are not supported by the local Kubernetes API',
      );
    const { vars, failed } = this.variables(spec, r);
    const conditions = conditionsOutcome(spec, vars, failed);
    if (conditions === false) return [];
    if (typeof conditions === 'string') return error(conditions);
    return objects(spec.validations).flatMap((v, index): Decision[] => {
      const expr = String(v.expression ?? '');
      const res = evaluate(compile(expr), vars, failed);
      if ('error' in res) return error(res.error, index);
      if (res.value === true) return [];
      if (res.value !== false)
        return error(`expression '${expr}' resulted in error: no such overload: expected bool`, index);
      const reason = typeof v.reason === 'string' ? v.reason : 'Invalid';
      return [{ policy, binding, message: this.message(v, vars, failed), reason, index }];
    });
  }

  /** The CEL activation: object, oldObject, request, params, namespaceObject and the policy's variables in order. */
  private variables(
    spec: JsonObject,
    r: AdmissionRequest,
  ): { vars: Record<string, unknown>; failed: Map<string, string> } {
    const nsObject = r.namespace ? this.store.get('/namespaces', undefined, r.namespace) : undefined;
    const variables: Record<string, unknown> = {};
    const vars: Record<string, unknown> = {
      object: celValue(r.object ?? undefined),
      oldObject: celValue(r.oldObject ?? undefined),
      request: celValue(requestVariable(r)),
      params: null,
      namespaceObject: nsObject ? celValue(nsObject) : null,
      variables,
    };
    const failed = new Map<string, string>();
    for (const v of objects(spec.variables)) {
      const res = evaluate(compile(String(v.expression ?? '')), vars, failed);
      if ('value' in res) variables[String(v.name)] = res.value;
      else failed.set(String(v.name), res.error.replace(/^expression '.*' resulted in error: /s, ''));
    }
    return { vars, failed };
  }

  /** messageExpression (a string without newlines), else message, else `failed expression: <expression>`. */
  private message(v: JsonObject, vars: Record<string, unknown>, failed: Map<string, string>): string {
    if (typeof v.messageExpression === 'string') {
      const res = evaluate(compile(v.messageExpression), vars, failed);
      if ('value' in res && typeof res.value === 'string') {
        const m = res.value.trim();
        if (m !== '' && !m.includes('\n') && m.length <= 5 * 1024) return m;
      }
    }
    if (typeof v.message === 'string' && v.message.trim() !== '') return v.message.trim();
    return `failed expression: ${String(v.expression ?? '').trim()}`;
  }
}

// ---------------------------------------------------------------------------------------------- validation

function compileErrors(field: string, source: JsonValue | undefined, required = true): FieldError[] {
  if (typeof source !== 'string' || source.trim() === '')
    return required ? [fieldRequired(field, 'expression is not specified')] : [];
  const c = compile(source);
  return c.error === undefined ? [] : [fieldInvalid(field, source, `compilation failed: ${c.error}`)];
}

function policyErrors(o: JsonObject): FieldError[] {
  const spec = isObject(o.spec) ? o.spec : {};
  const errors: FieldError[] = [];
  if (!isObject(spec.matchConstraints)) errors.push(fieldRequired('spec.matchConstraints', ''));
  const list = (k: string) => (Array.isArray(spec[k]) ? (spec[k] as JsonValue[]).filter(isObject) : []);
  if (list('validations').length === 0 && list('auditAnnotations').length === 0)
    errors.push(
      fieldRequired('spec.validations', 'validations or auditAnnotations must contain at least one item'),
    );
  list('validations').forEach((v, i) => {
    errors.push(...compileErrors(`spec.validations[${i}].expression`, v.expression));
    errors.push(...compileErrors(`spec.validations[${i}].messageExpression`, v.messageExpression, false));
  });
  for (const [i, c] of list('matchConditions').entries())
    errors.push(...compileErrors(`spec.matchConditions[${i}].expression`, c.expression));
  for (const [i, v] of list('variables').entries())
    errors.push(...compileErrors(`spec.variables[${i}].expression`, v.expression));
  if (spec.failurePolicy !== undefined && spec.failurePolicy !== 'Fail' && spec.failurePolicy !== 'Ignore')
    errors.push({
      reason: 'FieldValueNotSupported',
      field: 'spec.failurePolicy',
      detail: `Unsupported value: ${JSON.stringify(spec.failurePolicy)}: supported values: "Fail", "Ignore"`,
    });
  for (const e of errors) e.detail = e.detail.replace(/: $/, '');
  return errors;
}

function bindingErrors(o: JsonObject): FieldError[] {
  const spec = isObject(o.spec) ? o.spec : {};
  const errors: FieldError[] = [];
  if (typeof spec.policyName !== 'string' || spec.policyName === '')
    errors.push(fieldRequired('spec.policyName', ''));
  const actions = strings_(spec.validationActions);
  if (actions.length === 0)
    errors.push(fieldRequired('spec.validationActions', 'at least one validation action is required'));
  for (const [i, a] of actions.entries())
    if (!['Deny', 'Warn', 'Audit'].includes(a))
      errors.push({
        reason: 'FieldValueNotSupported',
        field: `spec.validationActions[${i}]`,
        detail: `Unsupported value: ${JSON.stringify(a)}: supported values: "Audit", "Deny", "Warn"`,
      });
  if (actions.includes('Deny') && actions.includes('Warn'))
    errors.push(
      fieldInvalid(
        'spec.validationActions',
        actions,
        'must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)',
      ),
    );
  for (const e of errors) e.detail = e.detail.replace(/: $/, '');
  return errors;
}

/** The object rules of the two kinds: expressions must compile, actions must be known. */
export function admissionHooks(
  kind: 'ValidatingAdmissionPolicy' | 'ValidatingAdmissionPolicyBinding',
): KindHooks {
  const check = kind === 'ValidatingAdmissionPolicy' ? policyErrors : bindingErrors;
  return { prepareCreate: check, validateUpdate: check };
}
