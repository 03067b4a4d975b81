/**
 * The PolicyHolds contract (test/contract/holds.ts) on the DynamoDB adapter against dynalite: a fresh table per
 * check, and a second adapter instance on the same table as the other Lambda container.
 */
import { createDynamoHolds } from '../../shared/adapters/dynamo/index.js';
import { describeHoldsContract } from '../contract/holds.js';
import { useDynamo } from '../support/dynamo.js';

const fx = useDynamo();

describeHoldsContract('DynamoDB (dynalite)', async () => {
  const { tableName, client } = await fx.freshTable();
  return {
    holds: createDynamoHolds({ client, tableName }),
    peer: createDynamoHolds({ client: fx.client(), tableName }),
  };
});
