/**
 * The local Kubernetes API: a kube-apiserver stand-in good enough for kubectl 1.32 and
 * @kubernetes/client-node 1.4 (see local/kube-api/README.md and the spec it implements). Start it with
 * `startKubeApi()`; it listens on 127.0.0.1, serves core/v1 namespaces, pods, configmaps and events,
 * CustomResourceDefinitions and the kube-ovn CRDs of infra/crds/, and backs gateway pods with the NAT
 * gateway simulator.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { ExecModel, type ExecModelOptions } from '../natgw/exec-model.js';
import type { KubeOvnRelease } from '../natgw/releases.js';
import { ExternalSegment, type NatGatewaySim } from '../natgw/sim.js';
import { ADMISSION_GROUP, Admission, admissionHooks } from './admission.js';
import { ADMIN_TOKEN, Authenticator, type StaticToken } from './auth.js';
import type { GatewayBackend } from './backend.js';
import { crdHooks, DEFAULT_NAMESPACES, namespaceHooks, readCrdManifests } from './controllers.js';
import { DataDir } from './datadir.js';
import { ApiError } from './errors.js';
import { ExecServer } from './exec.js';
import { Faults } from './faults.js';
import { deepEqual, type JsonObject } from './json.js';
import { Objects, type WriteContext } from './objects.js';
import { Kubelet } from './pods.js';
import {
  aggregateClusterRoles,
  BOOTSTRAP_CLUSTER_ROLE_BINDINGS,
  BOOTSTRAP_CLUSTER_ROLES,
  RBAC_GROUP,
  Rbac,
  rbacHooks,
} from './rbac.js';
import { Registry, type ResourceDef, resourcesFromCrd } from './registry.js';
import { ApiServer, RequestLog, type RequestRecord } from './server.js';
import { Store } from './store.js';
import { type ServingCertificate, servingCertificate } from './tls.js';
import { Watches } from './watch.js';

/** What kube-apiserver takes of a request's line and headers (MaxHeaderBytes 1 << 20). */
const MAX_HEADER_BYTES = 1 << 20;

export type { StaticToken } from './auth.js';
export { ADMIN_TOKEN, serviceAccountToken } from './auth.js';
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
  /**
   * Bearer tokens besides the administrator's (ADMIN_TOKEN, always known), as lines of a static token file: each
   * authenticates as its user and groups (plus system:authenticated). What each may do is up to RBAC.
   */
  tokens?: readonly StaticToken[];
  /**
   * What an exec into a gateway pod costs: start latency, per-command costs, the xtables lock
   * (local/natgw/exec-model.ts). Default: nothing (the simulator answers at once).
   */
  execModel?: ExecModelOptions;
}

export interface KubeApi {
  /**
   * http://127.0.0.1:PORT. The same port also speaks TLS: `tlsUrl` is what the kubeconfigs name, since kubectl
   * sends credentials only to an https server. Both answer the same, with the same authentication.
   */
  url: string;
  /** https://127.0.0.1:PORT */
  tlsUrl: string;
  /** PEM of the CA of the serving certificate (made at start). */
  ca: string;
  /** A kubeconfig both kubectl and client-node accept: the administrator's, or the one of `token`. */
  kubeconfigYaml(token?: string): string;
  writeKubeconfig(path: string, token?: string): Promise<void>;
  /** Fault injection (see README.md). */
  faults: Faults;
  /** The simulator behind each gateway pod, and the external segment they share. */
  gateways: {
    get(namespace: string, pod: string): NatGatewaySim | undefined;
    segment: ExternalSegment;
  };
  /** The exec cost model every exec into a gateway container goes through; it counts them. */
  execModel: ExecModel;
  /** Every request received (method, path, query, selected headers, body, status), oldest first. */
  requests: {
    all(): readonly RequestRecord[];
    clear(): void;
    /** Every request from now on, however many (all() keeps the last 5,000); returns the unsubscribe. */
    subscribe(fn: (r: RequestRecord) => void): () => void;
  };
  /** The current global resourceVersion. */
  resourceVersion(): number;
  /** Ends watches and execs, flushes the data dir, stops listening. */
  close(): Promise<void>;
}

