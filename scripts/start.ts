/**
 * npm start -- [options]: the whole product on one machine (see local/stack.ts), until Ctrl-C.
 */
import { parseArgs } from 'node:util';
import {
  DEFAULT_EXEC_LATENCY_MS,
  type ExecModelOptions,
  MEASURED_COSTS,
  type XtablesLock,
} from '../local/natgw/exec-model.js';
import { DEFAULT_RELEASE, KUBE_OVN_RELEASES, parseRelease } from '../local/natgw/releases.js';
import { NetnsRefused } from '../local/netns/backend.js';
import { isReleaseLine, RELEASE_LINES } from '../local/netns/release.js';
import { levelFromEnv } from '../shared/observability/log.js';
import { parseDuration } from './duration.js';

const RELEASES = KUBE_OVN_RELEASES.join(', ');

const USAGE = `usage: npm start -- [options]

Runs eip-lambdas on one machine: a local DynamoDB (dynalite), a local Kubernetes API with kube-ovn's CRDs and a
simulated NAT gateway, the bridge, and the four handlers, each component as its own identity under infra/'s RBAC
and exec policy (kubeconfig-handlers, -bridge, -kube-ovn beside the kubeconfig). Writes the administrator's
kubeconfig for kubectl, then prints a line
starting with "ready:" (with dashboard=http://127.0.0.1:PORT/, the local dashboard: EIPs, subnet use, dead
letters, handler outcomes and the CloudWatch dashboard's widgets from local metrics). Ctrl-C drains and exits.

options:
  --port N            port of the Kubernetes API (default: a free one)
  --kubeconfig FILE   where to write the kubeconfig (default: .local/kubeconfig)
  --data-dir DIR      keep Kubernetes objects and allocations in DIR across restarts (default: in memory);
                      a restart breaks the leases the previous run held when it was killed
  --dashboard-port N  port of the local dashboard on 127.0.0.1 (default: a free one)
  --no-dashboard      do not serve the local dashboard (its metrics are then not kept either)
  --no-demo           start empty (no ConfigMaps, subnet, gateway, QoS policy or EIP)
  --kube-ovn-version V the kube-ovn release the lab plays: its gateway pods, their nat-gateway.sh and its
                      controller's gateway initialisation; one of ${RELEASES} (default: ${DEFAULT_RELEASE})
  --with-kube-ovn-eip-controller
                      also run a MODEL of an unmodified kube-ovn-controller's IptablesEIP path (its queues and
                      retries, its own IPAM, eip-add, its EIP, gateway-redo and FIP writes as field manager
                      kube-ovn-controller; local/controllers/README.md)
  --gateway sim|netns  what backs the gateway pods: the simulator (default) or, on Linux as root, network
                      namespaces running kube-ovn's own nat-gateway.sh for real (local/netns/README.md)
  --gateway-scripts DIR
                      with --gateway=netns: one <release>/nat-gateway.sh per release (v1.12.35, …, v1.16.0,
                      master); default: $EIP_KUBE_OVN_SCRIPTS
  --gateway-release R with --gateway=netns: the release (1.12, 1.13, 1.14, 1.15, 1.16, master) of a gateway pod whose
                      image has no vX.Y tag (default: --kube-ovn-version's); a tagged image's release is its tag's
  --gateway-netns-pfifo
                      with --gateway=netns: run kube-ovn 1.16+'s EIP QoS with a pfifo leaf qdisc instead of
                      fq_codel (a copy of the script with that one change), for kernels without fq_codel
  --drift-period DURATION
                      how often every gateway is read (3 to 8 read-only execs each, by release) and its drift repaired, as the
                      gc function does on AWS (default: 30s; 0 turns it off; e.g. 10s, 2m)
  --gc-period DURATION
                      how often allocations of owners that are gone are released (default: 10m; 0 turns it off)
  --exec-latency MS   how long an exec into a gateway pod takes to start, as through a kubelet (default
                      ${DEFAULT_EXEC_LATENCY_MS}: 50 docker execs serialised by dockerd in ~3 s, moby/moby#45624); 0: at once
  --exec-commands C   what each program an exec runs costs on a simulated gateway: measured (default: this
                      machine's figures for kube-ovn 1.12's script, e.g. ${MEASURED_COSTS.iptables} ms an iptables run,
                      1 s an arping probe, so an eip-add takes about 6 s on 1.12, 3 s on 1.13+), none, or MS for
                      every program
  --xtables-lock L    a simulated gateway's iptables runs while another holds the xtables lock: wait
                      (default, as iptables 1.8.9 does), fail (exit 4, as iptables without -w did before) or none
                      (local/natgw/README.md#exec-costs)
  --log-level LEVEL   debug, info, warn or error for the JSON logs on stderr (default: warn)
  -h, --help          show this help

The handlers keep a 5 s read cache of ConfigMaps, Subnets and gateways as in Lambda; EIP_READ_CACHE_MS=0 npm start
turns it off (EIP_READ_CACHE_MS=N: N ms).`;

