/**
 * A small RBAC evaluator for our own manifests: which (verb, group, resource[/subresource], namespace, name)
 * requests the Roles and ClusterRoles in a YAML file allow, and the request attributes of an HTTP request as the
 * API server derives them (the subset of paths the product uses).
 */
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

export interface Attributes {
  verb: string;
  group: string;
  resource: string;
  namespace?: string;
  name?: string;
}

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

interface Grant {
  namespace?: string;
  rules: Rule[];
}

export function loadGrants(file: string): Grant[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => d.toJS() as { kind: string; metadata: { namespace?: string }; rules?: Rule[] })
    .filter((d) => d.kind === 'Role' || d.kind === 'ClusterRole')
    .map((d) => ({ ...(d.kind === 'Role' && { namespace: d.metadata.namespace }), rules: d.rules ?? [] }));
}

export function allowed(grants: Grant[], a: Attributes): boolean {
  return grants.some(
    (g) =>
      (g.namespace === undefined || g.namespace === a.namespace) &&
      g.rules.some(
        (r) =>
          r.apiGroups.includes(a.group) &&
          r.resources.includes(a.resource) &&
          r.verbs.includes(a.verb) &&
          (!r.resourceNames || (a.name !== undefined && r.resourceNames.includes(a.name))),
      ),
  );
}

/** Request attributes of `METHOD path?query` (core and named groups; namespaced or cluster-scoped). */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
export function attributesOf(method: string, path: string, query: string): Attributes {
  const parts = path.split('/').filter(Boolean);
  let group: string;
  let rest: string[];
  if (parts[0] === 'api') {
    group = '';
    rest = parts.slice(2);
  } else {
    group = parts[1] ?? '';
    rest = parts.slice(3);
  }
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length > 2) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource = '', name, sub] = rest;
  const collection = name === undefined;
  const watch = new URLSearchParams(query).get('watch') === 'true';
  const verb =
    method === 'GET'
      ? collection
        ? watch
          ? 'watch'
          : 'list'
        : 'get'
      : method === 'POST'
        ? 'create'
        : method === 'PUT'
          ? 'update'
          : method === 'PATCH'
            ? 'patch'
            : method === 'DELETE'
              ? 'delete'
              : method.toLowerCase();
  return {
    verb,
    group,
    resource: sub ? `${resource}/${sub}` : resource,
    ...(namespace && { namespace }),
    ...(name && { name }),
  };
}
