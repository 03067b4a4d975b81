/** The suite's polling helper (test/support/eventually.ts): when it returns, when it gives up, what it says. */
import { describe, expect, it } from 'vitest';
import { eventually, eventuallyValue, GiveUp } from '../support/eventually.js';

describe('eventually', () => {
  it('returns the value of the first try that does not throw', async () => {
    let tries = 0;
    const v = await eventually(
      () => {
        tries++;
        if (tries < 3) throw new Error(`try ${tries}`);
        return 'done';
      },
      { stepMs: 1 },
    );
    expect(v).toBe('done');
    expect(tries).toBe(3);
  });

  it('accepts undefined and false as values (only a throw means "not yet")', async () => {
    expect(await eventually(() => undefined)).toBeUndefined();
    expect(await eventually(() => false)).toBe(false);
  });

  it('gives up after timeoutMs with the last error, its message prefixed with the wait and what it was for', async () => {
    let tries = 0;
    const started = Date.now();
    const e = await eventually(
      () => {
        tries++;
        expect(tries).toBe(-1);
      },
      { timeoutMs: 60, stepMs: 5, what: 'the impossible' },
    ).catch((x: unknown) => x);
    expect(Date.now() - started).toBeGreaterThanOrEqual(60);
    expect(tries).toBeGreaterThan(1);
    expect((e as Error).name).toBe('AssertionError');
    expect((e as Error).message).toMatch(
      new RegExp(`^timed out after 60 ms waiting for the impossible: expected ${tries} to be -1`),
    );
  });

  it('stops at once when the check throws GiveUp', async () => {
    let tries = 0;
    const e = await eventually(
      () => {
        tries++;
        throw new GiveUp('the process exited');
      },
      { timeoutMs: 10_000 },
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(GiveUp);
    expect((e as Error).message).toBe('the process exited');
    expect(tries).toBe(1);
  });

  it('wraps a thrown non-Error in an Error that names it', async () => {
    const e = await eventually(
      () => {
        throw 'plain string';
      },
      { timeoutMs: 10, stepMs: 5 },
    ).catch((x: unknown) => x);
    expect((e as Error).message).toBe('timed out after 10 ms: plain string');
  });
});

describe('eventuallyValue', () => {
  it('keeps polling while the value is undefined, null or false and returns the first other value', async () => {
    const seq: unknown[] = [undefined, null, false, 0];
    expect(await eventuallyValue(() => seq.shift(), { stepMs: 1 })).toBe(0);
    expect(seq).toEqual([]);
    expect(await eventuallyValue(() => '')).toBe('');
  });

  it('retries a check that throws as well', async () => {
    let tries = 0;
    const v = await eventuallyValue(
      async () => {
        tries++;
        if (tries === 1) throw new Error('not reachable yet');
        return tries === 2 ? undefined : { ok: true };
      },
      { stepMs: 1 },
    );
    expect(v).toEqual({ ok: true });
    expect(tries).toBe(3);
  });

  it('names the last value when it gives up', async () => {
    const e = await eventuallyValue(() => null, { timeoutMs: 20, stepMs: 5, what: 'a pod' }).catch(
      (x: unknown) => x,
    );
    expect((e as Error).message).toBe('timed out after 20 ms waiting for a pod: still null');
  });
});
