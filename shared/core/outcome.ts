/** What a handler returns: a small JSON result, never undefined (DESIGN §4). */
export type Outcome =
  | { status: 'applied'; eip: string; actions: string[]; ip?: string }
  | { status: 'unchanged'; eip: string }
  | { status: 'skipped'; eip: string; reason: string }
  | { status: 'rejected'; eip: string; code: string; message: string };

export type OutcomeStatus = Outcome['status'];
