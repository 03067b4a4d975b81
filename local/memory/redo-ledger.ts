/**
 * In-memory RedoLedger: the same rules as the DynamoDB adapter (shared/adapters/dynamo/redo-ledger.ts): one record
 * per pod, replaced whole, read back as it was written.
 */
import type { RedoLedger, RedoRecord } from '../../shared/ports.js';

export class MemoryRedoLedger implements RedoLedger {
  readonly records = new Map<string, RedoRecord>();

  async get(pod: string): Promise<RedoRecord | undefined> {
    const r = this.records.get(pod);
    return r && { ...r, done: [...r.done] };
  }

  async put(record: RedoRecord): Promise<void> {
    this.records.set(record.pod, { ...record, done: [...record.done] });
  }
}
