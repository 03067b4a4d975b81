/**
 * The argv of a nat-gateway.sh call. Every gateway adapter builds its command here, so none can slip back to a
 * shell string (docs/kube-ovn-differences.md#argv-exec). The core validates meaning (addresses, decimal rates)
 * before it gets this far; this is the last line: a known operation, and arguments made only of the characters
 * the script's formats use.
 */

import type { NatGwOp } from '../ports.js';
import { InvalidSpecError } from './errors.js';
import { NAT_GATEWAY_SCRIPT } from './kube-ovn.js';

export const NAT_GW_OPS: readonly NatGwOp[] = [
  'eip-add',
  'eip-del',
  'eip-ingress-qos-add',
  'eip-egress-qos-add',
  'eip-ingress-qos-del',
  'eip-egress-qos-del',
];

/** Addresses, prefixes, commas, decimal numbers: `172.18.0.5/16,172.18.0.1`, `fd00::5`, `172.18.0.5,1,10.5,1`. */
const SAFE_ARG = /^[0-9A-Za-z.:/,_-]{1,200}$/;

export function natGatewayArgv(op: NatGwOp, args: readonly string[]): string[] {
  if (!NAT_GW_OPS.includes(op))
    throw new InvalidSpecError(`unknown nat-gateway.sh operation ${JSON.stringify(op)}`);
  for (const a of args) {
    if (!SAFE_ARG.test(a))
      throw new InvalidSpecError(`refusing nat-gateway.sh argument ${JSON.stringify(a)}`);
  }
  return ['bash', NAT_GATEWAY_SCRIPT, op, ...args];
}
