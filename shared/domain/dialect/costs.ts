/**
 * What one rule of an op costs a gateway before any exec of it was timed: the first guess the batcher sizes its
 * first chunk by, replaced per pod and op by what the execs took (shared/core/batch.ts). Every release's eip-add
 * probes the address with `arping -c 3` (iputils sends a probe a second, so three seconds an address); 1.12 probes
 * twice (duplicate address detection with -D, then -A). Everything else is a few iproute2, tc and iptables runs.
 */
import type { NatGwOp } from '../../ports.js';
import type { Dialect } from './dialects.js';

const ARPING_MS = 3_000;
const OTHER_RULE_MS = 100;

/** The expected time one rule of `op` takes in a gateway of dialect `d` (unknown dialect: as the slowest line). */
export function ruleCostMs(d: Pick<Dialect, 'line'> | undefined, op: NatGwOp): number {
  if (op !== 'eip-add') return OTHER_RULE_MS;
  return d === undefined || d.line === '1.12' ? 2 * ARPING_MS : ARPING_MS;
}
