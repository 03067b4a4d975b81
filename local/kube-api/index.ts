/**
 * The local Kubernetes API: a kube-apiserver stand-in good enough for kubectl 1.32 and
 * @kubernetes/client-node 1.4 (see local/kube-api/README.md and the spec it implements). Start it with
 * `startKubeApi()`; it listens on 127.0.0.1, serves core/v1 namespaces, pods, configmaps and events,
 * CustomResourceDefinitions and the kube-ovn CRDs of infra/crds/, and backs gateway pods with the NAT
 * gateway simulator.
 */
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { KubeOvnRelease } from '../natgw/releases.js';
import { ExternalSegment, type NatGatewaySim } from '../natgw/sim.js';
import type { GatewayBackend } from './backend.js';
import { crdHooks, DEFAULT_NAMESPACES, namespaceHooks, readCrdManifests } from './controllers.js';
import { DataDir } from './datadir.js';
import { ApiError } from './errors.js';
import { ExecServer } from './exec.js';
import { Faults } from './faults.js';
import { deepEqual, type JsonObject } from './json.js';
import { Objects, type WriteContext } from './objects.js';
import { Kubelet } from './pods.js';
import { Registry, type ResourceDef, resourcesFromCrd } from './registry.js';
import { ApiServer, RequestLog, type RequestRecord } from './server.js';
import { Store } from './store.js';
import { Watches } from './watch.js';

export type { RequestRecord } from './server.js';
export { Faults };

export interface KubeApiOptions {
  /** 0 = ephemeral (default). */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Keep objects (and the resourceVersion counter) across restarts in this directory. */
  dataDir?: string;
  /** CRD manifests installed at start (default: the repository's infra/crds). */
  crdDir?: string;
  /** Where the API reports what it does (default: nowhere). */
  log?: (line: string) => void;
  /** How long a watch without `timeoutSeconds` stays open (default 1800 s; real servers use 30-60 min). */
  watchTimeoutSeconds?: number;
  /** BOOKMARK interval on watches that allow bookmarks (default 60 s, as real servers). */
  bookmarkIntervalMs?: number;
  /** Watch events kept for watches from a resourceVersion before 410 Expired (default 1000). */
  historySize?: number;
  /** How long a killed gateway container stays not ready before it runs again (default 200 ms). */
  restartDelayMs?: number;
  /** Backs gateway pods instead of the simulator (local/kube-api/backend.ts); its owner closes it after the API. */
  gatewayBackend?: GatewayBackend;
  /** The kube-ovn release whose nat-gateway.sh the gateway pods run (default: the lab's, local/natgw/releases.ts). */
  kubeOvnRelease?: KubeOvnRelease;
}

export interface KubeApi {
  /** http://127.0.0.1:PORT */
  url: string;
  /** A kubeconfig both kubectl and client-node accept. */
  kubeconfigYaml(): string;
  writeKubeconfig(path: string): Promise<void>;
  /** Fault injection (see README.md). */
  faults: Faults;
  /** The simulator behind each gateway pod, and the external segment they share. */
  gateways: {
    get(namespace: string, pod: string): NatGatewaySim | undefined;
    segment: ExternalSegment;
  };
  /** Every request received (method, path, query, selected headers, body, status), oldest first. */
  requests: { all(): readonly RequestRecord[]; clear(): void };
  /** The current global resourceVersion. */
  resourceVersion(): number;
  /** Ends watches and execs, flushes the data dir, stops listening. */
  close(): Promise<void>;
}

const DEFAULT_CRD_DIR = fileURLToPath(new URL('../../infra/crds', import.meta.url));

export function kubeconfigFor(url: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: local',
    '  cluster:',
    `    server: ${url}`,
    '    insecure-skip-tls-verify: true',
    'contexts:',
    '- name: local',
    '  context:',
    '    cluster: local',
    '    user: local',
    'current-context: local',
    'users:',
    '- name: local',
    '  user:',
    '    token: local-token',
    '',
  ].join('\n');
}

const internal = (): WriteContext => ({ fieldValidation: 'Strict', dryRun: false, warnings: [] });

function must<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`local kube-api: ${what} missing from the registry`);
  return v;
}

