/**
 * Ports: every side effect the handlers have goes through one of these. Each has a real adapter
 * (DynamoDB, the Kubernetes API, pods/exec) and an in-memory one (local/memory/) that the tests and the
 * offline `npm run invoke` use. Adapters translate their library's errors into shared/domain/errors.ts.
 */
import type {
  GatewayPod,
  IptablesEip,
  NatRuleKind,
  QoSPolicy,
  Subnet,
  VpcNatGateway,
} from './domain/kube-ovn.js';

// ---------------------------------------------------------------- IPAM

/** Who holds an allocation. The uid is the identity; the name is for people reading the table. */
export interface Owner {
  uid: string;
  name: string;
}

/**
 * One address family of one subnet, as allocation needs it: the CIDR, the gateway and the excluded
 * addresses (single addresses or `a..b` ranges, kube-ovn's excludeIps format). Built from the Subnet CR by
 * `poolsOf()` in shared/domain/addressing.ts.
 */
export interface Pool {
  subnet: string;
  family: 4 | 6;
  cidr: string;
  gateway?: string;
  exclude: readonly string[];
  /**
   * The subnet's dedicated EIP range (annotation `eip-lambdas.io/eip-range`), when it has one: only these addresses
   * (single addresses or `a..b` ranges) are handed out, and excludeIps do not apply inside them — kube-ovn's own
   * IPAM is kept out of the range by listing it in excludeIps. See docs/adr (coexistence with kube-ovn's IPAM).
   */
  only?: readonly string[];
}

/**
 * Where an allocated address is configured: the NAT gateway whose net1 carries it and the prefix length it was
 * added with. Recorded with the allocation when the address is configured, so that clean-up and the refusal of a
 * gateway or subnet change never depend on the EIP's current spec or labels, which a user can edit
 * (docs/kube-ovn-differences.md).
 */
export interface Placement {
  gateway: string;
  prefix: number;
  /**
   * The QoS policy whose tc filters are on the gateway for this address ('' for none), recorded after the QoS step
   * changed them; undefined when not recorded (an allocation placed before this was kept). status.qosPolicy and the
   * qos label are put back from it when edited by hand (ADR 0086).
   */
  qos?: string;
  /**
   * The namespace the gateway's pods were in when the address was placed (docs/adr/0105-ha-gateways.md): clean-up
   * looks there even after the gateway's `spec.namespace` changed. Undefined: the adapter's own namespace.
   */
  namespace?: string;
  /**
   * The pods that carry the address, by pod uid, each with the redo token of the container run it was configured in
   * (ADR 0003's token of that pod). Undefined: unknown (any active pod may carry it; a single-pod gateway records
   * none, status.redo is its token). Replaced whole by `Ipam.place`.
   */
  pods?: Record<string, PlacedPod>;
}

/** One gateway pod that carries a placed address: its name, and the token of the run it was configured in. */
export interface PlacedPod {
  name: string;
  token: string;
}

export interface Allocation {
  subnet: string;
  family: 4 | 6;
  address: string;
  owner: Owner;
  /** Where the address is configured, once recorded (see Ipam.place). */
  placement?: Placement;
}

/** What the caller knows that lets claimAny do less (ADR 0042, ADR 0043). */
export interface ClaimOptions {
  /**
   * Addresses never to hand out, even when the table says they are free: the gateway pods' own addresses, which
   * the add reads from the pod list it needs anyway (the collector records them in the table, ADR 0042).
   */
  avoid?: readonly string[];
  /**
   * The caller guarantees that `owner` holds no allocation in this pool yet: it has just written the EIP's
   * finalizer itself, and every claim is made after that write, under the EIP's lease (ADR 0043). The adapter may
   * then skip looking for the owner's earlier claim; a retry (finalizer already there) never says so.
   */
  firstAttempt?: boolean;
  /**
   * Where the owner's claims go, as the adapter's `suggestHome` proposed it and the caller recorded it on the EIP
   * (annotation `eip-lambdas.io/ipam-home`) in the same write as the finalizer, before the first claim: a retry
   * passes what it reads there and meets its own claim. Opaque to the caller; an adapter ignores a value it does
   * not recognise (a user can edit annotations) and uses its own default (ADR 0043).
   */
  home?: string;
}

