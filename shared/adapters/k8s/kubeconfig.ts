/**
 * Loading a KubeConfig for local runs and the local stack (client-node parses the file). On EKS the composition
 * root builds a KubeEndpoint from the cluster endpoint, CA and a minted token instead, and the Lambda bundles never
 * load this module (ADR 0027).
 */
import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { ConfigError } from '../../config/config.js';
import { endpointOfKubeConfig, type KubeEndpoint } from './rest.js';

/**
 * The kubeconfig at `path`, or the first file named in KUBECONFIG.
 * @throws ConfigError when neither is given, the file is missing, or it names no current cluster
 */
export function kubeConfigFromFile(path?: string, env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const fromEnv = env.KUBECONFIG?.split(':').find((p) => p.trim() !== '');
  const file = path ?? fromEnv;
  if (!file) throw new ConfigError(['no kubeconfig: pass a path or set KUBECONFIG']);
  const origin = path ? '' : ' (from KUBECONFIG)';
  if (!existsSync(file)) throw new ConfigError([`kubeconfig ${file}${origin} does not exist`]);
  const kc = new KubeConfig();
  try {
    kc.loadFromFile(file);
  } catch (e) {
    throw new ConfigError([`kubeconfig ${file}${origin} cannot be read: ${(e as Error).message}`]);
  }
  if (!kc.getCurrentCluster()) {
    throw new ConfigError([`kubeconfig ${file}${origin} has no current context naming a cluster`]);
  }
  return kc;
}

/** The endpoint of the kubeconfig at `path` (see kubeConfigFromFile), for the thin client (rest.ts). */
export function endpointFromFile(path: string): Promise<KubeEndpoint> {
  return endpointOfKubeConfig(kubeConfigFromFile(path));
}
