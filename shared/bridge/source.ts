/**
 * The watch side of the bridge: one client-node informer (`makeInformer`, list then watch) per watched kind.
 *
 * client-node 1.4's ListWatch relists by itself after a 410 (history compacted) and re-watches from the last
 * resourceVersion when the server ends a stream, but it stops for good on any other error (connection refused
 * while the API restarts, a 5xx on list). Each WatchedResource here restarts its informer after such an error,
 * with exponential backoff and jitter; the restart resumes from the last resourceVersion, or relists if that is
 * gone. Nothing is lost: a change made while the watch was down arrives as a watch event (history kept) or as a
 * difference found by the relist.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  makeInformer,
} from '@kubernetes/client-node';
import { GROUP, Label, Plural, VERSION } from '../domain/kube-ovn.js';
import type { Logger } from '../ports.js';
import { type KubeObject, keyOf, type WatchedKind } from './objects.js';
import type { WatchType } from './route.js';
import { backoffDelay, errorText } from './sinks/sink.js';

export interface WatchSpec {
  kind: WatchedKind;
  /** The collection path the informer lists and watches. */
  path: string;
  labelSelector?: string;
  /** path plus the label selector, for a raw watch. */
  watchPath: string;
}

const CR_PLURALS: [WatchedKind, string][] = [
  ['IptablesEIP', Plural.eip],
  ['IptablesFIPRule', Plural.fip],
  ['IptablesDnatRule', Plural.dnat],
  ['IptablesSnatRule', Plural.snat],
  ['QoSPolicy', Plural.qos],
];

export const GATEWAY_POD_SELECTOR = `${Label.vpcNatGw}=true`;

/** What the bridge watches: the kube-ovn CRs (cluster-scoped) and the gateway pods in `namespace`. EIPs first. */
export function watchPaths(namespace: string): WatchSpec[] {
  const crs = CR_PLURALS.map(([kind, plural]) => {
    const path = `/apis/${GROUP}/${VERSION}/${plural}`;
    return { kind, path, watchPath: path };
  });
  const podPath = `/api/v1/namespaces/${namespace}/pods`;
  return [
    ...crs,
    {
      kind: 'Pod',
      path: podPath,
      labelSelector: GATEWAY_POD_SELECTOR,
      watchPath: `${podPath}?labelSelector=${encodeURIComponent(GATEWAY_POD_SELECTOR)}`,
    },
  ];
}

export type ChangeListener = (
  kind: WatchedKind,
  type: WatchType,
  object: KubeObject,
  opts: { initial: boolean },
) => void;

export interface WatchStatus {
  kind: WatchedKind;
  /** The first list succeeded. */
  listed: boolean;
  /** Listed and watching now (false while restarting after an error). */
  watching: boolean;
  restarts: number;
  lastError?: string;
}

export interface SourceOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  onChange: ChangeListener;
  log?: Logger;
  /** Restart backoff after an informer error: first delay and ceiling. Defaults 500 ms and 30 s. */
  restartBackoffMs?: number;
  maxRestartBackoffMs?: number;
}

/** Watch objects are plain JSON; list items may be client-node model classes with Date fields. One shape for all. */
function plain(o: KubernetesObject): KubeObject {
  return JSON.parse(JSON.stringify(o)) as KubeObject;
}

class WatchedResource {
  private readonly informer: Informer<KubernetesObject>;
  private stopped = false;
  private listed = false;
  private watching = false;
  private restarts = 0;
  private failures = 0;
  private errorsSeen = 0;
  private lastError: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Keys and resourceVersions of the first list, while its items are being delivered. */
  private firstList: Map<string, string | undefined> | undefined;
  private readonly log: Logger | undefined;
  private readyListeners: (() => void)[] = [];

  constructor(
    readonly spec: WatchSpec,
    private readonly options: SourceOptions,
  ) {
    this.log = options.log?.child({ watch: spec.kind });
    const list = this.listFn();
    this.informer = makeInformer(
      options.kubeConfig,
      spec.path,
      async () => {
        const result = await list();
        if (!this.listed) {
          this.firstList = new Map(
            (result.items ?? []).map((i) => [keyOf(i as KubeObject), i.metadata?.resourceVersion]),
          );
        }
        return result;
      },
      spec.labelSelector,
    );
    this.informer.on('add', (o) => this.deliver('ADDED', o));
    this.informer.on('update', (o) => this.deliver('MODIFIED', o));
    this.informer.on('delete', (o) => this.deliver('DELETED', o));
    this.informer.on('error', (e) => this.failed(e));
  }