/**
 * Where an owner's allocations may be, as the owner's EIP records them (ADR 0085): the addresses it names (spec.v4ip,
 * spec.v6ip, status.ip, the eip_v4_ip label) in one of its subnets, and that subnet's pools with the home its claims
 * go to (ClaimOptions.home, else the adapter's default for the uid). An adapter reads each of these places
 * consistently, so an allocation is found whatever an index says.
 */
export interface OwnerRecord {
  subnet: string;
  addresses: readonly string[];
  /** The subnet's pools, when known: where the adapter's claimAny puts the owner's claims is read too. */
  pools?: readonly Pool[];
  home?: string;
}

export interface Ipam {
  /**
   * Claims `address` in `pool` for `owner`. Idempotent for the same owner uid. `placement`, when given, is recorded
   * in the same write as a new claim (one request instead of a claim and a `place`, ADR 0041); an allocation the
   * owner already holds is returned as it is, with its own placement (or none): `place` moves it.
   * @throws AddressConflictError when another owner holds it
   * @throws AddressOutOfRangeError when it is outside the pool or reserved (network, broadcast, gateway, excluded)
   */
  claimAddress(pool: Pool, address: string, owner: Owner, placement?: Placement): Promise<Allocation>;
  /**
   * Claims any free address in `pool` for `owner`; returns the owner's existing allocation in that pool
   * if it already holds one (a retry never allocates twice). `placement` as for claimAddress.
   * @throws NoAvailableAddressError when the pool is exhausted
   */
  claimAny(pool: Pool, owner: Owner, placement?: Placement, options?: ClaimOptions): Promise<Allocation>;
  /**
   * Where this allocator would like a new owner's claims in `pool` to go (ClaimOptions.home), without a request:
   * somewhere it remembers free addresses. Undefined: no preference. Optional.
   */
  suggestHome?(pool: Pool): string | undefined;
  /**
   * Every allocation held by this owner uid, in any subnet. An adapter may find allocations through an index that
   * lags its table (DynamoDB's owner index); every place `where` names is read consistently, so an allocation made
   * there is found at once (ADR 0085). Every allocation returned is confirmed held by the owner.
   */
  findByOwner(ownerUid: string, where?: readonly OwnerRecord[]): Promise<Allocation[]>;
  /**
   * Releases one address only if `ownerUid` still holds it. Returns false (and changes nothing) when the
   * address is free or held by someone else, so a stale release can never free a re-claimed address.
   */
  release(subnet: string, address: string, ownerUid: string): Promise<boolean>;
  /**
   * Records where `ownerUid`'s address is configured (replacing an earlier placement). Returns false (and changes
   * nothing) when the owner no longer holds the address.
   */
  place(subnet: string, address: string, ownerUid: string, placement: Placement): Promise<boolean>;
  /**
   * Hands `fromUid`'s address to `to` in one conditional write (only while `fromUid` holds it; false and nothing
   * changes otherwise). The placement is dropped: the new holder is a gateway pod's reservation (`pod:<uid>`) that
   * keeps an address a pod may still carry out of the pool until the pod is gone (docs/adr/0105-ha-gateways.md).
   */
  transfer(subnet: string, address: string, fromUid: string, to: Owner): Promise<boolean>;
  /**
   * The allocations held at `addresses` of `subnet`'s IPv4 pool, by address (strongly consistent; a free or unknown
   * address is absent). Optional: a gateway's redo checks with it that each address it re-adds is held where it is
   * placed (docs/adr/0111-gateway-redo-in-one-sweep.md); without it every EIP redoes its own.
   */
  heldAt?(subnet: string, addresses: readonly string[]): Promise<Map<string, Allocation>>;
}

// ---------------------------------------------------------------- Policy holds

/**
 * The product's record of which EIP holds an unshared QoS policy (ADR 0087): one item per policy, taken with a
 * conditional write before any tc filter of the policy goes on, given back after the filters come off. The unshared
 * check decides from it, never from labels, which a user can edit.
 */
