/**
 * Reading a gateway per release dialect: the read-only commands (argv, never a shell; the only value in them is the
 * external interface's name, which comes from the gateway itself and is checked), and what their output means.
 * Decision: docs/adr/0037-gateway-inspection.md; per release: docs/compatibility.md.
 */
import type { QoSDirection } from '../kube-ovn.js';
import type { Dialect } from './dialects.js';
import {
  type HairpinRule,
  type InterfaceAddress,
  natChains,
  parseAddresses,
  parseEnvFile,
  parseHairpinSnat,
  parseHtbClasses,
  parseTcFilters,
  type QosFilter,
  withClassRates,
} from './parse.js';

/** Where 1.15+'s init records the interfaces; the script reads it on every call. */
export const ENV_FILE = '/etc/kube-ovn/nat-gateway.env';
export const ENV_FILE_ARGV = ['cat', ENV_FILE] as const;

/**
 * The nat table, legacy first: the script uses iptables-legacy whenever `iptables-legacy -t nat -S INPUT 1` works,
 * and the nft view then only warns that legacy tables exist (recorded runs).
 */
export const NAT_TABLE_ARGV = [
  ['iptables-legacy-save', '-t', 'nat'],
  ['iptables-save', '-t', 'nat'],
] as const;

/** A Linux interface name (at most 15 bytes) that can also carry the 1.16+ IFB name `ifb-<name>`. */
const IFNAME = /^[A-Za-z0-9_.-]{1,11}$/;

export function isInterfaceName(name: string): boolean {
  return IFNAME.test(name) && name !== '.' && name !== '..';
}

/** The IFB device 1.16+ redirects an interface's ingress to. */
export function ifbOf(ext: string): string {
  return `ifb-${ext}`;
}

export type InspectionKey = 'addresses' | 'ingress' | 'egress' | 'ingressClasses' | 'egressClasses';

/**
 * The commands that read `ext`'s addresses and QoS. Police (1.12–1.15): the filters of the ingress qdisc and of the
 * root htb (`tc filter show` without a parent lists only the root's on a real kernel). HTB (1.16+): the filters and
 * classes of the IFB for ingress and of `ext` for egress.
 * @throws Error when `ext` is not an interface name (never reaches an argv)
 */
export function inspectionArgv(
  d: Pick<Dialect, 'qos'>,
  ext: string,
): Partial<Record<InspectionKey, readonly string[]>> {
  if (!isInterfaceName(ext)) throw new Error(`not an interface name: ${JSON.stringify(ext.slice(0, 32))}`);
  const addresses = ['ip', '-o', 'addr', 'show', 'dev', ext];
  if (d.qos === 'police')
    return {
      addresses,
      ingress: ['tc', '-p', 'filter', 'show', 'dev', ext, 'parent', 'ffff:'],
      egress: ['tc', '-p', 'filter', 'show', 'dev', ext, 'parent', '1:'],
    };
  const ifb = ifbOf(ext);
  return {
    addresses,
    ingress: ['tc', '-p', 'filter', 'show', 'dev', ifb, 'parent', '1:'],
    ingressClasses: ['tc', 'class', 'show', 'dev', ifb],
    egress: ['tc', '-p', 'filter', 'show', 'dev', ext, 'parent', '1:'],
    egressClasses: ['tc', 'class', 'show', 'dev', ext],
  };
}

/**
 * True when `argv` is one of the commands an inspector may run for some dialect and interface: the env file, the
 * nat table, or an inspectionArgv entry. Adapters check before they exec.
 */
export function isDialectInspectionArgv(argv: readonly string[]): boolean {
  const same = (a: readonly string[]) => a.length === argv.length && a.every((x, i) => x === argv[i]);
  if (same(ENV_FILE_ARGV) || NAT_TABLE_ARGV.some(same)) return true;
  const dev = argv[argv.indexOf('dev') + 1];
  if (!argv.includes('dev') || dev === undefined) return false;
  const exts = [dev, ...(dev.startsWith('ifb-') ? [dev.slice(4)] : [])].filter(isInterfaceName);
  return exts.some((ext) =>
    (['police', 'htb'] as const).some((qos) =>
      Object.values(inspectionArgv({ qos }, ext)).some((a) => a !== undefined && same(a)),
    ),
  );
}

/**
 * The read-only execs one reading of a gateway of dialect `d` makes (shared/audit/inspect.ts): the env file on
 * 1.15+, the addresses and QoS of the external interface, and on 1.16+ the nat table — its nft view only when the
 * legacy one holds no kube-ovn chain, hence a range.
 */
