/**
 * The gateway lease: one per gateway pod, beside the per-EIP leases on the same Leases port (key
 * `pod#<namespace>/<name>`), so that two invocations — in one Lambda container or in two — never exec into one pod at
 * once: each exec starts a process in the pod and its iptables runs take the pod's xtables lock (kube-ovn serialises
 * its own execs per gateway pod, kubeovn/kube-ovn#5817). Whoever holds it runs every exec into the pod; a holder that
 * dies leaves it to expire (docs/adr/0110-gateway-work-batched-per-pod.md).
 */
import { DeadlineError, LeaseHeldError } from '../domain/errors.js';
import { LEASE_MAX_MS } from '../domain/lease.js';
import type { Deps, GatewayPod, Lease } from '../ports.js';

/** The lease key of a gateway pod. */
export const podLeaseKey = (pod: Pick<GatewayPod, 'namespace' | 'name'>): string =>
  `pod#${pod.namespace}/${pod.name}`;

/** How long past what it needs a holder takes the lease, so that a run of short execs extends it rarely. */
const HOLD_MARGIN_MS = 10_000;
/** Waiting for another holder: the first pause, doubling to the last. */
const FIRST_WAIT_MS = 25;
const MAX_WAIT_MS = 1_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class PodLease {
  private lease: Lease | undefined;
  /** The holder id of this container's claim on the pod. */
  private readonly holder: string;

  /**
   * @param waiting told when a hold starts waiting for another holder (true) and when that wait ends (false): the
   *   container gives back the leases it holds idle meanwhile (GatewayBatcher), so that two containers that each
   *   hold one pod of a replicated gateway and wait for the other's never wait on each other.
   */
  constructor(
    private readonly deps: Pick<Deps, 'leases' | 'clock' | 'newId' | 'metrics'>,
    readonly key: string,
    private readonly waiting?: (on: boolean) => Promise<void>,
  ) {
    this.holder = deps.newId();
  }

  get held(): boolean {
    return this.lease !== undefined && this.lease.expiresAt > this.deps.clock.now();
  }

  /**
   * Holds the lease for at least `ms` more, taking or extending it; while another holder has it, waits (pausing
   * 25 ms doubling to 1 s) until it is free or `deadline` (epoch ms) would pass. `stopIf`, asked after each refusal,
   * ends the wait without the lease when what the caller waited for got done meanwhile: then false.
   * @throws LeaseHeldError when the pod stayed busy until the deadline; DeadlineError when no time is left
   */
  async hold(ms: number, deadline: number, stopIf?: () => Promise<boolean>): Promise<boolean> {
    const need = Math.min(ms, LEASE_MAX_MS - HOLD_MARGIN_MS);
    if (this.lease && this.lease.expiresAt >= this.deps.clock.now() + need) return true;
    if (this.deps.clock.now() >= deadline)
      throw new DeadlineError(`no time left to take gateway lease ${this.key}`);
    let waited = false;
    try {
      for (let wait = FIRST_WAIT_MS; ; wait = Math.min(wait * 2, MAX_WAIT_MS)) {
        const refused = await this.tryTake(need);
        if (!refused) return true;
        this.deps.metrics.count('GatewayLeaseWaits');
        if (!waited) {
          waited = true;
          await this.waiting?.(true);
        }
        if (stopIf && (await stopIf())) return false;
        if (this.deps.clock.now() + wait >= deadline)
          throw new LeaseHeldError(`gateway pod busy: ${refused.message}`, refused.holder, refused.expiresAt);
        await sleep(wait * (0.5 + Math.random()));
      }
    } finally {
      if (waited) await this.waiting?.(false);
    }
  }

  /** One attempt at the lease: undefined when taken, else who holds it. */
  private async tryTake(need: number): Promise<LeaseHeldError | undefined> {
    try {
      this.lease = await this.deps.leases.acquire(
        this.key,
        this.holder,
        this.deps.clock.now() + need + HOLD_MARGIN_MS,
      );
      return undefined;
    } catch (e) {
      if (!(e instanceof LeaseHeldError)) throw e;
      this.lease = undefined;
      return e;
    }
  }

  /** Gives the lease up (nothing when it is not held; a failure only lets it expire). */
  async release(): Promise<void> {
    const lease = this.lease;
    this.lease = undefined;
    if (lease) await this.deps.leases.release(lease);
  }
}