export interface PolicyHolds {
  /**
   * Takes `policy` for `owner` when nobody holds it, `owner` already does, or the holder is `replacing` (the uid of a
   * holder found to be gone: taken over only if it still holds it). Returns the holder afterwards: `owner` on success.
   */
  hold(policy: string, owner: Owner, replacing?: string): Promise<Owner>;
  /** Who holds `policy` now (a consistent read), or undefined. */
  findHolder(policy: string): Promise<Owner | undefined>;
  /** Every hold (the collector's view: holders that are gone are let go). */
  listHolds(): Promise<{ policy: string; holder: Owner }[]>;
  /** Gives `policy` up only if `ownerUid` holds it; false (and nothing changes) otherwise. */
  release(policy: string, ownerUid: string): Promise<boolean>;
}

// ---------------------------------------------------------------- Leases

export interface Lease {
  key: string;
  holder: string;
  /** Epoch milliseconds. */
  expiresAt: number;
}

export interface Leases {
  /**
   * Takes the lease on `key` for `holder` until `expiresAt` (epoch ms). Succeeds when the key is free,
   * expired, or already held by the same holder (then the expiry is extended).
   * @throws LeaseHeldError when someone else holds an unexpired lease
   */
  acquire(key: string, holder: string, expiresAt: number): Promise<Lease>;
  /** Gives the lease up; does nothing if `holder` no longer holds it (it expired and was taken over). */
  release(lease: Lease): Promise<void>;
}

// ---------------------------------------------------------------- Cluster (Kubernetes API)

export interface NatRuleRef {
  kind: NatRuleKind;
  name: string;
}

/** Result of reading the two ConfigMaps that switch the NAT gateway feature on (ADR 0009). */
export interface NatGwFeature {
  enabled: boolean;
  /** Why it is off, in kube-ovn's words, when it is. */
  reason?: string;
  /**
   * `natGwNamePrefix` of ovn-vpc-nat-config when it names one (kube-ovn 1.13+): the gateway workloads' and pods'
   * name prefix (namePrefixOf in shared/domain/gateway-pod.ts applies it).
   */
  namePrefix?: string;
}

/** Changes to an EIP's metadata and spec, applied in one write guarded by the resourceVersion read. */
export interface EipObjectChange {
  /** Spec fields to set (undefined fields are left alone). */
  spec?: Partial<Record<'v4ip' | 'v6ip' | 'macAddress', string>>;
  /** Labels to set; `null` removes the key. Keys not named are kept. */
  labels?: Record<string, string | null>;
  /** Annotations to set; `null` removes the key. Keys not named are kept. */
  annotations?: Record<string, string | null>;
  /** The complete new finalizer list. */
  finalizers?: string[];
}

/** Status fields to merge-patch; only the fields present are sent. `conditions` replaces the list. */
export type EipStatusChange = Partial<{
  ready: boolean;
  ip: string;
  redo: string;
  nat: string;
  qosPolicy: string;
  conditions: NonNullable<IptablesEip['status']>['conditions'];
}>;

export interface KubeEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/**
 * Which gateway's pods to find, and where: `namespace` is what the EIP or the VpcNatGateway names
 * (gatewayNamespaceOf, shared/domain/gateway-pod.ts); without it, the adapter's own (kube-ovn's controller namespace,
 * the deploy parameter). docs/adr/0105-ha-gateways.md.
 */
export interface GatewayRef {
  name: string;
  namespace?: string;
  /**
   * The workloads' name prefix when the caller has already read it (namePrefixFor over the feature check's
   * `namePrefix`): the adapter then does not read ovn-vpc-nat-config again. Without it, the adapter reads it.
   */
  prefix?: string;
}

