/**
 * The four EIP operations: kube-ovn's add, update, reset and delete, with the differences listed in
 * docs/kube-ovn-differences.md. Every operation re-reads the EIP, holds the EIP's lease while it works, and
 * converges: it is safe to run twice, concurrently with a sibling, or out of order. Order of effects, always:
 * finalizer → allocation (durable) → gateway → spec/labels → status;
 * and on deletion: gateway cleanup → release → finalizer removal.
 */
import { parseAddress, poolsOf, staticAddressProblem, withPrefix } from '../domain/addressing.js';
import {
  AddressConflictError,
  InvalidEventError,
  InvalidSpecError,
  NatGwDisabledError,
  PermanentError,
  UnsupportedChangeError,
} from '../domain/errors.js';
import {
  DEFAULT_EXTERNAL_SUBNET,
  externalNetworkOf,
  type IptablesEip,
  Label,
  type Subnet,
} from '../domain/kube-ovn.js';
import type { Allocation, Deps, EipObjectChange, EipStatusChange, GatewayPod, Pool } from '../ports.js';
import { runGateway, runningGatewayPod } from './gateway.js';
import { podOwner } from './gc.js';
import { type Invocation, updateEipMeta, withLease } from './invocation.js';
import type { Outcome } from './outcome.js';
import { addQos, assertBindable, type LoadedQos, loadQos, removeQos } from './qos.js';
import {
  ConditionType,
  desiredLabels,
  hasOurFinalizer,
  labelChanges,
  macFor,
  natOf,
  redoToken,
  removeCondition,
  setCondition,
  statusChanges,
  withFinalizer,
  withoutFinalizer,
} from './view.js';

export type Operation = (inv: Invocation, deps: Deps) => Promise<Outcome>;

/** Tracks what one invocation changed, for the outcome and the logs. */
class Run {
  readonly actions: string[] = [];
  constructor(
    readonly inv: Invocation,
    readonly deps: Deps,
  ) {}
  did(action: string): void {
    this.actions.push(action);
  }
  outcome(eip: string, ip?: string): Outcome {
    return this.actions.length
      ? { status: 'applied', eip, actions: this.actions, ...(ip && { ip }) }
      : { status: 'unchanged', eip };
  }
  async gw(pod: GatewayPod, op: Parameters<typeof runGateway>[3], args: string[]): Promise<void> {
    await runGateway(this.inv, this.deps, pod, op, args);
    this.did(`${op} ${args.join(' ')}`);
  }
}

/** Reads the EIP the event names; undefined (→ skipped) when it is gone or is another object with that name. */
async function readEip(inv: Invocation, deps: Deps): Promise<IptablesEip | Outcome> {
  const { name, uid } = inv.event.object;
  const eip = await deps.cluster.getEip(name);
  if (!eip) return { status: 'skipped', eip: name, reason: 'not found' };
  if (uid && eip.metadata.uid !== uid)
    return {
      status: 'skipped',
      eip: name,
      reason: `stale event: uid ${uid} was replaced by ${eip.metadata.uid}`,
    };
  return eip;
}

const isOutcome = (v: IptablesEip | Outcome): v is Outcome => 'status' in v && !('apiVersion' in v);

/**
 * Records a permanent error on the EIP (status.conditions and a Warning Event) and turns it into a `rejected`
 * outcome. Best effort: failing to record must not turn a permanent error into a retry storm.
 */
async function rejected(inv: Invocation, deps: Deps, error: PermanentError): Promise<Outcome> {
  const name = inv.event.object.name;
  deps.metrics.count('Rejections', 1, { code: error.code });
  inv.log.warn('rejected', { code: error.code, message: error.message });
  try {
    const eip = await deps.cluster.getEip(name);
    if (eip && (!inv.event.object.uid || eip.metadata.uid === inv.event.object.uid)) {
      const now = new Date(deps.clock.now()).toISOString();
      let conditions = setCondition(
        eip.status?.conditions,
        {
          type: ConditionType.validated,
          status: 'False',
          reason: error.code,
          message: error.message,
          observedGeneration: eip.metadata.generation,
        },
        now,
      );
      if (!eip.status?.ip)
        conditions = setCondition(
          conditions,
          { type: ConditionType.ready, status: 'False', reason: error.code, message: error.message },
          now,
        );
      const change = statusChanges(eip, { conditions });
      if (change) {
        await deps.cluster.patchEipStatus(name, change);
        await deps.cluster.emitEvent(eip, { type: 'Warning', reason: error.code, message: error.message });
      }
    }
  } catch (e) {
    inv.log.error('could not record the rejection on the EIP', { error: String(e) });
  }
  return { status: 'rejected', eip: name, code: error.code, message: error.message };
}

