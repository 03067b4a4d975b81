/**
 * What a gateway pod object says about the network the CNI gives it and how its release starts it: eth0's and net1's
 * addresses and gateways (kube-ovn's annotations), the routes the CNI installs (kube-ovn 1.13+'s routes
 * annotations), the container's environment and postStart hook, its init containers. Every value that reaches `ip`
 * is checked to be an IPv4 address or CIDR first; a pod that does not say enough is refused with the reason.
 */

import { createHash } from 'node:crypto';
import { podAttachments } from '../../shared/domain/gateway-pod.js';
import { GATEWAY_CONTAINER } from '../../shared/domain/kube-ovn.js';
import { isObject, type JsonObject, type JsonValue } from '../kube-api/json.js';
import { eth0Of, net1Of } from '../kube-api/pods.js';
import {
  atLeast,
  controllerInitExecs,
  type ReleaseLine,
  releaseEnv,
  releaseOfImage,
  releasePostStart,
} from './release.js';

export interface Route {
  dst: string;
  gw: string;
}

export interface PodFacts {
  namespace: string;
  name: string;
  release: ReleaseLine;
  /** Whether the release came from the image tag (else the backend's default release). */
  releaseFromImage: boolean;
  eth0: { address: string; gateway: string; mac: string };
  net1: { address: string; gateway: string; cidr: string; mac: string };
  /** The routes the CNI installs on each interface (besides the connected ones). */
  routes: { eth0: Route[]; net1: Route[] };
  env: Record<string, string>;
  postStart?: string[];
  initContainers: string[][];
  controllerInit: string[][];
}

const OCTET = '(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = new RegExp(`^${OCTET}(\\.${OCTET}){3}$`);

export function isIpv4(v: string): boolean {
  return IPV4.test(v);
}

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

/**
 * An interface's MAC: kube-ovn's `…/mac_address` annotation when it is a unicast MAC, else one derived from the pod's
 * name and the interface (locally administered), so that the IPv6 link-local address `ip addr` lists is the same on
 * every run and after every restart.
 */
export function macOf(annotation: string | undefined, seed: string): string {
  const a = annotation?.toLowerCase();
  if (a && MAC.test(a) && (Number.parseInt(a.slice(0, 2), 16) & 1) === 0) return a;
  const h = createHash('sha256').update(seed).digest();
  return ['0a', ...[...h.subarray(0, 5)].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}

export function isIpv4Cidr(v: string): boolean {
  const [a, p, ...rest] = v.split('/');
  return rest.length === 0 && isIpv4(a ?? '') && /^(3[0-2]|[12]?\d)$/.test(p ?? '');
}

/** The network address of an IPv4 CIDR (`172.18.0.254/16` → `172.18.0.0/16`). */
export function networkOf(cidr: string): string {
  const [a, p] = cidr.split('/');
  const bits = Number(p);
  const n = a!.split('.').reduce((acc, o) => (acc << 8n) | BigInt(o), 0n);
  const mask = bits === 0 ? 0n : ((1n << 32n) - 1n) ^ ((1n << BigInt(32 - bits)) - 1n);
  const net = n & mask;
  const octets = [24n, 16n, 8n, 0n].map((s) => String((net >> s) & 255n));
  return `${octets.join('.')}/${bits}`;
}

const strings = (o: JsonValue | undefined): Record<string, string> => {
  const out: Record<string, string> = {};
  if (isObject(o)) for (const [k, v] of Object.entries(o)) if (typeof v === 'string') out[k] = v;
  return out;
};

const list = (v: JsonValue | undefined): JsonObject[] => (Array.isArray(v) ? v.filter(isObject) : []);

/** A routes annotation (`[{"dst":"10.96.0.0/12","gw":"10.0.1.1"}]`); throws on anything that is not IPv4 routes. */
function parseRoutes(key: string, text: string | undefined): Route[] {
  if (text === undefined || text === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`annotation ${key} is not JSON`);
  }
  if (!Array.isArray(parsed)) throw new Error(`annotation ${key} is not a list of routes`);
  return parsed.map((r: { dst?: unknown; gw?: unknown }) => {
    const dst = r?.dst === '' || r?.dst === undefined ? '0.0.0.0/0' : String(r.dst);
    const gw = String(r?.gw ?? '');
    if (!isIpv4Cidr(dst) || !isIpv4(gw))
      throw new Error(`annotation ${key}: route ${JSON.stringify(r)} is not an IPv4 destination and gateway`);
    return { dst, gw };
  });
}

function argvOf(c: JsonObject): string[] {
  return [...(Array.isArray(c.command) ? c.command : []), ...(Array.isArray(c.args) ? c.args : [])].map(
    String,
  );
}

/**
 * The literal `env` entries of a container (`valueFrom` is not resolved here). The script word-splits them, so a
 * value must be plain words of the characters addresses use.
 */
