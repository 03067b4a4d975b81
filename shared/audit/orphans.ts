/**
 * The `remove-orphan` repair (shared/audit/model.ts): an address nobody claims, on one pod of a gateway, removed
 * from that pod (eip-del and both QoS deletions, through the pod's gateway batching) once known to be older than the
 * grace period: released that long ago, or first seen that long ago (sightings per gateway and address: the same
 * orphan on several replicas shares its first sighting). Decisions: docs/adr/0039-drift-repair.md,
 * docs/adr/0120-audit-reads-every-replica.md.
 */
import { batcherOf } from '../core/batch.js';
import { chooseGatewayDialect } from '../core/dialect.js';
import { eipDel, qosRemove } from '../domain/dialect/index.js';
import { GatewayNotReadyError } from '../domain/errors.js';
import type { AuditDeps, AuditReport, RepairAction } from './audit.js';
import { auditInvocation as invocation } from './invocation.js';
import { ago, type Drift } from './model.js';
import { podAgain } from './pods.js';
import type { AddressRecord } from './ports.js';

type Note = (a: RepairAction) => void;

export async function repairOrphans(
  deps: AuditDeps,
  report: AuditReport,
  o: { dry: boolean; grace: number; note: Note },
): Promise<void> {
  const now = deps.clock.now();
  const orphans = report.drift.filter((d) => d.kind === 'orphan-address' && d.repair === 'remove-orphan');
  // Sightings are kept per gateway and address: the first pod seen with it starts the clock for all of them.
  for (const gateway of new Set(report.gateways.map((g) => g.gateway))) {
    const seen = await deps.store.sightings(gateway);
    const current = orphans.filter((d) => d.gateway === gateway);
    // Sightings of addresses that are no longer orphans are forgotten, so a later orphan starts its own clock.
    const gone = [...seen.keys()].filter((address) => !current.some((d) => d.address === address));
    if (!o.dry) for (const address of gone) await deps.store.forgetSighting(gateway, address);
    // An address removed from every pod that had it is forgotten (one still on a replica keeps its first sighting).
    const left = new Set<string>();
    const removed = new Set<string>();
    for (const d of current)
      ((await repairOrphan(deps, { gateway, seen, now }, d, o)) ? removed : left).add(d.address!);
    for (const address of [...removed].filter((a) => !left.has(a)))
      await deps.store.forgetSighting(gateway, address);
  }
}

/** Why an orphan is known to be older than the grace period (released, or first seen, long enough ago), if it is. */
function orphanEvidence(record: AddressRecord, firstSeen: number | undefined, now: number, grace: number) {
  if (record.state === 'released' && record.releasedAt <= now - grace)
    return `released ${ago(now - record.releasedAt)} ago`;
  if (firstSeen !== undefined && firstSeen <= now - grace) return `first seen ${ago(now - firstSeen)} ago`;
  return undefined;
}

/** One orphan address on one pod of gateway `at.gateway`: skipped when claimed meanwhile, waiting, or removed there. */
async function repairOrphan(
  deps: AuditDeps,
  at: { gateway: string; seen: Map<string, number>; now: number },
  d: Drift,
  o: { dry: boolean; grace: number; note: Note },
): Promise<boolean> {
  const { gateway, seen, now } = at;
  const address = d.address!;
  const target = `${address}/${d.prefix} on ${gateway}${d.pod ? ` (pod ${d.pod})` : ''}`;
  const orphan = (a: Omit<RepairAction, 'kind' | 'target'>) =>
    o.note({ kind: 'orphan-address', target, ...a });
  const record = await deps.store.addressRecord(d.subnet!, address);
  if (record.state === 'held') {
    orphan({ action: 'remove', result: 'skipped', detail: 'claimed since the audit read the table' });
    return false;
  }
  // With no grace at all (an operator's explicit choice), this sighting is enough.
  const firstSeen = seen.get(address) ?? (o.grace === 0 ? now : undefined);
  const evidence = orphanEvidence(record, firstSeen, now, o.grace);
  if (!evidence) {
    if (!o.dry && firstSeen === undefined) {
      await deps.store.recordSighting(gateway, address, now);
      seen.set(address, now); // the same address on another replica: the same first sighting
    }
    const since = firstSeen ?? now;
    orphan({
      action: 'remove',
      result: 'waiting',
      detail: `first seen ${ago(now - since)} ago, grace ${ago(o.grace)}: removable by an audit ${ago(since + o.grace - now)} from now or later`,
    });
    return false;
  }
  const action = 'remove (eip-del, QoS deletions)';
  if (o.dry) {
    orphan({ action, result: 'planned', detail: evidence });
    return false;
  }
  try {
    const pod = await podAgain(deps, gateway, d.pod, d.podUid);
    if (!pod) throw new GatewayNotReadyError(`pod ${d.pod} of gateway ${gateway} is gone or terminating`);
    const { dialect } = await chooseGatewayDialect(deps, gateway, pod, 'send');
    // Through the container's gateway batching, under the pod's gateway lease like every exec (ADR 0110).
    const inv = invocation(deps, address, `orphan:${address}`, 'manual');
    for (const call of [eipDel(dialect, { address, prefix: d.prefix! }), ...qosRemove(dialect, address)])
      await batcherOf(deps).exec(inv, pod, call, dialect);
    orphan({ action, result: 'done', detail: evidence });
    return true;
  } catch (e) {
    orphan({ action: 'remove', result: 'failed', detail: (e as Error).message });
    return false;
  }
}
