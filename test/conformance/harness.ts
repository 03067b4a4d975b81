/**
 * Shared setup of the conformance suite: one local API per test file, kubectl and client-node against it,
 * and the CI rule for kubectl (missing kubectl fails loudly when CI=true, and skips with a printed reason
 * elsewhere).
 */
import { ApiException, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type KubeApi, type KubeApiOptions, startKubeApi } from '../../local/kube-api/index.js';
import {
  forgetKubectlWorkspace,
  type KubectlOptions,
  type KubectlResult,
  kubeConfigFor,
  kubectlAvailability,
  kubectlWith,
} from '../../local/kube-api/testing.js';

/** describe() for a suite that needs kubectl: fails in CI without it, skips (with the reason) elsewhere. */
export function kubectlSuite(name: string, fn: () => void): void {
  const a = kubectlAvailability();
  if (a.available) {
    describe(name, fn);
    return;
  }
  if (process.env.CI === 'true') {
    describe(name, () => {
      it('has kubectl on PATH, which CI requires', () => {
        throw new Error(`CI=true but ${a.reason}`);
      });
    });
    return;
  }
  console.warn(`[conformance] skipping "${name}": ${a.reason}`);
  describe.skip(name, fn);
}

export interface Env {
  api: KubeApi;
  kc: KubeConfig;
  co: CustomObjectsApi;
  core: CoreV1Api;
  /** kubectl against this API; never rejects on a non-zero exit. */
  k: (...args: string[]) => Promise<KubectlResult>;
  kWith: (options: KubectlOptions, ...args: string[]) => Promise<KubectlResult>;
}

/** Starts a local API for the enclosing describe() and closes it afterwards. */
export function useApi(options: KubeApiOptions = {}): Env {
  const env = {} as Env;
  beforeAll(async () => {
    env.api = await startKubeApi(options);
    env.kc = kubeConfigFor(env.api);
    env.co = env.kc.makeApiClient(CustomObjectsApi);
    env.core = env.kc.makeApiClient(CoreV1Api);
    env.k = (...args) => kubectlWith(env.api, {}, ...args);
    env.kWith = (o, ...args) => kubectlWith(env.api, o, ...args);
  });
  afterAll(async () => {
    await env.api?.close();
    if (env.api) forgetKubectlWorkspace(env.api);
  });
  return env;
}

export const EIP = { group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips' } as const;

export function eip(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: 'kubeovn.io/v1',
    kind: 'IptablesEIP',
    metadata: { name, ...((extra.metadata as object | undefined) ?? {}) },
    spec: {
      natGwDp: 'gw1',
      externalSubnet: 'ovn-vpc-external-network',
      ...((extra.spec as object | undefined) ?? {}),
    },
  };
}

/** The ApiException client-node threw, with its Status body parsed. */
export async function apiError(
  p: Promise<unknown>,
): Promise<{ code: number; body: Record<string, unknown> }> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiException) {
      const raw = e.body as unknown;
      const body =
        typeof raw === 'string'
          ? (JSON.parse(raw) as Record<string, unknown>)
          : ((raw ?? {}) as Record<string, unknown>);
      return { code: e.code, body };
    }
    throw e;
  }
  throw new Error('expected the call to fail with an ApiException');
}

/** Table rows of kubectl output: the header and the lines, split on runs of 2+ spaces. */
export function table(stdout: string): { header: string[]; rows: string[][] } {
  const lines = stdout.split('\n').filter((l) => l.trim() !== '');
  const split = (l: string): string[] => l.trim().split(/\s{2,}/);
  return { header: split(lines[0] ?? ''), rows: lines.slice(1).map(split) };
}

/** YAML for `kubectl apply -f -`: JSON is valid YAML. */
export function manifest(obj: unknown): string {
  return JSON.stringify(obj);
}
