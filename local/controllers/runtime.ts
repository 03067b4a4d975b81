/**
 * The small controller runtime the stand-ins share — a thin layer over the product's own watch and queue
 * (shared/bridge/watch.ts, shared/bridge/work-queue.ts), so the stand-ins and the bridge restart watches and
 * retry work the same way: an informer that keeps itself running (client-node 1.4's ListWatch stops for good on
 * any error but a 410), and a work queue that serialises reconciles, folds duplicate keys and retries failures
 * with backoff — the shape of a client-go controller, without the rest of client-go.
 */
import { PassThrough } from 'node:stream';
import { Exec, type KubeConfig, type V1Status } from '@kubernetes/client-node';
import { backoffDelay } from '../../shared/bridge/backoff.js';
import { errorText, ResilientInformer, type WatchLog } from '../../shared/bridge/watch.js';
import { WorkQueue as SharedWorkQueue } from '../../shared/bridge/work-queue.js';

export type Log = (line: string) => void;

/** Anything with object metadata: client-node's V1Pod as well as the product's kube-ovn types. */
type Obj = { metadata?: { name?: string; namespace?: string; resourceVersion?: string } };

export interface WatchedOptions<T extends Obj> {
  kubeConfig: KubeConfig;
  /** Collection path, e.g. /apis/kubeovn.io/v1/vpc-nat-gateways. */
  path: string;
  list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>;
  labelSelector?: string;
  /** Called with every object added, updated or deleted (after the cache has it). */
  onChange: (obj: T, kind: 'add' | 'update' | 'delete') => void;
  log: Log;
  name: string;
}

/** A one-line log adapter: `<name>: <message> (<fields>)`; a failed watch reads as it always has. */
function lineLog(name: string, log: Log): WatchLog {
  const line = (message: string, fields?: Record<string, unknown>) => {
    if (message === 'watch failed; restarting') {
      const error = String(fields?.error);
      const delay = String(fields?.retryInMs);
      log(
        fields?.listed
          ? `${name}: watch failed (${error}); restarting in ${delay} ms`
          : `${name}: list/watch failed (${error}); retrying in ${delay} ms`,
      );
      return;
    }
    const { watch: _watch, ...rest } = fields ?? {};
    const extra = Object.entries(rest)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
    log(`${name}: ${message}${extra ? ` (${extra})` : ''}`);
  };
  return { info: line, warn: line };
}

const VERB = { ADDED: 'add', MODIFIED: 'update', DELETED: 'delete' } as const;

export class Watched<T extends Obj> {
  private readonly informer: ResilientInformer<T>;

  constructor(o: WatchedOptions<T>) {
    this.informer = new ResilientInformer<T>({
      kubeConfig: o.kubeConfig,
      kind: o.name,
      path: o.path,
      list: o.list,
      ...(o.labelSelector !== undefined && { labelSelector: o.labelSelector }),
      onChange: (type, obj) => o.onChange(obj, VERB[type]),
      log: lineLog(o.name, o.log),
      restartBackoffMs: 100,
      maxRestartBackoffMs: 5_000,
    });
  }

  /** Resolves once the first list has succeeded (retrying with backoff while the API fails). */
  start(): Promise<void> {
    return this.informer.start();
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  list(): readonly T[] {
    return this.informer.list();
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }
}

/** Reconciles keys one at a time; a key queued while it waits is folded; a failed key is retried with backoff. */
export class WorkQueue {
  private readonly queue: SharedWorkQueue<string>;

  constructor(reconcile: (key: string) => Promise<void>, log: Log, name: string) {
    this.queue = new SharedWorkQueue<string>({
      concurrency: 1,
      keyOf: (key) => key,
      run: reconcile,
      retry: (_key, _e, attempt) => backoffDelay(attempt, 100, 5_000),
      onError: (key, e, { retryInMs }) =>
        log(`${name} ${key}: ${errorText(e).split('\n')[0]}; retry in ${retryInMs ?? '-'} ms`),
    });
  }

  add(key: string): void {
    this.queue.push(key);
  }

  /** Resolves when nothing is queued or running (retries scheduled for later do not count). */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  async stop(): Promise<void> {
    this.queue.stop();
    this.queue.takeWaiting();
    await this.queue.idle();
  }
}

/**
 * Runs `argv` in a container through pods/exec (client-node), as kube-ovn's controller runs nat-gateway.sh;
 * rejects with the command, the status message and stderr when it does not exit 0.
 */
export async function execArgv(
  kubeConfig: KubeConfig,
  namespace: string,
  pod: string,
  container: string,
  argv: string[],
): Promise<void> {
  let stderr = '';
  const err = new PassThrough();
  err.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const status = await new Promise<V1Status>((resolve, reject) => {
    new Exec(kubeConfig)
      .exec(namespace, pod, container, argv, new PassThrough(), err, null, false, (s) => resolve(s))
      .catch(reject);
  });
  if (status.status !== 'Success')
    throw new Error(`exec ${argv.join(' ')} in ${pod}: ${status.message ?? ''} ${stderr}`.trim());
}