/** Wraps an operation: permanent errors become a recorded `rejected` outcome; everything else propagates. */
function guarded(op: Operation): Operation {
  return async (inv, deps) => {
    try {
      return await op(inv, deps);
    } catch (e) {
      if (e instanceof PermanentError && !(e instanceof InvalidEventError)) return rejected(inv, deps, e);
      throw e;
    }
  };
}

interface Target {
  subnet: Subnet;
  v4: Pool;
  v6?: Pool;
}

/** The external subnet's pools. @throws InvalidSpecError when it is missing or has no IPv4. */
async function targetOf(deps: Deps, eip: IptablesEip): Promise<Target> {
  const network = externalNetworkOf(eip);
  const subnet = await deps.cluster.getSubnet(network);
  if (!subnet) throw new InvalidSpecError(`subnet ${network} not found`);
  const pools = poolsOf(subnet);
  const v4 = pools.find((p) => p.family === 4);
  if (!v4) throw new InvalidSpecError(`subnet ${network} does not support ipv4`);
  const v6 = pools.find((p) => p.family === 6);
  return { subnet, v4, ...(v6 && { v6 }) };
}

async function requireFeature(deps: Deps): Promise<void> {
  const f = await deps.cluster.natGwFeature();
  if (!f.enabled) throw new NatGwDisabledError(`iptables nat gw not enable: ${f.reason ?? 'disabled'}`);
}

// ------------------------------------------------------------------------------------------- add / update

/**
 * add and update converge the same way; the handler name only says why they were called. A fresh EIP is
 * provisioned, a provisioned one is maintained (refused changes, QoS changes, redo), a terminating one finalized.
 */
async function converge(inv: Invocation, deps: Deps): Promise<Outcome> {
  const first = await readEip(inv, deps);
  if (isOutcome(first)) return first;
  return withLease(inv, deps, async () => {
    // Re-read under the lease: the first read only told us whether there is anything to do.
    const eip = await readEip(inv, deps);
    if (isOutcome(eip)) return eip;
    const run = new Run(inv, deps);
    if (eip.metadata.deletionTimestamp) return finalize(run, eip); // also ADDED-while-terminating
    await requireFeature(deps);
    if (!eip.spec.natGwDp) throw new InvalidSpecError('parameter "natGwDp" cannot be empty');
    return eip.status?.ip ? maintain(run, eip) : provision(run, eip);
  });
}

