/**
 * The bridge's public API, what its entry point (functions/bridge/main.ts) and the local stack start it with: the
 * bridge, its sinks and metrics. The modules behind it are imported directly where more is needed (tests). See
 * shared/bridge/README.md.
 */
export { type Bridge, startBridge } from './bridge.js';
export { BridgeMetrics, cloudWatchPublisher, emfPublisher } from './metrics.js';
export { BLOCKER_REASONS } from './route.js';
export { eventBridgeSink } from './sinks/eventbridge.js';
export { type InProcessSink, inProcessSink } from './sinks/in-process.js';
export { lambdaSink } from './sinks/lambda.js';
export type { Sink } from './sinks/sink.js';
export { watchPaths } from './source.js';
