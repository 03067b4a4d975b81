/**
 * What every operation starts with: the one lease prelude (take the EIP's lease, read the EIP once under it, then
 * converge) and the `Run` that records what one invocation changed. Below it, the two small reads the operations
 * share: status.nat, and a name taken from labels or an event snapshot (docs/adr/0014-event-path-top-down.md).
 */

import type { Dialect } from '../domain/dialect/index.js';
import { DeadlineError, GatewayNotReadyError, RetryableError } from '../domain/errors.js';
import { gatewayOfApp } from '../domain/gateway-pod.js';
import type { IptablesEip, VpcNatGateway } from '../domain/kube-ovn.js';
import type { NatGwCall } from '../domain/nat-gateway.js';
import { nameProblem } from '../domain/validation.js';
import type { Deps, GatewayPod } from '../ports.js';
import { chooseGatewayDialect } from './dialect.js';
import { runGateway } from './gateway.js';
import { type Invocation, withLease } from './invocation.js';
import type { Outcome } from './outcome.js';
import { ConditionType, natOf, setCondition, statusChanges } from './view.js';

/** Tracks what one invocation changed, for the outcome and the logs. */
export class Run {
  readonly actions: string[] = [];
  private readonly dialects = new Map<string, Dialect>();
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
  /** Runs one call built by `dialect` (shared/domain/dialect/calls.ts) and records it. */
  async gw(pod: GatewayPod, call: NatGwCall, dialect: Dialect): Promise<void> {
    const how = await runGateway(this.inv, this.deps, pod, call, dialect);
    this.did(`${call.op} ${call.args.join(' ')}${how === 'redone' ? ' (with the gateway redo)' : ''}`);
  }
  /**
   * The dialect a gateway pod is spoken to in (./dialect.ts), chosen once per pod in this invocation.
   * `gateway`: its VpcNatGateway when the caller has read it; `name`: the gateway's name when the caller knows it
   * (a pod's app label tells it only under the default name prefix).
   */
  async dialect(pod: GatewayPod, gateway?: VpcNatGateway | null, name?: string): Promise<Dialect> {
    const known = this.dialects.get(pod.uid);
    if (known) return known;
    const gw = gateway?.metadata.name ?? name ?? gatewayOfApp(pod.app);
    if (!gw) throw new GatewayNotReadyError(`pod ${pod.namespace}/${pod.name} has no gateway app label`);
    const choice = await chooseGatewayDialect(this.deps, gw, pod, 'send', {
      ...(gateway !== undefined && { gateway }),
      signal: this.inv.signal,
    });
    if (choice.by !== 'image' && choice.by !== 'override')
      this.inv.log.debug('gateway dialect', { pod: pod.name, line: choice.dialect.line, by: choice.by });
    this.dialects.set(pod.uid, choice.dialect);
    return choice.dialect;
  }
  now(): string {
    return new Date(this.deps.clock.now()).toISOString();
  }
}

/**
 * The one lease prelude: take the EIP's lease, read the EIP once under it, then run `body` (ADR 0041). An event for
 * an EIP that is gone costs the two lease writes and nothing else; every add saves the read it would take to find
 * that out before the lease.
 */
export async function underLease(
  inv: Invocation,
  deps: Deps,
  body: (run: Run, eip: IptablesEip) => Promise<Outcome>,
): Promise<Outcome> {
  return withLease(inv, deps, async () => {
    const eip = await readEip(inv, deps);
    if (isOutcome(eip)) return eip;
    try {
      return await body(new Run(inv, deps), eip);
    } catch (e) {
      if (e instanceof RetryableError && !(e instanceof DeadlineError)) await notReadyYet(inv, deps, e);
      throw e;
    }
  });
}

/** Reads the EIP the event names; an outcome (skipped) when it is gone or is another object with that name. */
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
 * A retryable failure of an EIP that has no address yet is written on it (Ready=False, the error's code and
 * message) before the error goes back to be retried, still under the lease: if every retry fails and the event
 * ends as a dead letter, the EIP says why it is not Ready. The next success replaces the condition. Best effort.
 */
async function notReadyYet(inv: Invocation, deps: Deps, error: RetryableError): Promise<void> {
  try {
    const eip = await deps.cluster.getEip(inv.event.object.name);
    if (!eip || eip.status?.ip || eip.metadata.deletionTimestamp) return;
    if (inv.event.object.uid && eip.metadata.uid !== inv.event.object.uid) return;
    const conditions = setCondition(
      eip.status?.conditions,
      {
        type: ConditionType.ready,
        status: 'False',
        reason: error.code,
        message: error.message.slice(0, 1024),
      },
      new Date(deps.clock.now()).toISOString(),
    );
    const change = statusChanges(eip, { conditions });
    if (change) await deps.cluster.patchEipStatus(eip.metadata.name, change);
  } catch (e) {
    inv.log.warn('could not record the failure on the EIP', { error: String(e) });
  }
}

// ------------------------------------------------------------------------------------------- shared reads

/**
 * status.nat for a status write (display only: nothing is decided on it). The event's hint — what the bridge's NAT
 * rule informers saw when it sent the event — is used only when it equals what the EIP already shows, so the
 * answer is "no change" and nothing is listed; a hint that differs, or none, costs the three rule listings (ADR
 * 0041). A stale hint cannot leave a wrong value for long: every rule change that makes status.nat wrong routes a
 * later reset whose hint differs from it, and that one lists. Deletion never uses the hint: whether rules still
 * name the EIP decides whether it may go.
 */
export async function natStatus(run: Run, eip: IptablesEip): Promise<string> {
  const hint = run.inv.event.nat;
  if (hint !== undefined && hint === (eip.status?.nat ?? '')) return hint;
  return natOf(await run.deps.cluster.listNatRulesForEip(eip.metadata.name));
}

/** `name` when it is a valid object name, else undefined (labels and event snapshots are not validated input). */
export const validName = (name: string | undefined): string | undefined =>
  name && !nameProblem(name) ? name : undefined;
