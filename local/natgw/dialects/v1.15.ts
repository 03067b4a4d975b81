/**
 * kube-ovn 1.15: the interfaces become configurable. `init [<vpc>,<ext>]` (no arguments from the controller:
 * eth0,net1) checks both links, writes them to /etc/kube-ovn/nat-gateway.env, and announces the external
 * interface's addresses with gratuitous ARP; every later run reads its interfaces from that file. `eip-add`
 * announces each address (`arping -U`, no duplicate detection) and then points the default route at the
 * container's `$GATEWAY_V4` (and `$GATEWAY_V6`). `help` and a longer answer to an unknown command appear.
 */
import { beforeSlash, type Dialect, Exit, type Op, type Run, SCRIPT_PATH } from '../script.js';
import { words } from '../state.js';
import { createChains, createJumps, exitIfInitialised } from './common.js';
import { NAT_OPS } from './v1.12.js';

export const ENV_FILE = '/etc/kube-ovn/nat-gateway.env';

/** The top of the script: `source` the env file when there is one, then default each interface. */
export function readInterfaces(r: Run): void {
  const vars = new Map<string, string>();
  for (const line of (r.net.files.get(ENV_FILE) ?? '').split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line.trim());
    if (m) vars.set(m[1]!, m[2]!);
  }
  r.vpcIf = vars.get('VPC_INTERFACE') || r.env.VPC_INTERFACE || 'eth0';
  r.extIf = vars.get('EXTERNAL_INTERFACE') || r.env.EXTERNAL_INTERFACE || 'net1';
}

/** init's interface argument (`net1, net2` is accepted), then the checks and the env file. */
export function initInterfaces(r: Run, given: string): void {
  r.echo(`init ${given}`);
  if (given !== '') {
    const parts = given.replace(/\s*,\s*/g, ',').split(',');
    if (parts.length > 1 && parts.at(-1) === '') parts.pop(); // `read -a` drops a trailing empty field
    if (parts.length !== 2) {
      r.warn('Error: Expected two interfaces separated by a comma (e.g., net1,net2)');
      throw new Exit(1);
    }
    const [vpc = '', ext = ''] = parts.map((p) => p.trim());
    if (vpc === '' || ext === '') {
      r.warn('Error: Interface names cannot be empty');
      throw new Exit(1);
    }
    r.vpcIf = vpc;
    r.extIf = ext;
  }
  r.echo(`using VPC interface: ${r.vpcIf}`);
  r.echo(`using External interface: ${r.extIf}`);
  for (const [role, dev] of [
    ['VPC', r.vpcIf],
    ['External', r.extIf],
  ] as const) {
    if (r.run(`ip link show ${dev}`, { silent: true }).code !== 0) {
      r.warn(`Error: ${role} interface '${dev}' not found`);
      throw new Exit(1);
    }
  }
  r.net.files.set(ENV_FILE, `VPC_INTERFACE=${r.vpcIf}\nEXTERNAL_INTERFACE=${r.extIf}\n`);
}

/** The end of init from 1.15: a gratuitous ARP for every IPv4 address already on the external interface. */
export function announceExternalAddresses(r: Run): void {
  const addresses = r
    .capture(`ip -4 addr show dev ${r.extIf}`)
    .split('\n')
    .filter((l) => /inet /.test(l))
    .map((l) => beforeSlash(words(l)[1]));
  if (addresses.length === 0) {
    r.echo(
      `INFO: No IP addresses on ${r.extIf}, skipping gratuitous ARP (no-IPAM mode or waiting for EIP allocation)`,
    );
    return;
  }
  r.echo(`Sending gratuitous ARP for external IPs on ${r.extIf}`);
  for (const a of addresses) r.run(`arping -I ${r.extIf} -c 3 -U ${a}`);
  r.echo('Gratuitous ARP completed');
}

const init: Op = (r, a) => {
  initInterfaces(r, a.joined);
  exitIfInitialised(r);
  r.run('iptables -t nat -N DNAT_FILTER');
  createChains(r);
  createJumps(r);
  announceExternalAddresses(r);
};

