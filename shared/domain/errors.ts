/**
 * The error taxonomy. Adapters translate library errors (SDK, HTTP, WebSocket) into these once, at the
 * boundary; the core and the Lambda edge only ever see these classes.
 *
 * - Retryable errors are thrown out of the handler so Lambda (or the local sink) retries, and the
 *   on-failure destination keeps what never succeeds.
 * - Permanent errors are recorded on the EIP (status.conditions and a Kubernetes Event) and returned as a
 *   `rejected` outcome: retrying cannot fix them.
 */
export abstract class EipError extends Error {
  abstract readonly code: string;
  abstract readonly retryable: boolean;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

export abstract class RetryableError extends EipError {
  readonly retryable = true as const;
}

export abstract class PermanentError extends EipError {
  readonly retryable = false as const;
  /**
   * True when what blocks the EIP may go away without the EIP changing (another EIP releases the address, the
   * missing object is created, the feature is switched on): such a rejection is retried with a capped backoff
   * (shared/domain/retry.ts). False when only an edit of the EIP or of the object it names can fix it.
   */
  readonly mayClear: boolean = false;
}

// ---- permanent ----

/** The event itself is malformed; names the offending field. */
export class InvalidEventError extends PermanentError {
  readonly code = 'InvalidEvent';
}

/** The EIP's spec (or an object it references) cannot be served as written. */
export class InvalidSpecError extends PermanentError {
  readonly code = 'InvalidSpec';
}

/** A static address is held by another owner. */
export class AddressConflictError extends PermanentError {
  readonly code = 'AddressConflict';
  override readonly mayClear = true;
  constructor(
    message: string,
    readonly holderUid?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A static address lies outside the subnet, or is its network, broadcast, gateway or an excluded address. */
export class AddressOutOfRangeError extends PermanentError {
  readonly code = 'AddressOutOfRange';
}

/** The subnet has no free address left. */
export class NoAvailableAddressError extends PermanentError {
  readonly code = 'NoAvailableAddress';
  override readonly mayClear = true;
}

/** A change the product refuses: a new v4ip, natGwDp or externalSubnet on an EIP that already has an address. */
export class UnsupportedChangeError extends PermanentError {
  readonly code = 'UnsupportedChange';
}

/** A QoS policy that cannot be bound as it is written (a NATGW policy, bad rule values). */
export class QoSPolicyError extends PermanentError {
  readonly code = 'QoSPolicyInvalid';
}

/** An unshared QoS policy already bound to another EIP; clears when that EIP lets go of it. */
export class QoSPolicyInUseError extends PermanentError {
  readonly code = 'QoSPolicyInUse';
  override readonly mayClear = true;
}

/** An object the EIP names (its external subnet, its gateway, its QoS policy) does not exist yet. */
export class DependencyMissingError extends PermanentError {
  readonly code = 'DependencyMissing';
  override readonly mayClear = true;
  constructor(
    message: string,
    readonly dependency: { kind: 'Subnet' | 'VpcNatGateway' | 'QoSPolicy'; name: string },
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The VPC NAT gateway feature is not enabled (ConfigMaps); the EIP waits, not Ready, until it is. */
export class NatGwDisabledError extends PermanentError {
  readonly code = 'NatGwDisabled';
  override readonly mayClear = true;
}

/** How a gateway refused (shared/domain/dialect/failures.ts classifies the script's messages). */
interface RefusalFacts {
  /** Which refusal: `malformed-argument`, `unknown-operation`, `kernel-lacks-feature`, `address-in-use`, … */
  reason?: string;
  /**
   * True when it may clear without the EIP changing: the node's kernel (another node), the other host holding the
   * address going away, or a release setting corrected after a dialect mismatch. Such a refusal has the code
   * `GatewayBlocked` and is retried with a backoff (shared/domain/retry.ts); any other is `GatewayRefused`.
   */
  mayClear?: boolean;
  /** The refusal is what a gateway of another kube-ovn release says to this call: the release is set wrong. */
  dialectMismatch?: boolean;
}

/**
 * nat-gateway.sh ran and refused a value (its tool printed why and exited non-zero): running it again with the
 * same call cannot succeed (docs/adr/0077-gateway-refusals-from-recorded-messages.md).
 */
export class GatewayRefusedError extends PermanentError {
  readonly code: 'GatewayRefused' | 'GatewayBlocked';
  override readonly mayClear: boolean;
  readonly reason: string | undefined;
  readonly dialectMismatch: boolean;
  constructor(
    message: string,
    readonly exitCode: number | undefined,
    readonly stderr: string,
    options: ErrorOptions & RefusalFacts = {},
  ) {
    const { reason, mayClear, dialectMismatch, ...errorOptions } = options;
    super(message, errorOptions);
    this.mayClear = mayClear === true;
    this.code = this.mayClear ? 'GatewayBlocked' : 'GatewayRefused';
    this.reason = reason;
    this.dialectMismatch = dialectMismatch === true;
  }
}

/**
 * The kube-ovn release of a gateway cannot be told, or is one the product does not speak: what was seen (image tag,
 * markers, the override annotation, KUBE_OVN_RELEASE) is in the message. Clears when the gateway's annotation, the
 * configuration or the pod changes (docs/compatibility.md).
 */
export class UnsupportedGatewayReleaseError extends PermanentError {
  readonly code = 'UnsupportedGatewayRelease';
  override readonly mayClear = true;
  constructor(
    message: string,
    /** What was seen, one fact each. */
    readonly seen: readonly string[],
    /** A read of the gateway itself (its nat table, its env file) could settle it. */
    readonly needs?: 'gateway-state',
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

// ---- retryable ----

/** The gateway pod is missing, not Running, or ambiguous. */
export class GatewayNotReadyError extends RetryableError {
  readonly code = 'GatewayNotReady';
}

/** nat-gateway.sh exited non-zero, or the exec stream broke before reporting a status. */
export class GatewayCommandError extends RetryableError {
  readonly code = 'GatewayCommandFailed';
  constructor(
    message: string,
    readonly exitCode: number | undefined,
    readonly stdout: string,
    readonly stderr: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The Kubernetes API failed (network, 429, 5xx) or a precondition raced (409). */
export class ClusterUnavailableError extends RetryableError {
  readonly code = 'ClusterUnavailable';
  constructor(
    message: string,
    readonly status?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A write lost an optimistic-concurrency race (resourceVersion test failed). The caller may re-read and retry. */
export class ConflictError extends RetryableError {
  readonly code = 'Conflict';
}

/** DynamoDB throttled or failed after the SDK's own retries. */
export class StoreUnavailableError extends RetryableError {
  readonly code = 'StoreUnavailable';
}

/** Another invocation holds this EIP's lease. */
export class LeaseHeldError extends RetryableError {
  readonly code = 'LeaseHeld';
  constructor(
    message: string,
    readonly holder?: string,
    readonly expiresAt?: number,
  ) {
    super(message);
  }
}

/** Something the EIP depends on exists but is not settled yet (e.g. a QoSPolicy whose status was not copied). */
export class DependencyNotReadyError extends RetryableError {
  readonly code = 'DependencyNotReady';
}

/** The invocation ran out of time before it could finish; everything done so far is safe to repeat. */
export class DeadlineError extends RetryableError {
  readonly code = 'Deadline';
}
