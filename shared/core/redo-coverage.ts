/**
 * What a gateway redo covered for one invocation (./redo.ts, docs/adr/0111-gateway-redo-in-one-sweep.md): the calls
 * the container run's sweep made, which the invocation's own update then skips — for an address only until it sends
 * a call of its own for it.
 */
import { createHash } from 'node:crypto';
import type { NatGwCall } from '../domain/nat-gateway.js';
import { ruleAddress } from '../domain/nat-gateway-batch.js';
import type { GatewayPod, RedoRecord } from '../ports.js';
import type { Invocation } from './invocation.js';

/** A container run of a gateway pod: its uid, the container's restart count and start time. */
export function containerRun(pod: GatewayPod): string {
  return `${pod.uid}:${pod.container?.restartCount ?? 0}:${pod.container?.startedAt ?? pod.creationTimestamp}`;
}

/** The ledger's name of a pod. */
export const podName = (pod: Pick<GatewayPod, 'namespace' | 'name'>): string =>
  `${pod.namespace}/${pod.name}`;

/** The key a call is recorded under: 64 bits of the SHA-256 of its op and argument. */
export function doneKey(call: NatGwCall): string {
  return createHash('sha256')
    .update(`${call.op} ${call.args.join(' ')}`)
    .digest('hex')
    .slice(0, 16);
}

interface Coverage {
  pod: string;
  run: string;
  done: ReadonlySet<string>;
  /** Addresses this invocation has sent a call for that the redo did not cover: from then on it sends its own. */
  own: Set<string>;
  /** Calls of the invocation's own EIP that failed in the sweep it ran, by key: their failure is its answer. */
  failed: ReadonlyMap<string, unknown>;
}

/** By invocation, then by pod (an invocation on a replicated gateway may redo several pods). */
const coverages = new WeakMap<Invocation, Map<string, Coverage>>();

/**
 * Lets `inv` skip the calls `record` says its container run's redo made; `failed`: calls of its own EIP that failed
 * in the sweep this invocation ran (their failure is its answer, not a second attempt).
 */
export function coverByRedo(
  inv: Invocation,
  pod: GatewayPod,
  record: RedoRecord,
  failed: ReadonlyMap<string, unknown> = new Map(),
): void {
  let byPod = coverages.get(inv);
  if (!byPod) {
    byPod = new Map();
    coverages.set(inv, byPod);
  }
  byPod.set(podName(pod), {
    pod: podName(pod),
    run: containerRun(pod),
    done: new Set(record.done),
    own: new Set(),
    failed,
  });
}

/**
 * What the container run's redo did with exactly this call for the invocation's EIP, as long as the invocation has
 * sent no call of its own for that address before: made it (the caller skips it), or, in the sweep this invocation
 * ran, failed it (the caller takes that failure). Undefined: the caller sends it.
 */
export function redoneCall(
  inv: Invocation,
  pod: GatewayPod,
  call: NatGwCall,
): { done: true } | { done: false; error: unknown } | undefined {
  const c = coverages.get(inv)?.get(podName(pod));
  if (!c || c.run !== containerRun(pod)) return undefined;
  const address = ruleAddress(call.args[0] ?? '');
  if (c.own.has(address)) return undefined;
  const key = doneKey(call);
  if (c.done.has(key)) return { done: true };
  c.own.add(address);
  return c.failed.has(key) ? { done: false, error: c.failed.get(key) } : undefined;
}
