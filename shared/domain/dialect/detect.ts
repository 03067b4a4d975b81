/**
 * Which release dialect a gateway speaks, from what its pod shows (docs/adr/0076-choosing-a-gateway-dialect.md):
 *
 * 1. the VpcNatGateway's annotation `eip-lambdas.io/kube-ovn-release`, when set, wins;
 * 2. else the vpc-nat-gw container's image tag, when it is a release (`v1.15.3`, `v1.16.0-rc1`, `master`);
 * 3. else the release's own markers on the pod (init container, GATEWAY_V4, routes annotations, owner) and, when
 *    the caller read it, on the gateway (the nat table's chains, the env file), when what they leave open does not
 *    matter for the caller's purpose;
 * 4. else the deployment's default (KUBE_OVN_RELEASE), when the markers allow it;
 * 5. else UnsupportedGatewayReleaseError naming everything seen.
 */
import { UnsupportedGatewayReleaseError } from '../errors.js';
import type { GatewayPodTemplate } from '../gateway-pod.js';
import type { GatewayPod } from '../kube-ovn.js';
import {
  agreeFor,
  DIALECTS,
  type Dialect,
  lineIndex,
  type Purpose,
  parseRelease,
  RELEASE_LINES,
  type ReleaseLine,
} from './dialects.js';

/** The override on a VpcNatGateway: the release its gateway speaks, e.g. `1.15`. */
export const RELEASE_ANNOTATION = 'eip-lambdas.io/kube-ovn-release';

/** What a read of the gateway showed (the audit reads it anyway; a handler reads it only when asked). */
export interface GatewayState {
  /** Chains of the nat table (iptables-save), when read. */
  natChains?: readonly string[];
  /** Whether /etc/kube-ovn/nat-gateway.env exists, when read after init. */
  envFile?: 'present' | 'absent';
}

export interface ReleaseFacts {
  pod: Pick<GatewayPod, 'namespace' | 'name' | 'template'>;
  /** The VpcNatGateway's name, for messages. */
  gateway: string;
  /** The VpcNatGateway's RELEASE_ANNOTATION, when set. */
  override?: string;
  /** KUBE_OVN_RELEASE, when set. */
  defaultRelease?: string;
  state?: GatewayState;
}

export interface ReleaseChoice {
  dialect: Dialect;
  by: 'override' | 'image' | 'markers' | 'default';
  /** The lines what was seen still allows (the chosen one among them; agreeing for the purpose). */
  candidates: ReleaseLine[];
  /** What was seen, one fact each, for logs and conditions. */
  seen: string[];
}

/** One fact that bounds the release: lines from..to (inclusive, in RELEASE_LINES order). */
export interface Marker {
  seen: string;
  from: ReleaseLine;
  to: ReleaseLine;
}

const DEFAULT_ROUTES = new Set(['0.0.0.0/0', '::/0']);

/** The lines a read of the gateway can tell apart (the env file: 1.15+; the HAIRPIN_SNAT chain: 1.16+). */
const STATE_GROUPS: ReadonlyArray<readonly ReleaseLine[]> = [['1.12', '1.13'], ['1.15'], ['1.16', 'master']];

/** The markers kube-ovn's pod template of each release leaves on the pod. */
export function podMarkers(t: GatewayPodTemplate): Marker[] {
  const out: Marker[] = [];
  out.push(
    t.initRunsScript
      ? { seen: 'an init container runs nat-gateway.sh init', from: '1.12', to: '1.12' }
      : { seen: 'no init container runs nat-gateway.sh init', from: '1.13', to: 'master' },
  );
  out.push(
    Object.hasOwn(t.env, 'GATEWAY_V4')
      ? { seen: 'the container env has GATEWAY_V4', from: '1.15', to: 'master' }
      : { seen: 'the container env has no GATEWAY_V4', from: '1.12', to: '1.13' },
  );
  const routes = Object.entries(t.routes).find(
    ([k, dsts]) => k === 'ovn.kubernetes.io/routes' || dsts.some((d) => DEFAULT_ROUTES.has(d)),
  );
  if (routes) out.push({ seen: `routes annotation ${routes[0]}`, from: '1.13', to: 'master' });
  if (t.ownerKind === 'ReplicaSet')
    out.push({ seen: 'owned by a ReplicaSet (a replicated gateway)', from: 'master', to: 'master' });
  return out;
}

/** The markers a read of the gateway gives. */
export function stateMarkers(s: GatewayState): Marker[] {
  const out: Marker[] = [];
  const chains = new Set(s.natChains ?? []);
  if (chains.has('HAIRPIN_SNAT')) out.push({ seen: 'nat chain HAIRPIN_SNAT', from: '1.16', to: 'master' });
  else if (chains.has('DNAT_FILTER'))
    out.push({ seen: 'nat chains without HAIRPIN_SNAT', from: '1.12', to: '1.15' });
  if (s.envFile === 'present')
    out.push({ seen: '/etc/kube-ovn/nat-gateway.env exists', from: '1.15', to: 'master' });
  if (s.envFile === 'absent')
    out.push({ seen: 'no /etc/kube-ovn/nat-gateway.env after init', from: '1.12', to: '1.13' });
  return out;
}

