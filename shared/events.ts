/**
 * The handler event contract (events/schema.json is its JSON Schema). The bridge sends an EventBridge envelope
 * or, for direct invoke and local runs, the bare detail. `parseEipEvent` is the runtime check at the handler's
 * edge: a plain type guard (no schema compiler at cold start) that mirrors the schema field by field; a test keeps
 * the two in step by running every sample event and every negative case through both.
 */
import { InvalidEventError } from './domain/errors.js';
import type { IptablesEip } from './domain/kube-ovn.js';

export const HANDLERS = ['add', 'update', 'reset', 'delete'] as const;
export type HandlerName = (typeof HANDLERS)[number];

export const REASONS = [
  'added',
  'deletion-requested',
  'redo-changed',
  'qos-changed',
  'spec-changed',
  'qos-policy-changed',
  'nat-rule-changed',
  'gateway-restarted',
  'gateway-ready',
  'deleted',
  'resync',
  'manual',
  // A rejected EIP tried again after its backoff, because what blocks it may have cleared (ADR 0016).
  'blocked-retry',
  // Something a waiting EIP depends on changed: an address released, a QoS policy created, changed or let go of,
  // its subnet or gateway created (the bridge's re-routing, ADR 0016).
  'dependency-changed',
  // The nat-gw ConfigMaps that switch the feature on or off changed (every EIP is sent).
  'feature-changed',
] as const;
export type Reason = (typeof REASONS)[number];

/** The values status.nat can take: the kinds of NAT rule naming the EIP, in the order dnat, fip, snat. */
export const NAT_HINTS = [
  '',
  'dnat',
  'fip',
  'snat',
  'dnat,fip',
  'dnat,snat',
  'fip,snat',
  'dnat,fip,snat',
] as const;
export type NatHint = (typeof NAT_HINTS)[number];

export const EVENT_SOURCE = 'eip-lambdas.bridge';
export const detailTypeOf = (h: HandlerName): string => `IptablesEIP ${h}`;

export interface ObjectSnapshot {
  metadata?: {
    name?: string;
    uid?: string;
    resourceVersion?: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    labels?: Record<string, string>;
  };
  spec?: IptablesEip['spec'];
  status?: IptablesEip['status'];
}

export interface EipEvent {
  version: 1;
  id: string;
  handler: HandlerName;
  reason: Reason;
  object: { kind?: 'IptablesEIP'; name: string; uid?: string; resourceVersion?: string };
  gateway?: string;
  /**
   * The uid of the gateway pod whose coming up sent a gateway-restarted or gateway-ready event: on a replicated
   * gateway only that pod's redo is hinted (docs/adr/0105-ha-gateways.md). Absent: every pod of the gateway.
   */
  pod?: string;
  emittedAt?: string;
  /**
   * status.nat as the bridge's NAT rule informers saw it when the event was sent (ADR 0041): a hint. A handler uses
   * it only when it equals the EIP's status.nat (nothing to write); otherwise, or without it, it lists the rules.
   */
  nat?: NatHint;
  old?: ObjectSnapshot;
  new?: ObjectSnapshot;
}

/** Stable id of an event: the same change routed twice gets the same id. */
export function eventId(
  uid: string | undefined,
  resourceVersion: string | undefined,
  reason: Reason,
): string {
  return `${uid ?? '-'}:${resourceVersion ?? '-'}:${reason}`;
}

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function fail(field: string, problem: string): never {
  throw new InvalidEventError(`invalid event: ${field} ${problem}`);
}

function onlyKeys(o: Obj, path: string, allowed: readonly string[]): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) fail(`${path}.${k}`, 'is not a known field');
}

function str(
  o: Obj,
  key: string,
  path: string,
  opts: { required?: boolean; max?: number; min?: number } = {},
) {
  const v = o[key];
  if (v === undefined) {
    if (opts.required) fail(`${path}.${key}`, 'is required');
    return undefined;
  }
  if (typeof v !== 'string') fail(`${path}.${key}`, `must be a string, got ${typeof v}`);
  if (opts.min !== undefined && v.length < opts.min) fail(`${path}.${key}`, 'must not be empty');
  if (opts.max !== undefined && v.length > opts.max)
    fail(`${path}.${key}`, `must be at most ${opts.max} characters`);
  return v;
}

const SNAPSHOT_METADATA = ['name', 'uid', 'resourceVersion', 'deletionTimestamp', 'finalizers', 'labels'];

function isStringArray(v: unknown): boolean {
  return Array.isArray(v) && v.every((f) => typeof f === 'string');
}

function isStringMap(v: unknown): boolean {
  return isObj(v) && Object.values(v).every((x) => typeof x === 'string');
}

