/**
 * The contract every RedoLedger adapter keeps (ADR 0111): the in-memory twin (test/unit/redo-ledger.test.ts) and the
 * DynamoDB adapter against dynalite (test/integration/dynamo-redo-ledger.test.ts) run these same tests.
 */
import { describe, expect, it } from 'vitest';
import type { RedoLedger, RedoRecord } from '../../shared/ports.js';

export type LedgerFactory = () => Promise<{ ledger: RedoLedger; peer: RedoLedger }>;

const key = (n: number) => n.toString(16).padStart(16, '0');

export function describeRedoLedgerContract(name: string, make: LedgerFactory): void {
  describe(`RedoLedger contract: ${name}`, () => {
    it('has nothing for a pod nobody recorded', async () => {
      const { ledger } = await make();
      expect(await ledger.get('kube-system/vpc-nat-gw-gw1-0')).toBeUndefined();
    });

    it('reads back what was put, whole, from another container too', async () => {
      const { ledger, peer } = await make();
      const r: RedoRecord = {
        pod: 'kube-system/vpc-nat-gw-gw1-0',
        run: 'uid-1:0:2026-11-29T10:00:00Z',
        done: [key(1), key(2), key(0xffff_ffff)],
        complete: false,
      };
      await ledger.put(r);
      expect(await peer.get(r.pod)).toEqual(r);
      expect(await ledger.get('kube-system/vpc-nat-gw-gw2-0')).toBeUndefined();
    });

    it('a put replaces the record of its pod', async () => {
      const { ledger, peer } = await make();
      const pod = 'kube-system/vpc-nat-gw-gw1-0';
      await ledger.put({ pod, run: 'uid-1:0:a', done: [key(1)], complete: false });
      await peer.put({ pod, run: 'uid-1:1:b', done: [key(7), key(8)], complete: true });
      expect(await ledger.get(pod)).toEqual({
        pod,
        run: 'uid-1:1:b',
        done: [key(7), key(8)],
        complete: true,
      });
    });

    it('keeps thousands of keys in one record', async () => {
      const { ledger } = await make();
      const done = Array.from({ length: 3000 }, (_, i) => key(i * 7919));
      const pod = 'kube-system/vpc-nat-gw-gw1-0';
      await ledger.put({ pod, run: 'r', done, complete: true });
      expect((await ledger.get(pod))?.done).toEqual(done);
    });
  });
}
