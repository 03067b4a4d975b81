/** The RedoLedger contract (test/contract/redo-ledger.ts) on the in-memory twin (local/memory/redo-ledger.ts). */
import { MemoryRedoLedger } from '../../local/memory/redo-ledger.js';
import { describeRedoLedgerContract } from '../contract/redo-ledger.js';

describeRedoLedgerContract('in-memory', async () => {
  const ledger = new MemoryRedoLedger();
  return { ledger, peer: ledger };
});
