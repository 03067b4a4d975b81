/**
 * Test helpers for suites that run against the local Kubernetes API: the real kubectl with a private
 * kubeconfig, cache directory and HOME per API instance, and a client-node KubeConfig.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { ADMIN_TOKEN, kubeconfigFor } from './index.js';

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface KubectlOptions {
  /** The bearer token kubectl's kubeconfig carries (default: the administrator's). */
  token?: string;
  /** Extra environment (e.g. KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false'). */
  env?: Record<string, string>;
  /** Written to kubectl's stdin, then closed. */
  stdin?: string | Buffer;
  /** Kill kubectl after this long (default 30 s); the result then has code -1. */
  timeoutMs?: number;
  /** Aborts kubectl (e.g. to end `kubectl get -w`). */
  signal?: AbortSignal;
}

/** Anything with the API's URL (a KubeApi, or a remote server started by `npm run cluster`). */
export interface ApiTarget {
  url: string;
}

interface Workspace {
  dir: string;
  kubeconfig: string;
}

const workspaces = new Map<string, Workspace>();

function workspace(target: ApiTarget, token: string): Workspace {
  const key = `${target.url} ${token}`;
  let ws = workspaces.get(key);
  if (!ws) {
    const dir = mkdtempSync(join(tmpdir(), 'kube-api-kubectl-'));
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, kubeconfigFor(target.url, token), { mode: 0o600 });
    ws = { dir, kubeconfig };
    workspaces.set(key, ws);
  }
  return ws;
}

/** Removes the temporary kubeconfigs, caches and HOMEs kubectl used for `target`. */
export function forgetKubectlWorkspace(target: ApiTarget): void {
  for (const [key, ws] of workspaces) {
    if (!key.startsWith(`${target.url} `)) continue;
    workspaces.delete(key);
    rmSync(ws.dir, { recursive: true, force: true });
  }
}

let availability: { available: boolean; reason?: string; version?: string } | undefined;

/** Whether the real kubectl is on PATH (checked once). */
export function kubectlAvailability(): { available: boolean; reason?: string; version?: string } {
  if (availability) return availability;
  const r = spawnSync('kubectl', ['version', '--client', '--output=json'], {
    encoding: 'utf8',
    timeout: 20_000,
  });
  if (r.error || r.status !== 0) {
    availability = {
      available: false,
      reason: `kubectl is not on PATH (${r.error ? r.error.message : r.stderr.trim()}); it comes with the machine image (google-cloud-cli), not with npm`,
    };
  } else {
    let version = '';
    try {
      version = String(
        (JSON.parse(r.stdout) as { clientVersion?: { gitVersion?: string } }).clientVersion?.gitVersion ?? '',
      );
    } catch {
      version = r.stdout.trim();
    }
    availability = { available: true, version };
  }
  return availability;
}

/**
 * Runs the real kubectl against `target` (argv, never a shell) with its own kubeconfig, `--cache-dir` and
 * HOME, so no ~/.kube state leaks in. Resolves with the exit code and output; never rejects on a non-zero
 * exit.
 */
export function kubectlWith(
  target: ApiTarget,
  options: KubectlOptions,
  ...args: string[]
): Promise<KubectlResult> {
  const ws = workspace(target, options.token ?? ADMIN_TOKEN.token);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith('KUBECTL_') && k !== 'KUBECONFIG') env[k] = v;
  Object.assign(env, { KUBECONFIG: ws.kubeconfig, HOME: ws.dir }, options.env ?? {});
  return new Promise((resolve, reject) => {
    const child = spawn('kubectl', [`--cache-dir=${join(ws.dir, 'cache')}`, ...args], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
    child.on('error', (e) => {
      if ((e as NodeJS.ErrnoException).code === 'ABORT_ERR') return;
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({
        code: code ?? -1,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString(),
      });
    });
    child.stdin.on('error', () => {});
    if (options.stdin !== undefined) child.stdin.end(options.stdin);
    else child.stdin.end();
  });
}

/** `kubectl(api, 'get', 'eip')`: runs kubectl against the local API (see kubectlWith). */
export function kubectl(target: ApiTarget, ...args: string[]): Promise<KubectlResult> {
  return kubectlWith(target, {}, ...args);
}

/**
 * A client-node KubeConfig for the local API as the administrator or as the user of `token`, over plain HTTP
 * (`api.kubeconfigYaml()` is the https one, with the API's CA).
 */
export function kubeConfigFor(target: ApiTarget, token: string = ADMIN_TOKEN.token): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // Plain HTTP: client-node sends the token there too, and the tests' hundreds of parallel clients cost no TLS
    // handshakes (kubectl needs https to send credentials: kubeconfigFor).
    clusters: [{ name: 'local', server: target.url, skipTLSVerify: true }],
    users: [{ name: 'local', token }],
    contexts: [{ name: 'local', cluster: 'local', user: 'local' }],
    currentContext: 'local',
  });
  return kc;
}

/**
 * `fetch` with the administrator's bearer token (or `token`): the local API authenticates every request, and one
 * without credentials is system:anonymous, which may only read /version and the health endpoints.
 */
export function adminFetch(
  url: string,
  init: RequestInit = {},
  token: string = ADMIN_TOKEN.token,
): Promise<Response> {
  const headers = new Headers(init.headers);
  if (!headers.has('authorization')) headers.set('authorization', `Bearer ${token}`);
  return fetch(url, { ...init, headers });
}
