/**
 * The one gateway clean-up of a deletion (finalize and the delete safety net, ./delete.ts), fanned out to every pod
 * of the gateway where the address is placed (docs/adr/0105-ha-gateways.md), and never stuck: a pod that is going,
 * not running or restarted since the address was configured there is skipped (its state goes with it); a pod that
 * refuses, or that still fails once the EIP has waited `DELETE_PATIENCE_MS`, keeps the address — handed to that
 * pod's reservation in IPAM (`pod:<uid>`, ADR 0042) with a Warning Event — and the deletion goes on.
 */
import { poolsOf, prefixLength } from '../domain/addressing.js';
import { classifyFailure, type Dialect, eipDel } from '../domain/dialect/index.js';
import { DeadlineError, EipError, GatewayCommandError, PermanentError } from '../domain/errors.js';
import { podOwner } from '../domain/gateway-pod.js';
import type { IptablesEip, QoSDirection } from '../domain/kube-ovn.js';
import type { Allocation, Deps, GatewayPod } from '../ports.js';
import type { Invocation } from './invocation.js';
import type { Run } from './prelude.js';
import { policyDirections, removeQos } from './qos.js';
import { containerDown, DELETE_PATIENCE_MS, gatewayPodsOf, isActive } from './replicas.js';
import { redoToken } from './view.js';

export interface CleanUp {
  /** The gateway for an allocation recorded before placements existed. */
  fallbackGateway: string | undefined;
  /** The QoS policies whose filters may be on the gateway for the EIP. */
  policies: readonly string[];
  /** The EIP, for the Events (the safety net may have only a snapshot, or nothing). */
  eip?: IptablesEip;
  /** When the deletion was asked for (RFC 3339): the patience runs from then. Unknown: it never runs out. */
  deletedAt?: string;
}

/**
 * Takes each address this EIP's uid holds in IPAM off every pod of the gateway where it is placed (its recorded
 * placement and namespace; `fallbackGateway` only for an allocation recorded before placements existed), with its
 * QoS filters. An address the EIP shows but does not hold is never touched: it belongs to someone else. Nothing to
 * do for a gateway that no longer exists. A retryable failure of a pod is thrown once every other pod is done.
 */
export async function cleanUpGateway(run: Run, held: readonly Allocation[], o: CleanUp): Promise<void> {
  const { deps, inv } = run;
  let retry: EipError | undefined;
  for (const { gateway, namespace, addresses } of byPlacedGateway(inv, held, o.fallbackGateway).values()) {
    if (!(await deps.cluster.getVpcNatGateway(gateway))) {
      inv.log.info('vpc nat gateway is gone; skipping in-pod cleanup', { gateway });
      continue;
    }
    for (const pod of await gatewayPodsOf(deps, gateway, namespace)) {
      if (!isActive(pod) || containerDown(pod)) {
        inv.log.info('gateway pod not running; its state goes with it', { pod: pod.name, phase: pod.phase });
        continue;
      }
      for (const a of addresses) retry = (await offPod(run, pod, gateway, a, o)) ?? retry;
    }
  }
  if (retry) throw retry;
}

/** The address off one pod; a retryable failure within the patience is returned (the others go on). */
async function offPod(
  run: Run,
  pod: GatewayPod,
  gateway: string,
  a: Allocation,
  o: CleanUp,
): Promise<EipError | undefined> {
  const entry = a.placement?.pods?.[pod.uid];
  if (entry && entry.token !== redoToken(pod)) {
    run.inv.log.info('gateway pod restarted since the address was configured there', { pod: pod.name });
    return undefined;
  }
  let d: Dialect | undefined;
  try {
    d = await run.dialect(pod, undefined, gateway);
    await takeOffGateway(run, pod, d, a, o.policies);
    return undefined;
  } catch (e) {
    if (e instanceof DeadlineError || !(e instanceof EipError)) throw e;
    // No eip-add succeeds in a container run kube-ovn has not initialised: nothing of the address is there.
    if (e instanceof GatewayCommandError && classifyFailure(e, d).reason === 'not-initialised')
      return undefined;
    if (e instanceof PermanentError || patienceOver(run, o.deletedAt)) {
      await leaveOnPod(run, pod, a, e, o.eip);
      return undefined;
    }
    return e;
  }
}

