/** The product's Kubernetes adapters: the Cluster and Gateway ports on @kubernetes/client-node 1.4. */
export { createK8sCluster, type K8sClusterOptions, REPORTING_COMPONENT } from './cluster.js';
export { createK8sGateway, DEFAULT_EXEC_TIMEOUT_MS, type K8sGatewayOptions } from './gateway.js';
export { kubeConfigFromFile } from './kubeconfig.js';
