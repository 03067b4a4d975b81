/**
 * An EIP's address on every active pod of its gateway (docs/adr/0105-ha-gateways.md): each pod that lacks it gets
 * eip-add, then each pod its QoS, each spoken to in its own dialect; a pod's failure is kept apart, so that the
 * others are configured and recorded before it is reported (a permanent refusal) or thrown for a retry (anything
 * else). On a gateway of one pod this is the one exec, then the QoS, as before.
 */
import type { Dialect } from '../domain/dialect/index.js';
import { DeadlineError, EipError, PermanentError, RetryableError } from '../domain/errors.js';
import type { IptablesEip, VpcNatGateway } from '../domain/kube-ovn.js';
import type { NatGwCall } from '../domain/nat-gateway.js';
import type { GatewayPod } from '../ports.js';
import type { Run } from './prelude.js';
import { applyQos, type LoadedQos, type QosResult } from './qos.js';
import { redoGateway } from './redo.js';
import { containerDown, type Lacking, lackingOf, notRunning } from './replicas.js';

/** What was done in the pods so far. */
export interface PodsState {
  /** The pods that carry the address (configured now, or untouched because they had it). */
  carrying: GatewayPod[];
  /** The pods that lack it, with their failure. */
  failed: { pod: GatewayPod; error: EipError }[];
  /** Uids of the pods the address was (re)added to in this invocation: their QoS is re-added too. */
  added: Set<string>;
}

export interface AddWork {
  gateway: string;
  /** The VpcNatGateway when the caller has read it (the dialect choice reads it otherwise). */
  vng?: VpcNatGateway | null;
  ip: string;
  /** The eip-add call in a pod's dialect. */
  add: (d: Dialect) => NatGwCall;
  /** Why a pod needs the address added now (undefined: it carries it). `run`: its redo sweep may cover it. */
  due: (pod: GatewayPod) => 'run' | 'asked' | undefined;
}

/** eip-add in every active pod that lacks the address, one pod after the other. */
export async function addOnPods(run: Run, active: readonly GatewayPod[], w: AddWork): Promise<PodsState> {
  const state: PodsState = { carrying: [], failed: [], added: new Set() };
  for (const pod of active) {
    run.knowGateway(pod, w.gateway);
    if (containerDown(pod)) {
      state.failed.push({ pod, error: notRunning(pod) });
      continue;
    }
    const due = w.due(pod);
    if (!due) {
      state.carrying.push(pod);
      continue;
    }
    const error = await attempt(async () => {
      const d = await run.dialect(pod, w.vng, w.gateway);
      // The pod's container run is not the one the address was configured in: the pod is redone at once, and what
      // that re-added is not sent again (ADR 0111).
      if (due === 'run') await redoGateway(run, pod, d, w.ip, w.gateway);
      await run.gw(pod, w.add(d), d);
    });
    if (error) state.failed.push({ pod, error });
    else {
      state.carrying.push(pod);
      state.added.add(pod.uid);
    }
  }
  return state;
}

/**
 * The QoS step in every pod that carries the address (./qos.ts): re-added where the address was, moved from `have` to
 * `want` elsewhere. A pod whose step fails is moved to the failed ones (its next run re-adds address and QoS there).
 * Returns what is applied: a problem a pod reported (the address stays configured), else the first pod's result.
 */
export async function qosOnPods(
  run: Run,
  eip: IptablesEip,
  state: PodsState,
  s: { ip: string; want: string; have: string; loaded?: LoadedQos },
): Promise<QosResult> {
  const results: QosResult[] = [];
  const carrying: GatewayPod[] = [];
  for (const pod of state.carrying) {
    const redo = state.added.has(pod.uid);
    const error = await attempt(async () => {
      results.push(await applyQos(run, eip, pod, s.ip, { want: s.want, have: s.have, redo }, s.loaded));
      carrying.push(pod);
    });
    if (error) state.failed.push({ pod, error });
  }
  state.carrying = carrying;
  return results.find((q) => q.problem) ?? results[0] ?? { wanted: s.want, applied: s.have };
}

/** Runs `f`; the EIP error it throws, if any (time running out and anything unexpected are thrown on). */
async function attempt(f: () => Promise<void>): Promise<EipError | undefined> {
  try {
    await f();
    return undefined;
  } catch (e) {
    if (e instanceof DeadlineError || !(e instanceof EipError)) throw e;
    return e;
  }
}

/** When no pod carries the address: the first pod's failure, as the one pod of a StatefulSet gives it. */
export function throwIfNone(state: PodsState): void {
  if (state.carrying.length === 0 && state.failed[0]) throw state.failed[0].error;
}

/** The failures as the conditions name them. */
export const lackingPods = (state: PodsState): Lacking[] =>
  state.failed.map(({ pod, error }) => lackingOf(pod, error));

/**
 * What the invocation ends with once the record and the status are written: a retryable failure of a pod is thrown
 * (the retry does only the pods that lack the address), else a pod's permanent refusal is returned to be reported.
 */
export function podsProblem(state: PodsState): PermanentError | undefined {
  const retry = state.failed.find((f) => f.error instanceof RetryableError);
  if (retry) throw retry.error;
  return state.failed.find(
    (f): f is { pod: GatewayPod; error: PermanentError } => f.error instanceof PermanentError,
  )?.error;
}
