/**
 * The small controller runtime the stand-ins share: an informer that keeps itself running (client-node 1.4's
 * ListWatch stops for good on any error but a 410, so restarting is the caller's job), and a work queue that
 * serialises reconciles, folds duplicate keys and retries failures with backoff — the shape of a client-go
 * controller, without the rest of client-go.
 */
import {
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
} from '@kubernetes/client-node';

export type Log = (line: string) => void;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Anything with object metadata: client-node's V1Pod as well as the product's kube-ovn types. */
type Obj = { metadata?: { name?: string; namespace?: string } };

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

export class Watched<T extends Obj> {
  private readonly informer;
  private stopped = false;
  private starting = false;
  private failure: unknown;
  private restarting: Promise<void> | undefined;

  constructor(private readonly o: WatchedOptions<T>) {
    const list = o.list as unknown as () => Promise<KubernetesListObject<KubernetesObject>>;
    this.informer = makeInformer<KubernetesObject>(o.kubeConfig, o.path, list, o.labelSelector);
    this.informer.on('add', (obj) => o.onChange(obj as T, 'add'));
    this.informer.on('update', (obj) => o.onChange(obj as T, 'update'));
    this.informer.on('delete', (obj) => o.onChange(obj as T, 'delete'));
    this.informer.on('error', (err) => {
      this.failure = err ?? new Error('informer error');
      // While start() runs it sees the failure itself and retries; afterwards a failure needs a restart.
      if (!this.stopped && !this.starting && !this.restarting) this.restarting = this.restart();
    });
  }

  /** Resolves once the first list has succeeded (retrying with backoff while the API fails). */
  async start(): Promise<void> {
    this.starting = true;
    try {
      for (let delay = 100; !this.stopped; delay = Math.min(delay * 2, 5_000)) {
        this.failure = undefined;
        await this.informer.start();
        if (this.failure === undefined) return;
        this.o.log(`${this.o.name}: list/watch failed (${describe(this.failure)}); retrying in ${delay} ms`);
        await sleep(delay);
      }
    } finally {
      this.starting = false;
    }
  }

  private async restart(): Promise<void> {
    this.o.log(`${this.o.name}: watch failed (${describe(this.failure)}); restarting`);
    await sleep(200);
    this.restarting = undefined;
    if (!this.stopped) await this.start();
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace) as T | undefined;
  }

  list(): readonly T[] {
    return this.informer.list() as readonly T[];
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.informer.stop();
  }
}

function describe(err: unknown): string {
  if (err && typeof err === 'object') {
    const code = (err as { code?: unknown }).code;
    const message = (err as { message?: unknown }).message;
    return (
      [code, typeof message === 'string' ? message.split('\n')[0] : undefined].filter(Boolean).join(' ') ||
      'error'
    );
  }
  return String(err);
}

/** Reconciles keys one at a time; a key queued while it waits is folded; a failed key is retried with backoff. */
export class WorkQueue {
  private readonly pending = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private running: Promise<void> | undefined;
  private stopped = false;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly reconcile: (key: string) => Promise<void>,
    private readonly log: Log,
    private readonly name: string,
  ) {}

  add(key: string): void {
    if (this.stopped) return;
    this.pending.add(key);
    this.running ??= this.drain();
  }

  private async drain(): Promise<void> {
    while (this.pending.size > 0 && !this.stopped) {
      const key = this.pending.values().next().value as string;
      this.pending.delete(key);
      try {
        await this.reconcile(key);
        this.failures.delete(key);
      } catch (e) {
        const n = (this.failures.get(key) ?? 0) + 1;
        this.failures.set(key, n);
        const delay = Math.min(100 * 2 ** (n - 1), 5_000);
        this.log(
          `${this.name} ${key}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}; retry in ${delay} ms`,
        );
        const t = setTimeout(() => {
          this.timers.delete(t);
          this.add(key);
        }, delay);
        this.timers.add(t);
      }
    }
    this.running = undefined;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Resolves when nothing is queued or running (retries scheduled for later do not count). */
  idle(): Promise<void> {
    if (!this.running && this.pending.size === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await this.running;
  }
}
