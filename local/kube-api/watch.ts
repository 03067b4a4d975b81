/**
 * Watch streams: headers flushed at once, one JSON event per line, selector transitions
 * (ADDED/DELETED when an object starts or stops matching), replay from a resourceVersion or 410 Expired
 * (then the stream closes), bookmarks when asked for, Table events with headers only on the first.
 */
import type { ServerResponse } from 'node:http';
import { ApiError, badRequest, expired, status } from './errors.js';
import { type JsonObject, meta } from './json.js';
import type { Objects } from './objects.js';
import { apiVersionOf, type ResourceDef, resourceKey } from './registry.js';
import { type Filter, matches } from './selectors.js';
import type { EventType, Store, StoreEvent } from './store.js';
import { type TableOptions, toTable } from './table.js';

export interface WatchRequest {
  def: ResourceDef;
  filter: Filter;
  /** The `resourceVersion` query value ('' when absent). */
  resourceVersion: string;
  allowBookmarks: boolean;
  /** Seconds until the server ends the stream. */
  timeoutSeconds: number;
  sendInitialEvents: boolean;
  /** Set when the client asked for Table output. */
  table?: TableOptions;
  contentType: string;
}

export interface WatchSettings {
  bookmarkIntervalMs: number;
}

interface ActiveWatch {
  def: ResourceDef;
  end(): void;
}

/** The lines one store event was written as, by the resource version a watch serves and the event type sent. */
interface EventLines {
  event: StoreEvent;
  lines: Map<ResourceDef, Map<string, string>>;
}

export class Watches {
  private readonly active = new Set<ActiveWatch>();
  /**
   * The store hands one event to every watch in turn: each watch of the same resource version writes the same line,
   * so it is presented and serialised once (for the latest event; Table watches have their own).
   */
  private latest: EventLines | undefined;

  constructor(
    private readonly store: Store,
    private readonly objects: Objects,
    private readonly settings: WatchSettings,
  ) {}

  get count(): number {
    return this.active.size;
  }

  /** `{"type":…,"object":…}` for `e` presented through `def`, shared by every watch that sends the same. */
  private eventLine(def: ResourceDef, type: EventType, e: StoreEvent): string {
    if (this.latest?.event !== e) this.latest = { event: e, lines: new Map() };
    let byType = this.latest.lines.get(def);
    if (!byType) {
      byType = new Map();
      this.latest.lines.set(def, byType);
    }
    let line = byType.get(type);
    if (line === undefined) {
      line = `${JSON.stringify({ type, object: this.objects.present(def, e.object) })}\n`;
      byType.set(type, line);
    }
    return line;
  }

  /** Validates the start point; throws an ApiError before any header is written. */
  private startPoint(req: WatchRequest): number | undefined {
    const rv = req.resourceVersion;
    if (rv === '' || rv === '0') return undefined;
    if (!/^\d+$/.test(rv)) throw badRequest(`invalid resource version: ${rv}`);
    const n = Number(rv);
    if (n > this.store.resourceVersion) {
      throw new ApiError(
        status(504, 'Timeout', `Too large resource version: ${n}, current: ${this.store.resourceVersion}`, {
          causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
          retryAfterSeconds: 1,
        }),
      );
    }
    return n;
  }

  serve(req: WatchRequest, res: ServerResponse): void {
    const from = this.startPoint(req);
    const resource = resourceKey(req.def.group, req.def.plural);
    res.writeHead(200, {
      'Content-Type': req.contentType,
      'Cache-Control': 'no-cache, private',
      'Transfer-Encoding': 'chunked',
    });
    res.flushHeaders();
    let first = true;
    let closed = false;
    const write = (type: EventType | 'BOOKMARK' | 'ERROR', object: JsonObject): void => {
      if (closed) return;
      let out = object;
      if (req.table && type !== 'ERROR' && type !== 'BOOKMARK') {
        out = toTable(
          req.def,
          [object],
          { resourceVersion: String(meta(object).resourceVersion ?? '') },
          {
            ...req.table,
            noHeaders: !first,
          },
        );
        first = false;
      }
      res.write(`${JSON.stringify({ type, object: out })}\n`);
    };
    // The event's own object, as `type`.
    const send = (type: EventType, e: StoreEvent): void => {
      if (closed) return;
      if (req.table) write(type, this.objects.present(req.def, e.object));
      else res.write(this.eventLine(req.def, type, e));
    };
    // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
    const emit = (e: StoreEvent): void => {
      const now = matches(req.filter, e.object);
      switch (e.type) {
        case 'ADDED':
          if (now) send('ADDED', e);
          return;
        case 'DELETED':
          if (e.previous ? matches(req.filter, e.previous) : now) send('DELETED', e);
          return;
        case 'MODIFIED': {
          const before = e.previous ? matches(req.filter, e.previous) : now;
          if (now && before) send('MODIFIED', e);
          else if (now) send('ADDED', e);
          else if (before && e.previous) {
            const old = this.objects.present(req.def, e.previous);
            meta(old).resourceVersion = String(e.rv);
            write('DELETED', old);
          }
          return;
        }
      }
    };
    const bookmark = (extra?: Record<string, string>): void => {
      const md: JsonObject = { resourceVersion: String(this.store.resourceVersion) };
      if (extra) md.annotations = extra;
      write('BOOKMARK', { kind: req.def.kind, apiVersion: apiVersionOf(req.def), metadata: md });
    };
    const timers: NodeJS.Timeout[] = [];
    let unsubscribe = (): void => {};
    const watch: ActiveWatch = {
      def: req.def,
      end: () => {
        if (closed) return;
        closed = true;
        unsubscribe();
        for (const t of timers) clearTimeout(t);
        this.active.delete(watch);
        res.end();
      },
    };
    res.on('close', () => watch.end());

    if (from === undefined) {
      for (const o of this.objects.select(req.def, req.filter))
        write('ADDED', this.objects.present(req.def, o));
      if (req.sendInitialEvents && req.allowBookmarks) bookmark({ 'k8s.io/initial-events-end': 'true' });
    } else {
      const events = this.store.eventsSince(resource, from);
      if (events === 'expired') {
        const e = expired(`too old resource version: ${from} (${this.store.compactedRevision})`);
        write('ERROR', e.status as unknown as JsonObject);
        watch.end();
        return;
      }
      for (const e of events) emit(e);
    }
    unsubscribe = this.store.subscribe((e) => {
      if (e.resource === resource) emit(e);
    });
    this.active.add(watch);
    timers.push(
      setTimeout(() => {
        if (req.allowBookmarks) bookmark();
        watch.end();
      }, req.timeoutSeconds * 1000),
    );
    if (req.allowBookmarks && !req.table) {
      const tick = (): void => {
        bookmark();
        timers.push(setTimeout(tick, this.settings.bookmarkIntervalMs));
      };
      timers.push(setTimeout(tick, this.settings.bookmarkIntervalMs));
    }
  }

  /** Ends the watches of a resource version that is no longer served (its CRD was deleted). */
  endResource(def: ResourceDef): void {
    for (const w of [...this.active]) {
      if (w.def.group === def.group && w.def.version === def.version && w.def.plural === def.plural) w.end();
    }
  }

  /** Ends every open watch stream (clients re-watch from their last resourceVersion). */
  dropAll(): number {
    const n = this.active.size;
    for (const w of [...this.active]) w.end();
    return n;
  }
}
