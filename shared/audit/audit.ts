/**
 * The audit: read every gateway first, then the table and the cluster, judge (model.ts), and on request repair the
 * safe subset. Used by `npm run audit`, by the scheduled gc function and by the local stack's resync timer.
 * Decisions: docs/adr/0037-gateway-inspection.md, 0038-drift-model.md, 0039-drift-repair.md.
 */

import { type Invocation, withLease } from '../core/invocation.js';
import { updateEip } from '../core/operations.js';
import type { Outcome } from '../core/outcome.js';
import { validateQos } from '../core/qos.js';
import { ConditionType, setCondition, statusChanges } from '../core/view.js';
import { poolsOf } from '../domain/addressing.js';
import { GatewayCommandError, GatewayNotReadyError, LeaseHeldError } from '../domain/errors.js';
import { externalNetworkOf, type IptablesEip } from '../domain/kube-ovn.js';
import type { Reason } from '../events.js';
import type { Deps, Pool } from '../ports.js';
import { type GatewayInspector, type GatewayState, inspectGateway } from './inspect.js';
import { auditInvocation as invocation } from './invocation.js';
import { repairLeaks } from './leaks.js';
import { type AuditOptions, type AuditSnapshot, type Drift, findDrift } from './model.js';
import { repairOrphans } from './orphans.js';
import { findPodSets, notReadable } from './pods.js';
import type { AuditStore } from './ports.js';
import { repairFilters } from './strip.js';

export interface AuditDeps extends Deps {
  inspector: GatewayInspector;
  store: AuditStore;
}

export interface AuditReport {
  /** ISO time the audit judged at. */
  at: string;
  /** One row per gateway pod read: where, as which release line, and the v4 global addresses it carries. */
  gateways: {
    gateway: string;
    pod: string;
    podUid: string;
    addresses: number;
    filters: number;
    line?: string;
    carries: string[];
  }[];
  eips: number;
  allocations: number;
  leases: number;
  drift: Drift[];
}

export interface RunAuditOptions extends AuditOptions {
  /** Progress lines (one per gateway read). */
  progress?: (line: string) => void;
  signal?: AbortSignal;
}

const INSPECT_CONCURRENCY = 4;

/** Reads gateways, then table and cluster, and returns the drift found. Changes nothing. */
export async function runAudit(deps: AuditDeps, options: RunAuditOptions = {}): Promise<AuditReport> {
  const { snapshot } = await takeSnapshot(deps, options);
  let drift = findDrift(snapshot, options);
  drift = await confirmMissing(deps, snapshot, drift, options.signal);
  return {
    at: new Date(snapshot.now).toISOString(),
    gateways: snapshot.gateways.map((g) => ({
      gateway: g.gateway,
      pod: g.pod,
      podUid: g.podUid,
      addresses: g.addresses.length,
      filters: g.filters.length,
      ...(g.line && { line: g.line }),
      carries: g.addresses.filter((a) => a.family === 4 && a.scope === 'global').map((a) => a.address),
    })),
    eips: snapshot.eips.length,
    allocations: snapshot.allocations.length,
    leases: snapshot.leases.length,
    drift,
  };
}

