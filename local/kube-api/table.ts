/**
 * Server-side Table output: CRs get Name plus their additionalPrinterColumns (no implicit Age);
 * built-in kinds get the kubelet-era printer columns (pods: Ready, Status, Restarts, Age, and the wide ones).
 * Every row carries the object's metadata as PartialObjectMetadata so `--show-labels`, `-L` and `-A` work.
 */
import { isObject, type JsonObject, type JsonValue } from './json.js';
import type { PrinterColumn, ResourceDef } from './registry.js';

export interface ColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

const NAME_DESCRIPTION =
  'Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names';
const AGE_DESCRIPTION =
  'CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.';

function col(name: string, type: string, description: string, priority = 0, format = ''): ColumnDefinition {
  return { name, type, format, description, priority };
}

const nameColumn = col('Name', 'string', NAME_DESCRIPTION, 0, 'name');

/** kubectl's duration.HumanDuration. */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
export function humanDuration(ms: number): string {
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) {
    const s = seconds % 60;
    return s === 0 ? `${minutes}m` : `${minutes}m${s}s`;
  }
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(seconds / 3600);
  if (hours < 8) {
    const m = minutes % 60;
    return m === 0 ? `${hours}h` : `${hours}h${m}m`;
  }
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) {
    const h = hours % 24;
    return h === 0 ? `${Math.trunc(hours / 24)}d` : `${Math.trunc(hours / 24)}d${h}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.trunc(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const dy = Math.trunc(hours / 24) % 365;
    const y = Math.trunc(hours / 24 / 365);
    return dy === 0 ? `${y}y` : `${y}y${dy}d`;
  }
  return `${Math.trunc(hours / 24 / 365)}y`;
}

function since(ts: JsonValue | undefined, now: number): string {
  if (typeof ts !== 'string' || ts === '') return '<unknown>';
  const t = Date.parse(ts);
  if (Number.isNaN(t)) return '<unknown>';
  return humanDuration(now - t);
}

/** Evaluates the simple JSONPaths printer columns use: `.a.b`, `.a[0].b`, `.a['x.y']`, optionally in `{}`. */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
export function evalJsonPath(obj: JsonValue, path: string): JsonValue | undefined {
  let p = path.trim();
  if (p.startsWith('{') && p.endsWith('}')) p = p.slice(1, -1);
  const re = /\.([^.[\]]+)|\[(\d+|\*)\]|\['([^']*)'\]|\["([^"]*)"\]/gy;
  let cur: JsonValue | undefined = obj;
  let consumed = 0;
  while (consumed < p.length) {
    const m = re.exec(p);
    if (!m) break;
    consumed = re.lastIndex;
    const key = m[1] ?? m[3] ?? m[4];
    if (key !== undefined) {
      cur = isObject(cur) ? cur[key] : undefined;
    } else {
      const idx = m[2] === '*' ? 0 : Number(m[2]);
      cur = Array.isArray(cur) ? cur[idx] : undefined;
    }
    if (cur === undefined) return undefined;
  }
  return consumed === p.length ? cur : undefined;
}

/** A cell of a CRD printer column (apiextensions tableconvertor: cellForJSONValue / PrintResults). */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function crdCell(column: PrinterColumn, obj: JsonObject, now: number): JsonValue {
  const v = evalJsonPath(obj, column.jsonPath);
  if (v === undefined || v === null) return null;
  switch (column.type) {
    case 'string':
      if (typeof v === 'string') return v;
      if (typeof v === 'object') return JSON.stringify(v);
      return String(v);
    case 'integer':
      return typeof v === 'number' ? Math.trunc(v) : null;
    case 'number':
      return typeof v === 'number' ? v : null;
    case 'boolean':
      return typeof v === 'boolean' ? v : null;
    case 'date':
      if (typeof v !== 'string') return null;
      return Number.isNaN(Date.parse(v)) ? '<invalid>' : humanDuration(now - Date.parse(v));
    default:
      return null;
  }
}

export function columnDefinitions(def: ResourceDef): ColumnDefinition[] {
  switch (def.table) {
    case 'pod':
      return [
        nameColumn,
        col('Ready', 'string', 'The aggregate readiness state of this pod for accepting traffic.'),
        col('Status', 'string', 'The aggregate status of the containers in this pod.'),
        col(
          'Restarts',
          'string',
          'The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.',
        ),
        col('Age', 'string', AGE_DESCRIPTION),
        col('IP', 'string', 'podIP address allocated to the pod. Routable at least within the cluster.', 1),
        col('Node', 'string', 'NodeName indicates in which node this pod is scheduled.', 1),
        col(
          'Nominated Node',
          'string',
          'nominatedNodeName is set only when this pod preempts other pods on the node.',
          1,
        ),
        col(
          'Readiness Gates',
          'string',
          'If specified, all readiness gates will be evaluated for pod readiness.',
          1,
        ),
      ];
    case 'namespace':
      return [
        nameColumn,
        col('Status', 'string', 'The status of the namespace'),
        col('Age', 'string', AGE_DESCRIPTION),
      ];
    case 'configmap':
      return [
        nameColumn,
        col('Data', 'string', 'Data contains the configuration data.'),
        col('Age', 'string', AGE_DESCRIPTION),
      ];
    case 'event':
      return [
        col(
          'Last Seen',
          'string',
          'The time at which the most recent occurrence of this event was recorded.',
        ),
        col('Type', 'string', 'Type of this event (Normal, Warning), new types could be added in the future'),
        col(
          'Reason',
          'string',
          "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        col('Object', 'string', 'The object that this event is about.'),
        col(
          'Subobject',
          'string',
          'If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.',
          1,
        ),
        col(
          'Source',
          'string',
          'The component reporting this event. Should be a short machine understandable string.',
          1,
        ),
        col('Message', 'string', 'A human-readable description of the status of this operation.'),
        col(
          'First Seen',
          'string',
          'The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)',
          1,
        ),
        col('Count', 'string', 'The number of times this event has occurred.', 1),
        col('Name', 'string', NAME_DESCRIPTION, 1, 'name'),
      ];
    case 'crd':
      return [nameColumn, col('Created At', 'date', AGE_DESCRIPTION)];
    case 'binding':
      return [
        nameColumn,
        col(
          'Role',
          'string',
          'RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.',
        ),
        col('Age', 'string', AGE_DESCRIPTION),
        col('Users', 'string', 'Users in the binding', 1),
        col('Groups', 'string', 'Groups in the binding', 1),
        col('ServiceAccounts', 'string', 'ServiceAccounts in the binding', 1),
      ];
    case 'columns':
      return [
        nameColumn,
        ...def.columns.map((c) =>
          col(
            c.name,
            c.type,
            c.description ?? `Custom resource definition column (in JSONPath format): ${c.jsonPath}`,
            c.priority ?? 0,
            c.format ?? '',
          ),
        ),
      ];
  }
}

function arr(v: JsonValue | undefined): JsonObject[] {
  return Array.isArray(v) ? (v.filter(isObject) as JsonObject[]) : [];
}

function obj(v: JsonValue | undefined): JsonObject {
  return isObject(v) ? v : {};
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function podCells(pod: JsonObject, now: number): JsonValue[] {
  const m = obj(pod.metadata);
  const spec = obj(pod.spec);
  const st = obj(pod.status);
  let reason = typeof st.reason === 'string' && st.reason ? st.reason : String(st.phase ?? '');
  let restarts = 0;
  let lastRestart = 0;
  const noteTermination = (cs: JsonObject): void => {
    const t = obj(obj(cs.lastState).terminated);
    if (typeof t.finishedAt === 'string') lastRestart = Math.max(lastRestart, Date.parse(t.finishedAt));
  };
  let initializing = false;
  const initSpecs = arr(spec.initContainers);
  const initStatuses = arr(st.initContainerStatuses);
  for (let i = 0; i < initStatuses.length; i++) {
    const cs = initStatuses[i] as JsonObject;
    restarts += Number(cs.restartCount ?? 0);
    noteTermination(cs);
    const state = obj(cs.state);
    const term = isObject(state.terminated) ? state.terminated : undefined;
    const wait = isObject(state.waiting) ? state.waiting : undefined;
    if (term && Number(term.exitCode ?? 0) === 0) continue;
    if (term) {
      reason = term.reason ? `Init:${String(term.reason)}` : `Init:ExitCode:${String(term.exitCode)}`;
    } else if (wait?.reason && wait.reason !== 'PodInitializing') {
      reason = `Init:${String(wait.reason)}`;
    } else {
      reason = `Init:${i}/${initSpecs.length}`;
    }
    initializing = true;
    break;
  }
  const conditions = arr(st.conditions);
  const initializedTrue = conditions.some((c) => c.type === 'Initialized' && c.status === 'True');
  let ready = 0;
  if (!initializing || initializedTrue) {
    restarts = 0;
    lastRestart = 0;
    let hasRunning = false;
    const statuses = arr(st.containerStatuses);
    for (let i = statuses.length - 1; i >= 0; i--) {
      const cs = statuses[i] as JsonObject;
      restarts += Number(cs.restartCount ?? 0);
      noteTermination(cs);
      const state = obj(cs.state);
      const wait = isObject(state.waiting) ? state.waiting : undefined;
      const term = isObject(state.terminated) ? state.terminated : undefined;
      if (wait?.reason) reason = String(wait.reason);
      else if (term?.reason) reason = String(term.reason);
      else if (term)
        reason = term.signal ? `Signal:${String(term.signal)}` : `ExitCode:${String(term.exitCode)}`;
      else if (cs.ready === true && isObject(state.running)) {
        hasRunning = true;
        ready++;
      }
    }
    if (reason === 'Completed' && hasRunning) {
      reason = conditions.some((c) => c.type === 'Ready' && c.status === 'True') ? 'Running' : 'NotReady';
    }
  }
  if (m.deletionTimestamp && st.phase !== 'Succeeded' && st.phase !== 'Failed') reason = 'Terminating';
  const restartsText =
    restarts !== 0 && lastRestart > 0
      ? `${restarts} (${humanDuration(now - lastRestart)} ago)`
      : String(restarts);
  const podIPs = arr(st.podIPs);
  const ip = (podIPs[0]?.ip as string | undefined) || (st.podIP as string | undefined) || '<none>';
  const gates = arr(spec.readinessGates);
  let gatesText = '<none>';
  if (gates.length > 0) {
    const trueCount = gates.filter((g) =>
      conditions.some((c) => c.type === g.conditionType && c.status === 'True'),
    ).length;
    gatesText = `${trueCount}/${gates.length}`;
  }
  return [
    String(m.name ?? ''),
    `${ready}/${arr(spec.containers).length}`,
    reason,
    restartsText,
    since(m.creationTimestamp, now),
    ip,
    (spec.nodeName as string) || '<none>',
    (st.nominatedNodeName as string) || '<none>',
    gatesText,
  ];
}

function eventCells(ev: JsonObject, now: number): JsonValue[] {
  const m = obj(ev.metadata);
  const inv = obj(ev.involvedObject);
  const src = obj(ev.source);
  const last = ev.lastTimestamp ?? ev.eventTime ?? m.creationTimestamp;
  const first = ev.firstTimestamp ?? ev.eventTime ?? m.creationTimestamp;
  const source = [src.component, src.host].filter((x) => typeof x === 'string' && x).join(', ');
  return [
    since(last, now),
    String(ev.type ?? ''),
    String(ev.reason ?? ''),
    `${String(inv.kind ?? '').toLowerCase()}/${String(inv.name ?? '')}`,
    String(inv.fieldPath ?? ''),
    source || String(ev.reportingComponent ?? ''),
    String(ev.message ?? ''),
    since(first, now),
    String(ev.count ?? 1),
    String(m.name ?? ''),
  ];
}

function bindingCells(b: JsonObject, now: number): JsonValue[] {
  const m = obj(b.metadata);
  const ref = obj(b.roleRef);
  const subjects = arr(b.subjects);
  const names = (kind: string) =>
    subjects
      .filter((s) => s.kind === kind)
      .map((s) =>
        kind === 'ServiceAccount' ? `${String(s.namespace ?? '')}/${String(s.name)}` : String(s.name),
      )
      .join(', ');
  return [
    String(m.name ?? ''),
    `${String(ref.kind ?? '')}/${String(ref.name ?? '')}`,
    since(m.creationTimestamp, now),
    names('User'),
    names('Group'),
    names('ServiceAccount'),
  ];
}

export function rowCells(def: ResourceDef, o: JsonObject, now: number): JsonValue[] {
  const m = obj(o.metadata);
  const name = String(m.name ?? '');
  switch (def.table) {
    case 'pod':
      return podCells(o, now);
    case 'namespace':
      return [name, String(obj(o.status).phase ?? 'Active'), since(m.creationTimestamp, now)];
    case 'configmap':
      return [
        name,
        Object.keys(obj(o.data)).length + Object.keys(obj(o.binaryData)).length,
        since(m.creationTimestamp, now),
      ];
    case 'event':
      return eventCells(o, now);
    case 'crd':
      return [name, typeof m.creationTimestamp === 'string' ? m.creationTimestamp : null];
    case 'binding':
      return bindingCells(o, now);
    case 'columns':
      return [name, ...def.columns.map((c) => crdCell(c, o, now))];
  }
}

export interface TableOptions {
  includeObject: IncludeObject;
  /** meta.k8s.io version of the Table: v1 or v1beta1. */
  version: 'v1' | 'v1beta1';
  /** Leave out columnDefinitions (watch events after the first). */
  noHeaders?: boolean;
}

export function tableRow(def: ResourceDef, o: JsonObject, opts: TableOptions, now: number): JsonObject {
  const row: JsonObject = { cells: rowCells(def, o, now) };
  if (opts.includeObject === 'Metadata') {
    row.object = {
      kind: 'PartialObjectMetadata',
      apiVersion: `meta.k8s.io/${opts.version}`,
      metadata: o.metadata ?? {},
    };
  } else if (opts.includeObject === 'Object') {
    row.object = o;
  }
  return row;
}

export function toTable(
  def: ResourceDef,
  objects: readonly JsonObject[],
  listMeta: JsonObject,
  opts: TableOptions,
  now = Date.now(),
): JsonObject {
  return {
    kind: 'Table',
    apiVersion: `meta.k8s.io/${opts.version}`,
    metadata: listMeta,
    columnDefinitions: opts.noHeaders ? null : (columnDefinitions(def) as unknown as JsonValue),
    rows: objects.map((o) => tableRow(def, o, opts, now)),
  };
}
