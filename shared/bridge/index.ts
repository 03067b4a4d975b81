/**
 * The bridge's public API: start it, choose a sink, route changes. See shared/bridge/README.md.
 */
export { backoffCeiling, backoffDelay, sleep } from './backoff.js';
export { type Bridge, type BridgeOptions, slotOf, startBridge } from './bridge.js';
export { type ForeignWrite, ForeignWriterWatch, foreignWrites, OWN_FIELD_MANAGERS } from './foreign.js';
export {
  BRIDGE_METRIC_NAMES,
  BRIDGE_METRICS_NAMESPACE,
  BRIDGE_SERVICE,
  BridgeMetrics,
  cloudWatchPublisher,
  emfPublisher,
} from './metrics.js';
export { type KubeObject, snapshotOf, WATCHED_KINDS, type WatchedKind } from './objects.js';
export {
  BLOCKER_REASONS,
  type Change,
  gatewayCameUp,
  isWaiting,
  modifiedReason,
  qosPolicyChanged,
  route,
  routeEip,
  routeGatewayPod,
  routeNatGateway,
  routeNatGwConfig,
  routeNatRule,
  routeQosPolicy,
  routeReleased,
  routeSubnet,
  type WatchType,
} from './route.js';
export { type EventBridgeSinkOptions, eventBridgeSink, type PutEventsClient } from './sinks/eventbridge.js';
export {
  type DeadLetter,
  IN_PROCESS_RETRY_FOR_MS,
  type InProcessSink,
  type InProcessSinkOptions,
  inProcessSink,
  retrySchedule,
} from './sinks/in-process.js';
export { type InvokeClient, LambdaInvokeError, type LambdaSinkOptions, lambdaSink } from './sinks/lambda.js';
export {
  isPermanentAwsError,
  type Sink,
  SinkGaveUp,
  type SinkListener,
  type SinkStats,
} from './sinks/sink.js';
export {
  GATEWAY_POD_SELECTOR,
  WATCHED_CONFIG_MAPS,
  type WatchSpec,
  type WatchStatus,
  watchPaths,
} from './source.js';
export { type BridgeStats, prometheusText } from './stats.js';
export { Tracker, type WatchLine } from './tracker.js';
export { ResilientInformer, type ResilientInformerOptions } from './watch.js';
export { type PushResult, WorkQueue, type WorkQueueOptions } from './work-queue.js';
