/**
 * In-memory AuditStore (shared/audit/ports.ts) over the in-memory IPAM and leases, for the audit's unit tests and
 * offline runs. MemoryIpam keeps no claim or release times, so allocations carry no `claimedAt` (always judged) and
 * a free address reads as never used (an orphan's age then rests on sightings alone).
 */
import type { AddressRecord, AuditStore } from '../../shared/audit/ports.js';
import type { MemoryIpam } from './ipam.js';
import type { MemoryLeases } from './leases.js';

export class MemoryAuditStore implements AuditStore {
  /** gateway → address → first sighting (epoch ms). */
  readonly seen = new Map<string, Map<string, number>>();

  constructor(
    private readonly ipam: MemoryIpam,
    private readonly leases: MemoryLeases,
  ) {}

  async read() {
    return { allocations: [...this.ipam.allocations.values()], leases: [...this.leases.held.values()] };
  }

  async addressRecord(subnet: string, address: string): Promise<AddressRecord> {
    const held = this.ipam.allocations.get(`${subnet}|${address}`);
    return held ? { state: 'held', ownerUid: held.owner.uid } : { state: 'never-used' };
  }

  async deleteLease(lease: { key: string; holder: string; expiresAt: number }): Promise<boolean> {
    const cur = this.leases.held.get(lease.key);
    if (!cur || cur.holder !== lease.holder || cur.expiresAt !== lease.expiresAt) return false;
    this.leases.held.delete(lease.key);
    return true;
  }

  async sightings(gateway: string): Promise<Map<string, number>> {
    return new Map(this.seen.get(gateway));
  }

  async recordSighting(gateway: string, address: string, at: number): Promise<void> {
    const m = this.seen.get(gateway) ?? new Map<string, number>();
    if (!m.has(address)) m.set(address, at);
    this.seen.set(gateway, m);
  }

  async forgetSighting(gateway: string, address: string): Promise<void> {
    this.seen.get(gateway)?.delete(address);
  }
}