/** eip-add's closing step from 1.15: the default route from the container's environment. */
export function defaultRouteFromEnv(r: Run, onlink: boolean): void {
  const suffix = onlink ? ' onlink' : '';
  if (r.env.GATEWAY_V4) r.execCmd(`ip route replace default via ${r.env.GATEWAY_V4} dev ${r.extIf}${suffix}`);
  if (r.env.GATEWAY_V6)
    r.execCmd(`ip -6 route replace default via ${r.env.GATEWAY_V6} dev ${r.extIf}${suffix}`);
}

const eipAdd: Op = (r, a) => {
  r.checkInited();
  for (const eip of a.rules) {
    r.execCmd(`ip addr replace ${eip} dev ${r.extIf}`);
    r.execCmd(`arping -I ${r.extIf} -c 3 -U ${beforeSlash(eip)}`);
  }
  defaultRouteFromEnv(r, false);
};

const COMMANDS: ReadonlyArray<readonly [string, string]> = [
  ['init', 'Initialize iptables chains'],
  ['subnet-route-add', 'Add VPC internal routes'],
  ['subnet-route-del', 'Delete VPC internal routes'],
  ['eip-add', 'Add external IP'],
  ['eip-del', 'Delete external IP'],
  ['floating-ip-add', 'Add floating IP mapping'],
  ['floating-ip-del', 'Delete floating IP mapping'],
  ['dnat-add', 'Add DNAT rule'],
  ['dnat-del', 'Delete DNAT rule'],
  ['snat-add', 'Add SNAT rule'],
  ['snat-del', 'Delete SNAT rule'],
  ['qos-add', 'Add QoS rule'],
  ['qos-del', 'Delete QoS rule'],
  ['eip-ingress-qos-add', 'Add EIP ingress QoS'],
  ['eip-egress-qos-add', 'Add EIP egress QoS'],
  ['eip-ingress-qos-del', 'Delete EIP ingress QoS'],
  ['eip-egress-qos-del', 'Delete EIP egress QoS'],
  ['get-iptables-version', 'Show iptables version'],
];

/** show_help's text; later releases add environment variables and commands to it. */
export function helpText(extraEnv: readonly string[] = [], extraCommands: typeof COMMANDS = []): string[] {
  // master lists its nft commands after dnat-del.
  const commands = [...COMMANDS.slice(0, 9), ...extraCommands, ...COMMANDS.slice(9)];
  return [
    'NAT Gateway Configuration Script',
    '',
    'Environment Variables:',
    '  VPC_INTERFACE       - Interface connecting to VPC (default: eth0)',
    '  EXTERNAL_INTERFACE  - Interface connecting to external network (default: net1)',
    ...extraEnv,
    '',
    `Usage: ${SCRIPT_PATH} [COMMAND] [ARGS...]`,
    '',
    'Commands:',
    ...commands.map(([c, what]) => `  ${c.padEnd(24)} - ${what}`),
    '',
    'Examples:',
    '  # Use custom interfaces',
    `  ${SCRIPT_PATH} init net1, net2`,
    '',
    '  # Use default interfaces (eth0,net1)',
    `  ${SCRIPT_PATH} init`,
    '',
    '  # Environment variable override',
    `  VPC_INTERFACE=net1 EXTERNAL_INTERFACE=net2 ${SCRIPT_PATH} init`,
  ];
}

/** The help op and the `*)` branch of a release with help text `help`. */
export function helpOps(help: readonly string[]): Pick<Dialect, 'unknown'> & { op: Op } {
  return {
    op: (r) => {
      for (const l of help) r.echo(l);
    },
    unknown: (r, op) => {
      r.echo(`Unknown command: ${op}`);
      r.echo('');
      for (const l of help) r.echo(l);
    },
  };
}

const help = helpOps(helpText());

export const v115: Dialect = {
  release: '1.15',
  argv: false,
  ops: {
    ...NAT_OPS,
    init,
    'eip-add': eipAdd,
    help: help.op,
    '--help': help.op,
    '-h': help.op,
  },
  silent: new Set(['init', 'help', '--help', '-h']),
  prelude: readInterfaces,
  unknown: help.unknown,
};
