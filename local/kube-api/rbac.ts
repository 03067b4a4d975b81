/**
 * Authorization as kube-apiserver does it with `--authorization-mode=RBAC` (plus the `system:masters` short cut):
 * request attributes from the URL and method (RequestInfoFactory), the RBAC rules of the ClusterRoleBindings and the
 * RoleBindings of the request's namespace, the Forbidden Status with the real message, the rules a user has
 * (SelfSubjectRulesReview), the default roles and bindings a cluster bootstraps, ClusterRole aggregation, and the
 * validation the API server applies to RBAC objects. local/kube-api/README.md lists what is not implemented.
 */
import type { IncomingMessage } from 'node:http';
import { type Authenticator, impersonationOf, MASTERS, type UserInfo } from './auth.js';
import { ApiError, type FieldError, fieldInvalid, fieldRequired, status } from './errors.js';
import { clone, deepEqual, isObject, type JsonObject, type JsonValue, meta } from './json.js';
import type { KindHooks, Objects } from './objects.js';
import type { ResourceDef } from './registry.js';
import { type LabelRequirement, matchesLabels } from './selectors.js';
import type { Store } from './store.js';

export const RBAC_GROUP = 'rbac.authorization.k8s.io';
const KEY = {
  clusterRoles: `${RBAC_GROUP}/clusterroles`,
  clusterRoleBindings: `${RBAC_GROUP}/clusterrolebindings`,
  roles: `${RBAC_GROUP}/roles`,
  roleBindings: `${RBAC_GROUP}/rolebindings`,
};

/** authorizer.Attributes: what a request does, as the authorizer and the admission chain see it. */
export interface Attributes {
  user: UserInfo;
  verb: string;
  resourceRequest: boolean;
  /** The URL path (non-resource requests). */
  path: string;
  group: string;
  version: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
}

function parseBool(v: string): boolean {
  return ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(v);
}

/** The name a list or watch is limited to by `fieldSelector=metadata.name=<name>` (RequiresExactMatch). */
function selectedName(fieldSelector: string | null): string {
  if (!fieldSelector) return '';
  for (const term of fieldSelector.split(',')) {
    const m = /^\s*metadata\.name\s*==?\s*(.*?)\s*$/.exec(term);
    const name = m?.[1] ?? '';
    if (m && name !== '' && name !== '.' && name !== '..' && !/[/%]/.test(name)) return name;
  }
  return '';
}

/** /api/<version>/… or /apis/<group>/<version>/…: the group, the version and the rest, decoded; else undefined. */
function apiPath(path: string): { group: string; version: string; rest: string[] } | undefined {
  const parts = path.split('/').filter((p) => p !== '');
  if (parts.length < 3 || (parts[0] !== 'api' && parts[0] !== 'apis')) return undefined;
  if (parts[0] === 'apis' && parts.length < 4) return undefined;
  const [group, version, ...rest] = parts[0] === 'apis' ? parts.slice(1) : ['', ...parts.slice(1)];
  return { group: group as string, version: version as string, rest: rest.map((p) => decodeURIComponent(p)) };
}

/** RequestInfoFactory.NewRequestInfo for the paths this server serves (no /proxy, no /watch/ prefix). */
export function requestAttributes(method: string, url: URL, user: UserInfo): Attributes {
  const path = url.pathname;
  const nonResource: Attributes = {
    user,
    verb: method.toLowerCase(),
    resourceRequest: false,
    path,
    group: '',
    version: '',
    resource: '',
    subresource: '',
    namespace: '',
    name: '',
  };
  const api = apiPath(path);
  if (!api) return nonResource;
  const { group, version } = api;
  let parts = api.rest;
  const verbs: Record<string, string> = {
    POST: 'create',
    GET: 'get',
    HEAD: 'get',
    PUT: 'update',
    PATCH: 'patch',
    DELETE: 'delete',
  };
  let verb = verbs[method.toUpperCase()] ?? '';
  let namespace = '';
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1] as string;
    if (parts.length > 2 && parts[2] !== 'status' && parts[2] !== 'finalize') parts = parts.slice(2);
  }
  const [resource = '', name0 = '', subresource = ''] = parts;
  let name = name0;
  if (name === '' && verb === 'get') {
    verb = parseBool(url.searchParams.get('watch') ?? '') ? 'watch' : 'list';
    name = selectedName(url.searchParams.get('fieldSelector'));
  }
  if (name === '' && verb === 'delete') verb = 'deletecollection';
  return {
    ...nonResource,
    verb,
    resourceRequest: true,
    group,
    version,
    resource,
    subresource,
    namespace,
    name,
  };
}