async function installCrds(
  objects: Objects,
  crdDef: ResourceDef,
  dir: string,
  log: (line: string) => void,
): Promise<void> {
  for (const manifest of await readCrdManifests(dir)) {
    const name = String((manifest.metadata as JsonObject | undefined)?.name ?? '');
    const existing = objects.store.get('apiextensions.k8s.io/customresourcedefinitions', undefined, name);
    try {
      if (!existing) {
        objects.create(crdDef, undefined, manifest, internal());
      } else if (!deepEqual(existing.spec, manifest.spec)) {
        const next = {
          ...manifest,
          metadata: {
            ...(manifest.metadata as JsonObject),
            resourceVersion: (existing.metadata as JsonObject).resourceVersion ?? '',
          },
        };
        objects.replace(crdDef, undefined, name, undefined, next, internal());
      }
    } catch (e) {
      const why = e instanceof ApiError ? e.status.message : String(e);
      throw new Error(`local kube-api: cannot install CRD ${name} from ${dir}: ${why}`);
    }
  }
  log(`CRDs installed from ${dir}`);
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
export async function startKubeApi(options: KubeApiOptions = {}): Promise<KubeApi> {
  const log = options.log ?? (() => {});
  const registry = new Registry();
  const store = new Store(options.historySize ?? 1000);
  const objects = new Objects(registry, store);
  const podsDef = must(registry.get('', 'v1', 'pods'), 'pods');
  const nsDef = must(registry.get('', 'v1', 'namespaces'), 'namespaces');
  const crdDef = must(
    registry.get('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'),
    'customresourcedefinitions',
  );
  const segment = new ExternalSegment();
  const kubelet = new Kubelet(objects, podsDef, {
    segment,
    restartDelayMs: options.restartDelayMs ?? 200,
    ...(options.kubeOvnRelease && { release: options.kubeOvnRelease }),
    log,
    ...(options.gatewayBackend && { backend: options.gatewayBackend }),
  });
  objects.setHooks('', 'pods', kubelet.hooks());
  objects.setHooks('', 'namespaces', namespaceHooks(objects, registry, nsDef));
  objects.setHooks('apiextensions.k8s.io', 'customresourcedefinitions', crdHooks(objects, registry, crdDef));

  let dataDir: DataDir | undefined;
  if (options.dataDir) {
    dataDir = new DataDir(options.dataDir, () => store.snapshot());
    const snap = dataDir.load();
    if (snap) {
      store.load(snap);
      for (const crd of store.list('apiextensions.k8s.io/customresourcedefinitions')) {
        registry.setCrd(String((crd.metadata as JsonObject).name), resourcesFromCrd(crd));
      }
      kubelet.resumeAfterLoad();
      log(`loaded ${options.dataDir} at resourceVersion ${snap.resourceVersion}`);
    }
  }
  for (const ns of DEFAULT_NAMESPACES) {
    if (!store.get('/namespaces', undefined, ns)) {
      objects.create(
        nsDef,
        undefined,
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
        internal(),
      );
    }
  }
  await installCrds(objects, crdDef, options.crdDir ?? DEFAULT_CRD_DIR, log);

  const watches = new Watches(store, objects, { bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000 });
  registry.onRemoved((def) => watches.endResource(def));
  const faults = new Faults({
    compact: () => store.compact(),
    dropWatches: () => watches.dropAll(),
  });
  const exec = new ExecServer({ objects, pods: podsDef, kubelet, faults, log });
  const requests = new RequestLog();
  let hostPort = '';
  const api = new ApiServer({
    registry,
    store,
    objects,
    watches,
    exec,
    faults,
    requests,
    hostPort: () => hostPort,
    watchTimeoutSeconds: options.watchTimeoutSeconds ?? 1800,
    log,
  });
  if (dataDir) {
    const dd = dataDir;
    dd.flush();
    // Synchronous: the change is on disk before the write that made it is answered.
    store.subscribe((event) => dd.record(event));
  }

  const server: Server = createServer((req, res) => {
    void api.handle(req, res);
  });
  server.on('upgrade', (req, socket, head) => api.upgrade(req, socket, head));
  server.on('clientError', (_err, socket) => socket.destroy());
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  hostPort = `${urlHost}:${port}`;
  const url = `http://${hostPort}`;
  log(`listening on ${url}`);

  let closing: Promise<void> | undefined;
  return {
    url,
    kubeconfigYaml: () => kubeconfigFor(url),
    writeKubeconfig: (path) => writeFile(path, kubeconfigFor(url), { mode: 0o600 }),
    faults,
    gateways: { get: (namespace, pod) => kubelet.gateway(namespace, pod), segment },
    requests: { all: () => requests.all(), clear: () => requests.clear() },
    resourceVersion: () => store.resourceVersion,
    close: () => {
      closing ??= (async () => {
        watches.dropAll();
        exec.close();
        kubelet.close();
        await kubelet.settled();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        dataDir?.close();
      })();
      return closing;
    },
  };
}
