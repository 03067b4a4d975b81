/**
 * Which kube-ovn release dialect a gateway pod is spoken to in (docs/adr/0076-choosing-a-gateway-dialect.md): the
 * domain's `chooseDialect` on what the pod shows, the VpcNatGateway's override annotation and KUBE_OVN_RELEASE;
 * when only the gateway's own state can settle it (a custom image tag of 1.15+), its nat table and env file are
 * read once, with read-only execs, and kept per pod (the release cannot change without a new pod).
 */
import {
  chooseDialect,
  ENV_FILE_ARGV,
  type GatewayState,
  NAT_TABLE_ARGV,
  natChains,
  type Purpose,
  RELEASE_ANNOTATION,
  type ReadResult,
  type ReleaseChoice,
} from '../domain/dialect/index.js';
import {
  GatewayCommandError,
  GatewayNotReadyError,
  UnsupportedGatewayReleaseError,
} from '../domain/errors.js';
import type { VpcNatGateway } from '../domain/kube-ovn.js';
import type { Deps, GatewayInspector, GatewayPod } from '../ports.js';

/** Gateway states read, by pod uid; bounded (oldest dropped), as a Lambda container lives for many invocations. */
const STATES = new Map<string, GatewayState>();
const MAX_STATES = 256;

interface DialectOptions {
  /** The VpcNatGateway, when the caller has read it (undefined: read here; null: it is gone). */
  gateway?: VpcNatGateway | null;
  signal?: AbortSignal;
}

/**
 * The dialect `pod` (of VpcNatGateway `gw`) speaks, for what the caller does with it: `send` (the handlers) or
 * `read` (the audit).
 * Every pod of a replicated gateway is spoken to in its own dialect (docs/adr/0105-ha-gateways.md).
 * @throws UnsupportedGatewayReleaseError naming what was seen; GatewayNotReadyError when its state had to be read
 *   before kube-ovn initialised it
 */
export async function chooseGatewayDialect(
  deps: Pick<Deps, 'cluster' | 'inspector' | 'kubeOvnRelease'>,
  gw: string,
  pod: GatewayPod,
  purpose: Purpose,
  options: DialectOptions = {},
): Promise<ReleaseChoice> {
  const vng = options.gateway === undefined ? await deps.cluster.getVpcNatGateway(gw) : options.gateway;
  const override = vng?.metadata.annotations?.[RELEASE_ANNOTATION];
  const known = STATES.get(pod.uid);
  const facts = {
    pod,
    gateway: gw,
    ...(override !== undefined && { override }),
    ...(deps.kubeOvnRelease && { defaultRelease: deps.kubeOvnRelease }),
    ...(known && { state: known }),
  };
  try {
    return chooseDialect(facts, purpose);
  } catch (e) {
    if (!(e instanceof UnsupportedGatewayReleaseError) || e.needs !== 'gateway-state' || !deps.inspector)
      throw e;
    const state = await readGatewayState(deps.inspector, pod, options.signal);
    return chooseDialect({ ...facts, state }, purpose);
  }
}

/** One read-only command's result, a non-zero exit included; a failure without an exit status is thrown. */
export async function readCommand(
  inspector: GatewayInspector,
  pod: GatewayPod,
  argv: readonly string[],
  signal?: AbortSignal,
): Promise<ReadResult> {
  try {
    return { exitCode: 0, ...(await inspector.read(pod, argv, signal)) };
  } catch (e) {
    if (e instanceof GatewayCommandError && e.exitCode !== undefined)
      return { exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr };
    throw e;
  }
}

/**
 * What the gateway's own state says about its release: the nat table's chains (legacy first, as the script picks
 * it), and whether init wrote the env file. Kept for the pod once kube-ovn has initialised it.
 * @throws GatewayNotReadyError before init (nothing in it tells yet)
 */
async function readGatewayState(
  inspector: GatewayInspector,
  pod: GatewayPod,
  signal?: AbortSignal,
): Promise<GatewayState> {
  let chains: string[] = [];
  for (const argv of NAT_TABLE_ARGV) {
    const r = await readCommand(inspector, pod, argv, signal);
    chains = r.exitCode === 0 ? natChains(r.stdout) : [];
    if (chains.includes('DNAT_FILTER')) break;
  }
  if (!chains.includes('DNAT_FILTER'))
    throw new GatewayNotReadyError(
      `gateway pod ${pod.namespace}/${pod.name} is not initialised yet (no nat chain DNAT_FILTER): its kube-ovn release is read from its state`,
    );
  const env = await readCommand(inspector, pod, ENV_FILE_ARGV, signal);
  const state: GatewayState = {
    natChains: chains,
    ...(env.exitCode === 0 && { envFile: 'present' as const }),
    ...(env.exitCode !== 0 && env.stderr.includes('No such file') && { envFile: 'absent' as const }),
  };
  remember(pod.uid, state);
  return state;
}

function remember(uid: string, state: GatewayState): void {
  STATES.delete(uid);
  STATES.set(uid, state);
  if (STATES.size > MAX_STATES) STATES.delete(STATES.keys().next().value!);
}
