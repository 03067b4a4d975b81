/**
 * The kube-ovn release lines whose gateway contract the product speaks, and what differs between them for what the
 * product sends and reads. Releases are grouped where nothing the product sends or reads differs: 1.13 and 1.14 run
 * the same nat-gateway.sh, and master (1.17 in development) runs the 1.16 script but may run a gateway as several
 * replicas. The facts come from kube-ovn's nat-gateway.sh and pkg/controller at each tag and from the recorded runs
 * in test/fixtures/gateway-runs/ (docs/compatibility.md, docs/adr/0075-gateway-dialects.md).
 */

/** Oldest first; a range of lines is an interval of this list. */
export const RELEASE_LINES = ['1.12', '1.13', '1.15', '1.16', 'master'] as const;
export type ReleaseLine = (typeof RELEASE_LINES)[number];

export interface Dialect {
  line: ReleaseLine;
  /** The kube-ovn releases the line covers, for people. */
  covers: string;
  /** kube-ovn minor versions (1.<minor>) of the line. */
  minors: readonly number[];
  /**
   * eip-add's argument: `<ip>/<len>,<gateway>` (1.12: the script also replaces the default route via that gateway),
   * or `<ip>/<len>` alone (1.13+: the route comes from the CNI's routes annotation, from 1.15 also from the
   * container's GATEWAY_V4). iproute2 refuses the 1.12 form on 1.13+ ("any valid prefix is expected").
   */
  eipAdd: 'address-and-gateway' | 'address';
  /**
   * Which interface is the external one: always `net1`, or (1.15+) EXTERNAL_INTERFACE from
   * /etc/kube-ovn/nat-gateway.env, which `init` writes, else the container's env, else `net1`.
   */
  externalInterface: 'net1' | 'env-file';
  /**
   * How EIP QoS is built: u32 filters with a police action on the external interface (ingress qdisc ffff:, egress
   * root htb 1:), or (1.16+) HTB classes with an fq_codel leaf, the u32 filter pointing at the class, on the
   * external interface for egress and on the IFB device `ifb-<external>` for ingress.
   */
  qos: 'police' | 'htb';
  /**
   * How a QoS change for an address is sent. `delete-then-add`: the script's add replaces the address's filter by
   * deleting the first filter whose text merely starts like the address, so a re-add can leave the old filter
   * (and its rate) in front of the new one; a deletion first leaves exactly the new filter (recorded runs).
   * `re-add`: the add replaces the address's class and filter in place, and a deletion also deletes by the class
   * id derived from the address, which may be another address's after a collision (recorded runs), so a change
   * never deletes first. Directions the new policy no longer has are deleted in both.
   */
  qosChange: 'delete-then-add' | 're-add';
  /** eip-add also adds a per-EIP hairpin SNAT rule in the nat chain HAIRPIN_SNAT, eip-del removes it (1.16+). */
  hairpinSnat: boolean;
  /** What the script prints for an operation it does not know: its usage line, or `Unknown command: <op>` (1.15+). */
  unknownOp: 'usage-line' | 'unknown-command';
  /**
   * eip-add probes the address with duplicate address detection (`arping -D`) and fails when another host answers,
   * leaving the address configured: 1.12, 1.13.0–1.13.14 and 1.14.0–1.14.4 (later patches send unsolicited ARP).
   */
  duplicateProbe: 'always' | 'early-patches' | 'never';
  /** A gateway has one pod (a StatefulSet), or (master) one or more replicas, each configured the same. */
  replicas: 'one' | 'one-or-more';
}

