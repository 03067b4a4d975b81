/**
 * The argv of a nat-gateway.sh call. Every gateway adapter builds its command here, so none can slip back to a
 * shell string (docs/kube-ovn-differences.md#argv-exec), and every call a release's dialect builds
 * (shared/domain/dialect/) is checked here against the op's format: the one place that decides what may reach the
 * gateway. The core validates meaning first (addresses in the subnet, policy values); this is the last line.
 */

import type { NatGwOp } from '../ports.js';
import { formatAddress, parseAddress } from './addressing.js';
import { InvalidSpecError } from './errors.js';
import { NAT_GATEWAY_SCRIPT } from './kube-ovn.js';
import { qosValueProblem } from './validation.js';

export const NAT_GW_OPS: readonly NatGwOp[] = [
  'eip-add',
  'eip-del',
  'eip-ingress-qos-add',
  'eip-egress-qos-add',
  'eip-ingress-qos-del',
  'eip-egress-qos-del',
];

/**
 * eip-add's argument as a release takes it: `<ip>/<len>,<gateway>` (kube-ovn 1.12) or `<ip>/<len>` (1.13+).
 * Unknown (an adapter that only runs what the core built): either.
 */
export type EipAddForm = 'address-and-gateway' | 'address';

/** One nat-gateway.sh call: the op and its arguments (the product sends one argument per call). */
export interface NatGwCall {
  op: NatGwOp;
  args: string[];
}

/** Only the characters of the formats below; checked first so no message ever echoes anything else. */
const SAFE_ARG = /^[0-9A-Za-z.:/,_-]{1,200}$/;
const PRIORITY = /^(0|[1-9]\d{0,4})$/;
const PREFIX = /^([1-9]|[12]\d|3[0-2])$/;

/** True for an IPv4 address in canonical dotted form (what the core formats; iproute2 reads no other). */
function isIpv4(text: string): boolean {
  const p = parseAddress(text);
  return p?.family === 4 && formatAddress(4, p.value) === text;
}

function isCidr4(text: string): boolean {
  const [ip, len, ...rest] = text.split('/');
  return rest.length === 0 && ip !== undefined && isIpv4(ip) && len !== undefined && PREFIX.test(len);
}

function eipAddProblem(arg: string, form: EipAddForm | undefined): string | undefined {
  const [cidr, gateway, ...rest] = arg.split(',');
  if (rest.length > 0 || cidr === undefined || !isCidr4(cidr))
    return 'must be <ipv4>/<prefix length>[,<gateway>]';
  if (gateway !== undefined && !isIpv4(gateway)) return 'the gateway must be an IPv4 address';
  if (form === 'address' && gateway !== undefined)
    return 'this release takes <ipv4>/<prefix length> alone (kube-ovn 1.13+)';
  if (form === 'address-and-gateway' && gateway === undefined)
    return 'this release takes <ipv4>/<prefix length>,<gateway> (kube-ovn 1.12)';
  return undefined;
}

function qosAddProblem(arg: string): string | undefined {
  const [ip, priority, rate, burst, ...rest] = arg.split(',');
  if (rest.length > 0 || burst === undefined) return 'must be <ipv4>,<priority>,<rate Mbit/s>,<burst MiB>';
  if (!isIpv4(ip!)) return 'the address must be an IPv4 address';
  if (!PRIORITY.test(priority!) || Number(priority) > 65535) return 'the priority must be an integer 0-65535';
  return qosValueProblem('rateMax', rate) ?? qosValueProblem('burstMax', burst);
}

function argProblem(op: NatGwOp, arg: string, form: EipAddForm | undefined): string | undefined {
  if (!SAFE_ARG.test(arg)) return 'has characters no nat-gateway.sh argument has';
  switch (op) {
    case 'eip-add':
      return eipAddProblem(arg, form);
    case 'eip-del':
      return isCidr4(arg) ? undefined : 'must be <ipv4>/<prefix length>';
    case 'eip-ingress-qos-add':
    case 'eip-egress-qos-add':
      return qosAddProblem(arg);
    case 'eip-ingress-qos-del':
    case 'eip-egress-qos-del':
      return isIpv4(arg) ? undefined : 'must be an IPv4 address';
  }
}

/**
 * A checked call.
 * @throws InvalidSpecError for an unknown op, not exactly one argument, or an argument not in the op's format
 */
export function natGatewayCall(
  op: NatGwOp,
  args: readonly string[],
  options: { eipAdd?: EipAddForm } = {},
): NatGwCall {
  if (!NAT_GW_OPS.includes(op))
    throw new InvalidSpecError(`unknown nat-gateway.sh operation ${JSON.stringify(op)}`);
  if (args.length !== 1)
    throw new InvalidSpecError(`nat-gateway.sh ${op} takes one argument, got ${args.length}`);
  const problem = argProblem(op, args[0]!, options.eipAdd);
  if (problem)
    throw new InvalidSpecError(
      `refusing nat-gateway.sh argument ${JSON.stringify(args[0]!.slice(0, 200))} for ${op}: ${problem}`,
    );
  return { op, args: [...args] };
}

/**
 * The argv adapters exec: a known op and arguments made only of the formats' characters. The adapters run what the
 * core built; the core builds every call with natGatewayCall (through a dialect), which checks each argument's
 * format as well.
 * @throws InvalidSpecError
 */
export function natGatewayArgv(op: NatGwOp, args: readonly string[]): string[] {
  if (!NAT_GW_OPS.includes(op))
    throw new InvalidSpecError(`unknown nat-gateway.sh operation ${JSON.stringify(op)}`);
  for (const a of args) {
    if (!SAFE_ARG.test(a))
      throw new InvalidSpecError(`refusing nat-gateway.sh argument ${JSON.stringify(a)}`);
  }
  return ['bash', NAT_GATEWAY_SCRIPT, op, ...args];
}
