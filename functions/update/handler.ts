// The update handler: wiring only (see shared/lambda/eip-handler.ts and shared/core/converge.ts).
import { liveDeps } from '../../shared/adapters/live.js';
import { eipHandler } from '../../shared/lambda/eip-handler.js';

export const handler = eipHandler('update', liveDeps);
