/**
 * The one polling helper of the test suite; every test that waits for something to happen imports it from here.
 *
 * - `eventually(check)` retries `check` until it stops throwing and returns its value (an assertion that comes
 *   true, a read that stops failing).
 * - `eventuallyValue(check)` also keeps polling while the value is `undefined`, `null` or `false` (a pod that is
 *   not there yet, a flag not yet set) and returns the first other value.
 *
 * Both give up after `timeoutMs` with the last error, its message prefixed with how long they waited and for
 * `what`: a safety net against a hung test, never a performance limit. A check that knows waiting cannot help
 * any more (the process it waits on has exited) throws `GiveUp`, which ends the wait at once.
 */
export interface Polling {
  /** How long to keep trying (default 20 s). */
  timeoutMs?: number;
  /** The pause between two tries (default 20 ms). */
  stepMs?: number;
  /** What is awaited, for the message when the wait times out ("demo-eip Ready"). */
  what?: string;
}

/** Thrown by a check to stop the wait at once: eventually() rethrows it without trying again. */
export class GiveUp extends Error {
  override name = 'GiveUp';
}

export async function eventually<T>(
  check: () => T | Promise<T>,
  { timeoutMs = 20_000, stepMs = 20, what }: Polling = {},
): Promise<T> {
  const started = Date.now();
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (e instanceof GiveUp) throw e;
      if (Date.now() - started > timeoutMs) throw timedOut(e, timeoutMs, what);
      await new Promise((r) => setTimeout(r, stepMs));
    }
  }
}

export type Present<T> = Exclude<T, undefined | null | false>;

export function eventuallyValue<T>(check: () => T | Promise<T>, polling: Polling = {}): Promise<Present<T>> {
  return eventually(async () => {
    const v = await check();
    if (v === undefined || v === null || v === false) throw new Error(`still ${String(v)}`);
    return v as Present<T>;
  }, polling);
}

/** The last error, kept as it is (an assertion keeps its diff), with the wait in front of its message. */
function timedOut(e: unknown, timeoutMs: number, what: string | undefined): Error {
  const wait = `timed out after ${timeoutMs} ms${what ? ` waiting for ${what}` : ''}`;
  if (!(e instanceof Error)) return new Error(`${wait}: ${String(e)}`);
  e.message = `${wait}: ${e.message}`;
  return e;
}
