/**
 * The optional data directory: a snapshot of every object and the global resourceVersion (`objects.json`) plus a
 * journal of the changes since (`journal.jsonl`, one line per ADDED/MODIFIED/DELETED).
 *
 * Durability: each change is appended to the journal and fsynced before the write that caused it is answered
 * (the store's listeners run synchronously inside the write), so an acknowledged write survives kill -9 and a
 * power cut; a journal line torn by a crash belongs to a write that was never answered and is ignored on load.
 * Every `compactEvery` changes, and on close, the snapshot is rewritten (temp file, fsync, rename, fsync of the
 * directory) and the journal emptied; journal lines at or below the snapshot's resourceVersion are skipped, so a
 * crash between the two steps loses nothing either.
 */
import {
  closeSync,
  fdatasyncSync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { isObject, type JsonObject, meta } from './json.js';
import { objectKey, type StoreEvent, type StoreSnapshot } from './store.js';

const FILE = 'objects.json';
const JOURNAL = 'journal.jsonl';
const FORMAT = 1;

interface JournalLine {
  rv: number;
  type: StoreEvent['type'];
  resource: string;
  object: JsonObject;
}

function fsyncPath(path: string, flags: string): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export class DataDir {
  private journalFd: number | undefined;
  private sinceCompaction = 0;

  constructor(
    readonly dir: string,
    private readonly snapshot: () => StoreSnapshot,
    private readonly compactEvery = 2000,
  ) {
    mkdirSync(dir, { recursive: true });
  }

  /** The saved state (snapshot plus journal), or undefined when the directory holds none yet. */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
  load(): StoreSnapshot | undefined {
    let base: StoreSnapshot | undefined;
    try {
      const parsed = JSON.parse(readFileSync(join(this.dir, FILE), 'utf8')) as {
        format?: number;
      } & StoreSnapshot;
      if (parsed.format !== FORMAT)
        throw new Error(`${join(this.dir, FILE)}: unknown format ${String(parsed.format)}`);
      base = { resourceVersion: parsed.resourceVersion, resources: parsed.resources };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    const lines = this.journalLines();
    if (!base && lines.length === 0) return undefined;
    let resourceVersion = base?.resourceVersion ?? 0;
    const buckets = new Map<string, Map<string, JsonObject>>();
    for (const [r, objs] of Object.entries(base?.resources ?? {})) {
      const b = new Map<string, JsonObject>();
      for (const o of objs) {
        if (!isObject(o)) continue;
        const m = meta(o);
        b.set(objectKey(m.namespace as string | undefined, m.name as string), o);
      }
      buckets.set(r, b);
    }
    for (const line of lines) {
      if (line.rv <= resourceVersion) continue;
      resourceVersion = line.rv;
      let b = buckets.get(line.resource);
      if (!b) {
        b = new Map();
        buckets.set(line.resource, b);
      }
      const m = meta(line.object);
      const key = objectKey(m.namespace as string | undefined, m.name as string);
      if (line.type === 'DELETED') b.delete(key);
      else b.set(key, line.object);
    }
    const resources: Record<string, JsonObject[]> = {};
    for (const [r, b] of buckets) if (b.size > 0) resources[r] = [...b.values()];
    return { resourceVersion, resources };
  }

  private journalLines(): JournalLine[] {
    let text: string;
    try {
      text = readFileSync(join(this.dir, JOURNAL), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const out: JournalLine[] = [];
    const lines = text.split('\n');
    for (const [i, raw] of lines.entries()) {
      if (raw === '') continue;
      try {
        const l = JSON.parse(raw) as JournalLine;
        if (typeof l.rv === 'number' && typeof l.resource === 'string' && isObject(l.object)) out.push(l);
      } catch (e) {
        // Only the last line can be torn (a crash during its append, before its write was answered).
        if (i < lines.length - 1 && lines.slice(i + 1).some((x) => x !== ''))
          throw new Error(`${join(this.dir, JOURNAL)}: line ${i + 1} is not JSON: ${(e as Error).message}`);
      }
    }
    return out;
  }

  /** Appends one change to the journal and fsyncs it; returns once it is on disk. */
  record(event: StoreEvent): void {
    this.journalFd ??= openSync(join(this.dir, JOURNAL), 'a');
    const line: JournalLine = {
      rv: event.rv,
      type: event.type,
      resource: event.resource,
      object: event.object,
    };
    writeSync(this.journalFd, `${JSON.stringify(line)}\n`);
    fdatasyncSync(this.journalFd);
    if (++this.sinceCompaction >= this.compactEvery) this.flush();
  }

  /** Writes the snapshot durably, then empties the journal. */
  flush(): void {
    const target = join(this.dir, FILE);
    const tmp = `${target}.${process.pid}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, JSON.stringify({ format: FORMAT, ...this.snapshot() }));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, target);
    fsyncPath(this.dir, 'r');
    this.journalFd ??= openSync(join(this.dir, JOURNAL), 'a');
    ftruncateSync(this.journalFd, 0);
    fsyncSync(this.journalFd);
    this.sinceCompaction = 0;
  }

  close(): void {
    this.flush();
    if (this.journalFd !== undefined) closeSync(this.journalFd);
    this.journalFd = undefined;
  }
}
