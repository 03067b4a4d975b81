/**
 * How a NAT gateway's pod is recognised, and what it says about itself. Defined once and used by the product (the
 * core and the Kubernetes adapter), the in-memory fakes and the local Kubernetes API, so that none of them can
 * drift from kube-ovn's rules:
 *
 * - kube-ovn's workload for VpcNatGateway `<gw>` is named `<prefix>-<gw>` (util.GenNatGwName) and labels its pods
 *   `app=<prefix>-<gw>` and `ovn.kubernetes.io/vpc-nat-gw=true`; the prefix is `vpc-nat-gw` unless the ConfigMap
 *   ovn-vpc-nat-config names another in `natGwNamePrefix` (kube-ovn 1.13+). The workload is a StatefulSet whose one
 *   pod is `<prefix>-<gw>-0`, or on kube-ovn master with `spec.replicas > 1` a Deployment whose pods are
 *   `<prefix>-<gw>-<pod-template-hash>-<5 chars>`, owned by its ReplicaSet (docs/adr/0105-ha-gateways.md);
 * - the pods live in `spec.namespace` of the IptablesEIP, else of the VpcNatGateway (kube-ovn master), else in
 *   kube-ovn's controller namespace;
 * - the pod's own address on an attached network is in the annotation
 *   `<network>.<attachment namespace>.kubernetes.io/ip_address` (and its prefix in `…/cidr`), where the
 *   attachment namespace is the one named in `k8s.v1.cni.cncf.io/networks` (`<ns>/<network>`), else the pod's;
 * - an IPAM reservation held for a gateway pod is owned by `pod:<pod uid>` (ADR 0006).
 */
import { parseRelease } from './dialect/dialects.js';

const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
const GATEWAY_LABEL = 'ovn.kubernetes.io/vpc-nat-gw';
const POD_OWNER_PREFIX = 'pod:';

/** kube-ovn's default name prefix of the gateway workloads (util.VpcNatGwNameDefaultPrefix). */
export const DEFAULT_NAME_PREFIX = 'vpc-nat-gw';

/**
 * The `app` label value of gateway `gw`'s pods, which is also its workload's name: `<prefix>-<gw>`
 * (util.GenNatGwName; an empty prefix is the default one).
 */
export function gatewayApp(gw: string, prefix: string = DEFAULT_NAME_PREFIX): string {
  return `${prefix || DEFAULT_NAME_PREFIX}-${gw}`;
}

/**
 * The gateway a pod belongs to, from its `app` label (the inverse of gatewayApp with the default prefix);
 * undefined for other pods.
 */
export function gatewayOfApp(app: string | undefined): string | undefined {
  const prefix = gatewayApp('');
  return app?.startsWith(prefix) && app.length > prefix.length ? app.slice(prefix.length) : undefined;
}

/** The label selector that finds gateway `gw`'s pods (kube-ovn's getNatGwPods). */
export function gatewayPodSelector(gw: string, prefix?: string): string {
  return `app=${gatewayApp(gw, prefix)},${GATEWAY_LABEL}=true`;
}

/** Name of the pod kube-ovn's StatefulSet keeps for gateway `gw` (util.GenNatGwPodName). */
export function gatewayPodName(gw: string, prefix?: string): string {
  return `${gatewayApp(gw, prefix)}-0`;
}

/**
 * The name prefix kube-ovn gives gateway `<gw>`'s workload and pods, from the data of ConfigMap ovn-vpc-nat-config
 * (resyncVpcNatConfig: `natGwNamePrefix` when not empty, taken as written). kube-ovn 1.12 has no such key: when the
 * release is known to be 1.12 the default prefix is kept whatever the ConfigMap says.
 */
export function namePrefixOf(data: Readonly<Record<string, string>> | undefined, release?: string): string {
  return namePrefixFor(data?.[NAME_PREFIX_KEY], release);
}

/** The same rule over the `natGwNamePrefix` value alone, as the feature check keeps it (NatGwFeature.namePrefix). */
export function namePrefixFor(configured: string | undefined, release?: string): string {
  if (release !== undefined && lineOf(release) === '1.12') return DEFAULT_NAME_PREFIX;
  return configured || DEFAULT_NAME_PREFIX;
}

/** The key of ovn-vpc-nat-config naming the gateway workloads' prefix (kube-ovn 1.13+). */
export const NAME_PREFIX_KEY = 'natGwNamePrefix';

const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** True for a valid namespace name (a DNS label of at most 63 characters). */
export function isNamespaceName(name: string): boolean {
  return name.length <= 63 && NAMESPACE_NAME.test(name);
}

