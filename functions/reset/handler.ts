// The reset handler: wiring only (see shared/lambda/eip-handler.ts and shared/core/reset.ts).
import { liveDeps } from '../../shared/adapters/live.js';
import { eipHandler } from '../../shared/lambda/eip-handler.js';

export const handler = eipHandler('reset', liveDeps);
