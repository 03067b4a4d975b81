/**
 * The GatewayInspector (shared/ports.ts) on pods/exec: runs one read-only command in the pod's vpc-nat-gw container,
 * through the same exec path as nat-gateway.sh (gateway.ts). Only the commands of the gateway dialects
 * (`isDialectInspectionArgv`, shared/domain/dialect/inspect.ts) can be sent through it.
 */
import { isDialectInspectionArgv } from '../../domain/dialect/inspect.js';
import type { GatewayInspector } from '../../ports.js';
import { DEFAULT_EXEC_TIMEOUT_MS, runArgv } from './gateway.js';
import { KubeRest, type KubeSource } from './rest.js';

export function createK8sInspector(options: {
  kubeConfig: KubeSource;
  timeoutMs?: number;
}): GatewayInspector {
  const exec = new KubeRest(options.kubeConfig);
  const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
  return {
    read(pod, argv, signal) {
      if (!isDialectInspectionArgv(argv))
        return Promise.reject(new Error(`not an inspection command: ${JSON.stringify(argv.slice(0, 8))}`));
      return runArgv(exec, timeoutMs, pod, [...argv], argv.join(' '), signal);
    },
  };
}
