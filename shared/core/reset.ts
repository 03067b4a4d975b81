/**
 * The reset operation: a NAT rule naming the EIP changed. It recomputes status.nat and re-asserts the labels of a
 * configured EIP; a terminating EIP waiting for its NAT rules continues its deletion here (ADR 0002).
 */
import type { IptablesEip } from '../domain/kube-ovn.js';
import { Label } from '../domain/kube-ovn.js';
import { finalize } from './delete.js';
import { heldBy } from './held.js';
import { updateEipMeta } from './invocation.js';
import type { Outcome } from './outcome.js';
import { natStatus, type Run } from './prelude.js';
import { desiredLabels, hasOurFinalizer, type LabelFacts, labelChanges, statusChanges } from './view.js';

/**
 * Recomputes status.nat from the NAT rules naming the EIP and re-asserts the labels of a configured EIP (from
 * where its address is recorded). It takes the lease and never touches status.ready, so it cannot cancel a pending
 * redo. A terminating EIP waiting for its NAT rules continues its deletion here (a rule going away is what it was
 * waiting for).
 */
export async function reset(run: Run, eip0: IptablesEip): Promise<Outcome> {
  if (eip0.metadata.deletionTimestamp) return finalize(run, eip0);
  const name = eip0.metadata.name;
  const ip = eip0.status?.ip;
  let eip: IptablesEip | undefined = eip0;
  // Labels all present and consistent: nothing to look up (an edited value is put right by the next update).
  if (ip && hasOurFinalizer(eip0) && !labelled(eip0, ip)) {
    eip = await relabel(run, eip0, ip);
    if (!eip) return { status: 'skipped', eip: name, reason: 'deleted while being reset' };
  }
  const change = statusChanges(eip, { nat: await natStatus(run, eip) });
  if (change) {
    await run.deps.cluster.patchEipStatus(name, change);
    run.did(`status nat=${change.nat}`);
  }
  return run.outcome(name);
}

/** Whether a configured EIP's labels are all there and agree with its status. */
function labelled(eip: IptablesEip, ip: string): boolean {
  const l = eip.metadata.labels ?? {};
  return (
    l[Label.eipV4Ip] === ip &&
    !!l[Label.subnet] &&
    !!l[Label.natGwName] &&
    (l[Label.qos] ?? '') === (eip.status?.qosPolicy ?? '')
  );
}

/**
 * Writes the labels from where the address is recorded (its allocation's subnet and placement, and the QoS policy
 * recorded as applied; ADR 0086). The EIP as it now
 * is; unchanged when its address has no recorded placement; undefined when it was deleted meanwhile.
 */
async function relabel(run: Run, eip0: IptablesEip, ip: string): Promise<IptablesEip | undefined> {
  const alloc = (await heldBy(run.deps, eip0)).find((a) => a.family === 4 && a.address === ip);
  const placement = alloc?.placement;
  if (!alloc || !placement) return eip0;
  const facts: LabelFacts = {
    subnet: alloc.subnet,
    gateway: placement.gateway,
    ip,
    qos: placement.qos ?? eip0.status?.qosPolicy,
  };
  const eip = await updateEipMeta(run.deps, eip0.metadata.name, eip0, (e) => {
    const labels = labelChanges(e.metadata.labels, desiredLabels(facts));
    return labels ? { labels } : undefined;
  });
  if (eip && eip.metadata.resourceVersion !== eip0.metadata.resourceVersion) run.did('labels');
  return eip;
}
