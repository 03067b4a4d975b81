/**
 * Loading a KubeConfig for local runs: the local stack, the command-line tools, the tests and benchmarks
 * (client-node parses the file). The product never reads a kubeconfig: on EKS the composition root builds a
 * KubeEndpoint from the cluster endpoint, CA and a minted token (ADR 0027), and a local caller passes what this
 * module loads as `kubeConfig` (shared/adapters/live.ts).
 */
import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { type Config, ConfigError } from '../shared/config/config.js';

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

/**
 * What a local caller passes to buildDeps and auditDepsOf as `kubeConfig`: the kubeconfig file the configuration
 * names, loaded; undefined with EKS access, which the composition root handles itself.
 */
export function kubeConfigOfConfig(config: Config): KubeConfig | undefined {
  return config.kube.kind === 'kubeconfig' ? kubeConfigFromFile(config.kube.path) : undefined;
}
