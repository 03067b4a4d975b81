/**
 * Reading what a NAT gateway has configured: net1's addresses and the u32 police filters of EIP QoS, through
 * pods/exec with fixed argv (no value from an object ever reaches these commands), and parsing iproute2's output.
 * Decision and format notes: docs/adr/0037-gateway-inspection.md.
 */
import {
  type InterfaceAddress,
  parseAddresses,
  parseTcFilters,
  parseTcRate,
  type QosFilter,
} from '../domain/dialect/parse.js';
import type { ExecResult, GatewayPod } from '../ports.js';

/**
 * The only commands an inspector may run: read-only, constant, one exec each. `tc filter show` without a parent
 * dumps only the root qdisc's filters on a real kernel, so ingress and egress are asked for separately.
 */
export const INSPECTION_ARGV = {
  addresses: ['ip', '-o', 'addr', 'show', 'dev', 'net1'],
  ingress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', 'ffff:'],
  egress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', '1:'],
} as const satisfies Record<string, readonly string[]>;

export type InspectionCommand = keyof typeof INSPECTION_ARGV;

/**
 * The read-only exec capability an audit needs. Adapters run exactly `INSPECTION_ARGV[command]` in the pod's
 * vpc-nat-gw container and resolve with its output when it exits 0.
 * @throws GatewayCommandError on a non-zero exit, a lost stream or a timeout; GatewayNotReadyError when the pod is gone
 */
export interface GatewayInspector {
  read(pod: GatewayPod, command: InspectionCommand, signal?: AbortSignal): Promise<ExecResult>;
}

/** One address on net1, as `ip -o addr` lists it (the parsers live with the gateway dialects). */
export type Net1Address = InterfaceAddress;
export type { QosFilter };

/** What one gateway had configured when it was read. */
export interface GatewayState {
  gateway: string;
  pod: string;
  addresses: Net1Address[];
  filters: QosFilter[];
  /** Epoch ms when the read finished. */
  readAt: number;
}

/** Reads a gateway: three constant read-only execs, one after the other. */
export async function inspectGateway(
  inspector: GatewayInspector,
  gateway: string,
  pod: GatewayPod,
  now: () => number,
  signal?: AbortSignal,
): Promise<GatewayState> {
  const addresses = parseNet1Addresses((await inspector.read(pod, 'addresses', signal)).stdout);
  const ingress = parseTcFilters((await inspector.read(pod, 'ingress', signal)).stdout, 'ingress');
  const egress = parseTcFilters((await inspector.read(pod, 'egress', signal)).stdout, 'egress');
  return {
    gateway,
    pod: `${pod.namespace}/${pod.name}`,
    addresses,
    filters: [...ingress, ...egress],
    readAt: now(),
  };
}

/** Parses `ip -o addr show dev net1` (shared/domain/dialect/parse.ts). */
export function parseNet1Addresses(text: string): Net1Address[] {
  return parseAddresses(text, 'net1');
}

export { parseTcFilters, parseTcRate };
