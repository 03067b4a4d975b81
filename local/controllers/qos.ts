/**
 * Stand-in for kube-ovn's QoS policy controller, reduced to the duty the EIP path depends on: copy each
 * QoSPolicy's spec into its status (shared, bindingType, and bandwidthLimitRules sorted by name) with a merge
 * patch on /status, as handleAddQoSPolicy/patchQoSStatus do. Like kube-ovn it refuses a NATGW policy that is not
 * shared (the status is then left alone). Unlike kube-ovn's update handler it does not refuse later changes to
 * a shared policy's rules: the product re-applies rule changes to every bound EIP itself
 * (docs/kube-ovn-differences.md#qos-policy-edits-reapplied).
 */
import { CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import {
  GROUP,
  Plural,
  type QoSPolicy,
  type QoSPolicyBandwidthLimitRule,
  VERSION,
} from '../../shared/domain/kube-ovn.js';
import { type Log, Watched, WorkQueue } from './runtime.js';

export interface QosStandInOptions {
  kubeConfig: KubeConfig;
  log: Log;
}

/** The status kube-ovn writes for a policy: the spec, rules sorted by name (Go's byte order). */
export function qosStatusOf(spec: QoSPolicy['spec']): {
  shared: boolean;
  bindingType: string;
  bandwidthLimitRules: QoSPolicyBandwidthLimitRule[] | null;
} {
  const rules = [...(spec?.bandwidthLimitRules ?? [])].sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  );
  return {
    shared: spec?.shared ?? false,
    bindingType: spec?.bindingType ?? '',
    // A Go nil slice marshals as null, which a merge patch turns into "no such field".
    bandwidthLimitRules: rules.length > 0 ? rules : null,
  };
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

function statusMatches(q: QoSPolicy): boolean {
  const want = qosStatusOf(q.spec);
  const have = q.status ?? {};
  return (
    (have.shared ?? false) === want.shared &&
    (have.bindingType ?? '') === want.bindingType &&
    canonical(have.bandwidthLimitRules ?? []) === canonical(want.bandwidthLimitRules ?? [])
  );
}

export async function startQosStandIn(o: QosStandInOptions): Promise<{ stop(): Promise<void> }> {
  const custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
  const queue = new WorkQueue(reconcile, o.log, 'qos stand-in');
  const policies = new Watched<QoSPolicy>({
    kubeConfig: o.kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${Plural.qos}`,
    list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: Plural.qos }),
    onChange: (q, kind) => {
      if (kind !== 'delete') queue.add(q.metadata.name);
    },
    log: o.log,
    name: 'qos-policies informer',
  });

  async function reconcile(name: string): Promise<void> {
    const q = policies.get(name);
    if (!q || statusMatches(q)) return;
    if (q.spec?.bindingType === 'NATGW' && !q.spec.shared) {
      o.log(`qos stand-in: not support unshared qos policy ${name} with natgw binding type`);
      return;
    }
    try {
      await custom.patchClusterCustomObjectStatus(
        { group: GROUP, version: VERSION, plural: Plural.qos, name, body: { status: qosStatusOf(q.spec) } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    } catch (e) {
      if ((e as { code?: number }).code !== 404) throw e;
    }
  }

  await policies.start();
  return {
    async stop() {
      await policies.stop();
      await queue.stop();
    },
  };
}
