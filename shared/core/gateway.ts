/**
 * Reaching the gateway: the NAT gateway feature on, the external subnet's pools (an address's prefix and next
 * hop), the gateway there and attached to the subnet, its pod Running, and one nat-gateway.sh operation run with
 * timing and metrics.
 */
import { poolsOf } from '../domain/addressing.js';
import {
  classifyFailure,
  type Dialect,
  type FailureClass,
  RELEASE_ANNOTATION,
} from '../domain/dialect/index.js';
import {
  DependencyMissingError,
  GatewayCommandError,
  GatewayNotReadyError,
  GatewayRefusedError,
  InvalidSpecError,
  NatGwDisabledError,
} from '../domain/errors.js';
import { DEFAULT_EXTERNAL_SUBNET, type VpcNatGateway } from '../domain/kube-ovn.js';
import type { NatGwCall } from '../domain/nat-gateway.js';
import type { Deps, GatewayPod, NatGwFeature, Placement, Pool } from '../ports.js';
import { batcherOf } from './batch.js';
import { checkDeadline, type Invocation } from './invocation.js';
import { redoneCall } from './redo-coverage.js';
import { gatewayPodsOf, requireActive } from './replicas.js';

/** @throws NatGwDisabledError when the VPC NAT gateway feature is off (kube-ovn removes the gateway pods then) */
export async function requireFeature(deps: Deps): Promise<NatGwFeature> {
  const f = await deps.cluster.natGwFeature();
  if (!f.enabled) throw new NatGwDisabledError(`iptables nat gw not enable: ${f.reason ?? 'disabled'}`);
  return f;
}

/** The IPv4 pool of a subnet. @throws DependencyMissingError when it is missing, InvalidSpecError without IPv4 */
export async function v4PoolOf(deps: Deps, name: string): Promise<{ v4: Pool; v6?: Pool }> {
  const subnet = await deps.cluster.getSubnet(name);
  if (!subnet)
    throw new DependencyMissingError(`subnet ${name} not found (spec.externalSubnet)`, {
      kind: 'Subnet',
      name,
    });
  const pools = poolsOf(subnet);
  const v4 = pools.find((p) => p.family === 4);
  if (!v4) throw new InvalidSpecError(`subnet ${name} does not support ipv4`);
  const v6 = pools.find((p) => p.family === 6);
  return { v4, ...(v6 && { v6 }) };
}

/**
 * The gateway, attached to `network`.
 * @throws DependencyMissingError when the gateway is missing, InvalidSpecError when not attached to `network`
 */
export async function requireAttachedGateway(
  deps: Deps,
  name: string,
  network: string,
): Promise<VpcNatGateway> {
  const gateway = await deps.cluster.getVpcNatGateway(name);
  if (!gateway)
    throw new DependencyMissingError(`vpc nat gateway ${name} not found (spec.natGwDp)`, {
      kind: 'VpcNatGateway',
      name,
    });
  // An address from a subnet the gateway is not attached to would land on net1 and re-point its default route.
  const attached = gateway.spec.externalSubnets?.length
    ? gateway.spec.externalSubnets
    : [DEFAULT_EXTERNAL_SUBNET];
  if (!attached.includes(network))
    throw new InvalidSpecError(
      `vpc nat gateway ${name} is not attached to subnet ${network} (its external subnets: ${attached.join(', ')})`,
    );
  return gateway;
}
/**
 * The pods of the gateway the address is placed on, in the namespace recorded with it: every one found, and the
 * active ones (docs/adr/0105-ha-gateways.md). No pod because the gateway itself is gone: the address is on no gateway
 * until it is back (a DependencyMissingError, not a retry).
 * @throws GatewayNotReadyError when no pod is active
 */
export async function podsWhereConfigured(
  deps: Deps,
  placement: Pick<Placement, 'gateway' | 'namespace'>,
  ip: string,
  feature?: NatGwFeature,
): Promise<{ found: GatewayPod[]; active: GatewayPod[] }> {
  const { gateway } = placement;
  const found = await gatewayPodsOf(deps, gateway, placement.namespace, feature && { feature });
  try {
    return { found, active: requireActive(gateway, found) };
  } catch (e) {
    if (e instanceof GatewayNotReadyError && !(await deps.cluster.getVpcNatGateway(gateway)))
      throw new DependencyMissingError(`vpc nat gateway ${gateway} not found; ${ip} is configured on it`, {
        kind: 'VpcNatGateway',
        name: gateway,
      });
    throw e;
  }
}

/**
 * Runs one call the dialect built. A failure the gateway will give every time (classifyFailure, on the script's
 * real messages: docs/adr/0077-gateway-refusals-from-recorded-messages.md) is a GatewayRefusedError naming the
 * command and what the gateway said; anything else (a missing device after a restart, a broken stream, a timeout,
 * a message nobody has judged) stays retryable.
 */
export async function runGateway(
  inv: Invocation,
  deps: Deps,
  pod: GatewayPod,
  call: NatGwCall,
  dialect?: Dialect,
): Promise<'ran' | 'redone'> {
  checkDeadline(inv);
  const { op, args } = call;
  // Made by this container run's gateway redo for this EIP (ADR 0111): nothing to send.
  const redone = redoneCall(inv, pod, call);
  if (redone?.done) return 'redone';
  const started = deps.clock.now();
  try {
    if (redone) throw redone.error;
    const { stderr } = await batcherOf(deps).exec(inv, pod, call, dialect);
    // stderr alone is not a failure; keep it for whoever reads the logs.
    inv.log.info('gateway op', { op, args, pod: pod.name, ...(stderr.trim() && { stderr: stderr.trim() }) });
    return 'ran';
  } catch (e) {
    deps.metrics.count('ExecFailures', 1, { op });
    if (!(e instanceof GatewayCommandError)) throw e;
    inv.log.warn('gateway op failed', { op, args, pod: pod.name, exitCode: e.exitCode, stderr: e.stderr });
    const failure = classifyFailure(e, dialect);
    if (failure.permanent) throw refusal(pod, call, e, failure, dialect);
    throw e;
  } finally {
    deps.metrics.timing('ExecDuration', deps.clock.now() - started, { op });
  }
}

function refusal(
  pod: GatewayPod,
  call: NatGwCall,
  e: GatewayCommandError,
  failure: Extract<FailureClass, { permanent: true }>,
  dialect: Dialect | undefined,
): GatewayRefusedError {
  const said = `${e.stderr}\n${e.stdout}`.trim().split('\n');
  // The deciding line first, then the script's own first lines (its echo of the op, failed commands).
  const lines = [failure.evidence, ...said.filter((l) => l.trim() && l !== failure.evidence)].slice(0, 4);
  const hint = failure.dialectMismatch
    ? `; this is what a gateway of another kube-ovn release says to the ${dialect ? `kube-ovn ${dialect.line}` : 'sent'} form: check annotation ${RELEASE_ANNOTATION} on the VpcNatGateway, KUBE_OVN_RELEASE and the pod's image (docs/compatibility.md)`
    : '';
  return new GatewayRefusedError(
    `gateway ${pod.namespace}/${pod.name} refused nat-gateway.sh ${call.op} ${call.args.join(' ')} (${failure.reason}, exit ${e.exitCode}): ${lines.join('; ')}${hint}`,
    e.exitCode,
    e.stderr,
    {
      cause: e,
      reason: failure.reason,
      mayClear: failure.mayClear || failure.dialectMismatch === true,
      dialectMismatch: failure.dialectMismatch === true,
    },
  );
}
