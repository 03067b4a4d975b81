/**
 * Where permanent errors end: `settle` turns an operation's permanent error into a `rejected` outcome, recorded on
 * the EIP (a Validated=False condition and a Warning Event), with `retryAfterMs` when its blocker may clear
 * (docs/adr/0014-event-path-top-down.md, docs/adr/0016-blocked-eips-retry.md). Everything else propagates: the
 * edge lets Lambda retry it.
 */
import {
  DependencyMissingError,
  GatewayRefusedError,
  InvalidEventError,
  NatGwDisabledError,
  PermanentError,
} from '../domain/errors.js';
import { type IptablesEip, Label } from '../domain/kube-ovn.js';
import { blockedRetryDelay } from '../domain/retry.js';
import type { Deps, EipObjectChange } from '../ports.js';
import { type Invocation, updateEipMeta } from './invocation.js';
import type { Outcome } from './outcome.js';
import type { Run } from './prelude.js';
import { ConditionType, labelChanges, setCondition, statusChanges } from './view.js';

export type Operation = (inv: Invocation, deps: Deps) => Promise<Outcome>;

/**
 * The one place permanent errors are handled: an operation's permanent error becomes a `rejected` outcome,
 * recorded on the EIP unless the event itself was at fault; everything else propagates (the edge lets Lambda
 * retry it).
 */
export function settle(op: Operation): Operation {
  return async (inv, deps) => {
    try {
      return await op(inv, deps);
    } catch (e) {
      if (e instanceof InvalidEventError) return invalidEvent(inv.event.object.name, e);
      if (e instanceof PermanentError) return rejected(inv, deps, e);
      throw e;
    }
  };
}

/** The outcome of an event that cannot be handled as sent (nothing is recorded: it may not name a real EIP). */
export function invalidEvent(name: string, error: InvalidEventError): Outcome {
  return { status: 'rejected', eip: name, code: error.code, message: error.message };
}

/**
 * Records a permanent error on the EIP (status.conditions and a Warning Event) and turns it into a `rejected`
 * outcome, with a retry delay when its blocker may clear. Best effort: failing to record must not turn a permanent
 * error into a retry storm.
 */
async function rejected(inv: Invocation, deps: Deps, error: PermanentError): Promise<Outcome> {
  const name = inv.event.object.name;
  deps.metrics.count('Rejections', 1, { code: error.code });
  inv.log.warn('rejected', { code: error.code, message: error.message });
  let retryAfterMs: number | undefined;
  try {
    const eip = await deps.cluster.getEip(name);
    if (error.mayClear) retryAfterMs = blockedRetryDelay(blockedSince(eip, error.code), deps.clock.now());
    if (eip && (!inv.event.object.uid || eip.metadata.uid === inv.event.object.uid))
      await recordRejection(deps, eip, error);
  } catch (e) {
    inv.log.error('could not record the rejection on the EIP', { error: String(e) });
  }
  return {
    status: 'rejected',
    eip: name,
    code: error.code,
    message: error.message,
    ...(retryAfterMs !== undefined && { retryAfterMs }),
  };
}

/** Since when the EIP has been blocked for `code` (epoch ms), from its Validated condition. */
function blockedSince(eip: IptablesEip | undefined, code: string): number | undefined {
  const c = eip?.status?.conditions?.find((x) => x.type === ConditionType.validated);
  if (c?.status !== 'False' || c.reason !== code || !c.lastTransitionTime) return undefined;
  return Date.parse(c.lastTransitionTime);
}

/**
 * Validated=False with the error, and a Warning Event when that changed something. An EIP whose address is not on
 * a gateway (never configured, or the NAT gateway feature is off, which removes the gateway pods) is also marked
 * not Ready.
 */
async function recordRejection(deps: Deps, eip: IptablesEip, error: PermanentError): Promise<void> {
  const name = eip.metadata.name;
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
  const lost = takesTheAddressOffItsGateway(error);
  const offGateway = !eip.status?.ip || lost;
  if (offGateway)
    conditions = setCondition(
      conditions,
      { type: ConditionType.ready, status: 'False', reason: error.code, message: error.message },
      now,
    );
  const change = statusChanges(eip, {
    conditions,
    // ready=false also asks for a redo once the feature is back (kube-ovn's own convention).
    ...(lost && eip.status?.ip && { ready: false }),
  });
  if (change) {
    await deps.cluster.patchEipStatus(name, change);
    await deps.cluster.emitEvent(eip, { type: 'Warning', reason: error.code, message: error.message });
  }
  // An EIP that was never configured carries no allocation labels (one labelled by an earlier release before it
  // was allocated loses them): they would count it as a used address and make its policy look bound.
  if (!eip.status?.ip) await updateEipMeta(deps, name, eip, withoutAllocationLabels);
}

/**
 * Whether the error means the address is not on a gateway even for a configured EIP: the feature is off (kube-ovn
 * removes the gateway pods), its gateway is gone, or the gateway refused to re-add it.
 */
function takesTheAddressOffItsGateway(error: PermanentError): boolean {
  return (
    error instanceof NatGwDisabledError ||
    error instanceof GatewayRefusedError ||
    (error instanceof DependencyMissingError && error.dependency.kind === 'VpcNatGateway')
  );
}

const ALLOCATION_LABELS = [Label.subnet, Label.natGwName, Label.eipV4Ip, Label.qos];

function withoutAllocationLabels(e: IptablesEip): EipObjectChange | undefined {
  const labels = labelChanges(e.metadata.labels, Object.fromEntries(ALLOCATION_LABELS.map((k) => [k, null])));
  return labels ? { labels } : undefined;
}

/**
 * The outcome of a configured EIP that still has a problem (a refused change, a QoS policy not applied): already
 * recorded in its conditions by the status write, so only counted and logged here.
 */
export function rejectedAfterConfiguring(run: Run, eip: IptablesEip, problem: PermanentError): Outcome {
  run.deps.metrics.count('Rejections', 1, { code: problem.code });
  run.inv.log.warn('rejected', { code: problem.code, message: problem.message, actions: run.actions });
  const since = eip.status?.conditions?.find((c) => c.reason === problem.code && c.status === 'False');
  return {
    status: 'rejected',
    eip: eip.metadata.name,
    code: problem.code,
    message: problem.message,
    ...(problem.mayClear && {
      retryAfterMs: blockedRetryDelay(
        since?.lastTransitionTime ? Date.parse(since.lastTransitionTime) : undefined,
        run.deps.clock.now(),
      ),
    }),
  };
}
