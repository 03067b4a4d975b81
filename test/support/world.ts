export { GW, ManualClock, POD, type World, world } from '../../local/memory/world.js';
