/**
 * Where routed events go. The bridge hands a sink one event at a time per EIP (its work queue), so `send`
 * resolving means "accepted": buffered for EventBridge, accepted (202) by Lambda, handled in-process.
 */
import type { EipEvent } from '../../events.js';
import type { GatewayOf } from './group.js';

export interface SinkStats {
  /** Deliveries attempted again after a failure. */
  retries: number;
  /** Events given up on (not delivered, or parked as dead letters). */
  failures: number;
  /** Of those, given up at once because the error cannot heal by retrying (unknown bus, access denied). */
  permanentFailures: number;
  /** Events that reached their destination (EventBridge accepted the entry, Lambda 202, handler finished). */
  delivered: number;
  /** Events parked where a person can see them (in-process only). */
  deadLetters: number;
  /** Events accepted but not yet delivered (EventBridge buffer). */
  buffered: number;
  /**
   * Set while the sink keeps failing permanently: the last delivery outcome was a permanent failure. Cleared by
   * the next delivery. The bridge's /readyz fails while it is set.
   */
  failingPermanently?: string;
}

export const emptySinkStats = (): SinkStats => ({
  retries: 0,
  failures: 0,
  permanentFailures: 0,
  delivered: 0,
  deadLetters: 0,
  buffered: 0,
});

/** What a sink tells the bridge about events after it accepted them. */
export interface SinkListener {
  /** The sink gave up on an accepted event (after its own retries, or at once for a permanent error). */
  gaveUp?(event: EipEvent, error: string, permanent: boolean): void;
  /** The handler rejected the event for a reason that may clear by itself: send it again after `delayMs`. */
  retryAfter?(event: EipEvent, delayMs: number): void;
}

export interface Sink {
  /**
   * Accepts one event. May wait (backpressure) when the sink is full.
   * @throws SinkGaveUp (or any error) when the event could not be accepted at all; the bridge counts a failure
   *   and queues the event again with backoff
   */
  send(event: EipEvent): Promise<void>;
  /** Delivers everything accepted so far (EventBridge: empties the buffer). Used by a graceful drain. */
  flush?(): Promise<void>;
  /** Stops retrying and accepting; what is in flight finishes. Used by a graceful drain. */
  close?(): Promise<void>;
  /** For sinks that give up on events after `send` resolved (EventBridge). */
  subscribe?(listener: SinkListener): void;
  /**
   * For sinks that group one gateway's events (./group.ts): where the bridge's cache says an event's EIP is
   * configured (its spec.natGwDp).
   */
  knowGateways?(lookup: GatewayOf): void;
  stats?(): SinkStats;
  /** A short name for logs and metrics labels. */
  readonly name?: string;
}

/** A sink gave up on an event; `permanent` when retrying cannot help (the bridge still re-queues it, slowly). */
export class SinkGaveUp extends Error {
  override readonly name: string = 'SinkGaveUp';
  constructor(
    message: string,
    readonly permanent = false,
  ) {
    super(message);
  }
}

/**
 * AWS error codes that retrying does not heal: the target does not exist, or this identity may not use it. A
 * permanent failure is counted, never retried by the sink, and keeps /readyz failing until a delivery succeeds.
 */
export const PERMANENT_AWS_CODES: ReadonlySet<string> = new Set([
  'AccessDeniedException',
  'AccessDenied',
  'NotAuthorizedForSourceException',
  'ResourceNotFoundException',
  'NotFoundException',
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'ValidationException',
  'InvalidParameterValueException',
  'InvalidRequestContentException',
  'RequestTooLargeException',
  'MalformedDetail',
  'InvalidArgument',
]);

/** The AWS error code of a thrown SDK error (its name) or of a failed PutEvents entry. */
export function awsCodeOf(e: unknown): string | undefined {
  if (e && typeof e === 'object') {
    const name = (e as { name?: unknown }).name;
    if (typeof name === 'string' && name !== 'Error') return name;
    const code = (e as { Code?: unknown; code?: unknown }).Code ?? (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

export const isPermanentAwsError = (e: unknown): boolean => PERMANENT_AWS_CODES.has(awsCodeOf(e) ?? '');

export function errorText(e: unknown): string {
  if (e instanceof Error) return e.name && e.name !== 'Error' ? `${e.name}: ${e.message}` : e.message;
  return String(e);
}
