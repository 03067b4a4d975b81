/**
 * The bridge's public API: start it, choose a sink, route changes. See shared/bridge/README.md.
 */
export { type Bridge, type BridgeOptions, startBridge } from './bridge.js';
export { KeyedQueue, type KeyedQueueOptions } from './keyed-queue.js';
export { type KubeObject, snapshotOf, WATCHED_KINDS, type WatchedKind } from './objects.js';
export {
  type Change,
  gatewayCameUp,
  modifiedReason,
  qosPolicyChanged,
  route,
  routeEip,
  routeGatewayPod,
  routeNatRule,
  routeQosPolicy,
  type WatchType,
} from './route.js';
export { type EventBridgeSinkOptions, eventBridgeSink, type PutEventsClient } from './sinks/eventbridge.js';
export {
  type DeadLetter,
  type InProcessSink,
  type InProcessSinkOptions,
  inProcessSink,
} from './sinks/in-process.js';
export { type InvokeClient, LambdaInvokeError, type LambdaSinkOptions, lambdaSink } from './sinks/lambda.js';
export type { Sink, SinkStats } from './sinks/sink.js';
export { GATEWAY_POD_SELECTOR, type WatchSpec, type WatchStatus, watchPaths } from './source.js';
export { type BridgeStats, prometheusText } from './stats.js';
export { Tracker, type WatchLine } from './tracker.js';