function fail(message: string): never {
  process.stderr.write(`start: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a command-line tool's main (flags, target, report, exit status) in one readable sequence, covered end to end by test/e2e
async function main(): Promise<void> {
  // AWS SDK v3 warns once on Node 20 that later releases will need Node 22; the pinned versions run on both.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      options: {
        port: { type: 'string' },
        kubeconfig: { type: 'string' },
        'data-dir': { type: 'string' },
        'no-demo': { type: 'boolean' },
        'dashboard-port': { type: 'string' },
        'no-dashboard': { type: 'boolean' },
        'with-kube-ovn-eip-controller': { type: 'boolean' },
        'log-level': { type: 'string' },
        gateway: { type: 'string' },
        'gateway-scripts': { type: 'string' },
        'gateway-release': { type: 'string' },
        'gateway-netns-pfifo': { type: 'boolean' },
        'kube-ovn-version': { type: 'string' },
        'drift-period': { type: 'string' },
        'gc-period': { type: 'string' },
        'exec-latency': { type: 'string' },
        'exec-commands': { type: 'string' },
        'xtables-lock': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    fail((e as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const port = values.port === undefined ? 0 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    fail(`--port must be a port number, got "${values.port}"`);
  const dashboardPort = values['dashboard-port'] === undefined ? 0 : Number(values['dashboard-port']);
  if (!Number.isInteger(dashboardPort) || dashboardPort < 0 || dashboardPort > 65535)
    fail(`--dashboard-port must be a port number, got "${values['dashboard-port']}"`);
  if (values['no-dashboard'] && values['dashboard-port'] !== undefined)
    fail('--no-dashboard and --dashboard-port exclude each other');
  const kubeOvnEipController = values['with-kube-ovn-eip-controller'] === true;
  const versionText = values['kube-ovn-version'];
  const kubeOvnRelease = typeof versionText === 'string' ? parseRelease(versionText) : DEFAULT_RELEASE;
  if (!kubeOvnRelease)
    fail(
      `--kube-ovn-version must be one of ${RELEASES} (a patch release such as 1.15.2 also reads as its line), got "${versionText}"`,
    );
  const netnsGateway = gatewayOption(values, kubeOvnRelease);
  const execModel = execModelOption(values);
  const level = levelFromEnv(typeof values['log-level'] === 'string' ? values['log-level'] : 'warn');
  const driftRepairMs = periodFlag(values, 'drift-period');
  const gcMs = periodFlag(values, 'gc-period');

  // The stack (and the Kubernetes client) load only once the options are known good: a usage error or --help
  // answers in well under a second instead of after compiling the whole lab.
  const { startLocalStack } = await import('../local/stack.js');
  const stack = await startLocalStack({
    port,
    kubeconfig: typeof values.kubeconfig === 'string' ? values.kubeconfig : '.local/kubeconfig',
    ...(typeof values['data-dir'] === 'string' && { dataDir: values['data-dir'] }),
    demo: !values['no-demo'],
    ...(kubeOvnEipController && { kubeOvnEipController }),
    logLevel: level,
    healthPort: 0,
    kubeOvnRelease,
    ...(driftRepairMs !== undefined && { driftRepairMs }),
    ...(gcMs !== undefined && { gcMs }),
    ...(!values['no-dashboard'] && { dashboardPort }),
    ...(netnsGateway && { netnsGateway }),
    execModel,
  });
  process.stdout.write(
    `ready: kubeconfig=${stack.kubeconfig} api=${stack.api.tlsUrl} dynamodb=${stack.dynamodbEndpoint} table=${stack.tableName} kube-ovn=${stack.kubeOvnRelease}${stack.bridge.healthUrl ? ` bridge=${stack.bridge.healthUrl}` : ''}${stack.dashboardUrl ? ` dashboard=${stack.dashboardUrl}` : ''}\n`,
  );
  process.stdout.write(`try: kubectl --kubeconfig ${stack.kubeconfig} get iptables-eips\n`);
  process.stdout.write(
    `     kubectl --kubeconfig ${stack.kubeconfig} exec -n kube-system vpc-nat-gw-gw1-0 -c vpc-nat-gw -- ip -o addr show dev net1\n`,
  );
  process.stdout.write('     npm run invoke -- update events/update.json\n');
  // Each component runs as its own identity under infra/'s RBAC and exec policy; its kubeconfig is beside this one.
  process.stdout.write(
    `as:  kubectl --kubeconfig ${stack.kubeconfigs.handlers} auth can-i --list -n kube-system   # the handlers (also ${stack.kubeconfigs.bridge}, ${stack.kubeconfigs['kube-ovn']})\n`,
  );
  if (!values['no-demo']) void reportDemo(stack.kubeconfig);

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`\n${signal}: draining the bridge and stopping\n`);
    const dead = stack.deadLetters();
    await stack.stop();
    if (dead.length) {
      process.stdout.write(`${dead.length} event(s) failed every retry (dead letters):\n`);
      for (const d of dead)
        process.stdout.write(`  ${d.event.handler} ${d.event.object.name} (${d.event.reason}): ${d.error}\n`);
    }
    process.stdout.write('stopped\n');
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

