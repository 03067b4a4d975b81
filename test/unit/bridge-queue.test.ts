import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../shared/bridge/work-queue.js';
import { eventually } from '../support/eventually.js';

interface Item {
  key: string;
  id: string;
  /** Coalescing slot; default: the id (no coalescing). */
  slot?: string;
  fail?: boolean;
}

/** A queue whose work items wait until the test releases them, recording start order and overlap. */
function harness(
  concurrency: number,
  extra: { limit?: number; retryMs?: number; maxAttempts?: number } = {},
) {
  const started: string[] = [];
  const finished: string[] = [];
  const release = new Map<string, () => void>();
  const running = new Set<string>();
  let maxParallel = 0;
  const errors: string[] = [];
  const pressure: boolean[] = [];
  const queue = new WorkQueue<Item>({
    concurrency,
    keyOf: (i) => i.key,
    slotOf: (i) => i.slot ?? i.id,
    idOf: (i) => i.id,
    ...(extra.limit !== undefined && {
      limit: extra.limit,
      onPressure: (full: boolean) => pressure.push(full),
    }),
    ...(extra.retryMs !== undefined && {
      retry: (_i: Item, _e: unknown, attempt: number) =>
        attempt < (extra.maxAttempts ?? 3) ? extra.retryMs : undefined,
    }),
    run: (i) =>
      new Promise<void>((resolve, reject) => {
        expect(running.has(i.key)).toBe(false); // never two at once for one key
        running.add(i.key);
        maxParallel = Math.max(maxParallel, running.size);
        started.push(i.id);
        release.set(i.id, () => {
          running.delete(i.key);
          finished.push(i.id);
          if (i.fail) reject(new Error(`boom ${i.id}`));
          else resolve();
        });
      }),
    onError: (i, e, { attempt, retryInMs }) =>
      errors.push(`${i.id}#${attempt}: ${(e as Error).message}${retryInMs !== undefined ? ' (retry)' : ''}`),
  });
  const tick = () => new Promise((r) => setImmediate(r));
  return {
    queue,
    started,
    finished,
    errors,
    pressure,
    maxParallel: () => maxParallel,
    tick,
    async done(id: string) {
      const r = release.get(id);
      if (!r) throw new Error(`${id} is not running (started: ${started.join(' ')})`);
      release.delete(id);
      r();
      await tick();
    },
  };
}