function snapshotMetadata(m: unknown, path: string): ObjectSnapshot['metadata'] {
  if (!isObj(m)) fail(path, 'must be an object');
  onlyKeys(m, path, SNAPSHOT_METADATA);
  for (const k of ['name', 'uid', 'resourceVersion', 'deletionTimestamp']) str(m, k, path);
  if (m.finalizers !== undefined && !isStringArray(m.finalizers))
    fail(`${path}.finalizers`, 'must be an array of strings');
  if (m.labels !== undefined && !isStringMap(m.labels)) fail(`${path}.labels`, 'must be a map of strings');
  return m as ObjectSnapshot['metadata'];
}

function snapshot(v: unknown, path: string): ObjectSnapshot | undefined {
  if (v === undefined) return undefined;
  if (!isObj(v)) fail(path, 'must be an object');
  onlyKeys(v, path, ['metadata', 'spec', 'status']);
  const out: ObjectSnapshot = {};
  if (v.metadata !== undefined) out.metadata = snapshotMetadata(v.metadata, `${path}.metadata`);
  for (const k of ['spec', 'status'] as const) {
    if (v[k] === undefined) continue;
    if (!isObj(v[k])) fail(`${path}.${k}`, 'must be an object');
    (out as Obj)[k] = v[k];
  }
  return out;
}

/** The event's `object`: which EIP (kind, name, and the uid and resourceVersion the bridge saw). */
function eventObject(o: unknown, path: string): EipEvent['object'] {
  if (!isObj(o)) fail(path, o === undefined ? 'is required' : 'must be an object');
  onlyKeys(o, path, ['kind', 'name', 'uid', 'resourceVersion']);
  if (o.kind !== undefined && o.kind !== 'IptablesEIP') fail(`${path}.kind`, 'must be IptablesEIP');
  const name = str(o, 'name', path, { required: true, min: 1, max: 253 })!;
  if (!NAME.test(name)) fail(`${path}.name`, `"${name}" is not a valid object name`);
  const uid = str(o, 'uid', path, { min: 1, max: 64 });
  const resourceVersion = str(o, 'resourceVersion', path, { max: 64 });
  return {
    name,
    ...(uid !== undefined && { uid }),
    ...(resourceVersion !== undefined && { resourceVersion }),
    ...(o.kind !== undefined && { kind: 'IptablesEIP' as const }),
  };
}

function parseDetail(d: unknown, path: string): EipEvent {
  if (!isObj(d)) fail(path, 'must be an object');
  onlyKeys(d, path, [
    'version',
    'id',
    'handler',
    'reason',
    'object',
    'gateway',
    'pod',
    'emittedAt',
    'nat',
    'old',
    'new',
  ]);
  if (d.version !== 1) fail(`${path}.version`, `must be 1, got ${JSON.stringify(d.version)}`);
  const id = str(d, 'id', path, { required: true, min: 1, max: 256 })!;
  const handler = d.handler;
  if (!HANDLERS.includes(handler as HandlerName))
    fail(`${path}.handler`, `must be one of ${HANDLERS.join(', ')}`);
  const reason = d.reason;
  if (!REASONS.includes(reason as Reason)) fail(`${path}.reason`, `must be one of ${REASONS.join(', ')}`);
  const object = eventObject(d.object, `${path}.object`);
  const gateway = str(d, 'gateway', path, { max: 253 });
  const pod = str(d, 'pod', path, { max: 128 });
  const emittedAt = str(d, 'emittedAt', path);
  const event: EipEvent = {
    version: 1,
    id,
    handler: handler as HandlerName,
    reason: reason as Reason,
    object,
  };
  if (gateway !== undefined) event.gateway = gateway;
  if (pod !== undefined) event.pod = pod;
  if (emittedAt !== undefined) event.emittedAt = emittedAt;
  if (d.nat !== undefined) {
    if (!NAT_HINTS.includes(d.nat as NatHint))
      fail(`${path}.nat`, `must be one of ${NAT_HINTS.map((h) => JSON.stringify(h)).join(', ')}`);
    event.nat = d.nat as NatHint;
  }
  const old = snapshot(d.old, `${path}.old`);
  const neu = snapshot(d.new, `${path}.new`);
  if (old) event.old = old;
  if (neu) event.new = neu;
  return event;
}

/**
 * The largest event accepted, serialised as JSON: 256 KiB, what EventBridge and Lambda's asynchronous invocation
 * take. The bridge's events are a few KB; anything larger is refused before a field is read (events/schema.json).
 */
export const MAX_EVENT_BYTES = 256 * 1024;

