/**
 * The periodic resync spread over its period at a bounded rate (shared/bridge/resync.ts), on a fake clock: every
 * send is recorded with the fake time it happened at.
 */
import { describe, expect, it } from 'vitest';
import { loadBridgeConfig } from '../../shared/bridge/config.js';
import { MIN_TICK_MS, SpreadResync, type Timers } from '../../shared/bridge/resync.js';

/** Timers on a fake clock. `advance` fires what is due in time order; `stall` moves time without firing. */
class FakeTimers implements Timers {
  private t = 0;
  private seq = 0;
  private pending = new Map<number, { at: number; fn: () => void }>();
  now = (): number => this.t;
  setTimeout = (fn: () => void, ms: number): unknown => {
    const id = ++this.seq;
    this.pending.set(id, { at: this.t + ms, fn });
    return id;
  };
  clearTimeout = (h: unknown): void => {
    this.pending.delete(h as number);
  };
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const next = [...this.pending.entries()].sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!next || next[1].at > end) break;
      this.pending.delete(next[0]);
      this.t = Math.max(this.t, next[1].at);
      next[1].fn();
    }
    this.t = end;
  }
  /** The event loop was busy: time passes, no timer fires until the next `advance`. */
  stall(ms: number): void {
    this.t += ms;
  }
  get timersPending(): number {
    return this.pending.size;
  }
}

function setup(items: number, periodMs: number, ratePerSecond: number) {
  const timers = new FakeTimers();
  let names = Array.from({ length: items }, (_, i) => `eip-${i}`);
  const sent: { name: string; at: number }[] = [];
  const rounds: { at: number; items: number; spreadMs: number }[] = [];
  const resync = new SpreadResync<string>({
    periodMs,
    ratePerSecond,
    list: () => names,
    send: (name) => sent.push({ name, at: timers.now() }),
    onRound: (r) => rounds.push({ at: timers.now(), ...r }),
    timers,
  });
  return { timers, resync, sent, rounds, setNames: (n: string[]) => (names = n) };
}

/** The most sends in any window of `ms` (a window starting at each send). */
function peak(times: number[], ms: number): number {
  let best = 0;
  for (let i = 0; i < times.length; i++) {
    let j = i;
    while (j < times.length && times[j]! < times[i]! + ms) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

describe('the periodic resync, spread over its period', () => {
  it('sends nothing before a period has passed, then every EIP once, evenly over the period', () => {
    const { timers, resync, sent, rounds } = setup(100, 10_000, 1_000);
    resync.start();
    timers.advance(9_999);
    expect(sent).toEqual([]);
    timers.advance(10_000);
    expect(rounds).toEqual([{ at: 10_000, items: 100, spreadMs: 10_000 }]);
    expect(sent.map((s) => s.name)).toEqual(Array.from({ length: 100 }, (_, i) => `eip-${i}`));
    // One every 100 ms: the period shared out, not a burst at its start.
    expect(sent.map((s) => s.at)).toEqual(Array.from({ length: 100 }, (_, i) => 10_000 + i * 100));
    expect(
      peak(
        sent.map((s) => s.at),
        1_000,
      ),
    ).toBe(10);
  });

  it('never exceeds its rate: a round that does not fit its period takes longer, and the next waits for it', () => {
    const { timers, resync, sent, rounds } = setup(100, 10_000, 5);
    resync.start();
    timers.advance(10_000 + 59_999);
    const times = sent.map((s) => s.at);
    expect(peak(times, 1_000)).toBeLessThanOrEqual(5);
    // 100 EIPs at 5 per second: 20 s per round, so rounds start at 10 s, 30 s, 50 s — never overlapping.
    expect(rounds.map((r) => r.at)).toEqual([10_000, 30_000, 50_000]);
    expect(rounds[0]!.spreadMs).toBe(20_000);
    const firstRound = sent.slice(0, 100).map((s) => s.name);
    expect(new Set(firstRound).size).toBe(100);
    expect(times[100]).toBe(30_000);
  });

  it('catches up after a stall no faster than its rate', () => {
    const { timers, resync, sent } = setup(50, 10_000, 10);
    resync.start();
    timers.advance(10_000); // round starts, first EIP sent
    timers.stall(3_000); // 3 s with no timer firing: 15 sends are overdue
    timers.advance(20_000);
    const times = sent.slice(0, 50).map((s) => s.at);
    expect(new Set(sent.slice(0, 50).map((s) => s.name)).size).toBe(50);
    expect(peak(times, 1_000)).toBeLessThanOrEqual(10);
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(100);
  });

  it("at a high rate sends a tick's share at once, and still holds the rate over any second", () => {
    const { timers, resync, sent } = setup(5_000, 1_000, 1_000);
    resync.start();
    timers.advance(1_000 + 5_500);
    // 5,000 EIPs at 1,000 per second: the round takes 5 s instead of its 1 s period.
    const times = sent.slice(0, 5_000).map((s) => s.at);
    expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(4_900);
    expect(times.at(-1)! - times[0]!).toBeLessThan(5_100);
    const perTick = (1_000 * MIN_TICK_MS) / 1_000;
    expect(peak(times, 1_000)).toBeLessThanOrEqual(1_000 + perTick);
    expect(peak(times, MIN_TICK_MS)).toBeLessThanOrEqual(perTick);
  });

  it('lists the EIPs at the start of each round, and an empty round waits a period', () => {
    const { timers, resync, sent, rounds, setNames } = setup(0, 1_000, 100);
    resync.start();
    timers.advance(1_000);
    expect(rounds).toEqual([{ at: 1_000, items: 0, spreadMs: 1_000 }]);
    setNames(['a', 'b']);
    timers.advance(1_000);
    expect(rounds.map((r) => [r.at, r.items])).toEqual([
      [1_000, 0],
      [2_000, 2],
    ]);
    timers.advance(1_500);
    expect(sent).toEqual([
      { name: 'a', at: 2_000 },
      { name: 'b', at: 2_500 },
      { name: 'a', at: 3_000 },
      { name: 'b', at: 3_500 },
    ]);
  });

  it('stops: nothing more is sent and no timer is left', () => {
    const { timers, resync, sent } = setup(10, 1_000, 100);
    resync.start();
    timers.advance(1_300);
    const before = sent.length;
    expect(before).toBeGreaterThan(0);
    resync.stop();
    expect(timers.timersPending).toBe(0);
    timers.advance(10_000);
    expect(sent).toHaveLength(before);
  });

  it('is configured by RESYNC_RATE, 20 per second unless set', () => {
    const env = { KUBECONFIG: '/k', BRIDGE_METRICS: 'none', BRIDGE_SINK: 'in-process' };
    expect(loadBridgeConfig(env).resyncRate).toBe(20);
    expect(loadBridgeConfig({ ...env, RESYNC_RATE: '200' }).resyncRate).toBe(200);
    expect(() => loadBridgeConfig({ ...env, RESYNC_RATE: '0' })).toThrow(
      /RESYNC_RATE must be an integer from 1/,
    );
    expect(SpreadResync.gapOf(12_000, 600_000, 20)).toBe(50); // 12,000 EIPs fit the default period exactly
    expect(SpreadResync.gapOf(100_000, 600_000, 20)).toBe(50); // 10⁵ take 5,000 s: the period stretches
  });
});
