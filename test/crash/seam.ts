/**
 * The seam the crash-point suite cuts at: a Deps wrapper that counts every side-effecting port call and can stop the
 * "process" right after the k-th one. A call is side-effecting unless its name says it only reads (get…, list…,
 * find…, natGwFeature, heldAt), so a write added to a port later is a crash point without editing this file.
 *
 * After the crash every port call throws at once and does nothing — the lease is not given back, nothing is rolled
 * back — as when Lambda's process is killed; the caller's clean-up code runs into the same wall.
 */
import type { Deps } from '../../shared/ports.js';

export class Crash extends Error {
  constructor(readonly step: string) {
    super(`crashed after ${step}`);
    this.name = 'Crash';
  }
}

const PORTS = ['ipam', 'holds', 'leases', 'cluster', 'gateway', 'redoLedger'] as const;
const READ = /^(get|list|find|natGw|heldAt)/;
/** Synchronous, request-free methods (Ipam.suggestHome): passed through as they are, crashing like the rest. */
const SYNC = /^suggest/;

export interface Seam {
  deps: Deps;
  /** Side-effecting calls made so far, labelled `port.method` (and the op for an exec). */
  readonly steps: string[];
  /** Set once the crash happened. */
  crashed?: string;
}

/** Wraps `deps`; with `crashAfter = k` the k-th side-effecting call completes and then the process "dies". */
export function seam(deps: Deps, crashAfter = Number.POSITIVE_INFINITY): Seam {
  const s: Seam = { deps: { ...deps }, steps: [] };
  for (const port of PORTS) {
    const target = deps[port] as unknown as Record<string, unknown> | undefined;
    if (!target) continue;
    (s.deps as unknown as Record<string, unknown>)[port] = new Proxy(target, {
      get(t, prop, receiver) {
        const v = Reflect.get(t, prop, receiver);
        if (typeof v !== 'function' || typeof prop !== 'string') return v;
        if (SYNC.test(prop))
          return (...args: unknown[]) => {
            if (s.crashed) throw new Crash(s.crashed);
            return (v as (...a: unknown[]) => unknown).apply(t, args);
          };
        // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
        return async (...args: unknown[]) => {
          if (s.crashed) throw new Crash(s.crashed);
          const result = await (v as (...a: unknown[]) => unknown).apply(t, args);
          if (!READ.test(prop)) {
            const step = port === 'gateway' && prop === 'run' ? `exec ${String(args[1])}` : `${port}.${prop}`;
            s.steps.push(step);
            if (s.steps.length >= crashAfter) {
              s.crashed = `#${s.steps.length} ${step}`;
              throw new Crash(s.crashed);
            }
          }
          return result;
        };
      },
    });
  }
  return s;
}