function sizeOf(input: unknown): number {
  try {
    return Buffer.byteLength(JSON.stringify(input) ?? '', 'utf8');
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/**
 * Several events of one handler in one delivery (docs/adr/0112-one-gateways-burst-in-one-invocation.md): the
 * bridge's sinks group the events of one handler and one gateway that wait together, so that one Lambda invocation
 * runs them side by side and their gateway calls share execs. Each member is a whole event, validated as one; the
 * EventBridge detail-type stays the handler's, so the rules route a batch as they route its members.
 */
export interface EipBatch {
  version: 1;
  handler: HandlerName;
  events: EipEvent[];
}

/** The most events one batch may carry (the sinks send fewer: EVENT_BATCH_MAX, default 8). */
export const MAX_BATCH_EVENTS = 32;

/** What a sink sends for a group of events of one handler: the event itself when alone, else a batch. */
export function detailOf(events: readonly EipEvent[]): EipEvent | EipBatch {
  if (events.length === 1) return events[0]!;
  return { version: 1, handler: events[0]!.handler, events: [...events] };
}

/** A member of a delivery: its event, or why it was refused (with its name when that name is a valid one). */
export type Member = { event: EipEvent } | { error: InvalidEventError; name: string };

function member(m: unknown, path: string, handler: HandlerName): Member {
  try {
    const event = parseDetail(m, path);
    if (event.handler !== handler) fail(`${path}.handler`, `must be the batch's handler, ${handler}`);
    return { event };
  } catch (error) {
    if (!(error instanceof InvalidEventError)) throw error;
    const name = isObj(m) && isObj(m.object) ? m.object.name : undefined;
    return { error, name: typeof name === 'string' && NAME.test(name) && name.length <= 253 ? name : '' };
  }
}

/** A batch's frame is checked as a whole; each member on its own (a bad member spoils only itself). */
function parseBatch(d: Obj, path: string): { handler: HandlerName; members: Member[] } {
  onlyKeys(d, path, ['version', 'handler', 'events']);
  if (d.version !== 1) fail(`${path}.version`, `must be 1, got ${JSON.stringify(d.version)}`);
  const handler = d.handler as HandlerName;
  if (!HANDLERS.includes(handler)) fail(`${path}.handler`, `must be one of ${HANDLERS.join(', ')}`);
  const events = d.events;
  if (!Array.isArray(events)) fail(`${path}.events`, 'must be an array');
  if (events.length < 2 || events.length > MAX_BATCH_EVENTS)
    fail(`${path}.events`, `must hold 2 to ${MAX_BATCH_EVENTS} events, got ${events.length}`);
  return { handler, members: events.map((m, i) => member(m, `${path}.events[${i}]`, handler)) };
}

/** A detail or a batch detail (one with `events`) at `path`. */
function parseAny(d: unknown, path: string): { handler: HandlerName; members: Member[] } {
  if (isObj(d) && 'events' in d) return parseBatch(d, path);
  const event = parseDetail(d, path);
  return { handler: event.handler, members: [{ event }] };
}

/**
 * Accepts an EventBridge envelope or a bare detail, of one event or of a batch. A single event comes back as the one
 * member, a batch as one member per event, each validated as a single event is: a bad member is returned as its
 * error, the others as events.
 * @throws InvalidEventError naming the offending field, for a single event or a batch's frame
 */
export function parseEipEvents(input: unknown): { handler: HandlerName; members: Member[] } {
  if (!isObj(input)) fail('event', 'must be a JSON object');
  const bytes = sizeOf(input);
  if (bytes > MAX_EVENT_BYTES)
    fail(
      'event',
      `is ${bytes === Infinity ? 'not serialisable' : `${bytes} bytes`}; at most ${MAX_EVENT_BYTES} are accepted`,
    );
  if ('detail' in input || 'detail-type' in input || 'source' in input) {
    if (input.source !== EVENT_SOURCE) fail('source', `must be "${EVENT_SOURCE}"`);
    const parsed = parseAny(input.detail, 'detail');
    if (input['detail-type'] !== detailTypeOf(parsed.handler))
      fail('detail-type', `must be "${detailTypeOf(parsed.handler)}" for handler ${parsed.handler}`);
    return parsed;
  }
  return parseAny(input, 'event');
}

/**
 * Accepts an EventBridge envelope or a bare detail of one event; returns the detail.
 * @throws InvalidEventError naming the offending field (a batch is refused: parseEipEvents takes it)
 */
export function parseEipEvent(input: unknown): EipEvent {
  const { members } = parseEipEvents(input);
  const only = members.length === 1 ? members[0]! : undefined;
  if (!only) fail('event.events', 'is a batch; one event was expected');
  if ('error' in only) throw only.error;
  return only.event;
}
