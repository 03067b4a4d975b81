/**
 * The pods of a gateway as the EIP path sees them (docs/adr/0105-ha-gateways.md): which are active, which of them
 * need an EIP's address (re)added, what the placement records of them afterwards, and how a pod that lacks the
 * address is named in the EIP's conditions. Pure, except `gatewayPodsOf`, the one lookup.
 */
import { EipError, GatewayNotReadyError } from '../domain/errors.js';
import { gatewayApp, namePrefixFor } from '../domain/gateway-pod.js';
import type { Condition, IptablesEip } from '../domain/kube-ovn.js';
import type { EipEvent } from '../events.js';
import type { Deps, GatewayPod, NatGwFeature, PlacedPod, Placement } from '../ports.js';
import { ConditionType, redoToken, removeCondition, setCondition } from './view.js';

/** How long a terminating EIP waits for a pod that fails to take its address off (then it is left to the pod). */
export const DELETE_PATIENCE_MS = 10 * 60_000;

/** The reason of a Ready=False condition this product writes while some active pod lacks the address. */
export const PARTIALLY_CONFIGURED = 'PartiallyConfigured';

/** A pod kube-ovn runs operations in: Running and not being deleted (master's getNatGwPods filter). */
export const isActive = (p: GatewayPod): boolean => p.phase === 'Running' && !p.terminating;

/** The pod's vpc-nat-gw container is not running (restarting): nothing can be done in it until it is back. */
export const containerDown = (p: GatewayPod): boolean => p.container?.ready === false;

/**
 * Every pod of gateway `gateway` in `namespace` (undefined: kube-ovn's). With `known.pods` (the add's listing of
 * kube-ovn's namespace) it is told from them when it can; otherwise one lookup, which reuses the name prefix the
 * feature check read (`known.feature`) rather than reading ovn-vpc-nat-config again.
 */
export async function gatewayPodsOf(
  deps: Deps,
  gateway: string,
  namespace: string | undefined,
  known?: { pods?: readonly GatewayPod[]; feature: NatGwFeature },
): Promise<GatewayPod[]> {
  const prefix = known && namePrefixFor(known.feature.namePrefix, deps.kubeOvnRelease);
  if (known?.pods && prefix !== undefined && namespace === undefined) {
    const app = gatewayApp(gateway, prefix);
    return known.pods.filter((p) => p.app === app).sort((a, b) => (a.name < b.name ? -1 : 1));
  }
  return deps.cluster.findGatewayPods({
    name: gateway,
    ...(namespace && { namespace }),
    ...(prefix !== undefined && { prefix }),
  });
}

/**
 * The active pods, or the error that there are none (GatewayNotReady, worded as for the one pod of a StatefulSet).
 * @throws GatewayNotReadyError
 */
export function requireActive(gateway: string, pods: readonly GatewayPod[]): GatewayPod[] {
  const active = pods.filter(isActive);
  if (active.length > 0) return active;
  const first = pods.find((p) => !p.terminating) ?? pods[0];
  if (!first) throw new GatewayNotReadyError(`pod of vpc nat gateway ${gateway} not found`);
  throw new GatewayNotReadyError(
    `pod ${first.namespace}/${first.name} is not active now (phase ${first.phase}${first.terminating ? ', terminating' : ''})`,
  );
}

/** A pod whose container is down, as the failure that pod gives. */
export const notRunning = (p: GatewayPod): GatewayNotReadyError =>
  new GatewayNotReadyError(
    `pod ${p.namespace}/${p.name} is not active now (its vpc-nat-gw container is not running)`,
  );

/**
 * Why `pod` needs the EIP's address (re)added now: `run` when the pod's container run is not the one the address was
 * configured in (the record has no entry for the pod or another token; without a record, status.redo is not its
 * token) — a restart or a new pod, which the pod's redo sweep covers (./redo.ts); `asked` when another writer asked
 * for a redo (status.ready false, kube-ovn's way, except this product's own PartiallyConfigured) or the bridge saw
 * this pod come up (tokens have one-second resolution); undefined: the pod carries it.
 */
export function addDue(
  pod: GatewayPod,
  eip: IptablesEip,
  recorded: Placement['pods'],
  event: EipEvent,
): 'run' | 'asked' | undefined {
  const token = redoToken(pod);
  const had = recorded ? recorded[pod.uid]?.token : eip.status?.redo;
  if (had !== token) return 'run';
  if (eip.status?.ready !== true && !partiallyConfigured(eip)) return 'asked';
  if (event.reason === 'gateway-restarted' && (!event.pod || event.pod === pod.uid)) return 'asked';
  return undefined;
}