export interface Cluster {
  getEip(name: string): Promise<IptablesEip | undefined>;
  /** Every IptablesEIP (garbage collection's live set). */
  listEips(): Promise<IptablesEip[]>;
  /** EIPs carrying label key=value (the unshared-QoS check lists by `ovn.kubernetes.io/qos`). */
  listEipsByLabel(key: string, value: string): Promise<IptablesEip[]>;
  getQosPolicy(name: string): Promise<QoSPolicy | undefined>;
  getSubnet(name: string): Promise<Subnet | undefined>;
  getVpcNatGateway(name: string): Promise<VpcNatGateway | undefined>;
  /** FIP/DNAT/SNAT rules whose spec.eip names this EIP (excluding rules already being deleted). */
  listNatRulesForEip(eipName: string): Promise<NatRuleRef[]>;
  /**
   * The gateway pod of VpcNatGateway `gw` (labels app=vpc-nat-gw-<gw>, ovn.kubernetes.io/vpc-nat-gw=true).
   * Returns undefined when there is none.
   * @throws GatewayNotReadyError when more than one pod matches
   */
  findGatewayPod(gw: string): Promise<GatewayPod | undefined>;
  /**
   * Every pod of the gateway, as kube-ovn finds them (getNatGwPods): labels `app=<prefix>-<gw>` and
   * `ovn.kubernetes.io/vpc-nat-gw=true` in the gateway's namespace, the prefix from ConfigMap ovn-vpc-nat-config
   * (`natGwNamePrefix`, in the adapter's namespace). One pod for a StatefulSet, `spec.replicas` for master's
   * Deployment; pods that are not Running or are terminating included (`phase`, `terminating`), ordered by name.
   * [] when there is none.
   * @throws InvalidSpecError when `gw.namespace` is not a namespace name
   */
  findGatewayPods(gw: GatewayRef): Promise<GatewayPod[]>;
  /** Every NAT gateway pod in the namespace (label ovn.kubernetes.io/vpc-nat-gw=true), with its own addresses. */
  listGatewayPods(): Promise<GatewayPod[]>;
  /** Reads ovn-vpc-nat-gw-config / ovn-vpc-nat-config in the controller namespace. */
  natGwFeature(): Promise<NatGwFeature>;
  /**
   * Writes spec, labels and finalizers in one request, guarded by `resourceVersion` (JSON patch with a test).
   * Returns the updated object, or undefined if it is gone.
   * @throws ConflictError when the object changed since `resourceVersion`
   */
  updateEip(name: string, resourceVersion: string, change: EipObjectChange): Promise<IptablesEip | undefined>;
  /** Merge-patches /status with only the given fields. Returns the updated object, or undefined if it is gone. */
  patchEipStatus(name: string, change: EipStatusChange): Promise<IptablesEip | undefined>;
  /** Records a Kubernetes Event on the EIP (best effort: adapters swallow their own failures). */
  emitEvent(eip: IptablesEip, event: KubeEvent): Promise<void>;
}

// ---------------------------------------------------------------- Gateway (pods/exec)

/** The nat-gateway.sh operations the EIP path runs. */
export type NatGwOp =
  | 'eip-add'
  | 'eip-del'
  | 'eip-ingress-qos-add'
  | 'eip-egress-qos-add'
  | 'eip-ingress-qos-del'
  | 'eip-egress-qos-del';

export interface ExecResult {
  stdout: string;
  stderr: string;
}

export interface GatewayRunOptions {
  /** The exec's hard limit instead of the adapter's own (a call with many rules takes longer, ADR 0110). */
  timeoutMs?: number;
}

export interface Gateway {
  /**
   * Runs `bash /kube-ovn/nat-gateway.sh <op> <args…>` as an argv array in the pod's vpc-nat-gw container: one rule
   * per argument, several in one call when the core batches them (shared/core/batch.ts).
   * Resolves when the command exits 0 (stderr alone is not a failure).
   * @throws GatewayCommandError on a non-zero exit, a stream that closes without a status, or a timeout
   */
  run(
    pod: GatewayPod,
    op: NatGwOp,
    args: readonly string[],
    signal?: AbortSignal,
    options?: GatewayRunOptions,
  ): Promise<ExecResult>;
}

/**
 * What a gateway redo re-applied in one run of a gateway pod's container (docs/adr/0111-gateway-redo-in-one-sweep.md):
 * the calls that succeeded there, as keys (shared/core/redo.ts), so that each EIP's own update skips what was done.
 */
