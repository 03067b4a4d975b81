/**
 * The bridge's own last-seen copy of every watched object. The informer reports only the new state of a
 * MODIFIED object; routing needs the previous one too, and a gateway or QoS change fans out over the cached
 * EIPs. Feeding a recorded watch stream through a Tracker is exactly what the bridge does with live events.
 */
import type { EipEvent, NatHint } from '../events.js';
import {
  field,
  isTerminating,
  type KubeObject,
  keyOf,
  NAT_RULE_KINDS,
  nameOf,
  WATCHED_KINDS,
  type WatchedKind,
} from './objects.js';
import { route, type WatchType } from './route.js';

/** One line of a watch stream (`{"type": …, "object": …}`). */
export interface WatchLine {
  type: string;
  object: KubeObject;
}

export class Tracker {
  private readonly byKind = new Map<WatchedKind, Map<string, KubeObject>>(
    WATCHED_KINDS.map((k) => [k, new Map()]),
  );

  /** EIP name → (rule kind/key → its kind): the NAT rules naming each EIP that are not being deleted. */
  private readonly rulesByEip = new Map<string, Map<string, NatRuleKindName>>();

  /** Records the change and returns the events it routes to. */
  observe(
    kind: WatchedKind,
    type: WatchType,
    object: KubeObject,
    opts: { initial?: boolean } = {},
  ): EipEvent[] {
    if (!nameOf(object)) return [];
    const objects = this.byKind.get(kind)!;
    const key = keyOf(object);
    const old = objects.get(key);
    if (type === 'DELETED') objects.delete(key);
    else objects.set(key, object);
    if (isNatRuleKind(kind)) this.indexRule(kind, key, old, type === 'DELETED' ? undefined : object);
    return route(
      { kind, type, object, ...(old && { old }), ...(opts.initial && { initial: true }) },
      this.eips(),
    );
  }

  /**
   * A raw watch line: ADDED/MODIFIED/DELETED are routed, BOOKMARK and ERROR carry no object change. The kind
   * comes from the object itself (watch events always carry it).
   */
  observeLine(line: WatchLine): EipEvent[] {
    const kind = line.object?.kind as WatchedKind | undefined;
    if (!kind || !this.byKind.has(kind)) return [];
    if (line.type !== 'ADDED' && line.type !== 'MODIFIED' && line.type !== 'DELETED') return [];
    return this.observe(kind, line.type, line.object);
  }

  /**
   * status.nat as the cached NAT rules make it (the kinds naming `eip`, dnat, fip, snat; '' for none), the way the
   * handlers compute it from a listing: rules being deleted do not count (ADR 0041).
   */
  natOf(eip: string): NatHint {
    const kinds = new Set(this.rulesByEip.get(eip)?.values() ?? []);
    return (['dnat', 'fip', 'snat'] as const).filter((k) => kinds.has(k)).join(',') as NatHint;
  }

  private indexRule(
    kind: NatRuleKind,
    key: string,
    old: KubeObject | undefined,
    now: KubeObject | undefined,
  ) {
    const id = `${kind}/${key}`;
    const before = old ? field(old, 'spec', 'eip') : '';
    if (before) {
      const m = this.rulesByEip.get(before);
      m?.delete(id);
      if (m?.size === 0) this.rulesByEip.delete(before);
    }
    const eip = now && !isTerminating(now) ? field(now, 'spec', 'eip') : '';
    if (!eip) return;
    let m = this.rulesByEip.get(eip);
    if (!m) {
      m = new Map();
      this.rulesByEip.set(eip, m);
    }
    m.set(id, RULE_KIND_NAME[kind]);
  }

  eips(): IterableIterator<KubeObject> {
    return this.byKind.get('IptablesEIP')!.values();
  }

  get(kind: WatchedKind, key: string): KubeObject | undefined {
    return this.byKind.get(kind)!.get(key);
  }

  size(kind: WatchedKind): number {
    return this.byKind.get(kind)!.size;
  }
}

type NatRuleKind = (typeof NAT_RULE_KINDS)[number];
type NatRuleKindName = 'dnat' | 'fip' | 'snat';
const RULE_KIND_NAME: Record<NatRuleKind, NatRuleKindName> = {
  IptablesDnatRule: 'dnat',
  IptablesFIPRule: 'fip',
  IptablesSnatRule: 'snat',
};
const isNatRuleKind = (k: WatchedKind): k is NatRuleKind => (NAT_RULE_KINDS as readonly string[]).includes(k);
