/**
 * The bridge's own last-seen copy of every watched object. The informer reports only the new state of a
 * MODIFIED object; routing needs the previous one too, and a gateway or QoS change fans out over the cached
 * EIPs. Feeding a recorded watch stream through a Tracker is exactly what the bridge does with live events.
 */
import type { EipEvent } from '../events.js';
import { type KubeObject, keyOf, nameOf, WATCHED_KINDS, type WatchedKind } from './objects.js';
import { route, type WatchType } from './route.js';

/** One line of a watch stream (`{"type": …, "object": …}`). */
export interface WatchLine {
  type: string;
  object: KubeObject;
}

export class Tracker {
  private readonly byKind = new Map<WatchedKind, Map<string, KubeObject>>(
    WATCHED_KINDS.map((k) => [k, new Map()]),
  );

  /** Records the change and returns the events it routes to. */
  observe(
    kind: WatchedKind,
    type: WatchType,
    object: KubeObject,
    opts: { initial?: boolean } = {},
  ): EipEvent[] {
    if (!nameOf(object)) return [];
    const objects = this.byKind.get(kind)!;
    const key = keyOf(object);
    const old = objects.get(key);
    if (type === 'DELETED') objects.delete(key);
    else objects.set(key, object);
    return route(
      { kind, type, object, ...(old && { old }), ...(opts.initial && { initial: true }) },
      this.eips(),
    );
  }

  /**
   * A raw watch line: ADDED/MODIFIED/DELETED are routed, BOOKMARK and ERROR carry no object change. The kind
   * comes from the object itself (watch events always carry it).
   */
  observeLine(line: WatchLine): EipEvent[] {
    const kind = line.object?.kind as WatchedKind | undefined;
    if (!kind || !this.byKind.has(kind)) return [];
    if (line.type !== 'ADDED' && line.type !== 'MODIFIED' && line.type !== 'DELETED') return [];
    return this.observe(kind, line.type, line.object);
  }

  eips(): IterableIterator<KubeObject> {
    return this.byKind.get('IptablesEIP')!.values();
  }

  get(kind: WatchedKind, key: string): KubeObject | undefined {
    return this.byKind.get(kind)!.get(key);
  }

  size(kind: WatchedKind): number {
    return this.byKind.get(kind)!.size;
  }
}
