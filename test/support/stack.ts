/**
 * The local stack as the end-to-end tests start it: in a temporary directory (its kubeconfig and stack file), quiet,
 * with client-node clients for the custom resources and the core API. `stop()` stops it and removes the directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { memoryLogger } from '../../local/memory/logger.js';
import { type LocalStack, type LocalStackOptions, startLocalStack } from '../../local/stack.js';

export interface TestStack {
  stack: LocalStack;
  dir: string;
  kubeConfig: KubeConfig;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  stop(): Promise<void>;
}

export async function startTestStack(prefix: string, options: LocalStackOptions = {}): Promise<TestStack> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const stack = await startLocalStack({
    kubeconfig: join(dir, 'kubeconfig'),
    log: memoryLogger('warn'),
    say: () => {},
    ...options,
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(stack.kubeconfig);
  return {
    stack,
    dir,
    kubeConfig,
    custom: kubeConfig.makeApiClient(CustomObjectsApi),
    core: kubeConfig.makeApiClient(CoreV1Api),
    stop: async () => {
      await stack.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