function patienceOver(run: Run, deletedAt: string | undefined): boolean {
  const since = deletedAt ? Date.parse(deletedAt) : Number.NaN;
  return Number.isFinite(since) && run.deps.clock.now() - since >= DELETE_PATIENCE_MS;
}

/**
 * The pod keeps the address: it is handed to the pod's reservation (one conditional write, only while the EIP holds
 * it), which the collector releases once the pod is gone — never while a pod may carry it.
 */
async function leaveOnPod(
  run: Run,
  pod: GatewayPod,
  a: Allocation,
  error: EipError,
  eip: IptablesEip | undefined,
): Promise<void> {
  const { deps, inv } = run;
  const to = { uid: podOwner(pod.uid), name: `${pod.namespace}/${pod.name}` };
  const moved = await deps.ipam.transfer(a.subnet, a.address, a.owner.uid, to);
  const message =
    `${a.address} is left on gateway pod ${to.name} (${error.code}: ${error.message.slice(0, 300)}); ` +
    (moved
      ? `it is held for the pod (${to.uid}) until the pod is gone`
      : 'the EIP no longer held it (left on another pod already)');
  inv.log.warn('address left on a gateway pod', {
    pod: to.name,
    address: a.address,
    moved,
    code: error.code,
  });
  run.did(`leave ${a.address} on ${pod.name}`);
  if (eip) await deps.cluster.emitEvent(eip, { type: 'Warning', reason: 'LeftOnGatewayPod', message });
}

/** The IPv4 allocations by the gateway (and namespace) they are placed on (else `fallbackGateway`). */
function byPlacedGateway(
  inv: Invocation,
  held: readonly Allocation[],
  fallbackGateway: string | undefined,
): Map<string, { gateway: string; namespace: string | undefined; addresses: Allocation[] }> {
  const out = new Map<string, { gateway: string; namespace: string | undefined; addresses: Allocation[] }>();
  for (const a of held) {
    if (a.family !== 4) continue;
    const gateway = a.placement?.gateway ?? fallbackGateway;
    if (!gateway) {
      inv.log.warn('no gateway known for an address; nothing to clean on a gateway', { address: a.address });
      continue;
    }
    const namespace = a.placement?.namespace;
    const key = `${gateway}/${namespace ?? ''}`;
    const group = out.get(key) ?? { gateway, namespace, addresses: [] };
    group.addresses.push(a);
    out.set(key, group);
  }
  return out;
}

/**
 * eip-del for one address (its prefix from the placement, else from its subnet), then its QoS in the directions its
 * policies use.
 */
async function takeOffGateway(
  run: Run,
  pod: GatewayPod,
  d: Dialect,
  a: Allocation,
  policies: readonly string[],
): Promise<void> {
  const { deps, inv } = run;
  const prefix = a.placement?.prefix ?? (await subnetPrefix(deps, a.subnet));
  if (prefix === undefined)
    inv.log.warn('external subnet is gone; cannot build eip-del argument', { address: a.address });
  else await run.gw(pod, eipDel(d, { address: a.address, prefix }), d);
  if (policies.length === 0) return;
  const directions = new Set<QoSDirection>();
  for (const p of policies) for (const x of await policyDirections(deps, p)) directions.add(x);
  await removeQos(inv, deps, pod, d, a.address, [...directions]);
}

/** The IPv4 prefix length of a subnet; undefined when it is gone or has no IPv4. */
async function subnetPrefix(deps: Deps, name: string): Promise<number | undefined> {
  const subnet = await deps.cluster.getSubnet(name);
  const v4 = subnet ? poolsOf(subnet).find((p) => p.family === 4) : undefined;
  return v4 ? prefixLength(v4) : undefined;
}