describe('WorkQueue', () => {
  it('runs one item per key at a time, in the order they were queued', async () => {
    const h = harness(4);
    h.queue.push({ key: 'a', id: 'a1' });
    h.queue.push({ key: 'a', id: 'a2' });
    h.queue.push({ key: 'a', id: 'a3' });
    await h.tick();
    expect(h.started).toEqual(['a1']);
    await h.done('a1');
    expect(h.started).toEqual(['a1', 'a2']);
    await h.done('a2');
    await h.done('a3');
    expect(h.finished).toEqual(['a1', 'a2', 'a3']);
  });

  it('runs different keys concurrently up to the limit, and no further', async () => {
    const h = harness(2);
    for (const k of ['a', 'b', 'c', 'd']) h.queue.push({ key: k, id: k });
    await h.tick();
    expect(h.started).toEqual(['a', 'b']);
    expect(h.queue.depth()).toBe(4);
    await h.done('b');
    expect(h.started).toEqual(['a', 'b', 'c']);
    await h.done('a');
    await h.done('c');
    await h.done('d');
    expect(h.maxParallel()).toBe(2);
  });

  it('coalesces: a newer item replaces the waiting one of its slot in place; the last state always runs', async () => {
    const h = harness(1);
    expect(h.queue.push({ key: 'a', id: 'run', slot: 's0' })).toBe('queued'); // starts at once
    expect(h.queue.push({ key: 'a', id: 'v1', slot: 's1' })).toBe('queued');
    expect(h.queue.push({ key: 'a', id: 'w1', slot: 's2' })).toBe('queued');
    expect(h.queue.push({ key: 'a', id: 'v2', slot: 's1' })).toBe('replaced');
    expect(h.queue.push({ key: 'a', id: 'v3', slot: 's1' })).toBe('replaced');
    expect(h.queue.push({ key: 'a', id: 'v3', slot: 's1' })).toBe('duplicate');
    expect(h.queue.waitingCount()).toBe(2);
    await h.done('run');
    await h.done('v3');
    await h.done('w1');
    expect(h.finished).toEqual(['run', 'v3', 'w1']); // v3 kept v1's place, ahead of w1
  });

  it('queues a new item for a slot that is running (the object may have changed since)', async () => {
    const h = harness(1);
    h.queue.push({ key: 'a', id: 'x1', slot: 's' });
    await h.tick();
    expect(h.queue.push({ key: 'a', id: 'x2', slot: 's' })).toBe('queued');
    await h.done('x1');
    await h.done('x2');
    expect(h.finished).toEqual(['x1', 'x2']);
  });

  it('retries a failed item after the backoff, and gives it up when retry says so', async () => {
    // A backoff long enough (100-200 ms with jitter) that the item is seen waiting before its retry starts.
    const h = harness(1, { retryMs: 200, maxAttempts: 2 });
    h.queue.push({ key: 'a', id: 'a1', fail: true });
    await h.tick();
    await h.done('a1');
    expect(h.queue.retrying()).toBe(1);
    await eventually(() => expect(h.started).toEqual(['a1', 'a1']));
    await h.done('a1');
    expect(h.errors).toEqual(['a1#1: boom a1 (retry)', 'a1#2: boom a1']);
    expect(h.queue.retrying()).toBe(0);
    await h.queue.idle();
  });

  it('drops a retry that a newer item of the same slot supersedes', async () => {
    const h = harness(1, { retryMs: 60_000 });
    h.queue.push({ key: 'a', id: 'old', slot: 's', fail: true });
    await h.tick();
    await h.done('old');
    expect(h.queue.retrying()).toBe(1);
    expect(h.queue.push({ key: 'a', id: 'new', slot: 's' })).toBe('replaced');
    expect(h.queue.retrying()).toBe(0);
    await h.done('new');
    expect(h.finished).toEqual(['old', 'new']);
  });

  it('does not retry when a newer item for the slot arrived while the failing one ran', async () => {
    const h = harness(1, { retryMs: 1 });
    h.queue.push({ key: 'a', id: 'old', slot: 's', fail: true });
    await h.tick();
    h.queue.push({ key: 'a', id: 'new', slot: 's' });
    await h.done('old');
    expect(h.queue.retrying()).toBe(0);
    expect(h.errors).toEqual(['old#1: boom old']);
    await h.done('new');
  });

  it('pushLater runs an item again after a delay unless something newer came', async () => {
    const h = harness(1);
    h.queue.pushLater({ key: 'a', id: 'late', slot: 's' }, 1);
    expect(h.queue.retrying()).toBe(1);
    expect(h.queue.attemptsOf({ key: 'a', id: 'late', slot: 's' })).toBe(1);
    await eventually(() => expect(h.started).toEqual(['late']));
    await h.done('late');
    expect(h.queue.attemptsOf({ key: 'a', id: 'late', slot: 's' })).toBe(0); // reset by the success
  });

  it('reports pressure at the limit and relief at half of it, without refusing an item', async () => {
    const h = harness(1, { limit: 4 });
    for (const id of ['r', 'a', 'b', 'c']) h.queue.push({ key: id, id });
    await h.tick();
    expect(h.queue.waitingCount()).toBe(3); // r runs
    expect(h.pressure).toEqual([]);
    expect(h.queue.push({ key: 'd', id: 'd' })).toBe('queued');
    expect(h.pressure).toEqual([true]);
    expect(h.queue.isFull()).toBe(true);
    expect(h.queue.push({ key: 'e', id: 'e' })).toBe('queued'); // over the limit, still kept
    expect(h.queue.push({ key: 'e', id: 'e2', slot: 'e' })).toBe('replaced'); // coalescing does not grow it
    expect(h.queue.waitingCount()).toBe(5);
    await h.done('r');
    await h.done('a');
    expect(h.pressure).toEqual([true]); // 3 waiting: above half
    await h.done('b');
    expect(h.pressure).toEqual([true, false]); // 2 waiting: relief
    await h.done('c');
    await h.done('d');
    await h.done('e2');
    expect(h.finished).toEqual(['r', 'a', 'b', 'c', 'd', 'e2']);
  });

  it('resolves idle() only when nothing is waiting or running', async () => {
    const h = harness(1);
    let idle = false;
    h.queue.push({ key: 'a', id: 'a1' });
    h.queue.push({ key: 'b', id: 'b1' });
    const p = h.queue.idle().then(() => {
      idle = true;
    });
    await h.done('a1');
    expect(idle).toBe(false);
    await h.done('b1');
    await p;
    expect(idle).toBe(true);
    expect(h.queue.depth()).toBe(0);
  });

  it('hands back what is still waiting (and waiting for a retry) and accepts nothing after close()', async () => {
    const h = harness(1, { retryMs: 60_000 });
    h.queue.push({ key: 'x', id: 'x1', fail: true });
    await h.tick();
    await h.done('x1');
    for (const id of ['a1', 'a2', 'b1']) h.queue.push({ key: id[0]!, id });
    await h.tick();
    h.queue.close();
    expect(h.queue.push({ key: 'c', id: 'c1' })).toBe('closed');
    expect(h.queue.takeWaiting().map((i) => i.id)).toEqual(['b1', 'a2', 'x1']);
    expect(h.queue.retrying()).toBe(0);
    expect(h.queue.depth()).toBe(1); // a1 still running
    await h.done('a1');
    expect(h.started).toEqual(['x1', 'a1']);
    await h.queue.idle();
  });
});