// ---------------------------------------------------------------------------------------------- rules

export interface PolicyRule {
  verbs: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

const strings = (v: JsonValue | undefined): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];

function rulesOf(role: JsonObject): PolicyRule[] {
  return (Array.isArray(role.rules) ? role.rules : []).filter(isObject).map((r) => {
    const rule: PolicyRule = { verbs: strings(r.verbs) };
    if (r.apiGroups !== undefined) rule.apiGroups = strings(r.apiGroups);
    if (r.resources !== undefined) rule.resources = strings(r.resources);
    if (r.resourceNames !== undefined) rule.resourceNames = strings(r.resourceNames);
    if (r.nonResourceURLs !== undefined) rule.nonResourceURLs = strings(r.nonResourceURLs);
    return rule;
  });
}

function resourceMatches(rule: PolicyRule, combined: string, subresource: string): boolean {
  return (rule.resources ?? []).some(
    (r) =>
      r === '*' ||
      r === combined ||
      (subresource !== '' && r.length === subresource.length + 2 && r === `*/${subresource}`),
  );
}

function nonResourceMatches(rule: PolicyRule, path: string): boolean {
  return (rule.nonResourceURLs ?? []).some(
    (u) => u === '*' || u === path || (u.endsWith('*') && path.startsWith(u.replace(/\*+$/, ''))),
  );
}

