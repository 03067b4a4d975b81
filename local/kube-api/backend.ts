/**
 * The seam behind gateway pods: by default the local kubelet backs each one with the in-memory simulator
 * (local/natgw); a GatewayBackend replaces it with something real — local/netns/ runs kube-ovn's own nat-gateway.sh
 * in Linux network namespaces. Everything here is asynchronous: the kubelet writes the pod's status when `start`
 * resolves, and pods/exec answers when `exec` does.
 */
import type { JsonObject } from './json.js';

export interface BackendOutcome {
  stdout: string;
  stderr: string;
  exitCode: number;
  /** The command killed the container's PID 1: the kubelet restarts the container. */
  restart?: boolean;
}

export interface GatewayBackend {
  /**
   * Brings a gateway pod's network up — again from the CNI's state after a container restart — and runs its init
   * containers in order up to the first failure; resolves with their outcomes (the kubelet reports them). Rejects
   * when the pod cannot be set up at all.
   */
  start(pod: JsonObject, restart: boolean): Promise<BackendOutcome[]>;
  /** Runs one exec in the pod's gateway container. */
  exec(pod: JsonObject, argv: readonly string[], stdin: string): Promise<BackendOutcome>;
  /** The pod is gone: its network goes too. */
  remove(pod: JsonObject): Promise<void>;
}
