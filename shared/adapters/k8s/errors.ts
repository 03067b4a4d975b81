/**
 * The one place where the Kubernetes client's errors become the product's taxonomy. A KubeHttpError (or a socket
 * error) never leaves shared/adapters/k8s: it rides along as `cause`.
 */
import {
  ClusterUnavailableError,
  ConflictError,
  type EipError,
  InvalidSpecError,
} from '../../domain/errors.js';
import { KubeHttpError } from './rest.js';

/** The HTTP status of a failed API call, if it got that far. */
export function statusOf(e: unknown): number | undefined {
  return e instanceof KubeHttpError ? e.status : undefined;
}

/** The API server's Status message (`.body` is the raw response text). */
export function apiMessage(e: unknown): string {
  if (e instanceof KubeHttpError) {
    const body: unknown = e.body;
    if (typeof body === 'string') {
      try {
        const parsed = JSON.parse(body) as {
          message?: unknown;
          details?: { causes?: Array<{ message?: unknown }> };
        };
        const causes = (parsed.details?.causes ?? [])
          .map((c) => c.message)
          .filter((m) => typeof m === 'string');
        const message = typeof parsed.message === 'string' ? parsed.message : '';
        return [message, ...causes].filter(Boolean).join(': ') || body;
      } catch {
        return body || `HTTP ${e.status}`;
      }
    }
    return `HTTP ${e.status}`;
  }
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return typeof code === 'string' ? `${e.message} (${code})` : e.message;
  }
  return String(e);
}

/**
 * Translates a failed call into the taxonomy:
 * - 409 → ClusterUnavailableError (a raced precondition; callers that own a precondition map it themselves),
 * - 400/422 → InvalidSpecError (the server refuses the request itself; sending it again cannot help),
 * - anything else — 401/403, 404 where the caller did not expect it, 429, 5xx, network errors, timeouts →
 *   ClusterUnavailableError with the status when there is one.
 * @param what e.g. `patch iptables-eips "eip-1" /status`
 */
export function translate(e: unknown, what: string): EipError {
  const status = statusOf(e);
  const message = `${what}: ${status ? `HTTP ${status}: ` : ''}${apiMessage(e)}`;
  if (status === 400 || status === 422) return new InvalidSpecError(message, { cause: e });
  return new ClusterUnavailableError(message, status, { cause: e });
}

export function conflict(e: unknown, what: string): ConflictError {
  return new ConflictError(`${what}: the object has been modified since it was read (${apiMessage(e)})`, {
    cause: e,
  });
}