async function provision(run: Run, eip0: IptablesEip): Promise<Outcome> {
  const { deps } = run;
  const name = eip0.metadata.name;
  const owner = { uid: eip0.metadata.uid, name };
  const gwName = eip0.spec.natGwDp!;

  // Validate everything we can before anything is allocated or configured.
  const target = await targetOf(deps, eip0);
  const gateway = await deps.cluster.getVpcNatGateway(gwName);
  if (!gateway) throw new InvalidSpecError(`vpc nat gateway ${gwName} not found`);
  // An address from a subnet the gateway is not attached to would land on net1 and re-point its default route
  // (docs/kube-ovn-differences.md#subnet-must-be-attached-to-the-gateway).
  const attached = gateway.spec.externalSubnets?.length
    ? gateway.spec.externalSubnets
    : [DEFAULT_EXTERNAL_SUBNET];
  if (!attached.includes(target.v4.subnet))
    throw new InvalidSpecError(
      `vpc nat gateway ${gwName} is not attached to subnet ${target.v4.subnet} (its external subnets: ${attached.join(', ')})`,
    );
  const requested = eip0.spec.v4ip?.trim();
  if (requested && parseAddress(requested)?.family !== 4)
    throw new InvalidSpecError(`failed to parse eip ip ${requested}`);
  const qos = eip0.spec.qosPolicy ? await loadQos(deps, eip0.spec.qosPolicy) : undefined;

  // 1. Finalizer (and the labels known so far) before anything is allocated
  //    (docs/kube-ovn-differences.md#finalizer-before-allocation). The qos label goes on here,
  //    before any tc change, so a concurrent binder of an unshared policy sees it.
  let eip = await updateEipMeta(deps, name, eip0, ownMetadata);
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being added' };
  if (eip.metadata.resourceVersion !== eip0.metadata.resourceVersion) run.did('finalizer');
  if (qos) await assertBindable(deps, eip, qos);

  // 2. Allocation: durable before the gateway is touched. Gateway pods' own addresses are claimed for the pods
  //    first, so they are never handed to an EIP (ADR 0006).
  const pods = await reserveGatewayAddresses(run, [target.v4, ...(target.v6 ? [target.v6] : [])]);
  let v4: Allocation;
  if (requested) {
    const held = await deps.ipam.findByOwner(owner.uid);
    v4 = await deps.ipam.claimAddress(target.v4, requested, owner);
    // The user changed spec.v4ip before the EIP was ever configured: give back what the old request claimed.
    for (const a of held)
      if (a.subnet === target.v4.subnet && a.family === 4 && a.address !== v4.address)
        await deps.ipam.release(a.subnet, a.address, owner.uid);
  } else {
    v4 = await deps.ipam.claimAny(target.v4, owner); // the owner's existing allocation, if a retry
  }
  const v6 = target.v6 ? await deps.ipam.claimAny(target.v6, owner) : undefined;
  run.did(`allocate ${v4.address}${v6 ? ` ${v6.address}` : ''}`);

  // 3. Gateway: address, then QoS.
  const pod = await runningGatewayPod(deps, gwName, pods);
  await run.gw(pod, 'eip-add', [`${withPrefix(target.v4, v4.address)},${target.v4.gateway}`]);
  if (qos) await addQos(run.inv, deps, pod, v4.address, qos);
  if (qos?.rules.length) run.did(`qos ${qos.name}`);

  // 4. Spec and labels in one write, then status.
  eip = await updateEipMeta(deps, name, eip, (e) => {
    const spec: Record<string, string> = {};
    if (e.spec.v4ip !== v4.address) spec.v4ip = v4.address;
    if (v6 && e.spec.v6ip !== v6.address) spec.v6ip = v6.address;
    if (!e.spec.macAddress) spec.macAddress = macFor(e.metadata.uid);
    const labels = labelChanges(e.metadata.labels, desiredLabels(e, v4.address));
    return Object.keys(spec).length || labels
      ? { ...(Object.keys(spec).length && { spec }), ...(labels && { labels }) }
      : undefined;
  });
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being added' };
  await writeReadyStatus(run, eip, { ip: v4.address, redo: redoToken(pod), qos });
  return run.outcome(name, v4.address);
}

/** Our finalizer and kube-ovn's labels, as far as they are known; undefined when both are already right. */
function ownMetadata(e: IptablesEip): EipObjectChange | undefined {
  const finalizers = withFinalizer(e.metadata.finalizers);
  const labels = labelChanges(e.metadata.labels, desiredLabels(e));
  return finalizers || labels ? { ...(finalizers && { finalizers }), ...(labels && { labels }) } : undefined;
}

/**
 * Claims each NAT gateway pod's own address on the EIP's external network (kube-ovn gave it to the pod) for that
 * pod, owner `pod:<uid>`, and returns the pods it listed. Idempotent. A re-created pod takes the address over from its predecessor's reservation
 * (released only if that pod is gone, and only if it still holds it); an address already held by an EIP is a
 * collision made before this product managed the subnet, and is reported rather than taken away.
 */
async function reserveGatewayAddresses(run: Run, pools: Pool[]): Promise<GatewayPod[]> {
  const { deps, inv } = run;
  const pods = await deps.cluster.listGatewayPods();
  const live = new Set(pods.map((p) => podOwner(p.uid)));
  for (const pod of pods) {
    for (const pool of pools) {
      const address = pod.addresses?.[pool.subnet];
      if (!address || staticAddressProblem(pool, address)) continue; // never handed out anyway
      const owner = { uid: podOwner(pod.uid), name: `${pod.namespace}/${pod.name}` };
      try {
        await deps.ipam.claimAddress(pool, address, owner);
      } catch (e) {
        if (!(e instanceof AddressConflictError)) throw e;
        const predecessor =
          e.holderUid?.startsWith('pod:') && !live.has(e.holderUid) ? e.holderUid : undefined;
        if (predecessor && (await deps.ipam.release(pool.subnet, address, predecessor))) {
          await deps.ipam.claimAddress(pool, address, owner);
          continue;
        }
        inv.log.error('a gateway pod address is allocated to someone else', {
          pod: pod.name,
          address,
          holder: e.holderUid,
        });
      }
    }
  }
  return pods;
}