const DEFAULT_CRD_DIR = fileURLToPath(new URL('../../infra/crds', import.meta.url));

/**
 * A kubeconfig for the local API as the user of `token` (default: the administrator). With the serving CA it names
 * the https URL and trusts that CA; without it (a remote `npm run cluster`), the https form of `url` with
 * insecure-skip-tls-verify.
 */
export function kubeconfigFor(url: string, token: string = ADMIN_TOKEN.token, ca?: string): string {
  const server = url.replace(/^http:/, 'https:');
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: local',
    '  cluster:',
    `    server: ${server}`,
    ca
      ? `    certificate-authority-data: ${Buffer.from(ca).toString('base64')}`
      : '    insecure-skip-tls-verify: true',
    'contexts:',
    '- name: local',
    '  context:',
    '    cluster: local',
    '    user: local',
    'current-context: local',
    'users:',
    '- name: local',
    '  user:',
    `    token: ${token}`,
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

/** The default ClusterRoles and ClusterRoleBindings, created when missing (as the RBAC post-start hook does). */
function bootstrapRbac(objects: Objects, registry: Registry): void {
  for (const [plural, docs] of [
    ['clusterroles', BOOTSTRAP_CLUSTER_ROLES],
    ['clusterrolebindings', BOOTSTRAP_CLUSTER_ROLE_BINDINGS],
  ] as const) {
    const def = must(registry.get(RBAC_GROUP, 'v1', plural), plural);
    for (const doc of docs) {
      const name = String((doc.metadata as JsonObject).name);
      if (!objects.store.get(`${RBAC_GROUP}/${plural}`, undefined, name))
        objects.create(def, undefined, doc, internal());
    }
  }
}

/**
 * The serving certificate: kept in the data dir (as a cluster keeps its PKI), so that the kubeconfigs written before
 * a restart still trust the API; made anew for an API in memory.
 */
function servingCertificateIn(dataDir: string | undefined, hosts: string[]): ServingCertificate {
  if (!dataDir) return servingCertificate(hosts);
  const file = join(dataDir, 'serving-cert.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as ServingCertificate;
  const made = servingCertificate(hosts);
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, JSON.stringify(made), { mode: 0o600 });
  return made;
}

/**
 * One port for both transports: a connection whose first byte starts a TLS handshake goes through TLS, any other
 * is plain HTTP; both end in the same HTTP server.
 */
function listenBoth(
  server: Server,
  cert: { cert: string; key: string },
): ReturnType<typeof createNetServer> & { destroyAll(): void } {
  const sockets = new Set<Socket>();
  const tlsServer = createTlsServer({ cert: cert.cert, key: cert.key, ALPNProtocols: ['http/1.1'] }, (s) =>
    server.emit('connection', s),
  );
  tlsServer.on('tlsClientError', (_e, s) => s.destroy());
  const net = createNetServer({ pauseOnConnect: true }, (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      if (first[0] === 0x16) {
        // TLS takes the handle over and reads what is buffered on the socket first (the bytes put back).
        tlsServer.emit('connection', socket);
        return;
      }
      // The HTTP server would read the handle natively and miss the bytes put back: keep it on the JS stream.
      const handle = (socket as unknown as { _handle?: { _consumed?: boolean } })._handle;
      if (handle) handle._consumed = true;
      server.emit('connection', socket);
      socket.resume();
    });
    socket.resume();
  });
  return Object.assign(net, {
    destroyAll: () => {
      for (const s of sockets) s.destroy();
    },
  });
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
  for (const [plural, kind] of [
    ['roles', 'Role'],
    ['clusterroles', 'ClusterRole'],
    ['rolebindings', 'RoleBinding'],
    ['clusterrolebindings', 'ClusterRoleBinding'],
  ] as const)
    objects.setHooks(RBAC_GROUP, plural, rbacHooks(kind));
  objects.setHooks(
    ADMISSION_GROUP,
    'validatingadmissionpolicies',
    admissionHooks('ValidatingAdmissionPolicy'),
  );
  objects.setHooks(
    ADMISSION_GROUP,
    'validatingadmissionpolicybindings',
    admissionHooks('ValidatingAdmissionPolicyBinding'),
  );
  const clusterRolesDef = must(registry.get(RBAC_GROUP, 'v1', 'clusterroles'), 'clusterroles');

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
  bootstrapRbac(objects, registry);
  // The clusterrole-aggregation controller: after any ClusterRole change, outside the write that made it.
  let aggregating = false;
  store.subscribe((event) => {
    if (event.resource !== `${RBAC_GROUP}/clusterroles` || aggregating) return;
    aggregating = true;
    queueMicrotask(() => {
      aggregating = false;
      aggregateClusterRoles(objects, clusterRolesDef);
    });
  });
  aggregateClusterRoles(objects, clusterRolesDef);
  const rbac = new Rbac(store);
  const admission = new Admission(store);
  const authn = new Authenticator([ADMIN_TOKEN, ...(options.tokens ?? [])]);

  const watches = new Watches(store, objects, { bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000 });
  registry.onRemoved((def) => watches.endResource(def));
  const faults = new Faults({
    compact: () => store.compact(),
    dropWatches: () => watches.dropAll(),
  });
  const execModel = new ExecModel(options.execModel);
  const exec = new ExecServer({ objects, pods: podsDef, kubelet, faults, log, execModel });
  const requests = new RequestLog();
  let hostPort = '';
  const api = new ApiServer({
    authn,
    rbac,
    admission,
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

  // Request line and headers up to 1 MiB, as kube-apiserver takes (Go's http.Server, MaxHeaderBytes 1 << 20): an
  // exec carries its command in the URL, and the product batches up to MAX_EXEC_ARG_BYTES of rules into one.
  const server: Server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
    void api.handle(req, res);
  });
  server.on('upgrade', (req, socket, head) => api.upgrade(req, socket, head));
  server.on('clientError', (_err, socket) => socket.destroy());
  const host = options.host ?? '127.0.0.1';
  const tls = servingCertificateIn(options.dataDir, [...new Set([host, '127.0.0.1', '::1', 'localhost'])]);
  const listener = listenBoth(server, tls);
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(options.port ?? 0, host, () => {
      listener.off('error', reject);
      resolve();
    });
  });
  const port = (listener.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  hostPort = `${urlHost}:${port}`;
  const url = `http://${hostPort}`;
  const tlsUrl = `https://${hostPort}`;
  log(`listening on ${url} and ${tlsUrl}`);

  let closing: Promise<void> | undefined;
  return {
    url,
    tlsUrl,
    ca: tls.ca,
    kubeconfigYaml: (token) => kubeconfigFor(url, token, tls.ca),
    writeKubeconfig: (path, token) => writeFile(path, kubeconfigFor(url, token, tls.ca), { mode: 0o600 }),
    faults,
    gateways: { get: (namespace, pod) => kubelet.gateway(namespace, pod), segment },
    execModel,
    requests: {
      all: () => requests.all(),
      clear: () => requests.clear(),
      subscribe: (fn) => requests.subscribe(fn),
    },
    resourceVersion: () => store.resourceVersion,
    close: () => {
      closing ??= (async () => {
        watches.dropAll();
        execModel.close();
        exec.close();
        kubelet.close();
        await kubelet.settled();
        await new Promise<void>((resolve) => {
          listener.close(() => resolve());
          server.closeAllConnections();
          listener.destroyAll();
        });
        dataDir?.close();
      })();
      return closing;
    },
  };
}