export const DIALECTS: Readonly<Record<ReleaseLine, Dialect>> = {
  '1.12': {
    line: '1.12',
    covers: 'kube-ovn 1.12',
    minors: [12],
    eipAdd: 'address-and-gateway',
    externalInterface: 'net1',
    qos: 'police',
    qosChange: 'delete-then-add',
    hairpinSnat: false,
    unknownOp: 'usage-line',
    duplicateProbe: 'always',
    replicas: 'one',
  },
  '1.13': {
    line: '1.13',
    covers: 'kube-ovn 1.13 and 1.14',
    minors: [13, 14],
    eipAdd: 'address',
    externalInterface: 'net1',
    qos: 'police',
    qosChange: 'delete-then-add',
    hairpinSnat: false,
    unknownOp: 'usage-line',
    duplicateProbe: 'early-patches',
    replicas: 'one',
  },
  '1.15': {
    line: '1.15',
    covers: 'kube-ovn 1.15',
    minors: [15],
    eipAdd: 'address',
    externalInterface: 'env-file',
    qos: 'police',
    qosChange: 'delete-then-add',
    hairpinSnat: false,
    unknownOp: 'unknown-command',
    duplicateProbe: 'never',
    replicas: 'one',
  },
  '1.16': {
    line: '1.16',
    covers: 'kube-ovn 1.16',
    minors: [16],
    eipAdd: 'address',
    externalInterface: 'env-file',
    qos: 'htb',
    qosChange: 're-add',
    hairpinSnat: true,
    unknownOp: 'unknown-command',
    duplicateProbe: 'never',
    replicas: 'one',
  },
  master: {
    line: 'master',
    covers: 'kube-ovn master (1.17 in development)',
    minors: [17],
    eipAdd: 'address',
    externalInterface: 'env-file',
    qos: 'htb',
    qosChange: 're-add',
    hairpinSnat: true,
    unknownOp: 'unknown-command',
    duplicateProbe: 'never',
    replicas: 'one-or-more',
  },
};

/**
 * The facets a caller depends on: what it sends (handlers) or what it reads (audit, drift repair). `replicas` is
 * not among them: a pod owned by a StatefulSet is a gateway's only pod on every line, and master's replicated
 * gateways are told apart by their pods' owner (a ReplicaSet).
 */
export const FACETS = {
  send: ['eipAdd', 'qosChange'],
  read: ['externalInterface', 'qos', 'hairpinSnat'],
} as const satisfies Record<string, ReadonlyArray<keyof Dialect>>;
export type Purpose = keyof typeof FACETS;

/** True when every line in `lines` agrees on the facets `purpose` depends on. */
export function agreeFor(purpose: Purpose, lines: readonly ReleaseLine[]): boolean {
  const [first, ...rest] = lines.map((l) => DIALECTS[l]);
  return first !== undefined && rest.every((d) => FACETS[purpose].every((f) => d[f] === first[f]));
}

export function lineIndex(line: ReleaseLine): number {
  return RELEASE_LINES.indexOf(line);
}

/** The release line of kube-ovn 1.<minor>; undefined for a minor the product does not speak. */
export function lineOfMinor(minor: number): ReleaseLine | undefined {
  return RELEASE_LINES.find((l) => DIALECTS[l].minors.includes(minor));
}

/** A release as written (`1.15`, `v1.15.3`, `1.16.0-rc1`, `master`): its line, or why it is not one. */
export type ParsedRelease = { ok: true; line: ReleaseLine; version: string } | { ok: false; problem: string };

const VERSION = /^v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?(?:[-+._][0-9A-Za-z.+_-]*)?$/;

/** Parses a release as an operator or an image tag writes it. */
export function parseRelease(text: string): ParsedRelease {
  const t = text.trim();
  if (t === 'master') return { ok: true, line: 'master', version: 'master' };
  const m = VERSION.exec(t);
  if (!m)
    return {
      ok: false,
      problem: `${JSON.stringify(t)} is not a kube-ovn release (e.g. 1.12, v1.15.3, master)`,
    };
  const [major, minor] = [Number(m[1]), Number(m[2])];
  const version = `${major}.${minor}${m[3] === undefined ? '' : `.${m[3]}`}`;
  const line = major === 1 ? lineOfMinor(minor) : undefined;
  if (!line) {
    const known = RELEASE_LINES.map((l) => DIALECTS[l].covers.replace(/^kube-ovn /, '')).join(', ');
    return { ok: false, problem: `kube-ovn ${version} is not supported (supported: ${known})` };
  }
  return { ok: true, line, version };
}