async function maintain(run: Run, eip0: IptablesEip): Promise<Outcome> {
  const { deps, inv } = run;
  const name = eip0.metadata.name;
  const ip = eip0.status!.ip!;
  const gwName = eip0.spec.natGwDp!;
  const network = externalNetworkOf(eip0);

  // Refused changes (docs/kube-ovn-differences.md#address-changes-refused-visibly): the address stays where it
  // is, and the refusal is recorded.
  if (eip0.spec.v4ip && eip0.spec.v4ip !== ip)
    throw new UnsupportedChangeError(`not support eip change ip, old ip '${ip}', new ip '${eip0.spec.v4ip}'`);
  const labels0 = eip0.metadata.labels ?? {};
  if (labels0[Label.natGwName] && labels0[Label.natGwName] !== gwName)
    throw new UnsupportedChangeError(
      `not support eip change natGwDp, old '${labels0[Label.natGwName]}', new '${gwName}'`,
    );
  if (labels0[Label.subnet] && labels0[Label.subnet] !== network)
    throw new UnsupportedChangeError(
      `not support eip change externalSubnet, old '${labels0[Label.subnet]}', new '${network}'`,
    );

  const target = await targetOf(deps, eip0);
  const wantQos = eip0.spec.qosPolicy ?? '';
  const haveQos = eip0.status?.qosPolicy ?? '';
  const qos = wantQos ? await loadQos(deps, wantQos) : undefined;

  // The allocation is the source of truth: adopt an address configured before this table existed (or lost).
  const owner = { uid: eip0.metadata.uid, name };
  const held = await deps.ipam.findByOwner(owner.uid);
  if (!held.some((a) => a.subnet === target.v4.subnet && a.address === ip)) {
    await deps.ipam.claimAddress(target.v4, ip, owner);
    run.did(`adopt ${ip}`);
  }

  // Finalizer and labels before tc changes (the qos label is what the unshared check sees).
  const eip = await updateEipMeta(deps, name, eip0, ownMetadata);
  if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being updated' };
  if (eip.metadata.resourceVersion !== eip0.metadata.resourceVersion) run.did('metadata');
  if (qos && wantQos !== haveQos) await assertBindable(deps, eip, qos);

  const pod = await runningGatewayPod(deps, gwName);
  const token = redoToken(pod);
  // Redo (ADR 0003): the gateway restarted since we configured it (the token moved), someone asked for a redo the
  // kube-ovn way (ready=false), or the bridge saw the gateway come back. The token has one-second resolution (as
  // Kubernetes' startedAt), so a restart within the same second is only visible through that last hint; re-adding
  // is idempotent, so trusting it costs one exec per EIP.
  const redo =
    eip.status?.redo !== token || eip.status?.ready !== true || inv.event.reason === 'gateway-restarted';
  if (redo) await run.gw(pod, 'eip-add', [`${withPrefix(target.v4, ip)},${target.v4.gateway}`]);

  const policyEdited = inv.event.reason === 'qos-policy-changed' && wantQos === haveQos && wantQos !== '';
  if (haveQos && (haveQos !== wantQos || policyEdited)) {
    await removeQos(inv, deps, pod, ip, haveQos, { allDirections: policyEdited });
  }
  if (qos && (redo || wantQos !== haveQos || policyEdited)) {
    await addQos(inv, deps, pod, ip, qos);
    if (qos.rules.length) run.did(`qos ${qos.name}`);
  }
  await writeReadyStatus(run, eip, { ip, redo: token, qos });
  return run.outcome(name, ip);
}

