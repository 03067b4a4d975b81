/**
 * Grouping for the sinks that feed Lambda (docs/adr/0112-one-gateways-burst-in-one-invocation.md): events of one
 * handler on one gateway that wait together go out as one EventBridge entry or one invocation, whose detail is a
 * batch (shared/events.ts), so that one container runs them side by side and their gateway calls share execs
 * (docs/adr/0110-gateway-work-batched-per-pod.md). A group never mixes handlers or gateways; an event whose gateway
 * is not known goes alone.
 */
import { detailOf, type EipEvent, MAX_BATCH_EVENTS } from '../../events.js';

/** Where an EIP's address is configured, as the bridge's cache knows it (spec.natGwDp), or undefined. */
export type GatewayOf = (event: EipEvent) => string | undefined;

export interface GroupLimits {
  /** Events per group at most, 1 (no grouping) to MAX_BATCH_EVENTS. */
  maxEvents: number;
  /** Bytes of one group's detail (JSON) at most. */
  maxBytes: number;
}

/** Default events per group: what one invocation's 27 s cover of arping (3 s an address) on kube-ovn 1.13 and later. */
export const DEFAULT_GROUP_EVENTS = 8;
/**
 * Default bytes of one group's detail: a quarter of what the handler accepts (MAX_EVENT_BYTES, 256 KiB with the
 * envelope), so that ten entries of one PutEvents call stay within its 256 KB too. The bridge's events are 0.2 to
 * 2 KB (test/unit/bridge-group.test.ts measures them): the byte limit binds only for unusual ones.
 */
export const DEFAULT_GROUP_BYTES = 24 * 1024;
/**
 * Default window (EVENT_BATCH_WINDOW_MS): how long an event waits for others to share its entry or invocation. A
 * burst reaches the bridge spread out — kubectl creates one object a request, the watch delivers them one by one: the
 * lab's 40 creates arrived over 440 ms, about one every 10 ms (ADR 0112) — so 20 ms caught 2.7 events a group, 100 ms
 * most of a full one. It adds at most 100 ms to an event whose add takes seconds on a real gateway (3 s of arping).
 */
export const DEFAULT_GROUP_WINDOW_MS = 100;

export function groupLimits(maxEvents?: number, maxBytes?: number): GroupLimits {
  const events = maxEvents ?? DEFAULT_GROUP_EVENTS;
  if (!Number.isInteger(events) || events < 1 || events > MAX_BATCH_EVENTS)
    throw new RangeError(`events per group must be an integer 1..${MAX_BATCH_EVENTS}, got ${events}`);
  return { maxEvents: events, maxBytes: maxBytes ?? DEFAULT_GROUP_BYTES };
}

/** The gateway an event's EIP is on: the event's own, the bridge's cache, or the snapshot it carries. */
export function gatewayOfEvent(event: EipEvent, lookup?: GatewayOf): string | undefined {
  return (
    event.gateway ?? lookup?.(event) ?? event.new?.spec?.natGwDp ?? event.old?.spec?.natGwDp ?? undefined
  );
}

export const bytesOf = (value: unknown): number => Buffer.byteLength(JSON.stringify(value), 'utf8');

/** `{"version":1,"handler":"…","events":[` and `]}`: what a batch adds to its members and their commas. */
const frameBytes = (e: EipEvent): number => bytesOf(detailOf([e, e])) - 2 * bytesOf(e) - 1;

/** A group being filled. */
export class Group<T> {
  readonly items: T[] = [];
  private memberBytes = 0;
  constructor(
    readonly key: string | undefined,
    private readonly limits: GroupLimits,
    private readonly eventOf: (item: T) => EipEvent,
  ) {}

  get events(): EipEvent[] {
    return this.items.map(this.eventOf);
  }

  /** The detail's bytes with `extra` more members of `extraBytes`. */
  bytesWith(extra: number, extraBytes: number): number {
    const n = this.items.length + extra;
    const sum = this.memberBytes + extraBytes;
    if (n <= 1) return sum;
    return sum + (n - 1) + frameBytes(this.eventOf(this.items[0] ?? (undefined as never)));
  }

  /** Adds the item when it fits (its key, the count, the bytes); the first item always fits. */
  tryAdd(item: T, key: string | undefined, bytes: number): boolean {
    if (this.items.length > 0) {
      if (key === undefined || key !== this.key) return false;
      if (this.items.length >= this.limits.maxEvents) return false;
      if (this.bytesWith(1, bytes) > this.limits.maxBytes) return false;
    }
    this.items.push(item);
    this.memberBytes += bytes;
    return true;
  }

  get full(): boolean {
    return this.items.length >= this.limits.maxEvents;
  }

  get bytes(): number {
    return this.bytesWith(0, 0);
  }
}

/** The key of an event's group: its handler and gateway; undefined (alone) when the gateway is not known. */
export function groupKey(event: EipEvent, lookup?: GatewayOf): string | undefined {
  const gateway = gatewayOfEvent(event, lookup);
  return gateway === undefined ? undefined : `${event.handler}|${gateway}`;
}

function newestOf<T>(groups: readonly Group<T>[], key: string): Group<T> | undefined {
  for (let i = groups.length - 1; i >= 0; i--) if (groups[i]!.key === key) return groups[i];
  return undefined;
}

export interface TakeOptions<T> {
  limits: GroupLimits;
  eventOf: (item: T) => EipEvent;
  lookup?: GatewayOf;
  /** Groups at most (PutEvents: 10 entries). */
  maxGroups: number;
  /** Bytes all groups' details together may weigh, each with `overheadBytes` more (PutEvents: its entry size). */
  maxTotalBytes?: number;
  overheadBytes?: number;
}

/**
 * Groups `items` in their order: each joins the first open group of its key with room, or opens one. Stops at the
 * first item that fits nowhere, so no item overtakes an earlier one of its EIP. Returns the groups and how many
 * items (a prefix of `items`) they took; the first item is always taken.
 */
export function takeGroups<T>(items: readonly T[], o: TakeOptions<T>): { groups: Group<T>[]; taken: number } {
  const groups: Group<T>[] = [];
  const room = (more: number) => o.maxTotalBytes === undefined || total + more <= o.maxTotalBytes;
  let total = 0;
  let taken = 0;
  for (const item of items) {
    const event = o.eventOf(item);
    const key = groupKey(event, o.lookup);
    const bytes = bytesOf(event);
    // The newest group of the key: an older one is full (by count or by bytes).
    const open = key === undefined ? undefined : newestOf(groups, key);
    let placed = false;
    if (open && !open.full && room(open.bytesWith(1, bytes) - open.bytes) && open.tryAdd(item, key, bytes)) {
      total = groups.reduce((t, g) => t + g.bytes + (o.overheadBytes ?? 0), 0);
      placed = true;
    } else if (groups.length < o.maxGroups && (taken === 0 || room(bytes + (o.overheadBytes ?? 0)))) {
      const g = new Group<T>(key, o.limits, o.eventOf);
      g.tryAdd(item, key, bytes);
      groups.push(g);
      total += g.bytes + (o.overheadBytes ?? 0);
      placed = true;
    }
    if (!placed) break;
    taken++;
  }
  return { groups, taken };
}
