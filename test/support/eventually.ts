/**
 * The one polling helper of the test suite. `eventually` retries `check` until it stops throwing and returns its
 * value; `eventuallyValue` also keeps polling while the value is `undefined`, `null` or `false` (a pod that is not
 * there yet, a flag not yet set) and returns the first other value. Both fail with the last error after
 * `timeoutMs`: a safety net against a hung test, never a performance limit.
 */
export async function eventually<T>(
  check: () => T | Promise<T>,
  timeoutMs = 20_000,
  stepMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, stepMs));
    }
  }
}

export type Present<T> = Exclude<T, undefined | null | false>;

export function eventuallyValue<T>(
  check: () => T | Promise<T>,
  timeoutMs = 20_000,
  stepMs = 20,
): Promise<Present<T>> {
  return eventually(
    async () => {
      const v = await check();
      if (v === undefined || v === null || v === false) throw new Error(`condition still ${String(v)}`);
      return v as Present<T>;
    },
    timeoutMs,
    stepMs,
  );
}