/** status.ready is false because this product said some pod lacks the address (not a request for a redo). */
function partiallyConfigured(eip: IptablesEip): boolean {
  const ready = eip.status?.conditions?.find((c) => c.type === ConditionType.ready);
  return ready?.status === 'False' && ready.reason === PARTIALLY_CONFIGURED;
}

/**
 * Whether the placement records its pods from now on: once the gateway has had more than one active pod (a gateway
 * of one pod with no record keeps today's writes: status.redo is its token).
 */
export const recordsPods = (recorded: Placement['pods'], active: readonly GatewayPod[]): boolean =>
  recorded !== undefined || active.length > 1;

/** The pods that carry the address now: each one configured or untouched, with its current token. */
export function carriedBy(carrying: readonly GatewayPod[]): Record<string, PlacedPod> {
  const out: Record<string, PlacedPod> = {};
  for (const p of [...carrying].sort((a, b) => (a.uid < b.uid ? -1 : 1)))
    out[p.uid] = { name: p.name, token: redoToken(p) };
  return out;
}

/** Two records of pods say the same. */
export function samePods(a: Placement['pods'], b: Placement['pods']): boolean {
  if (a === undefined || b === undefined) return a === b;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => a[k]?.name === b[k]?.name && a[k]?.token === b[k]?.token);
}

/** The newest redo token among the pods that carry the address (status.redo, kube-ovn's layout). */
export function newestToken(carrying: readonly GatewayPod[]): string | undefined {
  return carrying.map(redoToken).sort().at(-1);
}

/** A pod that lacks the address, and why. */
export interface Lacking {
  pod: GatewayPod;
  /** The code of the reason (an error's code; GatewayNotReady for a pod that is not running). */
  code: string;
  why: string;
}

/** How a failure of one pod is named in the conditions. */
export function lackingOf(pod: GatewayPod, error: unknown): Lacking {
  const code = error instanceof EipError ? error.code : 'GatewayCommandFailed';
  const said = error instanceof Error ? error.message : String(error);
  return { pod, code, why: said.length > 300 ? `${said.slice(0, 297)}...` : said };
}

/** The pods found that are neither active nor going: each lacks the address until it runs. */
export function notRunningYet(found: readonly GatewayPod[]): Lacking[] {
  return found
    .filter((p) => !isActive(p) && !p.terminating)
    .map((pod) => ({ pod, code: 'GatewayNotReady', why: `not running (${pod.phase})` }));
}

/** The condition type that tells, on a gateway of several pods, which of them carry the address. */
export const GATEWAY_PODS = 'GatewayPods';

/**
 * The conditions of a configured EIP, with what its gateway's pods say: Ready False (PartiallyConfigured) while an
 * active pod lacks the address, naming each one and why; on a gateway with more than one pod (not counting pods
 * being deleted), GatewayPods True (AllPods) or False with the first lacking pod's reason; removed otherwise.
 */
export function podConditions(
  conditions: readonly Condition[],
  s: {
    ip: string;
    found: readonly GatewayPod[];
    carrying: readonly GatewayPod[];
    failed: readonly Lacking[];
  },
  now: string,
): Condition[] {
  const named = (l: readonly Lacking[]) => l.map((x) => `${x.pod.name}: ${x.why}`).join('; ');
  const active = s.carrying.length + s.failed.length;
  let out = [...conditions];
  if (s.failed.length > 0)
    out = setCondition(
      out,
      {
        type: ConditionType.ready,
        status: 'False',
        reason: PARTIALLY_CONFIGURED,
        message: `${s.ip} is configured on ${s.carrying.length} of ${active} active pods of the gateway; ${named(s.failed)}`,
      },
      now,
    );
  const counted = s.found.filter((p) => !p.terminating);
  if (counted.length <= 1) return removeCondition(out, GATEWAY_PODS);
  const lacking = [...s.failed, ...notRunningYet(s.found)];
  const on = `on ${s.carrying.length} of ${counted.length} pods: ${s.carrying.map((p) => p.name).join(', ') || '(none)'}`;
  out = setCondition(
    out,
    lacking.length === 0
      ? { type: GATEWAY_PODS, status: 'True', reason: 'AllPods', message: on }
      : {
          type: GATEWAY_PODS,
          status: 'False',
          reason: lacking[0]!.code,
          message: `${on}; ${named(lacking)}`,
        },
    now,
  );
  // Right after Ready, whatever came first: the list reads the same however the EIP got here.
  const [pods] = out.splice(
    out.findIndex((c) => c.type === GATEWAY_PODS),
    1,
  );
  out.splice(out.findIndex((c) => c.type === ConditionType.ready) + 1, 0, pods!);
  return out;
}
