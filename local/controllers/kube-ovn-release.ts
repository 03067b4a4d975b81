/**
 * What differs between kube-ovn releases in the parts of kube-ovn-controller the lab models
 * (local/controllers/kube-ovn-eip.ts), read from each tag's pkg/controller (vpc_nat_gw_eip.go, vpc_nat_gw_nat.go,
 * vpc_nat_gateway.go, init.go, controller.go) and pkg/util/const.go: v1.12.35, v1.13.0, v1.14.0, v1.15.0, v1.16.0
 * and master.
 */
import { FINALIZER, LEGACY_FINALIZER, NAT_GATEWAY_SCRIPT } from '../../shared/domain/kube-ovn.js';
import { atLeast, type KubeOvnRelease } from '../natgw/releases.js';

export interface ReleaseFacts {
  release: KubeOvnRelease;
  /** The finalizer its handlers add and remove (util.ControllerName on 1.12, util.KubeOVNControllerFinalizer since). */
  finalizer: string;
  /** syncFinalizers at start (1.13+): `kube-ovn-controller` → `kubeovn.io/kube-ovn-controller`; a failure is fatal. */
  migratesFinalizers: boolean;
  /** createEipInPod's rule: 1.12 appends the subnet's gateway. */
  eipAddRule(ip: string, prefix: number, gateway: string): string;
  /** execNatGwRules: 1.12–1.16 run `bash <script> <op> <rules>` through `/bin/bash -c`; master sends the argv. */
  command(op: string, rules: readonly string[]): string[];
  /** handleAddIptablesEip checks the gateway pod before allocating (1.12 only). */
  podBeforeAllocation: boolean;
  /** The FIP finalizer goes on before floating-ip-add (master), or after (earlier). */
  fipFinalizerFirst: boolean;
  /** The FIP add schedules a reset of its EIP 3 s later (master). */
  fipAddResets: boolean;
  /**
   * processNextWorkItem's error, logged by utilruntime.HandleError: 1.12 `error syncing '<key>': <err>, requeuing`;
   * 1.13+ name the worker, `error syncing add iptables eip "<key>": <err>, requeuing`.
   */
  syncError(action: string, key: string, err: string): string;
  /**
   * What execNatGwRules logs when the exec fails. Refused or exited non-zero (`err`: the refused upgrade's Status
   * message, or `command terminated with exit code N`; `stderr`: the command's): 1.12–1.14 `failed to
   * ExecuteCommandInContainer, errOutput: …` and the error itself; 1.15+ `NAT gateway command failed - stderr: …` and
   * `NAT gateway command execution error: …`. Exited 0 with stderr: `failed to ExecuteCommandInContainer errOutput: …`.
   */
  execErrorLines(err: string, stderr: string, exitedZero: boolean): string[];
}

export function releaseFacts(release: KubeOvnRelease): ReleaseFacts {
  const modern = atLeast(release, '1.13');
  return {
    release,
    finalizer: modern ? FINALIZER : LEGACY_FINALIZER,
    migratesFinalizers: modern,
    eipAddRule: (ip, prefix, gateway) => (modern ? `${ip}/${prefix}` : `${ip}/${prefix},${gateway}`),
    command: (op, rules) =>
      release === 'master'
        ? ['bash', NAT_GATEWAY_SCRIPT, op, ...rules]
        : ['/bin/bash', '-c', `bash ${NAT_GATEWAY_SCRIPT} ${op} ${rules.join(' ')}`],
    podBeforeAllocation: !modern,
    fipFinalizerFirst: release === 'master',
    fipAddResets: release === 'master',
    syncError: (action, key, err) =>
      modern
        ? `error syncing ${action} "${key}": ${err}, requeuing`
        : `error syncing '${key}': ${err}, requeuing`,
    execErrorLines: (err, stderr, exitedZero) => {
      if (exitedZero) return [`failed to ExecuteCommandInContainer errOutput: ${stderr}`];
      const since15 = atLeast(release, '1.15');
      const out: string[] = [];
      if (stderr)
        out.push(
          since15
            ? `NAT gateway command failed - stderr: ${stderr}`
            : `failed to ExecuteCommandInContainer, errOutput: ${stderr}`,
        );
      out.push(since15 ? `NAT gateway command execution error: ${err}` : err);
      return out;
    },
  };
}