async function writeReadyStatus(
  run: Run,
  eip: IptablesEip,
  s: { ip: string; redo: string; qos: LoadedQos | undefined },
): Promise<void> {
  const { deps } = run;
  const now = new Date(deps.clock.now()).toISOString();
  let conditions = setCondition(
    eip.status?.conditions,
    {
      type: ConditionType.ready,
      status: 'True',
      reason: 'Configured',
      message: `${s.ip} is configured on the gateway`,
    },
    now,
  );
  conditions = removeCondition(conditions, ConditionType.validated);
  const want: EipStatusChange = {
    ready: true,
    ip: s.ip,
    redo: s.redo,
    nat: natOf(await deps.cluster.listNatRulesForEip(eip.metadata.name)),
    qosPolicy: s.qos?.name ?? '',
    conditions,
  };
  const change = statusChanges(eip, want);
  if (change) {
    await deps.cluster.patchEipStatus(eip.metadata.name, change);
    run.did(`status ${Object.keys(change).join(',')}`);
    // status.ip is written once per EIP: that is when an EIP has got its address.
    if (!eip.status?.ip) deps.metrics.count('Allocations', 1, { subnet: externalNetworkOf(eip) });
  }
}

// ------------------------------------------------------------------------------------------- deletion

/**
 * The deletion branch (docs/kube-ovn-differences.md#lifecycle-and-deletion): wait while NAT rules use the EIP;
 * remove the address and QoS from the gateway (skipped when the VpcNatGateway itself is gone, retried when only
 * its pod is missing); release the allocation; only then drop the finalizer.
 */
async function finalize(run: Run, eip: IptablesEip): Promise<Outcome> {
  const { deps, inv } = run;
  const name = eip.metadata.name;
  const uid = eip.metadata.uid;
  const held = await deps.ipam.findByOwner(uid);
  if (!hasOurFinalizer(eip) && held.length === 0)
    return { status: 'skipped', eip: name, reason: 'terminating, nothing of ours left' };

  const rules = await deps.cluster.listNatRulesForEip(name);
  if (rules.length > 0) {
    const message = `eip "${name}" is still in use by ${rules.map((r) => `${r.kind}/${r.name}`).join(', ')}; deletion waits until they are deleted`;
    const now = new Date(deps.clock.now()).toISOString();
    const change = statusChanges(eip, {
      nat: natOf(rules),
      conditions: setCondition(
        eip.status?.conditions,
        { type: ConditionType.deleting, status: 'True', reason: 'WaitingForNatRules', message },
        now,
      ),
    });
    if (change) {
      await deps.cluster.patchEipStatus(name, change);
      await deps.cluster.emitEvent(eip, { type: 'Warning', reason: 'WaitingForNatRules', message });
    }
    return { status: 'skipped', eip: name, reason: message };
  }

  // Addresses to take off the gateway: status.ip, and anything IPAM holds for this uid (an add that crashed
  // after eip-add but before writing status). Never an empty address
  // (docs/kube-ovn-differences.md#eip-del-never-without-an-address).
  const v4held = held.filter((a) => a.family === 4).map((a) => a.address);
  const addresses = [...new Set([eip.status?.ip, ...v4held].filter((a): a is string => !!a))];
  const policies = [...new Set([eip.status?.qosPolicy, eip.spec.qosPolicy].filter((p): p is string => !!p))];
  const gwName = eip.spec.natGwDp;
  if (addresses.length > 0 && gwName) {
    const gateway = await deps.cluster.getVpcNatGateway(gwName);
    const feature = await deps.cluster.natGwFeature();
    if (!gateway) {
      inv.log.info('vpc nat gateway is gone; skipping in-pod cleanup', { gateway: gwName });
    } else if (!feature.enabled) {
      // kube-ovn removes every gateway StatefulSet when the feature is switched off; nothing to clean in a pod.
      inv.log.info('vpc nat gateway feature is off; skipping in-pod cleanup', { reason: feature.reason });
    } else {
      const pod = await runningGatewayPod(deps, gwName);
      const subnet = await deps.cluster.getSubnet(externalNetworkOf(eip));
      const v4 = subnet ? poolsOf(subnet).find((p) => p.family === 4) : undefined;
      for (const address of addresses) {
        if (v4) await run.gw(pod, 'eip-del', [withPrefix(v4, address)]);
        else inv.log.warn('external subnet is gone; cannot build eip-del argument', { address });
        for (const p of policies) await removeQos(inv, deps, pod, address, p);
      }
    }
  }

  const released = await deps.ipam.releaseByOwner(uid);
  if (released.length) {
    deps.metrics.count('Releases', released.length);
    run.did(`release ${released.map((a) => a.address).join(' ')}`);
  }
  const after = await updateEipMeta(deps, name, eip, (e) => {
    const finalizers = withoutFinalizer(e.metadata.finalizers);
    return finalizers ? { finalizers } : undefined;
  });
  if (hasOurFinalizer(eip)) run.did('remove finalizer');
  if (after) inv.log.debug('finalized', { remainingFinalizers: after.metadata.finalizers ?? [] });
  return run.outcome(name);
}

