/**
 * What a gateway pod's object says to its simulated container beyond its addresses: the routes the CNI installs
 * from the pod's routes annotations (kube-ovn 1.13+ sets them) and the vpc-nat-gw container's environment
 * (GATEWAY_V4, GATEWAY_V6 on 1.15+). Read the way kube-ovn's CNI and the kubelet read them.
 */
import { podAttachments } from '../../shared/domain/gateway-pod.js';
import { GATEWAY_CONTAINER } from '../../shared/domain/kube-ovn.js';
import { parseIp, parsePrefix } from './addr.js';
import type { CniRoute } from './state.js';

type Loose = Record<string, unknown>;
const obj = (v: unknown): Loose =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Loose) : {};
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

function annotationsOf(pod: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(obj(obj(pod).metadata).annotations)))
    if (typeof v === 'string') out[k] = v;
  return out;
}

/** `[{"dst":"10.96.0.0/12","gw":"10.0.1.1"}]`; entries the CNI would skip (bad address) are left out. */
function routesOf(text: string | undefined, dev: string): CniRoute[] {
  if (!text) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [];
  }
  const out: CniRoute[] = [];
  for (const r of list(parsed)) {
    const { dst, gw } = obj(r);
    const to = typeof dst === 'string' && dst !== '' ? dst : '0.0.0.0/0';
    if (!parsePrefix(to) || (gw !== undefined && (typeof gw !== 'string' || !parseIp(gw)))) continue;
    out.push({ dst: to, dev, ...(typeof gw === 'string' ? { via: gw } : {}) });
  }
  return out;
}

const isDefault = (r: CniRoute): boolean => parsePrefix(r.dst)?.prefix === 0;

/**
 * The CNI's routes for a gateway pod with routes annotations: eth0's default via its subnet gateway
 * (`ovn.kubernetes.io/gateway`) plus `ovn.kubernetes.io/routes`, then net1's `<network>.<ns>.kubernetes.io/routes`;
 * a default route on net1 replaces eth0's. Undefined when the pod has no routes annotation (before 1.13): the
 * simulator then keeps its own default via eth0.
 */
export function cniRoutesOf(pod: unknown): CniRoute[] | undefined {
  const ann = annotationsOf(pod);
  const namespace = obj(obj(pod).metadata).namespace;
  const net1 = podAttachments(typeof namespace === 'string' ? namespace : 'default', ann)[0];
  const net1Key = net1 ? `${net1.network}.${net1.namespace}.kubernetes.io/routes` : undefined;
  const eth0Key = 'ovn.kubernetes.io/routes';
  if (ann[eth0Key] === undefined && (net1Key === undefined || ann[net1Key] === undefined)) return undefined;
  const onNet1 = routesOf(net1Key && ann[net1Key], 'net1');
  const gateway = ann['ovn.kubernetes.io/gateway']?.split(',')[0];
  const eth0Default: CniRoute[] =
    gateway && parseIp(gateway) && !onNet1.some(isDefault)
      ? [{ dst: '0.0.0.0/0', via: gateway, dev: 'eth0' }]
      : [];
  return [...eth0Default, ...routesOf(ann[eth0Key], 'eth0'), ...onNet1];
}

/** The vpc-nat-gw container's environment (plain `value`s; `valueFrom` is not resolved). */
export function containerEnvOf(pod: unknown): Record<string, string> {
  const container = list(obj(obj(pod).spec).containers).find((c) => obj(c).name === GATEWAY_CONTAINER);
  const env: Record<string, string> = {};
  for (const e of list(obj(container).env)) {
    const { name, value } = obj(e);
    if (typeof name === 'string') env[name] = typeof value === 'string' ? value : '';
  }
  return env;
}
