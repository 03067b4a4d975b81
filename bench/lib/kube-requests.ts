/** Naming the requests of the local Kubernetes API's request log for the benchmarks. */

/** `GET iptables-eips`, `PATCH iptables-eips/status`, `LIST pods`…: a request's verb and resource, from its path. */
export function verbAndResource(method: string, path: string, query: string): string {
  const parts = path.split('?')[0]!.split('/').filter(Boolean);
  // /api/v1[/namespaces/ns]/res[/name[/sub]]  or  /apis/group/version[/namespaces/ns]/res[/name[/sub]]
  let rest = parts[0] === 'api' ? parts.slice(2) : parts.slice(3);
  if (rest[0] === 'namespaces' && rest.length > 2) rest = rest.slice(2);
  const [resource = '?', name, sub] = rest;
  const watch = new URLSearchParams(query).get('watch');
  const verb =
    method !== 'GET' ? method : name ? 'GET' : watch === 'true' || watch === '1' ? 'WATCH' : 'LIST';
  return `${verb} ${resource}${sub ? `/${sub}` : ''}`;
}
