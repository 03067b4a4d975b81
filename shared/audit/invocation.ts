/** The invocation the audit's repairs run under (shared/audit/audit.ts, orphans.ts): its own id, a minute's deadline. */
import type { Invocation } from '../core/invocation.js';
import type { Reason } from '../events.js';
import type { Deps } from '../ports.js';

/** The audit's own invocation; `pod` (a uid) limits a gateway-restarted redo to that pod (ADR 0105, ADR 0120). */
export function auditInvocation(
  deps: Deps,
  name: string,
  uid: string,
  reason: Reason,
  pod?: string,
): Invocation {
  const now = deps.clock.now();
  return {
    event: {
      version: 1,
      id: `audit:${uid}:${now}${pod ? `:${pod}` : ''}`,
      handler: 'update',
      reason,
      object: { kind: 'IptablesEIP', name, uid },
      ...(pod && { pod }),
    },
    signal: AbortSignal.timeout(60_000),
    deadline: now + 60_000,
    log: deps.log.child({ eip: name, audit: true }),
  };
}
