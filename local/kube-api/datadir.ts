/**
 * The optional data directory: every object and the global resourceVersion, written shortly after each
 * change (atomically: temp file, then rename) and on close, read back at start.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StoreSnapshot } from './store.js';

const FILE = 'objects.json';
const FORMAT = 1;

export class DataDir {
  private timer: NodeJS.Timeout | undefined;
  private dirty = false;

  constructor(
    readonly dir: string,
    private readonly snapshot: () => StoreSnapshot,
    private readonly delayMs = 50,
  ) {
    mkdirSync(dir, { recursive: true });
  }

  /** The saved state, or undefined when the directory holds none yet. */
  load(): StoreSnapshot | undefined {
    let text: string;
    try {
      text = readFileSync(join(this.dir, FILE), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
    const parsed = JSON.parse(text) as { format?: number } & StoreSnapshot;
    if (parsed.format !== FORMAT)
      throw new Error(`${join(this.dir, FILE)}: unknown format ${String(parsed.format)}`);
    return { resourceVersion: parsed.resourceVersion, resources: parsed.resources };
  }

  /** Saves soon (changes within `delayMs` are written together). */
  changed(): void {
    this.dirty = true;
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, this.delayMs);
  }

  flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (!this.dirty) return;
    this.dirty = false;
    const target = join(this.dir, FILE);
    const tmp = `${target}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify({ format: FORMAT, ...this.snapshot() }));
    renameSync(tmp, target);
  }
}