/**
 * The namespace a gateway's pods are in, when the EIP or the gateway names one: `spec.namespace` of the IptablesEIP,
 * else of the VpcNatGateway (kube-ovn master's natEipNamespace and natGwNamespace); undefined means kube-ovn's
 * controller namespace. Only master has the field; when the release is known to be an older one it is ignored, as
 * that release's controller ignores it.
 */
export function gatewayNamespaceOf(
  eip: { spec?: { namespace?: string } } | undefined,
  gateway: { spec?: { namespace?: string } } | undefined,
  release?: string,
): string | undefined {
  if (release !== undefined && lineOf(release) !== 'master') return undefined;
  return eip?.spec?.namespace || gateway?.spec?.namespace || undefined;
}

/**
 * How many pods kube-ovn runs for a gateway (getNatGwReplicas): `spec.replicas` when above 0, else 1; before master
 * always 1. More than one is master's HA mode, a Deployment (util.IsNatGwHAMode).
 */
export function gatewayReplicasOf(gateway: { spec?: { replicas?: number } }, release?: string): number {
  if (release !== undefined && lineOf(release) !== 'master') return 1;
  const n = gateway.spec?.replicas;
  return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : 1;
}

function lineOf(release: string): string | undefined {
  const r = parseRelease(release);
  return r.ok ? r.line : undefined;
}

/** The IPAM owner uid of a gateway pod's own address reservation. */
export function podOwner(podUid: string): string {
  return `${POD_OWNER_PREFIX}${podUid}`;
}

/** True when an IPAM owner uid is a gateway pod's reservation rather than an EIP. */
export function isPodOwner(ownerUid: string): boolean {
  return ownerUid.startsWith(POD_OWNER_PREFIX);
}

export interface Attachment {
  /** The network (NetworkAttachmentDefinition) name, e.g. the external subnet's provider network. */
  network: string;
  /** The namespace of the attachment, which keys kube-ovn's per-network annotations. */
  namespace: string;
}

/**
 * The attachments listed in `k8s.v1.cni.cncf.io/networks`, in order: the short form (`ns/net,net2@if`) or the
 * JSON list form (`[{"name":"net","namespace":"ns"}]`). The first one is the pod's net1.
 */
export function podAttachments(
  podNamespace: string,
  annotations: Readonly<Record<string, string>> | undefined,
): Attachment[] {
  const text = annotations?.[NETWORKS_ANNOTATION]?.trim();
  if (!text) return [];
  return text.startsWith('[') ? jsonAttachments(podNamespace, text) : shortAttachments(podNamespace, text);
}

/** `[{"name":"net","namespace":"ns"}, …]`; nothing when the text is not JSON. */
function jsonAttachments(podNamespace: string, text: string): Attachment[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [];
  }
  const out: Attachment[] = [];
  for (const el of Array.isArray(parsed) ? parsed : []) {
    if (typeof el !== 'object' || el === null) continue;
    const { name, namespace } = el as { name?: unknown; namespace?: unknown };
    if (typeof name !== 'string' || !name) continue;
    out.push({
      network: name,
      namespace: typeof namespace === 'string' && namespace ? namespace : podNamespace,
    });
  }
  return out;
}

/** `ns/net,net2@if`: a namespace defaults to the pod's, an interface name after `@` is dropped. */
function shortAttachments(podNamespace: string, text: string): Attachment[] {
  const out: Attachment[] = [];
  for (const entry of text.split(',')) {
    const e = entry.trim();
    if (!e) continue;
    const slash = e.indexOf('/');
    const namespace = slash >= 0 ? e.slice(0, slash) : podNamespace;
    const network = (slash >= 0 ? e.slice(slash + 1) : e).split('@')[0]!;
    if (network) out.push({ network, namespace });
  }
  return out;
}

/** The pod's own address (and prefix length, when annotated) on one attachment. */
export function attachmentAddress(
  attachment: Attachment,
  annotations: Readonly<Record<string, string>> | undefined,
): { address: string; prefix?: number } | undefined {
  const key = `${attachment.network}.${attachment.namespace}.kubernetes.io`;
  const ip = annotations?.[`${key}/ip_address`]?.split(',')[0]?.trim();
  if (!ip) return undefined;
  const prefix = Number(annotations?.[`${key}/cidr`]?.split(',')[0]?.split('/')[1]);
  return Number.isInteger(prefix) ? { address: ip, prefix } : { address: ip };
}

