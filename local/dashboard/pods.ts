/**
 * The dashboard's per-pod view (state.ts `GatewayPodRow`, `EipRow.pods`): every gateway pod as the API lists it,
 * joined with what the last drift check read on it (shared/audit: which addresses each pod carried, which release
 * line it was read as). Pure, so that the page's rows can be checked without a browser.
 */

import type { DriftRepairSummary } from '../../shared/audit/live.js';
import { gatewayOfPod } from '../../shared/audit/pods.js';
import { redoToken } from '../../shared/core/view.js';
import { imageTag } from '../../shared/domain/dialect/detect.js';
import { type GatewayPod, type IptablesEip, Label } from '../../shared/domain/kube-ovn.js';
import type { EipRow, GatewayPodRow } from './state.js';

type Read = DriftRepairSummary['gateways'];

/** One row per gateway pod, by gateway then namespace and name. */
export function gatewayPodRows(pods: readonly GatewayPod[], read: Read | undefined): GatewayPodRow[] {
  const byUid = new Map((read ?? []).map((r) => [r.podUid, r]));
  return pods
    .map((p): GatewayPodRow => {
      const r = byUid.get(p.uid);
      const tag = p.template?.image ? imageTag(p.template.image).tag : undefined;
      return {
        gateway: gatewayOfPod(p) ?? p.app ?? '',
        namespace: p.namespace,
        name: p.name,
        phase: p.phase,
        terminating: p.terminating === true,
        container: !p.container ? 'none' : p.container.ready ? 'running' : 'not ready',
        restarts: p.container?.restartCount ?? 0,
        token: redoToken(p),
        release: r?.line ?? tag ?? '',
        ...(r && { carries: r.carries.length }),
      };
    })
    .sort((a, b) => key(a).localeCompare(key(b)));
}

const key = (r: GatewayPodRow) => `${r.gateway}\u0000${r.namespace}\u0000${r.name}`;

/** The pods of the EIP's gateway the last check read, and whether each carried its address. */
export function eipPods(eip: IptablesEip, read: Read | undefined): EipRow['pods'] {
  const ip = eip.status?.ip;
  const gw = eip.metadata.labels?.[Label.natGwName] || eip.spec.natGwDp;
  if (!ip || !gw) return [];
  return (read ?? [])
    .filter((r) => r.gateway === gw)
    .map((r) => ({ pod: r.pod, carries: r.carries.includes(ip) }))
    .sort((a, b) => a.pod.localeCompare(b.pod));
}