/** The --exec-* options: what an exec into a gateway pod costs (local/natgw/exec-model.ts). */
function execModelOption(values: Record<string, string | boolean | undefined>): ExecModelOptions {
  const latency = values['exec-latency'] ?? String(DEFAULT_EXEC_LATENCY_MS);
  const startMs = Number(latency);
  if (typeof latency !== 'string' || !Number.isInteger(startMs) || startMs < 0 || startMs > 60_000)
    fail(`--exec-latency must be a whole number of ms from 0 to 60000, got "${latency}"`);
  const c = values['exec-commands'] ?? 'measured';
  const perCommand = Number(c);
  if (
    c !== 'measured' &&
    c !== 'none' &&
    !(Number.isInteger(perCommand) && perCommand >= 0 && perCommand <= 60_000)
  )
    fail(`--exec-commands must be measured, none or a whole number of ms, got "${c}"`);
  const lock = values['xtables-lock'] ?? 'wait';
  if (lock !== 'wait' && lock !== 'fail' && lock !== 'none')
    fail(`--xtables-lock must be wait, fail or none, got "${lock}"`);
  return {
    startMs,
    commands: c === 'measured' || c === 'none' ? c : perCommand,
    xtablesLock: lock as XtablesLock,
  };
}

/** A duration flag in milliseconds (undefined when not given); a bad one fails with usage. */
function periodFlag(values: Record<string, unknown>, flag: 'drift-period' | 'gc-period'): number | undefined {
  const text = values[flag];
  if (typeof text !== 'string') return undefined;
  const ms = parseDuration(text);
  if (ms === undefined) fail(`--${flag} must be a duration such as 30s or 10m, got "${text}"`);
  return ms;
}

/** The --gateway options: undefined for the simulator, the netns backend's options for --gateway=netns. */
function gatewayOption(values: Record<string, string | boolean | undefined>, kubeOvnRelease: string) {
  const kind = values.gateway ?? 'sim';
  if (kind !== 'sim' && kind !== 'netns') fail(`--gateway must be sim or netns, got "${kind}"`);
  const netnsOnly = ['gateway-scripts', 'gateway-release', 'gateway-netns-pfifo'].filter(
    (k) => values[k] !== undefined,
  );
  if (kind === 'sim') {
    if (netnsOnly.length > 0) fail(`--${netnsOnly[0]} needs --gateway=netns`);
    return undefined;
  }
  const release = values['gateway-release'] ?? kubeOvnRelease;
  if (typeof release !== 'string' || !isReleaseLine(release))
    fail(`--gateway-release must be one of ${RELEASE_LINES.join(', ')}, got "${release}"`);
  const scripts = values['gateway-scripts'] ?? process.env.EIP_KUBE_OVN_SCRIPTS;
  return {
    scripts: typeof scripts === 'string' && scripts !== '' ? scripts : undefined,
    defaultRelease: release,
    pfifo: values['gateway-netns-pfifo'] === true,
  };
}

/** Tells the newcomer when the demo EIP is Ready (or why not), without blocking the stack. */
async function reportDemo(kubeconfig: string): Promise<void> {
  const [{ CustomObjectsApi }, { kubeConfigFromFile }] = await Promise.all([
    import('@kubernetes/client-node'),
    import('../local/kubeconfig.js'),
  ]);
  const api = kubeConfigFromFile(kubeconfig).makeApiClient(CustomObjectsApi);
  for (let i = 0; i < 50; i++) {
    const eip = (await api
      .getClusterCustomObject({
        group: 'kubeovn.io',
        version: 'v1',
        plural: 'iptables-eips',
        name: 'demo-eip',
      })
      .catch(() => undefined)) as
      | {
          status?: {
            ready?: boolean;
            ip?: string;
            conditions?: { type: string; status: string; message?: string }[];
          };
        }
      | undefined;
    if (eip?.status?.ready) {
      process.stdout.write(`demo: iptables-eip demo-eip is Ready with ${eip.status.ip} on gateway gw1\n`);
      return;
    }
    const failed = eip?.status?.conditions?.find((c) => c.type === 'Validated' && c.status === 'False');
    if (failed) {
      process.stdout.write(`demo: iptables-eip demo-eip was rejected: ${failed.message}\n`);
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  process.stdout.write(
    'demo: iptables-eip demo-eip is not Ready after 10 s; see the logs (--log-level info)\n',
  );
}

main().catch((e: unknown) => {
  if (e instanceof NetnsRefused) {
    process.stderr.write(`start: ${e.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`start: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
