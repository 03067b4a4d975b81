/**
 * Checks on the values an EIP's spec and its QoS policy carry, made before any API call, allocation or exec. The
 * limits are what the gateway accepts: a name is a DNS-1123 subdomain (so "." or ".." can never become a URL path
 * segment), a MAC is a unicast 48-bit address, and QoS rates and bursts fit what `tc police` takes
 * (docs/kube-ovn-differences.md).
 */
import { parseAddress } from './addressing.js';
import { InvalidSpecError, QoSPolicyError } from './errors.js';
import type { IptablesEip } from './kube-ovn.js';

const DNS1123_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_LABEL}(\\.${DNS1123_LABEL})*$`);

/** Why `name` is not a DNS-1123 subdomain (Kubernetes' rule for these objects' names), or undefined. */
export function nameProblem(name: string): string | undefined {
  if (name.length === 0) return 'must not be empty';
  if (name.length > 253) return 'must be at most 253 characters';
  if (!DNS1123_SUBDOMAIN.test(name))
    return 'must consist of lower case alphanumeric characters, "-" or ".", and must start and end with an alphanumeric character';
  return undefined;
}

/** @throws InvalidSpecError naming the field when `value` is not a valid object name */
export function assertName(field: string, value: string): void {
  const problem = nameProblem(value);
  if (problem)
    throw new InvalidSpecError(`${field} ${JSON.stringify(value.slice(0, 64))} is invalid: ${problem}`);
}

const MAC = /^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$/;

/** Why `mac` is not a unicast 48-bit MAC address (six hex octets separated by ":" or "-"), or undefined. */
export function macProblem(mac: string): string | undefined {
  if (!MAC.test(mac)) return 'must be six hexadecimal octets separated by ":" (e.g. 00:00:00:0A:0B:0C)';
  if (Number.parseInt(mac.slice(0, 2), 16) & 1) return 'must be a unicast address (the first octet is even)';
  return undefined;
}

/**
 * QoS limits in the units nat-gateway.sh passes to `tc police`: rateMax in Mbit/s (`rate <n>Mbit`), burstMax in
 * MiB (`burst <n>Mb`). tc stores the rate in bytes per second and the burst in bytes in 32 bits, so a rate must
 * come to at least one byte per second and a burst to at most 4 GiB; zero is refused by tc itself.
 */
export const QosLimits = {
  rateMaxMbit: { min: 0.001, max: 100_000 },
  burstMaxMb: { min: 0.001, max: 4_095 },
} as const;

const DECIMAL = /^\d{1,9}(\.\d{1,6})?$/;

/** Why a rateMax / burstMax value would be refused, or undefined. */
export function qosValueProblem(field: 'rateMax' | 'burstMax', value: unknown): string | undefined {
  const unit = field === 'rateMax' ? 'Mbit/s' : 'MiB';
  if (typeof value !== 'string' || !DECIMAL.test(value))
    return `${field} must be a decimal number (${unit}), got ${JSON.stringify(value ?? '')}`;
  const n = Number(value);
  const { min, max } = field === 'rateMax' ? QosLimits.rateMaxMbit : QosLimits.burstMaxMb;
  if (n < min || n > max) return `${field} must be between ${min} and ${max} ${unit}, got ${value}`;
  return undefined;
}

/** @throws QoSPolicyError when a rule value would be refused by the gateway */
export function assertQosValue(where: string, field: 'rateMax' | 'burstMax', value: unknown): void {
  const problem = qosValueProblem(field, value);
  if (problem) throw new QoSPolicyError(`${where}: ${problem}`);
}

/**
 * Checks the spec alone, before any API call: names that become URL path segments or label values, the MAC, the
 * requested address. @throws InvalidSpecError
 */
export function validateSpec(eip: IptablesEip): void {
  const { natGwDp, externalSubnet, qosPolicy, macAddress, v4ip } = eip.spec;
  if (!natGwDp) throw new InvalidSpecError('parameter "natGwDp" cannot be empty');
  assertName('natGwDp', natGwDp);
  if (externalSubnet) assertName('externalSubnet', externalSubnet);
  if (qosPolicy) assertName('qosPolicy', qosPolicy);
  if (macAddress) {
    const problem = macProblem(macAddress);
    if (problem)
      throw new InvalidSpecError(`macAddress ${JSON.stringify(macAddress.slice(0, 32))} ${problem}`);
  }
  // kube-ovn's words ("failed to parse eip ip"), with the field named. Surrounding spaces are refused, not trimmed:
  // the value a user wrote is the value checked.
  if (v4ip && parseAddress(v4ip)?.family !== 4)
    throw new InvalidSpecError(`spec.v4ip: failed to parse eip ip ${JSON.stringify(v4ip.slice(0, 64))}`);
  if (eip.spec.v6ip && parseAddress(eip.spec.v6ip)?.family !== 6)
    throw new InvalidSpecError(
      `spec.v6ip: ${JSON.stringify(eip.spec.v6ip.slice(0, 64))} is not an IPv6 address`,
    );
}
