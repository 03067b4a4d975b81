export { GW, ManualClock, POD, type World, world } from '../../shared/memory/world.js';
