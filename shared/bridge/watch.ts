/**
 * One watched collection that keeps itself running: a client-node informer (`makeInformer`: list, then watch)
 * plus the restart loop client-node leaves to its caller. client-node 1.4's ListWatch relists by itself after a
 * 410 (history compacted) and re-watches from the last resourceVersion when the server ends a stream, but it stops
 * for good on any other error (connection refused while the API restarts, a 5xx on list). This restarts it after
 * such an error with exponential backoff and jitter; the restart resumes from the last resourceVersion, or relists
 * if that is gone, and the relist reports what changed meanwhile (added, modified, and deleted objects — the last
 * as a delete carrying the last state seen).
 *
 * The bridge (shared/bridge/source.ts) and the local stand-ins (local/controllers/runtime.ts) both use it.
 */
import {
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  type ObjectCache,
  Watch,
} from '@kubernetes/client-node';
import { backoffDelay } from './backoff.js';

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** The part of the product's Logger a watch writes to. */
export interface WatchLog {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
}

export interface WatchStatus<K extends string = string> {
  kind: K;
  /** The first list succeeded. */
  listed: boolean;
  /** Listed and watching now (false while restarting after an error, or while paused). */
  watching: boolean;
  /** Stopped on purpose for a while (the bridge's queue is full); not a failure. */
  paused?: boolean;
  restarts: number;
  lastError?: string;
}

type Obj = { metadata?: { name?: string; namespace?: string; resourceVersion?: string } };

export interface ResilientInformerOptions<T extends Obj, K extends string = string> {
  kubeConfig: KubeConfig;
  /** A name for logs and status (the bridge uses the object kind). */
  kind: K;
  /** Collection path, e.g. /apis/kubeovn.io/v1/vpc-nat-gateways. */
  path: string;
  list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>;
  labelSelector?: string;
  /** e.g. `metadata.name=<name>`: one object, for an identity allowed to read only that one (RBAC resourceNames). */
  fieldSelector?: string;
  /**
   * Called with every change after the cache has it. `initial` is true for an ADDED that comes from the very
   * first list (the object was there before we started), false for everything later.
   */
  onChange: (type: WatchType, object: T, opts: { initial: boolean }) => void;
  log?: WatchLog;
  /** Restart backoff after an error: first delay and ceiling. Defaults 500 ms and 30 s. */
  restartBackoffMs?: number;
  maxRestartBackoffMs?: number;
}

export function errorText(e: unknown): string {
  if (e instanceof Error) return e.name && e.name !== 'Error' ? `${e.name}: ${e.message}` : e.message;
  if (e && typeof e === 'object') {
    const code = (e as { code?: unknown }).code;
    const message = (e as { message?: unknown }).message;
    const text = [code, typeof message === 'string' ? message.split('\n')[0] : undefined]
      .filter(Boolean)
      .join(' ');
    if (text) return text;
  }
  return String(e);
}