function envOf(c: JsonObject | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of list(c?.env)) {
    if (typeof e.name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(e.name)) continue;
    const value = typeof e.value === 'string' ? e.value : '';
    if (!/^[A-Za-z0-9.,:/_+=@%-]*$/.test(value))
      throw new Error(`env ${e.name} is "${value}", not an address`);
    out[e.name] = value;
  }
  return out;
}

function postStartOf(c: JsonObject | undefined): string[] | undefined {
  const lifecycle = isObject(c?.lifecycle) ? c.lifecycle : {};
  const exec =
    isObject(lifecycle.postStart) && isObject(lifecycle.postStart.exec) ? lifecycle.postStart.exec : {};
  return Array.isArray(exec.command) ? exec.command.map(String) : undefined;
}

export interface FactsOptions {
  /** The release of a pod whose image carries no vX.Y tag. */
  defaultRelease: ReleaseLine;
  /** The cluster's service CIDR (the 1.13+ eth0 route when a pod has no routes annotation). */
  serviceCidr: string;
}

function need(v: string | undefined, what: string, check: (v: string) => boolean): string {
  if (v === undefined || !check(v)) throw new Error(`${what} is ${v === undefined ? 'missing' : `"${v}"`}`);
  return v;
}

/**
 * Reads a gateway pod. The routes follow kube-ovn's CNI: without routes annotations (1.12) eth0 gets the default
 * route via its gateway; with them each interface gets its annotation's routes, and a default route in any of them
 * replaces eth0's. A 1.13+ pod without the annotations gets those its release's controller writes (the service CIDR
 * via the LAN gateway on eth0, the default route via the external gateway on net1).
 */
export function podFacts(pod: JsonObject, o: FactsOptions): PodFacts {
  const m = isObject(pod.metadata) ? pod.metadata : {};
  const spec = isObject(pod.spec) ? pod.spec : {};
  const namespace = String(m.namespace ?? 'default');
  const name = String(m.name ?? '');
  const ann = strings(m.annotations);
  const container = list(spec.containers).find((c) => c.name === GATEWAY_CONTAINER);
  const fromImage = releaseOfImage(typeof container?.image === 'string' ? container.image : undefined);
  const release = fromImage ?? o.defaultRelease;

  const eth0Address = need(eth0Of(pod), 'eth0 address (ovn.kubernetes.io/ip_address and /cidr)', isIpv4Cidr);
  const lanGateway = need(
    ann['ovn.kubernetes.io/gateway']?.split(',')[0],
    'ovn.kubernetes.io/gateway',
    isIpv4,
  );
  const net1Address = need(
    net1Of(pod),
    'net1 address (the first attachment ip_address and cidr)',
    isIpv4Cidr,
  );
  const attachment = podAttachments(namespace, ann)[0]!;
  const provider = `${attachment.network}.${attachment.namespace}.kubernetes.io`;
  const extGateway = need(ann[`${provider}/gateway`]?.split(',')[0], `${provider}/gateway`, isIpv4);

  const ovnRoutesKey = 'ovn.kubernetes.io/routes';
  const netRoutesKey = `${provider}/routes`;
  let routes = {
    eth0: parseRoutes(ovnRoutesKey, ann[ovnRoutesKey]),
    net1: parseRoutes(netRoutesKey, ann[netRoutesKey]),
  };
  const annotated = ann[ovnRoutesKey] !== undefined || ann[netRoutesKey] !== undefined;
  if (!annotated && atLeast(release, '1.13'))
    routes = {
      eth0: [{ dst: need(o.serviceCidr, 'the service CIDR', isIpv4Cidr), gw: lanGateway }],
      net1: [{ dst: '0.0.0.0/0', gw: extGateway }],
    };
  const hasDefault = [...routes.eth0, ...routes.net1].some((r) => r.dst === '0.0.0.0/0');
  if (!hasDefault) routes.eth0.unshift({ dst: '0.0.0.0/0', gw: lanGateway });

  const env = { ...releaseEnv(release, extGateway), ...envOf(container) };
  const postStart = postStartOf(container) ?? releasePostStart(release);
  return {
    namespace,
    name,
    release,
    releaseFromImage: fromImage !== undefined,
    eth0: {
      address: eth0Address,
      gateway: lanGateway,
      mac: macOf(ann['ovn.kubernetes.io/mac_address'], `${namespace}/${name}/eth0`),
    },
    net1: {
      address: net1Address,
      gateway: extGateway,
      cidr: networkOf(net1Address),
      mac: macOf(ann[`${provider}/mac_address`], `${namespace}/${name}/net1`),
    },
    routes,
    env,
    ...(postStart && { postStart }),
    initContainers: list(spec.initContainers).map(argvOf),
    controllerInit: controllerInitExecs(release, {
      serviceCidr: o.serviceCidr,
      lanGateway,
      externalCidr: networkOf(net1Address),
      externalGateway: extGateway,
    }),
  };
}
