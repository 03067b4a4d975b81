/** Reaching the gateway pod: find it Running, and run one nat-gateway.sh operation with timing and metrics. */
import { GatewayCommandError, GatewayNotReadyError } from '../domain/errors.js';
import type { Deps, GatewayPod, NatGwOp } from '../ports.js';
import { checkDeadline, type Invocation } from './invocation.js';

/**
 * The gateway's pod, from `pods` (a listing the caller already has) or from the API.
 * @throws GatewayNotReadyError when the gateway has no pod, several, or it is not Running with its container ready.
 */
export async function runningGatewayPod(
  deps: Deps,
  gw: string,
  pods?: readonly GatewayPod[],
): Promise<GatewayPod> {
  let pod: GatewayPod | undefined;
  if (pods) {
    const matches = pods.filter((p) => p.app === `vpc-nat-gw-${gw}`);
    if (matches.length > 1) throw new GatewayNotReadyError(`too many pods for vpc nat gateway ${gw}`);
    pod = matches[0];
  } else {
    pod = await deps.cluster.findGatewayPod(gw);
  }
  if (!pod) throw new GatewayNotReadyError(`pod of vpc nat gateway ${gw} not found`);
  if (pod.phase !== 'Running' || pod.container?.ready === false)
    throw new GatewayNotReadyError(`pod ${pod.namespace}/${pod.name} is not active now (phase ${pod.phase})`);
  return pod;
}

export async function runGateway(
  inv: Invocation,
  deps: Deps,
  pod: GatewayPod,
  op: NatGwOp,
  args: readonly string[],
): Promise<void> {
  checkDeadline(inv);
  const started = deps.clock.now();
  try {
    const { stderr } = await deps.gateway.run(pod, op, args, inv.signal);
    // stderr alone is not a failure (D28); keep it for whoever reads the logs.
    inv.log.info('gateway op', { op, args, pod: pod.name, ...(stderr.trim() && { stderr: stderr.trim() }) });
  } catch (e) {
    deps.metrics.count('ExecFailures', 1, { op });
    if (e instanceof GatewayCommandError)
      inv.log.warn('gateway op failed', { op, args, pod: pod.name, exitCode: e.exitCode, stderr: e.stderr });
    throw e;
  } finally {
    deps.metrics.timing('ExecDuration', deps.clock.now() - started, { op });
  }
}
