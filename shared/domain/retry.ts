/**
 * When a rejected EIP is tried again. A rejection whose blocker may clear by itself — an address held by another
 * EIP, a full subnet, a missing subnet, gateway or QoS policy, an unshared policy bound elsewhere, the NAT gateway
 * feature switched off — is retried with a backoff that doubles from one second and is capped at 20 seconds (as
 * kube-ovn's work queue does for a failed key); so is a gateway refusal that may clear (the node's kernel, another
 * host holding the address, a release set wrong), and a gateway whose kube-ovn release cannot be told. The delay is
 * derived from how long the EIP has been blocked (the
 * lastTransitionTime of its condition), so no attempt counter has to be stored anywhere: waiting as long again as
 * it has already waited doubles the delay at every attempt. See docs/adr/0016-blocked-eips-retry.md.
 */
export const BLOCKED_RETRY_MIN_MS = 1_000;
export const BLOCKED_RETRY_MAX_MS = 20_000;

/** The delay before the next attempt for an EIP blocked since `sinceMs` (epoch ms; undefined = just now). */
export function blockedRetryDelay(sinceMs: number | undefined, nowMs: number): number {
  const waited = sinceMs === undefined || !Number.isFinite(sinceMs) ? 0 : Math.max(0, nowMs - sinceMs);
  return Math.min(BLOCKED_RETRY_MAX_MS, Math.max(BLOCKED_RETRY_MIN_MS, waited));
}

/**
 * The rejection codes whose blocker may clear by itself (the permanent errors with `mayClear`, and a retired one; a
 * unit test keeps them in step). An EIP showing one of them in a False condition is waiting, and is worth sending again.
 */
export const BLOCKED_CODES: readonly string[] = [
  'AddressConflict',
  'NoAvailableAddress',
  'QoSPolicyInUse',
  'DependencyMissing',
  'NatGwDisabled',
  'GatewayBlocked',
  'UnsupportedGatewayRelease',
  // No longer given (replicated gateways are served, docs/adr/0105-ha-gateways.md): an EIP refused with it before is
  // sent again, and its condition clears.
  'ReplicatedGateway',
];

interface ConditionLike {
  type: string;
  status: string;
  reason?: string;
  lastTransitionTime?: string;
}

/**
 * For a deliverer that sees EIPs rather than handler outcomes (the bridge in front of EventBridge or Lambda): the
 * delay before a waiting EIP should be sent again, from its conditions alone, or undefined when it is not blocked
 * by anything that may clear. The same delay the handler puts in the outcome's `retryAfterMs`.
 */
export function blockedRetryAfter(
  eip: { status?: { conditions?: readonly ConditionLike[] } } | undefined,
  nowMs: number,
): number | undefined {
  const blocked = (eip?.status?.conditions ?? []).filter(
    (c) => c.status === 'False' && c.reason !== undefined && BLOCKED_CODES.includes(c.reason),
  );
  if (blocked.length === 0) return undefined;
  const since = Math.min(
    ...blocked.map((c) => (c.lastTransitionTime ? Date.parse(c.lastTransitionTime) : nowMs)),
  );
  return blockedRetryDelay(since, nowMs);
}