/** rbac.RuleAllows. */
export function ruleAllows(a: Attributes, rule: PolicyRule): boolean {
  const verbOk = rule.verbs.includes('*') || rule.verbs.includes(a.verb);
  if (!verbOk) return false;
  if (!a.resourceRequest) return nonResourceMatches(rule, a.path);
  const combined = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const names = rule.resourceNames ?? [];
  return (
    ((rule.apiGroups ?? []).includes('*') || (rule.apiGroups ?? []).includes(a.group)) &&
    resourceMatches(rule, combined, a.subresource) &&
    (names.length === 0 || names.includes(a.name))
  );
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

function subjectsOf(binding: JsonObject): Subject[] {
  return (Array.isArray(binding.subjects) ? binding.subjects : []).filter(isObject).map((s) => ({
    kind: String(s.kind ?? ''),
    name: String(s.name ?? ''),
    ...(typeof s.namespace === 'string' && s.namespace !== '' && { namespace: s.namespace }),
  }));
}

function appliesTo(user: UserInfo, s: Subject, bindingNamespace: string): boolean {
  switch (s.kind) {
    case 'User':
      return user.username === s.name;
    case 'Group':
      return user.groups.includes(s.name);
    case 'ServiceAccount': {
      const ns = s.namespace ?? bindingNamespace;
      return ns !== '' && user.username === `system:serviceaccount:${ns}:${s.name}`;
    }
    default:
      return false;
  }
}

function describeSubject(s: Subject, bindingNamespace: string): string {
  if (s.kind === 'ServiceAccount') return `${s.kind} "${s.name}/${s.namespace ?? bindingNamespace}"`;
  return `${s.kind} "${s.name}"`;
}

interface RoleRef {
  kind: string;
  name: string;
}

function roleRefOf(binding: JsonObject): RoleRef {
  const r = isObject(binding.roleRef) ? binding.roleRef : {};
  return { kind: String(r.kind ?? ''), name: String(r.name ?? '') };
}

export interface Decision {
  allowed: boolean;
  /** `RBAC: allowed by …` when allowed; `RBAC: <errors>` or '' when not. */
  reason: string;
}

type Visitor = (source: string | undefined, rule: PolicyRule | undefined, err: string | undefined) => boolean;

/** One step of a visit: a rule and the binding it came through, or the error of a binding whose role is missing. */
type Visited =
  | { source: string; rule: PolicyRule; err?: undefined }
  | { source?: undefined; rule?: undefined; err: string };

/** How many (user, namespace) visits are kept before the cache starts again (impersonation can name any user). */
const VISITS_KEPT = 1000;

export class Rbac {
  /**
   * The steps of a visit by user and namespace, valid while no Role, ClusterRole or binding changes: every request
   * is authorized, and finding a user's rules means reading every ClusterRoleBinding and the namespace's
   * RoleBindings and their roles. Any write of those four resources (the store's generations) empties it, so a
   * change takes effect on the next request, as on a real API server (ADR 0128).
   */
  private readonly visits = new Map<string, readonly Visited[]>();
  private visitsGeneration = -1;

  constructor(private readonly store: Store) {}

  private byName(key: string, namespace?: string): JsonObject[] {
    return this.store.list(key, namespace);
  }

  private roleRules(ref: RoleRef, namespace: string): { rules?: PolicyRule[]; err?: string } {
    if (ref.kind === 'ClusterRole') {
      const role = this.store.get(KEY.clusterRoles, undefined, ref.name);
      return role ? { rules: rulesOf(role) } : { err: `clusterrole.${RBAC_GROUP} "${ref.name}" not found` };
    }
    if (ref.kind === 'Role') {
      const role = this.store.get(KEY.roles, namespace, ref.name);
      return role ? { rules: rulesOf(role) } : { err: `role.${RBAC_GROUP} "${ref.name}" not found` };
    }
    return { err: `unsupported role reference kind: "${ref.kind}"` };
  }

  /** DefaultRuleResolver.VisitRulesFor: ClusterRoleBindings, then the RoleBindings of `namespace`. */
  private visit(user: UserInfo, namespace: string, visitor: Visitor): void {
    for (const v of this.visited(user, namespace)) if (!visitor(v.source, v.rule, v.err)) return;
  }

  private visited(user: UserInfo, namespace: string): readonly Visited[] {
    const generation = Object.values(KEY).reduce((n, k) => n + this.store.generation(k), 0);
    if (generation !== this.visitsGeneration) {
      this.visits.clear();
      this.visitsGeneration = generation;
    }
    const key = JSON.stringify([namespace, user.username, user.groups]);
    let steps = this.visits.get(key);
    if (!steps) {
      steps = this.collect(user, namespace);
      if (this.visits.size >= VISITS_KEPT) this.visits.clear();
      this.visits.set(key, steps);
    }
    return steps;
  }

  private collect(user: UserInfo, namespace: string): Visited[] {
    const sources: { binding: JsonObject; kind: string; ns: string }[] = [
      ...this.byName(KEY.clusterRoleBindings).map((b) => ({
        binding: b,
        kind: 'ClusterRoleBinding',
        ns: '',
      })),
      ...(namespace === ''
        ? []
        : this.byName(KEY.roleBindings, namespace).map((b) => ({
            binding: b,
            kind: 'RoleBinding',
            ns: namespace,
          }))),
    ];
    const steps: Visited[] = [];
    for (const { binding, kind, ns } of sources) steps.push(...this.bindingSteps(user, binding, kind, ns));
    return steps;
  }

  /** One binding's rules, when it applies to `user`, or the error of its missing role. */
  private bindingSteps(user: UserInfo, binding: JsonObject, kind: string, ns: string): Visited[] {
    const subject = subjectsOf(binding).find((s) => appliesTo(user, s, ns));
    if (!subject) return [];
    const ref = roleRefOf(binding);
    const { rules, err } = this.roleRules(ref, ns);
    if (err !== undefined) return [{ err }];
    const name = String(meta(binding).name);
    const source = `${kind} "${kind === 'RoleBinding' ? `${name}/${ns}` : name}" of ${ref.kind} "${ref.name}" to ${describeSubject(subject, ns)}`;
    return (rules ?? []).map((rule) => ({ source, rule }));
  }

  authorize(a: Attributes): Decision {
    // The privileged-group authorizer runs before RBAC: system:masters may do anything.
    if (a.user.groups.includes(MASTERS)) return { allowed: true, reason: '' };
    let reason = '';
    const errors: string[] = [];
    let allowed = false;
    this.visit(a.user, a.namespace, (source, rule, err) => {
      if (rule && ruleAllows(a, rule)) {
        allowed = true;
        reason = `RBAC: allowed by ${source}`;
        return false;
      }
      if (err) errors.push(err);
      return true;
    });
    if (allowed) return { allowed, reason };
    return { allowed: false, reason: errors.length === 0 ? '' : `RBAC: ${aggregate(errors)}` };
  }

  /** What SelfSubjectRulesReview answers for `user` in `namespace`. */
  rulesFor(user: UserInfo, namespace: string): JsonObject {
    if (user.groups.includes(MASTERS)) {
      return {
        resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }],
        nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
        incomplete: false,
      };
    }
    const resourceRules: JsonObject[] = [];
    const nonResourceRules: JsonObject[] = [];
    const errors: string[] = [];
    this.visit(user, namespace, (_source, rule, err) => {
      if (err) errors.push(err);
      if (!rule) return true;
      if (rule.resources && rule.resources.length > 0) {
        // Copies: the rules are the cached visit's.
        const r: JsonObject = {
          verbs: [...rule.verbs],
          apiGroups: [...(rule.apiGroups ?? [])],
          resources: [...rule.resources],
        };
        if (rule.resourceNames && rule.resourceNames.length > 0) r.resourceNames = [...rule.resourceNames];
        resourceRules.push(r);
      }
      if (rule.nonResourceURLs && rule.nonResourceURLs.length > 0)
        nonResourceRules.push({ verbs: [...rule.verbs], nonResourceURLs: [...rule.nonResourceURLs] });
      return true;
    });
    const out: JsonObject = { resourceRules, nonResourceRules, incomplete: errors.length > 0 };
    if (errors.length > 0) out.evaluationError = aggregate(errors);
    return out;
  }
}

