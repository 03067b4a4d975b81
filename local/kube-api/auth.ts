/**
 * Authentication and impersonation as kube-apiserver does them with a static token file (`--token-auth-file`) and
 * anonymous requests allowed (its default): a known bearer token is that token's user plus `system:authenticated`;
 * an unknown one is 401; no credentials (or credentials of another scheme: basic auth is gone since 1.19) are
 * `system:anonymous` in `system:unauthenticated`. Then the `Impersonate-*` headers, each checked with the verb
 * `impersonate` (users, groups, serviceaccounts; uids and userextras in authentication.k8s.io).
 * local/kube-api/README.md says what is implemented and what is not.
 */
import type { IncomingMessage } from 'node:http';
import { ApiError, status } from './errors.js';

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/** One line of a static token file: `token,user,uid,"group1,group2"`. */
export interface StaticToken {
  token: string;
  user: string;
  uid?: string;
  groups?: readonly string[];
}

export const ALL_AUTHENTICATED = 'system:authenticated';
export const ALL_UNAUTHENTICATED = 'system:unauthenticated';
export const ANONYMOUS_USER = 'system:anonymous';
export const MASTERS = 'system:masters';

/**
 * The lab's administrator: a member of `system:masters`, as kubeadm's admin.conf is. Its token is the one every
 * kubeconfig the local API writes by default carries (kubeconfigFor), so tools and tests that use the admin
 * kubeconfig are unaffected by authorization.
 */
export const ADMIN_TOKEN: StaticToken = {
  token: 'local-token',
  user: 'eip-admin',
  uid: 'eip-admin',
  groups: [MASTERS],
};

export const ANONYMOUS: UserInfo = { username: ANONYMOUS_USER, groups: [ALL_UNAUTHENTICATED] };

const SA_PREFIX = 'system:serviceaccount:';

/** `system:serviceaccount:<ns>:<name>` → {namespace, name}, as serviceaccount.SplitUsername. */
export function splitServiceAccount(username: string): { namespace: string; name: string } | undefined {
  if (!username.startsWith(SA_PREFIX)) return undefined;
  const parts = username.slice(SA_PREFIX.length).split(':');
  if (parts.length !== 2 || !parts[0] || !parts[1]) return undefined;
  return { namespace: parts[0], name: parts[1] };
}

/** The groups the API server gives a ServiceAccount's token (besides system:authenticated). */
export function serviceAccountGroups(namespace: string): string[] {
  return ['system:serviceaccounts', `system:serviceaccounts:${namespace}`];
}

/** A static token for a ServiceAccount identity: its username and groups as the token authenticator sets them. */
export function serviceAccountToken(token: string, namespace: string, name: string): StaticToken {
  return { token, user: `${SA_PREFIX}${namespace}:${name}`, groups: serviceAccountGroups(namespace) };
}

/** The WebSocket subprotocol that carries a bearer token (browsers cannot set Authorization on a WebSocket). */
const WS_BEARER_PREFIX = 'base64url.bearer.authorization.k8s.io.';

export function unauthorized(): ApiError {
  return new ApiError(status(401, 'Unauthorized', 'Unauthorized'));
}

function withAuthenticated(groups: readonly string[]): string[] {
  return groups.includes(ALL_AUTHENTICATED) ? [...groups] : [...groups, ALL_AUTHENTICATED];
}

function headerValues(req: IncomingMessage, name: string): string[] {
  const v = req.headersDistinct[name];
  return v ? v.map((s) => s.trim()) : [];
}

export class Authenticator {
  private readonly tokens = new Map<string, StaticToken>();

  constructor(tokens: readonly StaticToken[]) {
    for (const t of tokens) this.tokens.set(t.token, t);
  }

  /** Who sent the request (before impersonation). Throws 401 on a bearer token that is not known. */
  authenticate(req: IncomingMessage): UserInfo {
    const token = bearerToken(req);
    if (token === undefined) return { ...ANONYMOUS, groups: [...ANONYMOUS.groups] };
    const t = this.tokens.get(token);
    if (!t) throw unauthorized();
    return {
      username: t.user,
      ...(t.uid && { uid: t.uid }),
      groups: withAuthenticated(t.groups ?? []),
    };
  }
}

