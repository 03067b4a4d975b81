import { world as labWorld, type WorldOptions } from '../../local/memory/world.js';
import { ManualClock } from './clock.js';

export { GW, POD } from '../../local/memory/world.js';

/** The in-memory world of local/memory on the shared test clock (w.clock is a test/support/clock.ts ManualClock). */
export function world(options: WorldOptions = {}) {
  const clock = new ManualClock();
  return { ...labWorld({ clock, ...options }), clock };
}

export type World = ReturnType<typeof world>;
