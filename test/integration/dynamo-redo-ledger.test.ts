/**
 * The RedoLedger contract (test/contract/redo-ledger.ts) on the DynamoDB adapter against dynalite: a fresh table per
 * check, and a second adapter instance on the same table as the other Lambda container.
 */
import { createDynamoRedoLedger } from '../../shared/adapters/dynamo/index.js';
import { describeRedoLedgerContract } from '../contract/redo-ledger.js';
import { useDynamo } from '../support/dynamo.js';

const fx = useDynamo();

describeRedoLedgerContract('DynamoDB (dynalite)', async () => {
  const { tableName } = await fx.freshTable();
  const make = () => createDynamoRedoLedger({ client: fx.client(), tableName });
  return { ledger: make(), peer: make() };
});
