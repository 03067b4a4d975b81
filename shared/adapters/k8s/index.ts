/**
 * The product's Kubernetes adapters: the Cluster, Gateway and GatewayInspector ports on the thin REST and exec client
 * (rest.ts, ADR 0027).
 */
export { createK8sCluster } from './cluster.js';
export { createK8sGateway } from './gateway.js';
export { createK8sInspector } from './inspect.js';