const keyOf = (o: Obj): string =>
  o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata.name ?? ''}` : (o.metadata?.name ?? '');

export class ResilientInformer<T extends Obj, K extends string = string> {
  private readonly informer: Informer<KubernetesObject> & ObjectCache<KubernetesObject>;
  private stopped = false;
  private paused = false;
  private listed = false;
  private watching = false;
  private restarts = 0;
  private failures = 0;
  private errorsSeen = 0;
  private lastError: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Keys and resourceVersions of the first list, while its items are being delivered. */
  private firstList: Map<string, string | undefined> | undefined;
  private readyListeners: (() => void)[] = [];

  constructor(private readonly options: ResilientInformerOptions<T, K>) {
    const list = async () => {
      const result = await options.list();
      if (!this.listed) {
        this.firstList = new Map((result.items ?? []).map((i) => [keyOf(i), i.metadata?.resourceVersion]));
      }
      return result as unknown as KubernetesListObject<KubernetesObject>;
    };
    // What makeInformer builds (no autoStart), plus the field selector makeInformer does not pass on.
    this.informer = new ListWatch<KubernetesObject>(
      options.path,
      new Watch(options.kubeConfig),
      list,
      false,
      options.labelSelector,
      options.fieldSelector,
    );
    this.informer.on('add', (o) => this.deliver('ADDED', o as T));
    this.informer.on('update', (o) => this.deliver('MODIFIED', o as T));
    this.informer.on('delete', (o) => this.deliver('DELETED', o as T));
    this.informer.on('error', (e) => this.failed(e));
  }

  get kind(): K {
    return this.options.kind;
  }

  private deliver(type: WatchType, object: T): void {
    if (this.stopped) return;
    const key = keyOf(object);
    const initial =
      type === 'ADDED' &&
      this.firstList?.has(key) === true &&
      this.firstList.get(key) === object.metadata?.resourceVersion;
    try {
      this.options.onChange(type, object, { initial });
    } catch (e) {
      this.options.log?.warn('change handler failed', { watch: this.kind, error: errorText(e), object: key });
    }
  }

  private failed(e: unknown): void {
    // client-node 1.4 reports its own abort on stop() as an error
    if (this.stopped || this.paused) return;
    this.errorsSeen++;
    this.watching = false;
    this.lastError = errorText(e);
    this.failures++;
    const delay = backoffDelay(
      this.failures,
      this.options.restartBackoffMs ?? 500,
      this.options.maxRestartBackoffMs ?? 30_000,
    );
    this.options.log?.warn('watch failed; restarting', {
      watch: this.kind,
      error: this.lastError,
      retryInMs: delay,
      attempt: this.failures,
      listed: this.listed,
    });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(), delay);
    this.timer.unref?.();
  }

  /** Starts (or restarts) the informer; resolves when it has listed and opened its watch, or failed trying. */
  async run(): Promise<void> {
    if (this.stopped || this.paused) return;
    const errorsBefore = this.errorsSeen;
    if (this.listed) this.restarts++;
    try {
      await this.informer.start();
    } catch (e) {
      this.failed(e);
      return;
    }
    if (this.stopped || this.paused || this.errorsSeen !== errorsBefore) return;
    if (!this.listed) this.options.log?.info('listed and watching', { watch: this.kind });
    else this.options.log?.info('watching again', { watch: this.kind, restarts: this.restarts });
    this.listed = true;
    this.firstList = undefined;
    this.watching = true;
    this.failures = 0;
    this.lastError = undefined;
    const listeners = this.readyListeners;
    this.readyListeners = [];
    for (const l of listeners) l();
  }

  /** Starts in the background; resolves once the first list succeeded and the watch is open. */
  start(): Promise<void> {
    void this.run();
    return this.whenListed();
  }

  /** Resolves once the first list succeeded and the watch is open (retrying in the background until then). */
  whenListed(): Promise<void> {
    if (this.listed) return Promise.resolve();
    return new Promise((r) => this.readyListeners.push(r));
  }

  /**
   * Closes the watch for a while (back-pressure). Nothing is lost: `resume()` re-watches from the last
   * resourceVersion, or relists and reports the differences.
   */
  async pause(): Promise<void> {
    if (this.stopped || this.paused) return;
    this.paused = true;
    this.watching = false;
    clearTimeout(this.timer);
    await this.informer.stop();
  }

  resume(): void {
    if (this.stopped || !this.paused) return;
    this.paused = false;
    void this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.watching = false;
    clearTimeout(this.timer);
    await this.informer.stop();
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace) as T | undefined;
  }

  list(): readonly T[] {
    return this.informer.list() as unknown as readonly T[];
  }

  status(): WatchStatus<K> {
    return {
      kind: this.kind,
      listed: this.listed,
      watching: this.watching,
      ...(this.paused && { paused: true }),
      restarts: this.restarts,
      ...(this.lastError && { lastError: this.lastError }),
    };
  }
}
