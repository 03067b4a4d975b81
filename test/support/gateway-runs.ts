/**
 * The recorded runs of kube-ovn's own nat-gateway.sh (test/fixtures/gateway-runs/, written by
 * local/record-gateway-runs.ts): each release's script run for real in a network namespace, every step with its
 * argv, exit status, stdout and stderr.
 */
import { readFileSync } from 'node:fs';
import type { GatewayRun, RecordedStep } from '../../local/record-gateway-runs.js';

export const RECORDED = ['v1.12.35', 'v1.13.0', 'v1.14.0', 'v1.15.0', 'v1.16.0', 'master'] as const;
export type Recorded = (typeof RECORDED)[number];

const cache = new Map<string, GatewayRun>();

export function run(release: Recorded): GatewayRun {
  let r = cache.get(release);
  if (!r) {
    r = JSON.parse(
      readFileSync(new URL(`../fixtures/gateway-runs/${release}.json`, import.meta.url), 'utf8'),
    ) as GatewayRun;
    cache.set(release, r);
  }
  return r;
}

/** The one step of `release` named `name`. */
export function step(release: Recorded, name: string): RecordedStep {
  const found = run(release).steps.filter((s) => s.name === name);
  if (found.length !== 1) throw new Error(`${release}: ${found.length} steps named ${JSON.stringify(name)}`);
  return found[0]!;
}

/** The output of a read step that exited 0. */
export function output(release: Recorded, name: string): string {
  const s = step(release, name);
  if (s.exitCode !== 0) throw new Error(`${release}: ${name} exited ${s.exitCode}: ${s.stderr}`);
  return s.stdout;
}
