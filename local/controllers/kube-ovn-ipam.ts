/**
 * kube-ovn-controller's in-memory IPAM for one IPv4 subnet (pkg/ipam/subnet.go, ipam.go), as far as the EIP path
 * uses it, for the lab's model of kube-ovn's controller (local/controllers/kube-ovn-eip.ts):
 *
 * - the free pool is the CIDR without the network and broadcast addresses, the gateway and `excludeIps`; `excludeIps`
 *   are *reserved*, never handed out at random;
 * - a random address is the lowest free one (`V4Free.Allocate`); an address given back goes to the released list,
 *   handed out again only once the free pool is empty;
 * - a NIC (kube-ovn's port name) that already holds an address gets it again;
 * - a static address outside the CIDR is `ErrOutOfRange`; one held by another owner is `ErrConflict` (with
 *   checkConflict); a reserved one (inside `excludeIps`) is recorded as in use and returned — kube-ovn does not refuse a
 *   static address in `excludeIps`, it only never hands one out at random;
 * - nothing is released but by `release(owner)`.
 *
 * At start kube-ovn rebuilds it (InitIPAM): the subnets, the pods' addresses, and every IptablesEIP's `status.ip` as a
 * static address for owner and NIC `<eip name>`; an EIP without a status.ip fails that and is logged.
 */
import { cidrBounds, formatAddress, parseAddress, parseRanges } from '../../shared/domain/addressing.js';

export class IpamError extends Error {}

export class KubeOvnSubnetIpam {
  readonly prefix: number;
  private readonly network: bigint;
  private readonly broadcast: bigint;
  private readonly gateway: bigint | undefined;
  private readonly reserved: { start: bigint; end: bigint }[];
  /** address value → owner (pod or EIP name) */
  private readonly byAddress = new Map<bigint, string>();
  /** NIC → address value */
  private readonly byNic = new Map<string, bigint>();
  private readonly nicOwner = new Map<string, string>();
  private readonly released: bigint[] = [];

  constructor(
    readonly name: string,
    cidr: string,
    gateway: string | undefined,
    excludeIps: readonly string[],
  ) {
    const b = cidrBounds(cidr);
    if (b.family !== 4) throw new IpamError(`subnet ${name}: only IPv4 is modelled`);
    this.prefix = Number(cidr.split('/')[1]);
    this.network = b.start;
    this.broadcast = b.end;
    this.gateway = gateway ? parseAddress(gateway)?.value : undefined;
    this.reserved = parseRanges({ subnet: name, family: 4 }, excludeIps, 'excludeIps');
  }

  private isReserved(v: bigint): boolean {
    return v === this.gateway || this.reserved.some((r) => v >= r.start && v <= r.end);
  }

  private take(owner: string, nic: string, v: bigint): string {
    this.byAddress.set(v, owner);
    this.byNic.set(nic, v);
    this.nicOwner.set(nic, owner);
    return formatAddress(4, v);
  }

  /** GetRandomAddress: the NIC's address if it has one, else the lowest free address, else a released one. */
  random(owner: string, nic: string): string {
    const held = this.byNic.get(nic);
    if (held !== undefined) return formatAddress(4, held);
    for (let v = this.network + 1n; v < this.broadcast; v++) {
      if (this.isReserved(v) || this.byAddress.has(v) || this.released.includes(v)) continue;
      return this.take(owner, nic, v);
    }
    const again = this.released.shift();
    if (again !== undefined) return this.take(owner, nic, again);
    throw new IpamError(`NoAvailableAddress: subnet ${this.name} has no free address`);
  }

  /** GetStaticAddress with checkConflict. */
  static(owner: string, nic: string, address: string): string {
    const p = parseAddress(address);
    if (!p) throw new IpamError(`failed to parse ip ${JSON.stringify(address)}`);
    if (p.family !== 4 || p.value < this.network || p.value > this.broadcast)
      throw new IpamError(`AddressOutOfRange: ${address} is not in subnet ${this.name}`);
    const holder = this.byAddress.get(p.value);
    if (holder !== undefined && holder !== owner)
      throw new IpamError(`AddressConflict: ip ${address} has been allocated to ${holder}`);
    const i = this.released.indexOf(p.value);
    if (i >= 0) this.released.splice(i, 1);
    return this.take(owner, nic, p.value);
  }

  /** ReleaseAddressByPod: every address the owner holds goes to the released list. */
  release(owner: string): void {
    for (const [nic, o] of this.nicOwner) {
      if (o !== owner) continue;
      const v = this.byNic.get(nic);
      this.byNic.delete(nic);
      this.nicOwner.delete(nic);
      if (v === undefined) continue;
      if (this.byAddress.get(v) === owner) this.byAddress.delete(v);
      if (!this.isReserved(v)) this.released.push(v);
    }
  }

  /** Every address held, with its owner. */
  held(): { address: string; owner: string; reserved: boolean }[] {
    return [...this.byAddress]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([v, owner]) => ({ address: formatAddress(4, v), owner, reserved: this.isReserved(v) }));
  }
}