/** utilerrors.NewAggregate(...).Error(). */
function aggregate(errors: readonly string[]): string {
  const unique = [...new Set(errors)];
  return unique.length === 1 ? (unique[0] as string) : `[${unique.join(', ')}]`;
}

/** responsewriters.forbiddenMessage. */
export function forbiddenMessage(a: Attributes): string {
  if (!a.resourceRequest) return `User "${a.user.username}" cannot ${a.verb} path "${a.path}"`;
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const where = a.namespace ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
  return `User "${a.user.username}" cannot ${a.verb} resource "${resource}" in API group "${a.group}" ${where}`;
}

/** apierrors.NewForbidden(groupResource, name, err), as every 403 of the API server is made. */
export function forbiddenFor(
  target: { group: string; resource: string; name: string },
  message: string,
): ApiError {
  const gr =
    target.resource === '' ? '' : target.group ? `${target.resource}.${target.group}` : target.resource;
  const text =
    gr === ''
      ? `forbidden: ${message}`
      : target.name
        ? `${gr} "${target.name}" is forbidden: ${message}`
        : `${gr} is forbidden: ${message}`;
  const details: Record<string, string> = {};
  if (target.name) details.name = target.name;
  if (target.group) details.group = target.group;
  if (target.resource) details.kind = target.resource;
  return new ApiError(status(403, 'Forbidden', text, details));
}

/** responsewriters.Forbidden: the 403 a request the authorizer did not allow gets. */
export function forbidden(a: Attributes, reason: string): ApiError {
  const msg = forbiddenMessage(a);
  return forbiddenFor(a, reason ? `${msg}: ${reason}` : msg);
}

// ---------------------------------------------------------------------------------------------- defaults

const BOOTSTRAP_META = {
  labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' },
  annotations: { 'rbac.authorization.kubernetes.io/autoupdate': 'true' },
};

function clusterRole(name: string, rules: JsonObject[]): JsonObject {
  return {
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: 'ClusterRole',
    metadata: { name, ...BOOTSTRAP_META },
    rules,
  };
}

function clusterBinding(name: string, groups: string[]): JsonObject {
  return {
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: 'ClusterRoleBinding',
    metadata: { name, ...BOOTSTRAP_META },
    roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name },
    subjects: groups.map((g) => ({ apiGroup: RBAC_GROUP, kind: 'Group', name: g })),
  };
}

const PUBLIC_INFO = ['/livez', '/readyz', '/healthz', '/version', '/version/'];

/**
 * The default ClusterRoles and ClusterRoleBindings kube-apiserver's RBAC post-start hook creates (bootstrappolicy)
 * that matter here: cluster-admin for system:masters, discovery and self-review for every authenticated user, and the
 * health and version endpoints for everyone.
 */
