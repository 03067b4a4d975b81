/**
 * In-memory PolicyHolds (shared/ports.ts): one holder per unshared QoS policy, taken and given back with the same
 * conditions as the DynamoDB adapter's single-item writes (shared/adapters/dynamo/holds.ts). Both pass
 * test/contract/holds.ts.
 */
import type { Owner, PolicyHolds } from '../../shared/ports.js';

export class MemoryHolds implements PolicyHolds {
  /** policy → holder */
  readonly held = new Map<string, Owner>();

  async hold(policy: string, owner: Owner, replacing?: string): Promise<Owner> {
    const current = this.held.get(policy);
    if (!current || current.uid === owner.uid || (replacing !== undefined && current.uid === replacing)) {
      this.held.set(policy, { ...owner });
      return { ...owner };
    }
    return { ...current };
  }

  async findHolder(policy: string): Promise<Owner | undefined> {
    const h = this.held.get(policy);
    return h && { ...h };
  }

  async listHolds(): Promise<{ policy: string; holder: Owner }[]> {
    return [...this.held].map(([policy, holder]) => ({ policy, holder: { ...holder } }));
  }

  async release(policy: string, ownerUid: string): Promise<boolean> {
    if (this.held.get(policy)?.uid !== ownerUid) return false;
    this.held.delete(policy);
    return true;
  }
}