/** The image's repository and tag (`registry:5000/kubeovn/vpc-nat-gateway:v1.15.0@sha256:…`). */
export function imageTag(image: string): { repository: string; tag?: string } {
  const ref = image.split('@')[0] ?? '';
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  if (colon > slash) return { repository: ref.slice(0, colon), tag: ref.slice(colon + 1) };
  return { repository: ref };
}

const range = (from: ReleaseLine, to: ReleaseLine): ReleaseLine[] =>
  RELEASE_LINES.slice(lineIndex(from), lineIndex(to) + 1);

function describe(lines: readonly ReleaseLine[]): string {
  return lines.map((l) => DIALECTS[l].covers.replace(/^kube-ovn /, '')).join(', ');
}

function markerText(m: Marker): string {
  return `${m.seen} (${m.from === m.to ? m.from : `${m.from}–${m.to}`})`;
}

/** What a choice goes on: the facts, and what was seen of them. */
interface Seen {
  where: string;
  seen: string[];
  tag?: string;
}

function refuse(s: Seen, why: string, needs?: 'gateway-state'): never {
  throw new UnsupportedGatewayReleaseError(
    `${s.where}: ${why}; seen: ${s.seen.join('; ') || 'nothing'}`,
    s.seen,
    needs,
  );
}

function byOverride(facts: ReleaseFacts, s: Seen): ReleaseChoice | undefined {
  const override = facts.override?.trim();
  if (!override) return undefined;
  const r = parseRelease(override);
  if (!r.ok)
    return refuse(s, `annotation ${RELEASE_ANNOTATION} on VpcNatGateway ${facts.gateway}: ${r.problem}`);
  return {
    dialect: DIALECTS[r.line],
    by: 'override',
    candidates: [r.line],
    seen: [`annotation ${override}`, ...s.seen],
  };
}

function byImage(s: Seen): ReleaseChoice | undefined {
  if (s.tag === undefined) return undefined;
  const r = parseRelease(s.tag);
  if (r.ok) return { dialect: DIALECTS[r.line], by: 'image', candidates: [r.line], seen: s.seen };
  // A tag that looks like a version but is not one the product speaks is refused; any other tag is custom.
  if (/^v?\d+\.\d+/.test(s.tag)) return refuse(s, `image tag ${s.tag}: ${r.problem}`);
  return undefined;
}

function byDefault(
  facts: ReleaseFacts,
  s: Seen,
  candidates: readonly ReleaseLine[],
): ReleaseChoice | undefined {
  const fallback = facts.defaultRelease?.trim();
  if (!fallback) return undefined;
  const r = parseRelease(fallback);
  if (!r.ok) return refuse(s, `KUBE_OVN_RELEASE: ${r.problem}`);
  if (!candidates.includes(r.line))
    return refuse(s, `KUBE_OVN_RELEASE says ${fallback}, but the pod shows ${describe(candidates)}`);
  return {
    dialect: DIALECTS[r.line],
    by: 'default',
    candidates: [r.line],
    seen: [...s.seen, `KUBE_OVN_RELEASE ${fallback}`],
  };
}

/** True when a read of the gateway would leave only lines that agree for `purpose`. */
function stateCouldTell(purpose: Purpose, candidates: readonly ReleaseLine[]): boolean {
  return STATE_GROUPS.every(
    (g) =>
      agreeFor(
        purpose,
        candidates.filter((l) => g.includes(l)),
      ) || !candidates.some((l) => g.includes(l)),
  );
}

/**
 * Chooses the dialect for `purpose` (what the caller sends, or reads).
 * @throws UnsupportedGatewayReleaseError naming what was seen
 */
export function chooseDialect(facts: ReleaseFacts, purpose: Purpose): ReleaseChoice {
  const t = facts.pod.template;
  const markers = [...(t ? podMarkers(t) : []), ...(facts.state ? stateMarkers(facts.state) : [])];
  const s: Seen = {
    where: `gateway pod ${facts.pod.namespace}/${facts.pod.name} of VpcNatGateway ${facts.gateway}`,
    seen: [...(t?.image ? [`image ${t.image}`] : []), ...markers.map(markerText)],
    ...(t?.image && { tag: imageTag(t.image).tag }),
  };
  const chosen = byOverride(facts, s) ?? byImage(s);
  if (chosen) return chosen;
  let candidates: ReleaseLine[] = [...RELEASE_LINES];
  for (const m of markers) candidates = candidates.filter((l) => range(m.from, m.to).includes(l));
  if (candidates.length === 0) return refuse(s, 'its markers contradict each other');
  if (agreeFor(purpose, candidates))
    return { dialect: DIALECTS[candidates[0]!], by: 'markers', candidates, seen: s.seen };
  const fallback = byDefault(facts, s, candidates);
  if (fallback) return fallback;
  const tagSays =
    s.tag === undefined ? 'no image tag' : `image tag ${JSON.stringify(s.tag)} is not a release`;
  return refuse(
    s,
    `cannot tell its kube-ovn release (${tagSays}; it may be ${describe(candidates)}); set annotation ${RELEASE_ANNOTATION} on the VpcNatGateway or KUBE_OVN_RELEASE`,
    !facts.state && stateCouldTell(purpose, candidates) ? 'gateway-state' : undefined,
  );
}
