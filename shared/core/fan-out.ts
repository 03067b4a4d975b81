/**
 * An EIP's address on every active pod of its gateway (docs/adr/0105-ha-gateways.md): each pod that lacks it gets
 * eip-add, then each pod its QoS, the pods at once, each spoken to in its own dialect; a pod's failure is kept apart, so that the
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

/** What one pod's step gave: it carries the address (added now or before), or it failed. */
type PodStep =
  | { pod: GatewayPod; carries: true; added: boolean }
  | { pod: GatewayPod; carries: false; error: EipError };

/**
 * eip-add in every active pod that lacks the address, the pods at once (each has its own queue and gateway lease,
 * ./batch.ts), their results taken in the pods' order.
 */
export async function addOnPods(run: Run, active: readonly GatewayPod[], w: AddWork): Promise<PodsState> {
  const steps = await allInOrder(active.map((pod) => addOnPod(run, pod, w)));
  const state: PodsState = { carrying: [], failed: [], added: new Set() };
  for (const step of steps) {
    if (!step.carries) state.failed.push({ pod: step.pod, error: step.error });
    else {
      state.carrying.push(step.pod);
      if (step.added) state.added.add(step.pod.uid);
    }
  }
  return state;
}

async function addOnPod(run: Run, pod: GatewayPod, w: AddWork): Promise<PodStep> {
  run.knowGateway(pod, w.gateway);
  if (containerDown(pod)) return { pod, carries: false, error: notRunning(pod) };
  const due = w.due(pod);
  if (!due) return { pod, carries: true, added: false };
  const error = await attempt(async () => {
    const d = await run.dialect(pod, w.vng, w.gateway);
    // The pod's container run is not the one the address was configured in: the pod is redone at once, and what
    // that re-added is not sent again (ADR 0111).
    if (due === 'run') await redoGateway(run, pod, d, w.ip, w.gateway);
    await run.gw(pod, w.add(d), d);
  });
  return error ? { pod, carries: false, error } : { pod, carries: true, added: true };
}

/**
 * Every promise settled, then their values in order; the first rejection in order is thrown once all have settled
 * (no pod's work is left running behind the invocation's back).
 */
async function allInOrder<T>(work: readonly Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(work);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
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
  const steps = await allInOrder(
    state.carrying.map(async (pod) => {
      const redo = state.added.has(pod.uid);
      let result: QosResult | undefined;
      const error = await attempt(async () => {
        result = await applyQos(run, eip, pod, s.ip, { want: s.want, have: s.have, redo }, s.loaded);
      });
      return { pod, result, error };
    }),
  );
  const results: QosResult[] = [];
  const carrying: GatewayPod[] = [];
  for (const { pod, result, error } of steps) {
    if (error) state.failed.push({ pod, error });
    else {
      results.push(result!);
      carrying.push(pod);
    }
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
