// Scheduled garbage collection of allocations whose EIP (or gateway pod) is gone: wiring only (shared/core/gc.ts).
import { liveDeps } from '../../shared/adapters/live.js';
import { collectGarbage, isGarbageCollector } from '../../shared/core/gc.js';

export const handler = async (): Promise<{ scanned: number; orphans: number; released: number }> => {
  const deps = await liveDeps();
  if (!isGarbageCollector(deps.ipam)) throw new Error('the configured IPAM cannot collect garbage');
  const report = await collectGarbage(deps, deps.ipam);
  return { scanned: report.scanned, orphans: report.orphans.length, released: report.released.length };
};
