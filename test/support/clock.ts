import type { Clock } from '../../shared/ports.js';

/**
 * The one test clock: time moves only when a test says so. `now` is a bound function, so the clock can be handed
 * to code that keeps `clock.now` alone. Starts at a fixed instant unless told otherwise.
 */
export class ManualClock implements Clock {
  constructor(public t = Date.parse('2026-11-29T10:00:00Z')) {}
  now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
  set(t: number): void {
    this.t = t;
  }
}