// ------------------------------------------------------------------------------------------- reset

/**
 * Recomputes status.nat from the NAT rules naming the EIP and re-asserts its labels. Unlike kube-ovn's reset it
 * takes the lease and never touches status.ready, so it cannot cancel a pending redo. A terminating EIP waiting
 * for its NAT rules continues its deletion here (a rule going away is what it was waiting for).
 */
async function reset(inv: Invocation, deps: Deps): Promise<Outcome> {
  const first = await readEip(inv, deps);
  if (isOutcome(first)) return first;
  return withLease(inv, deps, async () => {
    const eip = await readEip(inv, deps);
    if (isOutcome(eip)) return eip;
    const run = new Run(inv, deps);
    if (eip.metadata.deletionTimestamp) return finalize(run, eip);
    const after = await updateEipMeta(deps, eip.metadata.name, eip, (e) => {
      if (!e.status?.ip && !hasOurFinalizer(e)) return undefined; // not ours yet: add will label it
      const labels = labelChanges(e.metadata.labels, desiredLabels(e));
      return labels ? { labels } : undefined;
    });
    if (!after) return { status: 'skipped', eip: eip.metadata.name, reason: 'deleted while being reset' };
    if (after.metadata.resourceVersion !== eip.metadata.resourceVersion) run.did('labels');
    const change = statusChanges(after, {
      nat: natOf(await deps.cluster.listNatRulesForEip(eip.metadata.name)),
    });
    if (change) {
      await deps.cluster.patchEipStatus(eip.metadata.name, change);
      run.did(`status nat=${change.nat}`);
    }
    return run.outcome(eip.metadata.name);
  });
}

// ------------------------------------------------------------------------------------------- delete

/**
 * The object is gone. A real safety net (docs/kube-ovn-differences.md#delete-handler-releases-leftovers): whatever
 * IPAM still holds for the deleted uid (finalizer removed by hand, force delete) is taken off the gateway — using
 * the last snapshot the bridge saw — and released.
 */
async function remove(inv: Invocation, deps: Deps): Promise<Outcome> {
  const name = inv.event.object.name;
  const uid = inv.event.object.uid ?? inv.event.old?.metadata?.uid;
  if (!uid) throw new InvalidEventError('invalid event: object.uid is required for the delete handler');
  const current = await deps.cluster.getEip(name);
  if (current?.metadata.uid === uid)
    return { status: 'skipped', eip: name, reason: 'the object still exists' };
  const held = await deps.ipam.findByOwner(uid);
  if (held.length === 0) return { status: 'unchanged', eip: name };
  return withLease(inv, deps, async () => {
    const run = new Run(inv, deps);
    const last = inv.event.old;
    const gwName = last?.spec?.natGwDp;
    const v4held = held.filter((a) => a.family === 4);
    if (
      gwName &&
      v4held.length > 0 &&
      (await deps.cluster.getVpcNatGateway(gwName)) &&
      (await deps.cluster.natGwFeature()).enabled
    ) {
      const pod = await runningGatewayPod(deps, gwName);
      for (const a of v4held) {
        const subnet = await deps.cluster.getSubnet(a.subnet);
        const v4 = subnet ? poolsOf(subnet).find((p) => p.family === 4) : undefined;
        if (v4) await run.gw(pod, 'eip-del', [withPrefix(v4, a.address)]);
        const policies = [
          ...new Set([last?.status?.qosPolicy, last?.spec?.qosPolicy].filter((p): p is string => !!p)),
        ];
        for (const p of policies) await removeQos(inv, deps, pod, a.address, p);
      }
    }
    for (const a of held) {
      if (await deps.ipam.release(a.subnet, a.address, uid)) {
        deps.metrics.count('Releases');
        run.did(`release ${a.address}`);
      }
    }
    return run.outcome(name);
  });
}

export const addEip: Operation = guarded(converge);
export const updateEip: Operation = guarded(converge);
export const resetEip: Operation = guarded(reset);
export const deleteEip: Operation = guarded(remove);

export const operations = { add: addEip, update: updateEip, reset: resetEip, delete: deleteEip } as const;
