/**
 * The object store: one global resourceVersion counter shared by every resource (the etcd revision),
 * the objects, a bounded history of change events for watches from a resourceVersion, and
 * compaction (a watch from a compacted revision gets 410).
 */
import { ApiError } from './errors.js';
import { clone, isObject, type JsonObject, meta } from './json.js';

/**
 * etcd's default --max-request-bytes: a write of a larger object fails in etcd, and the API server passes the
 * error on as a 500 without a reason (kubectl: `Error from server: etcdserver: request is too large`).
 */
export const MAX_OBJECT_BYTES = 1.5 * 1024 * 1024;

function checkSize(obj: JsonObject): void {
  if (Buffer.byteLength(JSON.stringify(obj)) <= MAX_OBJECT_BYTES) return;
  throw new ApiError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'etcdserver: request is too large',
    code: 500,
  });
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  rv: number;
  type: EventType;
  /** group/plural */
  resource: string;
  /** The object as stored after the write; for DELETED the last stored state with the deletion's RV. */
  object: JsonObject;
  /** The state before the write (MODIFIED and DELETED), for selector transitions. */
  previous?: JsonObject;
}

export type StoreListener = (event: StoreEvent) => void;

export function objectKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

export interface StoreSnapshot {
  resourceVersion: number;
  resources: Record<string, JsonObject[]>;
}

export class Store {
  private revision = 0;
  private compacted = 0;
  private readonly data = new Map<string, Map<string, JsonObject>>();
  private history: StoreEvent[] = [];
  private readonly listeners = new Set<StoreListener>();
  /** Per resource, a count that moves with every write of one of its objects (and with a load). */
  private readonly writes = new Map<string, number>();

  constructor(private readonly historyLimit = 1000) {}

  /**
   * A number that changes whenever an object of `resource` is created, replaced or deleted (or a snapshot loaded):
   * what a cache of something derived from those objects compares to know it is still current.
   */
  generation(resource: string): number {
    return this.writes.get(resource) ?? 0;
  }

  private wrote(resource: string): void {
    this.writes.set(resource, (this.writes.get(resource) ?? 0) + 1);
  }

  /** The current global resourceVersion. */
  get resourceVersion(): number {
    return this.revision;
  }

  /** Watches from a resourceVersion below this get 410 Expired. */
  get compactedRevision(): number {
    return this.compacted;
  }

  private bucket(resource: string): Map<string, JsonObject> {
    let b = this.data.get(resource);
    if (!b) {
      b = new Map();
      this.data.set(resource, b);
    }
    return b;
  }

  /** The stored object (do not mutate; clone first). */
  get(resource: string, namespace: string | undefined, name: string): JsonObject | undefined {
    return this.data.get(resource)?.get(objectKey(namespace, name));
  }

  /** Stored objects sorted by namespace/name (etcd key order). `namespace` undefined = all. */
  list(resource: string, namespace?: string): JsonObject[] {
    const b = this.data.get(resource);
    if (!b) return [];
    const out: [string, JsonObject][] = [];
    for (const [k, o] of b) {
      if (namespace !== undefined && (o.metadata as JsonObject).namespace !== namespace) continue;
      out.push([k, o]);
    }
    out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    return out.map(([, o]) => o);
  }

  resources(): string[] {
    return [...this.data.keys()];
  }

  private emit(event: StoreEvent): void {
    this.history.push(event);
    if (this.history.length > this.historyLimit) {
      const drop = this.history.length - this.historyLimit;
      this.compacted = (this.history[drop - 1] as StoreEvent).rv;
      this.history = this.history.slice(drop);
    }
    for (const l of [...this.listeners]) l(event);
  }

  private stamp(obj: JsonObject): number {
    this.revision += 1;
    meta(obj).resourceVersion = String(this.revision);
    return this.revision;
  }

  /** Stores a new object (takes ownership), assigns its resourceVersion and emits ADDED. */
  create(resource: string, obj: JsonObject): JsonObject {
    checkSize(obj);
    const m = meta(obj);
    const rv = this.stamp(obj);
    this.bucket(resource).set(objectKey(m.namespace as string | undefined, m.name as string), obj);
    this.wrote(resource);
    this.emit({ rv, type: 'ADDED', resource, object: obj });
    return obj;
  }

  /** Replaces a stored object (takes ownership), assigns a new resourceVersion and emits MODIFIED. */
  update(resource: string, obj: JsonObject): JsonObject {
    checkSize(obj);
    const m = meta(obj);
    const key = objectKey(m.namespace as string | undefined, m.name as string);
    const previous = this.bucket(resource).get(key);
    const rv = this.stamp(obj);
    this.bucket(resource).set(key, obj);
    this.wrote(resource);
    const event: StoreEvent = { rv, type: 'MODIFIED', resource, object: obj };
    if (previous) event.previous = previous;
    this.emit(event);
    return obj;
  }

  /** Removes an object; the DELETED event carries its last stored state with the deletion's RV. */
  delete(resource: string, namespace: string | undefined, name: string): JsonObject | undefined {
    const b = this.data.get(resource);
    const key = objectKey(namespace, name);
    const previous = b?.get(key);
    if (!b || !previous) return undefined;
    b.delete(key);
    this.wrote(resource);
    const last = clone(previous);
    const rv = this.stamp(last);
    this.emit({ rv, type: 'DELETED', resource, object: last, previous });
    return last;
  }

  /** Events of `resource` with rv > `since`, or 'expired' when that part of the history is compacted. */
  eventsSince(resource: string, since: number): StoreEvent[] | 'expired' {
    if (since < this.compacted) return 'expired';
    return this.history.filter((e) => e.rv > since && e.resource === resource);
  }

  /** Drops the whole history: a watch from any older resourceVersion now gets 410. */
  compact(): void {
    this.compacted = this.revision;
    this.history = [];
  }

  subscribe(listener: StoreListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  snapshot(): StoreSnapshot {
    const resources: Record<string, JsonObject[]> = {};
    for (const [r, b] of this.data) if (b.size > 0) resources[r] = [...b.values()];
    return { resourceVersion: this.revision, resources };
  }

  /** Loads a snapshot into an empty store. The history starts empty (compacted at the loaded revision). */
  load(snap: StoreSnapshot): void {
    this.revision = snap.resourceVersion;
    this.compacted = snap.resourceVersion;
    for (const [r, objs] of Object.entries(snap.resources)) {
      for (const o of objs) {
        if (!isObject(o)) continue;
        const m = meta(o);
        this.bucket(r).set(objectKey(m.namespace as string | undefined, m.name as string), o);
      }
      this.wrote(r);
    }
  }
}
