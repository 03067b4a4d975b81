/**
 * What the crash, replay and fault suites compare: everything observable about the in-memory world with the
 * accidents of a run taken out — uids replaced by the object's name, condition timestamps dropped — and the
 * invariants every converged world keeps (no leaked allocation, no orphan address, no duplicate).
 */
import type { World } from '../support/world.js';

/**
 * The world's state, comparable across two worlds built the same way. The gateway's addresses and filters are
 * compared as sets: the order an interface lists them in follows the order they were re-added, which a gateway
 * redo sets by whose event came first (ADR 0111), and nothing reads it.
 */
export function normalized(w: World): unknown {
  const raw = w.snapshot();
  const byText = (a: unknown, b: unknown) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1);
  const replicas = raw.replicas.map((r) => ({ ...r, net1: [...r.net1].sort(), tc: [...r.tc].sort(byText) }));
  const snap = { ...raw, net1: [...raw.net1].sort(), tc: [...raw.tc].sort(byText), replicas };
  const now = w.clock.now();
  const leases = [...w.leases.held.values()].filter((l) => l.expiresAt > now).map((l) => l.key);
  let text = JSON.stringify({ ...snap, leases });
  for (const e of w.cluster.eips.values()) text = text.replaceAll(e.metadata.uid, `uid(${e.metadata.name})`);
  for (const p of w.cluster.pods.values()) text = text.replaceAll(p.uid, `uid(${p.name})`);
  return JSON.parse(text, (k, v) => (k === 'lastTransitionTime' || k === 'lastUpdateTime' ? undefined : v));
}

/** Problems a converged world must not have; [] when clean. */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
export function invariantViolations(w: World, baselineNet1: readonly string[] = []): string[] {
  const problems: string[] = [];
  const eips = [...w.cluster.eips.values()];
  const liveUids = new Set(eips.map((e) => e.metadata.uid));
  const livePods = new Set([...w.cluster.pods.values()].map((p) => `pod:${p.uid}`));
  const byOwner = new Map<string, string[]>();
  for (const a of w.ipam.allocations.values()) {
    if (!liveUids.has(a.owner.uid) && !livePods.has(a.owner.uid))
      problems.push(`leaked allocation ${a.address} (owner ${a.owner.name} is gone)`);
    const list = byOwner.get(`${a.owner.uid}/${a.family}`) ?? [];
    list.push(a.address);
    byOwner.set(`${a.owner.uid}/${a.family}`, list);
  }
  for (const [owner, list] of byOwner)
    if (list.length > 1) problems.push(`duplicate: ${owner} holds ${list.join(', ')}`);
  const claimed = new Set([...w.ipam.allocations.values()].map((a) => a.address));
  // The StatefulSet's pod, or every pod of the Deployment once the gateway runs replicas.
  const pods = w.pods();
  for (const pod of pods) {
    const net1 = w.net1(pod).filter((a) => !baselineNet1.includes(a));
    if (new Set(net1).size !== net1.length)
      problems.push(`an address is on ${pod.name}'s net1 twice: ${net1.join(', ')}`);
    for (const cidr of net1) {
      const address = cidr.split('/')[0]!;
      if (!claimed.has(address))
        problems.push(`orphan address ${cidr} on ${pod.name}'s net1 (no allocation claims it)`);
    }
    for (const f of w.tc(pod))
      if (!claimed.has(f.ip)) problems.push(`orphan tc ${f.direction} filter for ${f.ip} on ${pod.name}`);
  }
  for (const e of eips) {
    const ip = e.status?.ip;
    if (!ip) continue;
    const held = [...w.ipam.allocations.values()].filter((a) => a.owner.uid === e.metadata.uid);
    if (!held.some((a) => a.address === ip))
      problems.push(`${e.metadata.name}: status.ip ${ip} is not allocated to it`);
    for (const pod of pods.filter((p) => p.phase === 'Running' && !p.terminating))
      if (e.status?.ready && !w.net1(pod).some((c) => c.startsWith(`${ip}/`)))
        problems.push(`${e.metadata.name}: Ready but ${ip} is not on ${pod.name}'s net1`);
  }
  return problems;
}
