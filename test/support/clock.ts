/**
 * The one test clock: the in-memory world's ManualClock (local/memory/world.ts), so that a test and the world it
 * drives share one notion of time. Time moves only when a test says so.
 */
export { ManualClock } from '../../local/memory/world.js';