  private listFn(): () => Promise<{ metadata?: { resourceVersion?: string }; items: KubernetesObject[] }> {
    const kc = this.options.kubeConfig;
    if (this.spec.kind === 'Pod') {
      const core = kc.makeApiClient(CoreV1Api);
      return () =>
        core.listNamespacedPod({ namespace: this.options.namespace, labelSelector: this.spec.labelSelector });
    }
    const custom = kc.makeApiClient(CustomObjectsApi);
    const plural = this.spec.path.split('/').pop()!;
    return async () =>
      (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as {
        metadata?: { resourceVersion?: string };
        items: KubernetesObject[];
      };
  }

  private deliver(type: WatchType, o: KubernetesObject): void {
    if (this.stopped) return;
    const object = plain(o);
    const key = keyOf(object);
    const initial =
      type === 'ADDED' &&
      this.firstList?.has(key) === true &&
      this.firstList.get(key) === object.metadata?.resourceVersion;
    try {
      this.options.onChange(this.spec.kind, type, object, { initial });
    } catch (e) {
      this.log?.error('change handler failed', { error: errorText(e), object: key });
    }
  }

  private failed(e: unknown): void {
    if (this.stopped) return; // client-node 1.4 reports its own abort on stop() as an error
    this.errorsSeen++;
    this.watching = false;
    this.lastError = errorText(e);
    this.failures++;
    const delay = backoffDelay(
      this.failures,
      this.options.restartBackoffMs ?? 500,
      this.options.maxRestartBackoffMs ?? 30_000,
    );
    this.log?.warn('watch failed; restarting', {
      error: this.lastError,
      retryInMs: delay,
      attempt: this.failures,
    });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(), delay);
    this.timer.unref?.();
  }

  /** Starts (or restarts) the informer; resolves when it has listed and opened its watch, or failed trying. */
  async run(): Promise<void> {
    if (this.stopped) return;
    const errorsBefore = this.errorsSeen;
    if (this.listed) this.restarts++;
    try {
      await this.informer.start();
    } catch (e) {
      this.failed(e);
      return;
    }
    if (this.stopped || this.errorsSeen !== errorsBefore) return;
    if (!this.listed) this.log?.info('listed and watching');
    else this.log?.info('watching again', { restarts: this.restarts });
    this.listed = true;
    this.firstList = undefined;
    this.watching = true;
    this.failures = 0;
    this.lastError = undefined;
    const listeners = this.readyListeners;
    this.readyListeners = [];
    for (const l of listeners) l();
  }

  /** Resolves once the first list succeeded and the watch is open (retrying in the background until then). */
  whenListed(): Promise<void> {
    if (this.listed) return Promise.resolve();
    return new Promise((r) => this.readyListeners.push(r));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.watching = false;
    clearTimeout(this.timer);
    await this.informer.stop();
  }

  status(): WatchStatus {
    return {
      kind: this.spec.kind,
      listed: this.listed,
      watching: this.watching,
      restarts: this.restarts,
      ...(this.lastError && { lastError: this.lastError }),
    };
  }
}

export class InformerSource {
  private readonly resources: WatchedResource[];

  constructor(options: SourceOptions) {
    this.resources = watchPaths(options.namespace).map((s) => new WatchedResource(s, options));
  }

  /**
   * Starts every informer. The EIP informer lists first, so that a rule, pod or QoS policy seen in the other
   * first lists already finds the EIPs it fans out to. Resolves once all have listed and are watching (each
   * retries in the background until it can).
   */
  async start(): Promise<void> {
    const [eips, ...rest] = this.resources;
    void eips!.run();
    await eips!.whenListed();
    for (const r of rest) void r.run();
    await Promise.all(rest.map((r) => r.whenListed()));
  }

  /** Every informer has listed and is watching now. */
  ready(): boolean {
    return this.resources.every((r) => r.status().watching);
  }

  status(): WatchStatus[] {
    return this.resources.map((r) => r.status());
  }

  async stop(): Promise<void> {
    await Promise.all(this.resources.map((r) => r.stop()));
  }
}
