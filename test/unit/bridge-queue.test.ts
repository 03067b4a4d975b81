import { describe, expect, it } from 'vitest';
import { KeyedQueue } from '../../shared/bridge/keyed-queue.js';

interface Item {
  key: string;
  id: string;
}

/** A queue whose work items wait until the test releases them, recording start order and overlap. */
function harness(concurrency: number) {
  const started: string[] = [];
  const finished: string[] = [];
  const release = new Map<string, () => void>();
  const running = new Set<string>();
  let maxParallel = 0;
  const errors: string[] = [];
  const queue = new KeyedQueue<Item & { fail?: boolean }>({
    concurrency,
    keyOf: (i) => i.key,
    idOf: (i) => i.id,
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
    onError: (i, e) => errors.push(`${i.id}: ${(e as Error).message}`),
  });
  const tick = () => new Promise((r) => setImmediate(r));
  return {
    queue,
    started,
    finished,
    errors,
    maxParallel: () => maxParallel,
    tick,
    async done(id: string) {
      const r = release.get(id);
      if (!r) throw new Error(`${id} is not running (started: ${started.join(' ')})`);
      r();
      await tick();
    },
  };
}

describe('KeyedQueue', () => {
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

  it('drops an item whose id is already waiting, but takes it again once that one has started', async () => {
    const h = harness(1);
    expect(h.queue.push({ key: 'a', id: 'x' })).toBe(true); // starts at once
    expect(h.queue.push({ key: 'a', id: 'y' })).toBe(true); // waits
    expect(h.queue.push({ key: 'a', id: 'y' })).toBe(false); // duplicate of a waiting id
    expect(h.queue.push({ key: 'a', id: 'x' })).toBe(true); // x is running, not waiting: a new change
    await h.done('x');
    await h.done('y');
    await h.done('x');
    expect(h.finished).toEqual(['x', 'y', 'x']);
  });

  it('reports a failing item and carries on with the next one for the same key', async () => {
    const h = harness(1);
    h.queue.push({ key: 'a', id: 'a1', fail: true });
    h.queue.push({ key: 'a', id: 'a2' });
    await h.tick();
    await h.done('a1');
    await h.done('a2');
    expect(h.errors).toEqual(['a1: boom a1']);
    expect(h.finished).toEqual(['a1', 'a2']);
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

  it('hands back what is still waiting and accepts nothing after close()', async () => {
    const h = harness(1);
    for (const id of ['a1', 'a2', 'b1']) h.queue.push({ key: id[0]!, id });
    await h.tick();
    h.queue.close();
    expect(h.queue.push({ key: 'c', id: 'c1' })).toBe(false);
    expect(h.queue.takeWaiting().map((i) => i.id)).toEqual(['b1', 'a2']);
    expect(h.queue.depth()).toBe(1); // a1 still running
    await h.done('a1');
    expect(h.started).toEqual(['a1']);
    await h.queue.idle();
  });
});