export function inspectionExecs(d: Pick<Dialect, 'externalInterface' | 'qos' | 'hairpinSnat'>): {
  min: number;
  max: number;
} {
  const base = (d.externalInterface === 'env-file' ? 1 : 0) + Object.keys(inspectionArgv(d, 'net1')).length;
  return d.hairpinSnat ? { min: base + 1, max: base + NAT_TABLE_ARGV.length } : { min: base, max: base };
}

/** One command's result as an inspector returns it (exit status 0), or its failure. */
export interface ReadResult {
  exitCode: number | null | undefined;
  stdout: string;
  stderr: string;
}

/**
 * The external interface of a gateway: on 1.15+ EXTERNAL_INTERFACE from the env file (missing file: not
 * initialised yet, or a 1.13-style gateway), else from the container's env, else net1 — the script's own order
 * (it sources the file over its environment). `envFile` is the result of ENV_FILE_ARGV; a missing file is
 * `No such file or directory` from cat.
 * @throws Error when the file could not be read for another reason, or the value is not an interface name
 */
export function externalInterfaceOf(
  d: Dialect,
  envFile: ReadResult | undefined,
  containerEnv: Readonly<Record<string, string>> = {},
): string {
  if (d.externalInterface === 'net1') return 'net1';
  if (envFile && envFile.exitCode !== 0 && !envFile.stderr.includes('No such file or directory'))
    throw new Error(
      `${ENV_FILE} could not be read (exit ${envFile.exitCode}): ${envFile.stderr.trim().split('\n')[0] ?? ''}`,
    );
  const fromFile = envFile?.exitCode === 0 ? parseEnvFile(envFile.stdout).EXTERNAL_INTERFACE : undefined;
  const name = fromFile || containerEnv.EXTERNAL_INTERFACE || 'net1';
  if (!isInterfaceName(name))
    throw new Error(
      `the gateway's EXTERNAL_INTERFACE ${JSON.stringify(name.slice(0, 32))} is not an interface name`,
    );
  return name;
}

/** True when a read failed only because the device does not exist (1.16+'s IFB before the first ingress QoS). */
export function isMissingDevice(r: ReadResult, dev: string): boolean {
  return r.exitCode !== 0 && r.stderr.includes(`Cannot find device "${dev}"`);
}

export interface GatewayReading {
  externalInterface: string;
  addresses: InterfaceAddress[];
  filters: QosFilter[];
  /** 1.16+: the per-EIP hairpin SNAT rules, when the nat table was read. */
  hairpin?: HairpinRule[];
  natChains?: string[];
}

/**
 * Interprets the reads of a gateway: `reads` holds the result of each inspectionArgv command (exit status 0, or a
 * missing IFB), `natTable` the nat table reads in NAT_TABLE_ARGV order when the caller made them.
 * @throws Error when a read failed for another reason (the gateway is unreadable: nothing is judged)
 */
export function interpretReads(
  d: Dialect,
  ext: string,
  reads: Partial<Record<InspectionKey, ReadResult>>,
  natTable?: readonly ReadResult[],
): GatewayReading {
  const text = (key: InspectionKey): string => {
    const r = reads[key];
    if (!r) throw new Error(`inspection ${key} was not read`);
    if (r.exitCode === 0) return r.stdout;
    if (d.qos === 'htb' && key.startsWith('ingress') && isMissingDevice(r, ifbOf(ext))) return '';
    throw new Error(`inspection ${key} failed (exit ${r.exitCode}): ${r.stderr.trim().split('\n')[0] ?? ''}`);
  };
  const dir = (direction: QoSDirection): QosFilter[] => {
    const filters = parseTcFilters(text(direction), direction);
    if (d.qos === 'police') return filters;
    return withClassRates(filters, parseHtbClasses(text(`${direction}Classes`)));
  };
  const reading: GatewayReading = {
    externalInterface: ext,
    addresses: parseAddresses(text('addresses'), ext),
    filters: [...dir('ingress'), ...dir('egress')],
  };
  const nat = natTable && pickNatTable(natTable);
  if (nat === undefined) return reading;
  return { ...reading, natChains: natChains(nat), ...(d.hairpinSnat && { hairpin: parseHairpinSnat(nat) }) };
}

/** Of the nat table reads, the one holding the script's chains (DNAT_FILTER); the first that exited 0 otherwise. */
export function pickNatTable(reads: readonly ReadResult[]): string | undefined {
  const ok = reads.filter((r) => r.exitCode === 0).map((r) => r.stdout);
  return ok.find((t) => natChains(t).includes('DNAT_FILTER')) ?? ok[0];
}