function bearerToken(req: IncomingMessage): string | undefined {
  const auth = String(req.headers.authorization ?? '').trim();
  if (auth !== '') {
    const parts = auth.split(' ');
    // Another scheme (Basic) is not a credential this server knows: the request goes on as anonymous.
    if (parts.length >= 2 && parts[0]?.toLowerCase() === 'bearer' && parts[1] !== '') return parts[1];
    return undefined;
  }
  for (const p of String(req.headers['sec-websocket-protocol'] ?? '').split(',')) {
    const proto = p.trim();
    if (!proto.startsWith(WS_BEARER_PREFIX)) continue;
    const encoded = proto.slice(WS_BEARER_PREFIX.length);
    const token = Buffer.from(encoded, 'base64url').toString('utf8');
    return token === '' ? undefined : token;
  }
  return undefined;
}

/** An `impersonate` check, in the attributes the authorizer sees. */
export interface ImpersonationCheck {
  resource: 'users' | 'groups' | 'serviceaccounts' | 'uids' | 'userextras';
  group: '' | 'authentication.k8s.io';
  name: string;
  namespace?: string;
  subresource?: string;
}

/** The Impersonate-Extra-<key> headers' values by key, each with its check added to `checks`. */
function impersonatedExtra(
  req: IncomingMessage,
  extraKeys: string[],
  checks: ImpersonationCheck[],
): Record<string, string[]> {
  const extra: Record<string, string[]> = {};
  for (const h of extraKeys) {
    const key = decodeURIComponent(h.slice('impersonate-extra-'.length));
    for (const v of headerValues(req, h)) {
      checks.push({ resource: 'userextras', group: 'authentication.k8s.io', name: v, subresource: key });
      extra[key] = [...(extra[key] ?? []), v];
    }
  }
  return extra;
}

/** The API server adds system:authenticated (or system:unauthenticated for system:anonymous) unless given. */
function withAuthenticatedGroup(username: string, groups: string[]): void {
  if (username === ANONYMOUS_USER) {
    if (!groups.includes(ALL_UNAUTHENTICATED)) groups.push(ALL_UNAUTHENTICATED);
  } else if (!groups.some((g) => g === ALL_AUTHENTICATED || g === ALL_UNAUTHENTICATED)) {
    groups.push(ALL_AUTHENTICATED);
  }
}

/**
 * The impersonation a request asks for, with the checks it needs (in the API server's order: user, groups, extra,
 * uid), or undefined without Impersonate-* headers. Throws 500 (as the API server) for groups, uid or extra
 * without a user.
 */
export function impersonationOf(
  req: IncomingMessage,
): { user: UserInfo; checks: ImpersonationCheck[] } | undefined {
  const users = headerValues(req, 'impersonate-user');
  const groups = headerValues(req, 'impersonate-group');
  const uids = headerValues(req, 'impersonate-uid');
  const extraKeys = Object.keys(req.headersDistinct).filter((h) => h.startsWith('impersonate-extra-'));
  if (users.length === 0) {
    if (groups.length > 0 || uids.length > 0 || extraKeys.length > 0)
      throw new ApiError(
        status(500, 'InternalError', 'Internal error occurred: requested impersonation without a user', {
          causes: [{ message: 'requested impersonation without a user' }],
        }),
      );
    return undefined;
  }
  const username = users[0] as string;
  const checks: ImpersonationCheck[] = [];
  const sa = splitServiceAccount(username);
  let impersonatedGroups: string[] = [];
  if (sa) {
    checks.push({ resource: 'serviceaccounts', group: '', name: sa.name, namespace: sa.namespace });
    if (groups.length === 0) impersonatedGroups = serviceAccountGroups(sa.namespace);
  } else {
    checks.push({ resource: 'users', group: '', name: username });
  }
  for (const g of groups) {
    checks.push({ resource: 'groups', group: '', name: g });
    impersonatedGroups.push(g);
  }
  const extra = impersonatedExtra(req, extraKeys, checks);
  const uid = uids[0];
  if (uid !== undefined) checks.push({ resource: 'uids', group: 'authentication.k8s.io', name: uid });
  withAuthenticatedGroup(username, impersonatedGroups);
  const user: UserInfo = {
    username,
    groups: impersonatedGroups,
    ...(uid !== undefined && { uid }),
    ...(Object.keys(extra).length > 0 && { extra }),
  };
  return { user, checks };
}
