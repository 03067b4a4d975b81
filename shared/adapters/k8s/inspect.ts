/**
 * The audit's GatewayInspector (shared/audit/inspect.ts) on pods/exec: runs one of the constant, read-only
 * inspection commands in the pod's vpc-nat-gw container, through the same exec path as nat-gateway.sh
 * (gateway.ts). Nothing but `INSPECTION_ARGV` can be sent through it.
 */
import { type GatewayInspector, INSPECTION_ARGV } from '../../audit/inspect.js';
import { DEFAULT_EXEC_TIMEOUT_MS, runArgv } from './gateway.js';
import { KubeRest, type KubeSource } from './rest.js';

export function createK8sInspector(options: {
  kubeConfig: KubeSource;
  timeoutMs?: number;
}): GatewayInspector {
  const exec = new KubeRest(options.kubeConfig);
  const timeoutMs = options.timeoutMs ?? DEFAULT_EXEC_TIMEOUT_MS;
  return {
    read(pod, command, signal) {
      const argv = INSPECTION_ARGV[command];
      if (!argv) return Promise.reject(new Error(`unknown inspection command ${JSON.stringify(command)}`));
      return runArgv(exec, timeoutMs, pod, [...argv], argv.join(' '), signal);
    },
  };
}