export interface RedoRecord {
  /** The pod, `<namespace>/<name>`. */
  pod: string;
  /** The container run the calls were made in: pod uid, restart count and start time. */
  run: string;
  /** Keys of the calls that succeeded in that run. */
  done: readonly string[];
  /** False while the redo is still under way (it ran out of time and the next invocation goes on with it). */
  complete: boolean;
}

export interface RedoLedger {
  /** The record of pod `pod` (`<namespace>/<name>`), if any (strongly consistent). */
  get(pod: string): Promise<RedoRecord | undefined>;
  /** Replaces the record of `record.pod` (the caller holds the pod's gateway lease). */
  put(record: RedoRecord): Promise<void>;
}

/**
 * Read-only commands in a gateway pod's vpc-nat-gw container: the audit's inspection, and the one read a handler
 * makes when a gateway's kube-ovn release can only be told from inside it (its nat table, its env file). Argv only,
 * and only what `isDialectInspectionArgv` accepts (shared/domain/dialect/inspect.ts); adapters check before they exec.
 * Resolves with the output when the command exits 0.
 * @throws GatewayCommandError on a non-zero exit (with its exit code and output), a lost stream or a timeout;
 *   GatewayNotReadyError when the pod is gone
 */
export interface GatewayInspector {
  read(pod: GatewayPod, argv: readonly string[], signal?: AbortSignal): Promise<ExecResult>;
}

// ---------------------------------------------------------------- Clock, ids, logging

export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /** A logger that adds `fields` to every line (event id, EIP name, handler). */
  child(fields: Record<string, unknown>): Logger;
}

/** Counters and timings the core reports (CloudWatch EMF in Lambda, a plain tally elsewhere). */
export interface Metrics {
  count(name: string, value?: number, dimensions?: Record<string, string>): void;
  timing(name: string, ms: number, dimensions?: Record<string, string>): void;
}

/** Everything a handler needs. Built once per cold start by shared/adapters/live.ts, or by the tests. */
export interface Deps {
  ipam: Ipam;
  holds: PolicyHolds;
  leases: Leases;
  cluster: Cluster;
  gateway: Gateway;
  clock: Clock;
  log: Logger;
  metrics: Metrics;
  /** Identifies this invocation as a lease holder. */
  newId(): string;
  /** Read-only gateway commands; without it a gateway whose release only its own state tells is refused. */
  inspector?: GatewayInspector;
  /** KUBE_OVN_RELEASE: the release a gateway is taken to speak when nothing else tells (docs/compatibility.md). */
  kubeOvnRelease?: string;
  /** Where gateway redos record what they re-applied; without it every EIP redoes its own (ADR 0111). */
  redoLedger?: RedoLedger;
  /** How gateway work is batched per pod (shared/core/batch.ts); the defaults there otherwise. */
  batching?: BatchSettings;
}

/** Tuning of the per-pod batching of gateway work (ADR 0110). */
export interface BatchSettings {
  /**
   * How long a call waits at most for the other running invocations of this container to reach a gateway before its
   * exec goes (never when every one is there already, as in a Lambda container with its one invocation). Default
   * 50 ms.
   */
  windowMs?: number;
  /** The most argument bytes one exec carries (MAX_EXEC_ARG_BYTES). */
  maxArgBytes?: number;
  /** The most rules one exec carries. Default 10,000. */
  maxRules?: number;
  /** The exec's own limit for one rule; the exec timeout grows from it with the rules (EXEC_TIMEOUT_MS). */
  execTimeoutMs?: number;
  /**
   * How many execs of one op this container runs into one pod at once when its rules would take long one after
   * another (the script runs a call's rules in turn, and each eip-add waits seconds for arping). 1: one exec at a
   * time. Default 8 (GATEWAY_EXEC_LANES, ADR 0125).
   */
  lanes?: number;
}

/** Re-export for adapters that only need the types of the objects they move. */
export type { GatewayPod, IptablesEip, QoSPolicy, Subnet, VpcNatGateway };
