/**
 * What a handler returns: a small JSON result, never undefined. `retryAfterMs` is set when the EIP is blocked by
 * something that may clear without the EIP changing: whoever delivers events sends it again after that delay
 * (docs/adr/0016-blocked-eips-retry.md).
 */
export type Outcome =
  | { status: 'applied'; eip: string; actions: string[]; ip?: string }
  | { status: 'unchanged'; eip: string }
  | { status: 'skipped'; eip: string; reason: string }
  | { status: 'rejected'; eip: string; code: string; message: string; retryAfterMs?: number };

export type OutcomeStatus = Outcome['status'];