export const BOOTSTRAP_CLUSTER_ROLES: readonly JsonObject[] = [
  clusterRole('cluster-admin', [
    { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
    { nonResourceURLs: ['*'], verbs: ['*'] },
  ]),
  clusterRole('system:discovery', [
    {
      nonResourceURLs: [...PUBLIC_INFO, '/openapi', '/openapi/*', '/api', '/api/*', '/apis', '/apis/*'],
      verbs: ['get'],
    },
  ]),
  clusterRole('system:basic-user', [
    {
      apiGroups: ['authorization.k8s.io'],
      resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
      verbs: ['create'],
    },
    { apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'], verbs: ['create'] },
  ]),
  clusterRole('system:public-info-viewer', [{ nonResourceURLs: PUBLIC_INFO, verbs: ['get'] }]),
];

export const BOOTSTRAP_CLUSTER_ROLE_BINDINGS: readonly JsonObject[] = [
  clusterBinding('cluster-admin', [MASTERS]),
  clusterBinding('system:discovery', ['system:authenticated']),
  clusterBinding('system:basic-user', ['system:authenticated']),
  clusterBinding('system:public-info-viewer', ['system:authenticated', 'system:unauthenticated']),
];

// ---------------------------------------------------------------------------------------------- aggregation

/** metav1.LabelSelector (matchLabels, matchExpressions) → a predicate on labels. */
export function labelSelectorMatcher(
  sel: JsonValue | undefined,
): (labels: Record<string, string>) => boolean {
  if (!isObject(sel)) return () => false;
  const reqs: LabelRequirement[] = [];
  if (isObject(sel.matchLabels))
    for (const [key, v] of Object.entries(sel.matchLabels)) reqs.push({ key, op: 'eq', values: [String(v)] });
  const ops: Record<string, LabelRequirement['op']> = {
    In: 'in',
    NotIn: 'notin',
    Exists: 'exists',
    DoesNotExist: '!exists',
  };
  for (const e of Array.isArray(sel.matchExpressions) ? sel.matchExpressions.filter(isObject) : []) {
    const op = ops[String(e.operator ?? '')];
    if (!op) return () => false;
    reqs.push({ key: String(e.key ?? ''), op, values: strings(e.values) });
  }
  return (labels) => matchesLabels(reqs, labels);
}

/**
 * The clusterrole-aggregation controller: an aggregated ClusterRole's rules are the rules of every ClusterRole its
 * aggregationRule selects (sorted by name, duplicates dropped), rewritten whenever one of them changes.
 */
export function aggregateClusterRoles(objects: Objects, def: ResourceDef): void {
  const roles = objects.store.list(KEY.clusterRoles);
  const byName = [...roles].sort((a, b) => String(meta(a).name).localeCompare(String(meta(b).name)));
  for (const role of roles) {
    if (!isObject(role.aggregationRule)) continue;
    const rules = aggregatedRules(role, role.aggregationRule, byName);
    if (deepEqual(role.rules ?? [], rules)) continue;
    const next = clone(role);
    next.rules = rules;
    const m = meta(next);
    m.resourceVersion = meta(role).resourceVersion ?? '';
    objects.writeInternal(def, next);
  }
}

/** The rules of the other ClusterRoles (by name) that `aggregation` selects, each once. */
function aggregatedRules(role: JsonObject, aggregation: JsonObject, byName: JsonObject[]): JsonValue[] {
  const selectors = (
    Array.isArray(aggregation.clusterRoleSelectors) ? aggregation.clusterRoleSelectors : []
  ).map((s) => labelSelectorMatcher(s));
  const selected = byName.filter((other) => {
    const labels = (isObject(meta(other).labels) ? meta(other).labels : {}) as Record<string, string>;
    return meta(other).name !== meta(role).name && selectors.some((m) => m(labels));
  });
  const rules: JsonValue[] = [];
  for (const r of selected.flatMap((other) => (Array.isArray(other.rules) ? other.rules : [])))
    if (!rules.some((x) => deepEqual(x, r))) rules.push(clone(r));
  return rules;
}

// ---------------------------------------------------------------------------------------------- validation

function ruleErrors(rules: JsonValue | undefined, namespaced: boolean): FieldError[] {
  return (Array.isArray(rules) ? rules : []).flatMap((r, i) =>
    oneRuleErrors(isObject(r) ? r : {}, `rules[${i}]`, namespaced),
  );
}

function nonResourceRuleErrors(
  rule: JsonObject,
  urls: string[],
  at: string,
  namespaced: boolean,
): FieldError[] {
  const errors: FieldError[] = [];
  if (namespaced)
    errors.push(
      fieldInvalid(`${at}.nonResourceURLs`, urls, 'namespaced rules cannot apply to non-resource URLs'),
    );
  if (strings(rule.apiGroups).length > 0 || strings(rule.resources).length > 0)
    errors.push(
      fieldInvalid(
        `${at}.nonResourceURLs`,
        urls,
        'rules cannot apply to both regular resources and non-resource URLs',
      ),
    );
  return errors;
}

function oneRuleErrors(rule: JsonObject, at: string, namespaced: boolean): FieldError[] {
  const errors: FieldError[] = [];
  if (strings(rule.verbs).length === 0)
    errors.push(fieldRequired(`${at}.verbs`, 'verbs must contain at least one value'));
  const urls = strings(rule.nonResourceURLs);
  if (urls.length > 0) return [...errors, ...nonResourceRuleErrors(rule, urls, at, namespaced)];
  if (strings(rule.apiGroups).length === 0)
    errors.push(fieldRequired(`${at}.apiGroups`, 'resource rules must supply at least one api group'));
  if (strings(rule.resources).length === 0)
    errors.push(fieldRequired(`${at}.resources`, 'resource rules must supply at least one resource'));
  return errors;
}

function bindingErrors(binding: JsonObject, cluster: boolean): FieldError[] {
  const errors: FieldError[] = [];
  const ref = isObject(binding.roleRef) ? binding.roleRef : undefined;
  if (!ref) return [fieldRequired('roleRef', '')];
  const kinds = cluster ? ['ClusterRole'] : ['Role', 'ClusterRole'];
  if (!kinds.includes(String(ref.kind ?? '')))
    errors.push({
      reason: 'FieldValueNotSupported',
      field: 'roleRef.kind',
      detail: `Unsupported value: ${JSON.stringify(String(ref.kind ?? ''))}: supported values: ${kinds.map((k) => JSON.stringify(k)).join(', ')}`,
    });
  if (ref.apiGroup !== RBAC_GROUP)
    errors.push({
      reason: 'FieldValueNotSupported',
      field: 'roleRef.apiGroup',
      detail: `Unsupported value: ${JSON.stringify(String(ref.apiGroup ?? ''))}: supported values: "${RBAC_GROUP}"`,
    });
  if (typeof ref.name !== 'string' || ref.name === '') errors.push(fieldRequired('roleRef.name', ''));
  (Array.isArray(binding.subjects) ? binding.subjects : []).forEach((s, i) => {
    const subject = isObject(s) ? s : {};
    const at = `subjects[${i}]`;
    if (typeof subject.name !== 'string' || subject.name === '') errors.push(fieldRequired(`${at}.name`, ''));
    if (!['User', 'Group', 'ServiceAccount'].includes(String(subject.kind ?? '')))
      errors.push({
        reason: 'FieldValueNotSupported',
        field: `${at}.kind`,
        detail: `Unsupported value: ${JSON.stringify(String(subject.kind ?? ''))}: supported values: "ServiceAccount", "User", "Group"`,
      });
    if (cluster && subject.kind === 'ServiceAccount' && !subject.namespace)
      errors.push(fieldRequired(`${at}.namespace`, ''));
  });
  for (const e of errors) e.detail = e.detail.replace(/: $/, '');
  return errors;
}

/** The object rules of the four RBAC kinds: rules validated, roleRef required and immutable. */
export function rbacHooks(kind: 'Role' | 'ClusterRole' | 'RoleBinding' | 'ClusterRoleBinding'): KindHooks {
  if (kind === 'Role' || kind === 'ClusterRole') {
    const check = (o: JsonObject) => ruleErrors(o.rules, kind === 'Role');
    return { prepareCreate: check, validateUpdate: check };
  }
  const cluster = kind === 'ClusterRoleBinding';
  return {
    prepareCreate: (o) => bindingErrors(o, cluster),
    validateUpdate: (o, old) => {
      const errors = bindingErrors(o, cluster);
      if (!deepEqual(o.roleRef, old.roleRef))
        errors.push(fieldInvalid('roleRef', o.roleRef ?? null, 'cannot change roleRef'));
      return errors;
    },
  };
}

// ---------------------------------------------------------------------------------------------- identity

/**
 * The user a request acts as: authenticated, then impersonated when it asks to (WithImpersonation), each
 * impersonation checked with the verb `impersonate`. Throws 401, or 403 with the impersonate attributes.
 */
export function identify(req: IncomingMessage, authn: Authenticator, rbac: Rbac): UserInfo {
  const requestor = authn.authenticate(req);
  const asked = impersonationOf(req);
  if (!asked) return requestor;
  for (const c of asked.checks) {
    const a: Attributes = {
      user: requestor,
      verb: 'impersonate',
      resourceRequest: true,
      path: '',
      group: c.group,
      version: 'v1',
      resource: c.resource,
      subresource: c.subresource ?? '',
      namespace: c.namespace ?? '',
      name: c.name,
    };
    const d = rbac.authorize(a);
    if (!d.allowed) throw forbidden(a, d.reason);
  }
  return asked.user;
}

// ---------------------------------------------------------------------------------------------- reviews

function reviewInvalid(kind: string, group: string, field: string, detail: string): ApiError {
  return new ApiError(
    status(422, 'Invalid', `${kind}.${group} "" is invalid: ${field}: ${detail}`, {
      group,
      kind,
      causes: [{ reason: 'FieldValueInvalid', message: detail, field }],
    }),
  );
}

function attributesOfSpec(kind: string, spec: JsonObject, user: UserInfo): Attributes {
  const ra = isObject(spec.resourceAttributes) ? spec.resourceAttributes : undefined;
  const na = isObject(spec.nonResourceAttributes) ? spec.nonResourceAttributes : undefined;
  if ((ra === undefined) === (na === undefined))
    throw reviewInvalid(
      kind,
      'authorization.k8s.io',
      'spec.resourceAttributes',
      `Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified`,
    );
  const s = (o: JsonObject, k: string) => (typeof o[k] === 'string' ? (o[k] as string) : '');
  if (na)
    return {
      user,
      verb: s(na, 'verb'),
      resourceRequest: false,
      path: s(na, 'path'),
      group: '',
      version: '',
      resource: '',
      subresource: '',
      namespace: '',
      name: '',
    };
  const r = ra as JsonObject;
  return {
    user,
    verb: s(r, 'verb'),
    resourceRequest: true,
    path: '',
    group: s(r, 'group'),
    version: s(r, 'version'),
    resource: s(r, 'resource'),
    subresource: s(r, 'subresource'),
    namespace: s(r, 'namespace'),
    name: s(r, 'name'),
  };
}

function reviewed(body: JsonObject, statusValue: JsonObject): JsonObject {
  const { status: _s, ...rest } = body;
  const m = isObject(rest.metadata) ? rest.metadata : {};
  return { ...rest, metadata: { ...m, creationTimestamp: null }, status: statusValue };
}

/**
 * The answer to a create on a review resource: SelfSubjectAccessReview (`kubectl auth can-i`),
 * SelfSubjectRulesReview (`kubectl auth can-i --list`), SubjectAccessReview, SelfSubjectReview (`kubectl auth
 * whoami`).
 */
export function answerReview(def: ResourceDef, body: JsonObject, user: UserInfo, rbac: Rbac): JsonObject {
  const spec = isObject(body.spec) ? body.spec : {};
  switch (def.kind) {
    case 'SelfSubjectAccessReview':
    case 'SubjectAccessReview': {
      const subject =
        def.kind === 'SelfSubjectAccessReview'
          ? user
          : {
              username: typeof spec.user === 'string' ? spec.user : '',
              groups: strings(spec.groups),
              ...(typeof spec.uid === 'string' && { uid: spec.uid }),
            };
      const d = rbac.authorize(attributesOfSpec(def.kind, spec, subject));
      return reviewed(body, { allowed: d.allowed, ...(d.reason && { reason: d.reason }) });
    }
    case 'SelfSubjectRulesReview':
      return reviewed(body, rbac.rulesFor(user, typeof spec.namespace === 'string' ? spec.namespace : ''));
    case 'SelfSubjectReview': {
      const info: JsonObject = { username: user.username };
      if (user.uid) info.uid = user.uid;
      info.groups = user.groups;
      if (user.extra) info.extra = user.extra;
      return reviewed(body, { userInfo: info });
    }
    default:
      throw new ApiError(
        status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'),
      );
  }
}