export async function takeSnapshot(
  deps: AuditDeps,
  options: RunAuditOptions = {},
): Promise<{ snapshot: AuditSnapshot }> {
  const pods = await deps.cluster.listGatewayPods();
  // Which gateways, and in which namespaces: from their pods and the EIPs naming them (read again below).
  const { sets, gateways: specs } = await findPodSets(deps, pods, await deps.cluster.listEips());
  const unreadable: AuditSnapshot['unreadable'] = [];
  // 1. Gateways first, every active pod of each: whatever is on a net1 now was allocated before the table is read.
  const gateways: GatewayState[] = [];
  const queue = sets.flatMap((set) => set.pods.filter((p) => !p.terminating).map((pod) => ({ set, pod })));
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const { set, pod } = next;
      const gw = set.gateway;
      const named = { gateway: gw, pod: `${pod.namespace}/${pod.name}`, podUid: pod.uid, scope: set.scope };
      const why = notReadable(pod);
      if (why) {
        unreadable.push({ ...named, error: why });
        continue;
      }
      try {
        const state = await inspectGateway(deps, gw, pod, deps.clock.now, options.signal, set.scope);
        gateways.push(state);
        options.progress?.(
          `read gateway ${gw} (pod ${state.pod}): ${state.addresses.length} addresses, ${state.filters.length} tc filters`,
        );
      } catch (e) {
        unreadable.push({ ...named, error: (e as Error).message });
        options.progress?.(`could not read gateway ${gw} (pod ${named.pod}): ${(e as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: INSPECT_CONCURRENCY }, worker));
  gateways.sort((a, b) =>
    a.gateway !== b.gateway ? (a.gateway < b.gateway ? -1 : 1) : a.pod < b.pod ? -1 : 1,
  );
  unreadable.sort((a, b) => (`${a.gateway} ${a.pod}` < `${b.gateway} ${b.pod}` ? -1 : 1));
  // Every pod found counts as a gateway pod (its own addresses, its reservation), read or not.
  const known = new Set(pods.map((p) => p.uid));
  const allPods = [
    ...pods,
    ...sets.flatMap((x) => x.pods).filter((p) => !known.has(p.uid) && known.add(p.uid)),
  ];

  // 2. Then the cluster and the table.
  const eips = await deps.cluster.listEips();
  const { allocations, leases } = await deps.store.read();
  const qos: AuditSnapshot['qos'] = {};
  const named = [...eips.map((e) => e.status?.qosPolicy), ...allocations.map((a) => a.placement?.qos)];
  for (const name of new Set(named.filter((q): q is string => !!q))) {
    const policy = await deps.cluster.getQosPolicy(name);
    try {
      qos[name] = policy ? validateQos(policy) : undefined;
    } catch {
      qos[name] = undefined;
    }
  }
  const pools: Record<string, Pool[]> = {};
  const subnetPools = new Map<string, Pool[]>();
  const poolsOfSubnet = async (name: string): Promise<Pool[]> => {
    if (!subnetPools.has(name)) {
      const subnet = await deps.cluster.getSubnet(name);
      let list: Pool[] = [];
      try {
        list = subnet ? poolsOf(subnet) : [];
      } catch {
        list = [];
      }
      subnetPools.set(name, list);
    }
    return subnetPools.get(name)!;
  };
  for (const gw of new Set(sets.map((x) => x.gateway))) {
    const gateway = specs.get(gw);
    const names = gateway?.spec.externalSubnets?.length
      ? gateway.spec.externalSubnets
      : [externalNetworkOf({ spec: {} })];
    pools[gw] = (await Promise.all(names.map(poolsOfSubnet))).flat();
  }
  return {
    snapshot: {
      now: deps.clock.now(),
      pods: allPods,
      gateways,
      unreadable,
      gatewayNamespaces: Object.fromEntries([...specs].map(([gw, g]) => [gw, g?.spec.namespace ?? ''])),
      ...(deps.kubeOvnRelease !== undefined && { release: deps.kubeOvnRelease }),
      eips,
      allocations,
      leases,
      qos,
      pools,
    },
  };
}

/** A missing address may have been added since its pod was read: read those pods again. */
async function confirmMissing(
  deps: AuditDeps,
  snapshot: AuditSnapshot,
  drift: Drift[],
  signal?: AbortSignal,
): Promise<Drift[]> {
  const missing = drift.filter((d) => d.kind === 'missing-address' && d.podUid);
  if (missing.length === 0) return drift;
  const now = new Map<string, Set<string>>();
  for (const uid of new Set(missing.map((d) => d.podUid!))) {
    const pod = snapshot.pods.find((p) => p.uid === uid);
    const read = snapshot.gateways.find((g) => g.podUid === uid);
    if (!pod || !read) continue;
    try {
      const state = await inspectGateway(deps, read.gateway, pod, deps.clock.now, signal, read.scope);
      now.set(uid, new Set(state.addresses.map((a) => a.address)));
    } catch {
      // keep the finding: the first read is all there is
    }
  }
  return drift.filter((d) => d.kind !== 'missing-address' || !now.get(d.podUid ?? '')?.has(d.address!));
}

// ------------------------------------------------------------------------------------------- repair

export type RepairResult = 'done' | 'planned' | 'waiting' | 'failed' | 'skipped';

export interface RepairAction {
  kind: Drift['kind'];
  target: string;
  action: string;
  result: RepairResult;
  detail?: string;
}

export interface RepairOptions {
  dryRun?: boolean;
  /**
   * An orphan address is removed only once it is known to be this old: first seen by a pass at least this long
   * before (or released that long ago). Default 25 s: with passes every 30 s (ADR 0088), the second consecutive pass
   * that sees it removes it.
   */
  orphanGraceMs?: number;
  progress?: (line: string) => void;
}

export const DEFAULT_ORPHAN_GRACE_MS = 25_000;

/** Repairs the safe subset of `report.drift` (docs/adr/0039-drift-repair.md) and says what it did. */
export async function repairDrift(
  deps: AuditDeps,
  report: AuditReport,
  options: RepairOptions = {},
): Promise<RepairAction[]> {
  const dry = !!options.dryRun;
  const grace = options.orphanGraceMs ?? DEFAULT_ORPHAN_GRACE_MS;
  const actions: RepairAction[] = [];
  const note = (a: RepairAction): void => {
    actions.push(a);
    options.progress?.(`${a.result}: ${a.action} (${a.kind} ${a.target})${a.detail ? `: ${a.detail}` : ''}`);
  };
  for (const [name, repair] of eipRepairs(report)) await repairEip(deps, name, repair, { dry, note });
  await repairLeaks(deps, report, { dry, note });
  await repairLeases(deps, report, { dry, note });
  // tc filters put on by hand.
  await repairFilters(deps, report.drift, {
    dry,
    note,
    invocation: (n, u) => invocation(deps, n, u, 'manual'),
  });
  // Orphans: removed only once known to be older than the grace period.
  await repairOrphans(deps, report, { dry, grace, note });
  return actions;
}

type Note = (a: RepairAction) => void;
interface EipRepair {
  uid: string;
  reason: Reason;
  drift: Drift[];
}

/** EIPs: one core update each (the strongest reason wins: a redo re-adds the address and its QoS). */
function eipRepairs(report: AuditReport): Map<string, EipRepair> {
  const perEip = new Map<string, EipRepair>();
  for (const d of report.drift) {
    if ((d.repair !== 'redo' && d.repair !== 'resync' && d.repair !== 'restore-status') || !d.eip || !d.uid)
      continue;
    const cur = perEip.get(d.eip) ?? { uid: d.uid, reason: 'manual' as Reason, drift: [] };
    // status.ip edited by hand: the update itself puts it back from the allocation (ADR 0086), no redo needed.
    if (d.repair === 'redo') cur.reason = 'gateway-restarted';
    cur.drift.push(d);
    perEip.set(d.eip, cur);
  }
  return perEip;
}

async function repairEip(
  deps: AuditDeps,
  name: string,
  { uid, reason, drift }: EipRepair,
  o: { dry: boolean; note: Note },
): Promise<void> {
  // A redo on the pods found without it, one update each, the event naming the pod (ADR 0120); none named: the
  // gateway's every pod, as a restart asks (a single-pod gateway).
  const pods = new Map(drift.filter((d) => d.repair === 'redo' && d.podUid).map((d) => [d.podUid!, d.pod!]));
  if (reason !== 'gateway-restarted' || pods.size === 0) {
    await repairEipOnce(deps, { name, uid, reason, drift }, o);
    return;
  }
  for (const [podUid, pod] of pods) {
    const mine = drift.filter((d) => d.podUid === podUid || d.repair !== 'redo');
    await repairEipOnce(deps, { name, uid, reason, drift: mine, pod: { uid: podUid, name: pod } }, o);
  }
}

/** One core update of the EIP (on one pod, when `pod` is named), noted; its failure handled by eipRepairFailed. */
async function repairEipOnce(
  deps: AuditDeps,
  r: EipRepair & { name: string; pod?: { uid: string; name: string } },
  o: { dry: boolean; note: Note },
): Promise<void> {
  const { name, uid, reason, drift, pod } = r;
  const main = drift.find((d) => d.repair === 'redo') ?? drift[0]!;
  const where = pod ? `on pod ${pod.name}` : 'on the gateway';
  const verb = reason === 'gateway-restarted' ? `re-add ${where} and rewrite status` : 'resync';
  const action = `${verb} (update, reason ${reason})`;
  if (o.dry) {
    const kinds = [...new Set(drift.map((d) => d.kind))].join(', ');
    o.note({ kind: main.kind, target: name, action, result: 'planned', detail: kinds });
    return;
  }
  const inv = invocation(deps, name, uid, reason, pod?.uid);
  try {
    const outcome = await updateEip(inv, deps);
    const result =
      outcome.status === 'rejected' ? 'failed' : outcome.status === 'skipped' ? 'skipped' : 'done';
    o.note({ kind: main.kind, target: name, action, result, detail: describe(outcome) });
  } catch (e) {
    o.note(await eipRepairFailed(deps, inv, drift, e, { kind: main.kind, target: name, action }));
  }
}

/**
 * The update failed. An EIP Ready without its address whose re-add the gateway refused is marked not Ready (the
 * status must stop claiming it); anything else is reported as failed, or skipped when another holds the lease.
 */
async function eipRepairFailed(
  deps: AuditDeps,
  inv: Invocation,
  drift: readonly Drift[],
  e: unknown,
  planned: Pick<RepairAction, 'kind' | 'target' | 'action'>,
): Promise<RepairAction> {
  const why = (e as Error).message;
  // Ready without its address (not on the gateway, or no status.ip at all).
  const missing = drift.find(
    (d) => d.kind === 'missing-address' || (d.kind === 'status-mismatch' && d.address === undefined),
  );
  if (!missing || !(e instanceof GatewayCommandError || e instanceof GatewayNotReadyError))
    return { ...planned, result: e instanceof LeaseHeldError ? 'skipped' : 'failed', detail: why };
  const marked = await markNotReady(deps, inv, missing, why).catch((err: unknown) => String(err));
  return {
    kind: missing.kind,
    target: planned.target,
    action: 'mark not ready',
    result: marked === true ? 'done' : 'failed',
    detail:
      marked === true ? `re-add failed: ${why}` : `re-add failed (${why}); status write failed: ${marked}`,
  };
}

/** Stale leases: deleted only if still exactly as the audit read them. */
async function repairLeases(
  deps: AuditDeps,
  report: AuditReport,
  o: { dry: boolean; note: Note },
): Promise<void> {
  for (const d of report.drift.filter((x) => x.repair === 'delete-lease' && x.lease)) {
    const target = d.lease!.key;
    if (o.dry) {
      o.note({ kind: 'stale-lease', target, action: 'delete lease', result: 'planned' });
      continue;
    }
    const ok = await deps.store.deleteLease(d.lease!);
    o.note({
      kind: 'stale-lease',
      target,
      action: 'delete lease',
      result: ok ? 'done' : 'skipped',
      ...(!ok && { detail: 'taken over or given back meanwhile' }),
    });
  }
}

/** Ready=false with a condition saying why; the core's next update treats it as a redo request. */
async function markNotReady(deps: Deps, inv: Invocation, d: Drift, why: string): Promise<true> {
  await withLease(inv, deps, async () => {
    const eip: IptablesEip | undefined = await deps.cluster.getEip(d.eip!);
    if (!eip || eip.metadata.uid !== d.uid || eip.metadata.deletionTimestamp) return;
    const message = d.address
      ? `${d.address} is not on gateway ${d.gateway}${d.pod ? ` (pod ${d.pod})` : ''} and could not be re-added: ${why}`
      : `Ready without an address, and none could be configured: ${why}`;
    const conditions = setCondition(
      eip.status?.conditions,
      { type: ConditionType.ready, status: 'False', reason: 'AddressMissing', message },
      new Date(deps.clock.now()).toISOString(),
    );
    const change = statusChanges(eip, { ready: false, conditions });
    if (change) {
      await deps.cluster.patchEipStatus(eip.metadata.name, change);
      await deps.cluster.emitEvent(eip, { type: 'Warning', reason: 'AddressMissing', message });
    }
  });
  return true;
}

function describe(o: Outcome): string {
  switch (o.status) {
    case 'applied':
      return o.actions.join('; ');
    case 'unchanged':
      return 'nothing to change';
    case 'skipped':
      return `skipped: ${o.reason}`;
    case 'rejected':
      return `rejected (${o.code}): ${o.message}`;
  }
}
