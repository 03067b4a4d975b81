/**
 * How a NAT gateway's pod is recognised, and what it says about itself. Defined once and used by the product (the
 * core and the Kubernetes adapter), the in-memory fakes and the local Kubernetes API, so that none of them can
 * drift from kube-ovn's rules:
 *
 * - kube-ovn's StatefulSet for VpcNatGateway `<gw>` labels its pod `app=vpc-nat-gw-<gw>` and
 *   `ovn.kubernetes.io/vpc-nat-gw=true`, and names it `vpc-nat-gw-<gw>-0`;
 * - the pod's own address on an attached network is in the annotation
 *   `<network>.<attachment namespace>.kubernetes.io/ip_address` (and its prefix in `…/cidr`), where the
 *   attachment namespace is the one named in `k8s.v1.cni.cncf.io/networks` (`<ns>/<network>`), else the pod's;
 * - an IPAM reservation held for a gateway pod is owned by `pod:<pod uid>` (ADR 0006).
 */

const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
const GATEWAY_LABEL = 'ovn.kubernetes.io/vpc-nat-gw';
const POD_OWNER_PREFIX = 'pod:';

/** The `app` label value of gateway `gw`'s pod. */
export function gatewayApp(gw: string): string {
  return `vpc-nat-gw-${gw}`;
}

/** The gateway a pod belongs to, from its `app` label (the inverse of gatewayApp); undefined for other pods. */
export function gatewayOfApp(app: string | undefined): string | undefined {
  const prefix = gatewayApp('');
  return app?.startsWith(prefix) && app.length > prefix.length ? app.slice(prefix.length) : undefined;
}

/** The label selector that finds gateway `gw`'s pod. */
export function gatewayPodSelector(gw: string): string {
  return `app=${gatewayApp(gw)},${GATEWAY_LABEL}=true`;
}

/** Name of the pod kube-ovn's StatefulSet keeps for gateway `gw`. */
export function gatewayPodName(gw: string): string {
  return `${gatewayApp(gw)}-0`;
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
  const out: Attachment[] = [];
  if (text.startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return [];
    }
    for (const el of Array.isArray(parsed) ? parsed : []) {
      if (typeof el !== 'object' || el === null) continue;
      const { name, namespace } = el as { name?: unknown; namespace?: unknown };
      if (typeof name === 'string' && name)
        out.push({
          network: name,
          namespace: typeof namespace === 'string' && namespace ? namespace : podNamespace,
        });
    }
    return out;
  }
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
