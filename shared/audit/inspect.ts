/**
 * Reading what a NAT gateway has configured, in its kube-ovn release's dialect: the external interface's addresses,
 * the EIP QoS (police filters on 1.12–1.15, HTB classes and their filters on 1.16+) and, on 1.16+, the per-EIP
 * hairpin SNAT rules. Read-only argv through pods/exec; the only value in them is the external interface's name,
 * which comes from the gateway itself and is checked (shared/domain/dialect/inspect.ts).
 * Decision and format notes: docs/adr/0037-gateway-inspection.md, docs/adr/0075-gateway-dialects.md.
 */
import { chooseGatewayDialect, readCommand } from '../core/dialect.js';
import {
  ENV_FILE_ARGV,
  externalInterfaceOf,
  type HairpinRule,
  type InspectionKey,
  inspectionArgv,
  interpretReads,
  NAT_TABLE_ARGV,
  natChains,
  type ReadResult,
  type ReleaseLine,
} from '../domain/dialect/index.js';
import {
  type InterfaceAddress,
  parseAddresses,
  parseTcFilters,
  parseTcRate,
  type QosFilter,
} from '../domain/dialect/parse.js';
import type { Deps, GatewayInspector, GatewayPod } from '../ports.js';

export type { GatewayInspector };

/**
 * The commands that read a kube-ovn 1.12–1.14 gateway (net1, police filters). `tc filter show` without a parent
 * dumps only the root qdisc's filters on a real kernel, so ingress and egress are asked for separately.
 */
export const INSPECTION_ARGV = {
  addresses: ['ip', '-o', 'addr', 'show', 'dev', 'net1'],
  ingress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', 'ffff:'],
  egress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', '1:'],
} as const satisfies Record<string, readonly string[]>;

/** One address on the external interface, as `ip -o addr` lists it (the parsers live with the gateway dialects). */
export type Net1Address = InterfaceAddress;
export type { QosFilter };

/** What one pod of a gateway had configured when it was read (each replica is read on its own, ADR 0120). */
export interface GatewayState {
  gateway: string;
  /** `<namespace>/<name>` of the pod read. */
  pod: string;
  podUid: string;
  /**
   * The namespace the gateway's pods were looked for in (gatewayNamespaceOf: the EIP's or the gateway's
   * spec.namespace), '' for kube-ovn's own: the pods an EIP of this gateway and namespace must be on.
   */
  scope: string;
  addresses: Net1Address[];
  filters: QosFilter[];
  /** Epoch ms when the read finished. */
  readAt: number;
  /** The release line it was read as. */
  line?: ReleaseLine;
  /** The interface the addresses and QoS were read on (net1, or the env file's EXTERNAL_INTERFACE on 1.15+). */
  externalInterface?: string;
  /** 1.16+: the per-EIP hairpin SNAT rules of its nat table. */
  hairpin?: HairpinRule[];
}

/** What names an EIP's address on one pod read, in every finding about that pod (ADR 0120: findings are per pod). */
export function onPod(
  eip: { metadata: { name: string; uid: string } },
  ip: string,
  state: Pick<GatewayState, 'gateway' | 'pod' | 'podUid'>,
): { eip: string; uid: string; gateway: string; pod: string; podUid: string; address: string } {
  return {
    eip: eip.metadata.name,
    uid: eip.metadata.uid,
    gateway: state.gateway,
    pod: state.pod,
    podUid: state.podUid,
    address: ip,
  };
}

/** What reading a gateway needs: the read-only execs, the VpcNatGateway's override and KUBE_OVN_RELEASE. */
type InspectDeps = Pick<Deps, 'cluster' | 'kubeOvnRelease'> & { inspector: GatewayInspector };

/**
 * Reads a gateway: its dialect chosen for reading (its nat table and env file read first when only they tell), the
 * env file on 1.15+, then the addresses and QoS of its external interface, and the nat table on 1.16+.
 * @throws when a read fails or the release cannot be told (the gateway is then unreadable: nothing is judged)
 */
export async function inspectGateway(
  deps: InspectDeps,
  gateway: string,
  pod: GatewayPod,
  now: () => number,
  signal?: AbortSignal,
  scope = '',
): Promise<GatewayState> {
  const { dialect: d } = await chooseGatewayDialect(deps, gateway, pod, 'read', {
    ...(signal && { signal }),
  });
  const read = (argv: readonly string[]): Promise<ReadResult> =>
    readCommand(deps.inspector, pod, argv, signal);
  const env = d.externalInterface === 'env-file' ? await read(ENV_FILE_ARGV) : undefined;
  const ext = externalInterfaceOf(d, env, pod.template?.env);
  const reads: Partial<Record<InspectionKey, ReadResult>> = {};
  for (const [key, argv] of Object.entries(inspectionArgv(d, ext)) as [InspectionKey, readonly string[]][])
    reads[key] = await read(argv);
  const nat = d.hairpinSnat ? await readNatTable(read) : undefined;
  const reading = interpretReads(d, ext, reads, nat);
  return {
    gateway,
    pod: `${pod.namespace}/${pod.name}`,
    podUid: pod.uid,
    scope,
    addresses: reading.addresses,
    filters: reading.filters,
    readAt: now(),
    line: d.line,
    externalInterface: ext,
    ...(reading.hairpin && { hairpin: reading.hairpin }),
  };
}

/** The nat table reads, legacy first; the nft view only when the legacy one does not hold the script's chains. */
async function readNatTable(read: (argv: readonly string[]) => Promise<ReadResult>): Promise<ReadResult[]> {
  const out: ReadResult[] = [];
  for (const argv of NAT_TABLE_ARGV) {
    const r = await read(argv);
    out.push(r);
    if (r.exitCode === 0 && natChains(r.stdout).includes('DNAT_FILTER')) break;
  }
  return out;
}

/** Parses `ip -o addr show dev net1` (shared/domain/dialect/parse.ts). */
export function parseNet1Addresses(text: string): Net1Address[] {
  return parseAddresses(text, 'net1');
}

export { parseTcFilters, parseTcRate };
