/**
 * The `strip-qos` repair (shared/audit/model.ts): tc filters put on a gateway by hand — in a direction the address's
 * policy has no rule for, for an EIP with no policy, or for an address nobody holds — are deleted with the script's
 * own QoS deletion in the gateway's release dialect (eip-<direction>-qos-del; ADR 0090). An EIP's filters are stripped under its lease and only while what it has applied
 * (its allocation's record, else status.qosPolicy) is still what the audit judged; a holder-less address only while
 * the table still says nobody holds it.
 */
import { chooseGatewayDialect } from '../core/dialect.js';
import { heldBy } from '../core/held.js';
import { type Invocation, withLease } from '../core/invocation.js';
import { qosRemove } from '../domain/dialect/index.js';
import { GatewayNotReadyError, LeaseHeldError } from '../domain/errors.js';
import type { Deps } from '../ports.js';
import type { AuditDeps, RepairAction } from './audit.js';
import type { Drift } from './model.js';
import { podAgain } from './pods.js';

/** Every strip-qos finding, one repair action each (planned in a dry run). */
export async function repairFilters(
  deps: AuditDeps,
  drift: readonly Drift[],
  o: { dry: boolean; note: (a: RepairAction) => void; invocation: (name: string, uid: string) => Invocation },
): Promise<void> {
  for (const d of drift.filter((x) => x.repair === 'strip-qos')) {
    const target = `${d.address} on ${d.gateway}${d.pod ? ` (pod ${d.pod})` : ''}`;
    const action = `delete ${(d.directions ?? []).join(', ')} filter(s)`;
    if (o.dry) {
      o.note({ kind: d.kind, target, action, result: 'planned' });
      continue;
    }
    try {
      o.note({ kind: d.kind, target, action, ...(await stripQos(deps, d, o.invocation)) });
    } catch (e) {
      const result = e instanceof LeaseHeldError ? 'skipped' : 'failed';
      o.note({ kind: d.kind, target, action, result, detail: (e as Error).message });
    }
  }
}

async function stripQos(
  deps: AuditDeps,
  d: Drift,
  inv: (name: string, uid: string) => Invocation,
): Promise<Pick<RepairAction, 'result' | 'detail'>> {
  const strip = async (): Promise<Pick<RepairAction, 'result' | 'detail'>> => {
    // On the pod the filters were read on, only (each replica is judged and repaired alone, ADR 0120).
    const pod = await podAgain(deps, d.gateway!, d.pod, d.podUid);
    if (!pod) throw new GatewayNotReadyError(`pod ${d.pod} of gateway ${d.gateway} is gone or terminating`);
    const { dialect } = await chooseGatewayDialect(deps, d.gateway!, pod, 'send');
    for (const call of qosRemove(dialect, d.address!, d.directions ?? []))
      await deps.gateway.run(pod, call.op, call.args);
    return { result: 'done', detail: `deleted the ${(d.directions ?? []).join(' and ')} filter(s)` };
  };
  if (!d.eip || !d.uid) {
    const record = await deps.store.addressRecord(d.subnet ?? '', d.address!);
    if (record.state === 'held')
      return { result: 'skipped', detail: 'claimed since the audit read the table' };
    return strip();
  }
  const eipName = d.eip;
  const uid = d.uid;
  return withLease(inv(eipName, uid), deps, async () => {
    const eip = await deps.cluster.getEip(eipName);
    if (!eip || eip.metadata.uid !== uid || eip.metadata.deletionTimestamp)
      return { result: 'skipped' as const, detail: 'the EIP is gone or terminating' };
    const mine = (await heldBy(deps as Deps, eip)).find((a) => a.address === d.address);
    const applied = mine?.placement?.qos ?? eip.status?.qosPolicy ?? '';
    if (applied !== d.policy)
      return { result: 'skipped' as const, detail: `its policy changed since (now "${applied}")` };
    return strip();
  });
}