/**
 * The pod's own addresses by attached network name. Attachments listed in `k8s.v1.cni.cncf.io/networks` are keyed
 * by their own namespace; annotations of networks not listed there are read with the pod's namespace.
 */
export function podNetworkAddresses(
  podNamespace: string,
  annotations: Readonly<Record<string, string>> | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  const suffix = `.${podNamespace}.kubernetes.io/ip_address`;
  for (const [k, v] of Object.entries(annotations ?? {})) {
    if (k.endsWith(suffix) && k.length > suffix.length && v)
      out[k.slice(0, -suffix.length)] = v.split(',')[0]!.trim();
  }
  for (const a of podAttachments(podNamespace, annotations)) {
    const found = attachmentAddress(a, annotations);
    if (found) out[a.network] = found.address;
  }
  return out;
}

/** The pod's net1 (its first attachment) address, as `address/prefix` when the prefix is annotated. */
export function net1Address(
  podNamespace: string,
  annotations: Readonly<Record<string, string>> | undefined,
): string | undefined {
  const first = podAttachments(podNamespace, annotations)[0];
  const found = first && attachmentAddress(first, annotations);
  if (!found) return undefined;
  return found.prefix !== undefined ? `${found.address}/${found.prefix}` : found.address;
}

// ------------------------------------------------------------------ what the pod's spec says about its release

/**
 * What kube-ovn's pod template put on a gateway pod that tells its release apart (docs/compatibility.md): read by
 * the Kubernetes adapter from the pod, judged by shared/domain/dialect/detect.ts. Present only when the whole pod
 * was read: an absent init container or env entry then counts as absent.
 */
export interface GatewayPodTemplate {
  /** The vpc-nat-gw container's image, as the pod spec names it. */
  image?: string;
  /** The vpc-nat-gw container's env, by name (an entry with valueFrom has the value ''). */
  env: Record<string, string>;
  /** An init container runs `nat-gateway.sh init` (kube-ovn 1.12's template). */
  initRunsScript: boolean;
  /**
   * The destinations of each routes annotation (`<provider>.kubernetes.io/routes`, a JSON list of `{dst, gw}`), by
   * key: 1.13+ puts the service CIDR on `ovn.kubernetes.io/routes` and the default route on the external network's
   * provider; 1.12 has one only for a gateway with API access (a route to the API server).
   */
  routes: Record<string, string[]>;
  /** Kind of the controller that owns the pod (StatefulSet; ReplicaSet for master's replicated gateways). */
  ownerKind?: string;
}

/** The slice of a core/v1 Pod the template facts come from (client-node's V1Pod fits it). */
export interface PodSpecShape {
  metadata?: { annotations?: Record<string, string>; ownerReferences?: ReadonlyArray<{ kind?: string }> };
  spec?: { containers?: readonly ContainerShape[]; initContainers?: readonly ContainerShape[] };
}

interface ContainerShape {
  name?: string;
  image?: string;
  command?: readonly string[];
  args?: readonly string[];
  env?: ReadonlyArray<{ name?: string; value?: string }>;
}

const ROUTES_SUFFIX = 'kubernetes.io/routes';

/** Reads the template facts of a gateway pod; `container` is the gateway container's name (vpc-nat-gw). */
export function gatewayPodTemplate(pod: PodSpecShape, container: string): GatewayPodTemplate {
  const main = pod.spec?.containers?.find((c) => c.name === container);
  const env: Record<string, string> = {};
  for (const e of main?.env ?? []) if (e.name) env[e.name] = e.value ?? '';
  const initRunsScript = (pod.spec?.initContainers ?? []).some((c) => {
    const words = [...(c.command ?? []), ...(c.args ?? [])].join(' ');
    return /nat-gateway\.sh\s+init\b/.test(words);
  });
  const routes: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(pod.metadata?.annotations ?? {}))
    if (k.endsWith(ROUTES_SUFFIX) && k.length > ROUTES_SUFFIX.length) routes[k] = routeDestinations(v);
  const ownerKind = pod.metadata?.ownerReferences?.find((o) => o.kind)?.kind;
  return {
    ...(main?.image && { image: main.image }),
    env,
    initRunsScript,
    routes,
    ...(ownerKind && { ownerKind }),
  };
}

/** The `dst` of each route in a routes annotation; [] when it is not the JSON list kube-ovn writes. */
function routeDestinations(value: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  return parsed.flatMap((r) =>
    typeof r === 'object' && r !== null && typeof (r as { dst?: unknown }).dst === 'string'
      ? [(r as { dst: string }).dst]
      : [],
  );
}
