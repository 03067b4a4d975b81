/**
 * Detection of a second controller. kube-ovn's own controller runs IptablesEIP workers beside this product unless
 * they are turned off, and it writes the same status and finalizer. The API server records who wrote which
 * fields in `metadata.managedFields`; an entry whose manager is not one of the product's and that owns status
 * fields or the finalizers is another controller at work. The bridge says so (a warning and the `ForeignWriter`
 * metric with dimension `manager`) and does nothing else: fighting over the object would make it flap.
 */
import { FIELD_MANAGER } from '../adapters/k8s/cluster.js';
import type { KubeObject } from './objects.js';

/** The product's own field managers. */
export const OWN_FIELD_MANAGERS: readonly string[] = [FIELD_MANAGER];

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  time?: string;
  fieldsV1?: Record<string, unknown>;
}

export interface ForeignWrite {
  manager: string;
  /** What it owns that only a controller writes. */
  fields: ('status' | 'finalizers')[];
  /** When it last wrote (the entry's time, one-second resolution), to count each write once. */
  time: string;
  /** The subresource written (`status`), if any: the API server keeps one entry per manager and subresource. */
  subresource?: string;
  /** This manager's first write seen on this EIP (the bridge warns on it, and logs later ones at debug). */
  first?: boolean;
}

function entriesOf(o: KubeObject): ManagedFieldsEntry[] {
  const list = (o.metadata as { managedFields?: unknown } | undefined)?.managedFields;
  return Array.isArray(list) ? (list as ManagedFieldsEntry[]).filter((e) => e && typeof e === 'object') : [];
}

/** Which of status and finalizers one managedFields entry records writing. */
function fieldsWritten(e: ManagedFieldsEntry): ForeignWrite['fields'] {
  const f = e.fieldsV1 ?? {};
  const fields: ForeignWrite['fields'] = [];
  if (e.subresource === 'status' || 'f:status' in f) fields.push('status');
  const meta = f['f:metadata'];
  if (meta && typeof meta === 'object' && 'f:finalizers' in meta) fields.push('finalizers');
  return fields;
}

/** The foreign writers of status or finalizers recorded on `eip`. */
export function foreignWrites(eip: KubeObject, own: readonly string[] = OWN_FIELD_MANAGERS): ForeignWrite[] {
  const out: ForeignWrite[] = [];
  for (const e of entriesOf(eip)) {
    const manager = typeof e.manager === 'string' ? e.manager : '';
    if (own.includes(manager)) continue;
    const fields = fieldsWritten(e);
    if (fields.length === 0) continue;
    out.push({
      manager: manager || '(unnamed)',
      fields,
      time: e.time ?? '',
      ...(typeof e.subresource === 'string' && e.subresource !== '' && { subresource: e.subresource }),
    });
  }
  return out;
}

/** Remembers which writes were reported, so each foreign write is counted once. Bounded by the EIPs watched. */
export class ForeignWriterWatch {
  private readonly seen = new Map<string, Map<string, string>>();

  /** The writes on `eip` not reported before. */
  observe(eip: KubeObject, own?: readonly string[]): ForeignWrite[] {
    const uid = eip.metadata?.uid ?? eip.metadata?.name ?? '';
    const writes = foreignWrites(eip, own);
    if (writes.length === 0) return [];
    let byManager = this.seen.get(uid);
    if (!byManager) {
      byManager = new Map();
      this.seen.set(uid, byManager);
    }
    const fresh: ForeignWrite[] = [];
    for (const w of writes) {
      const entry = `${w.manager}|${w.subresource ?? ''}`;
      if (byManager.get(entry) === w.time) continue;
      const first = ![...byManager.keys()].some((k) => k.startsWith(`${w.manager}|`));
      byManager.set(entry, w.time);
      fresh.push(first ? { ...w, first } : w);
    }
    return fresh;
  }

  forget(eip: KubeObject): void {
    this.seen.delete(eip.metadata?.uid ?? eip.metadata?.name ?? '');
  }
}
