/**
 * The Leases contract (test/contract/leases.ts) on the DynamoDB adapter against dynalite: a fresh table per check,
 * and a second adapter instance on the same table as the other Lambda container.
 */
import { createDynamoLeases } from '../../shared/adapters/dynamo/index.js';
import { describeLeasesContract } from '../contract/leases.js';
import type { ManualClock } from '../support/clock.js';
import { useDynamo } from '../support/dynamo.js';

const fx = useDynamo();

describeLeasesContract('DynamoDB (dynalite)', async (clock: ManualClock) => {
  const { leases, tableName } = await fx.freshTable({ clock });
  return { leases, peer: createDynamoLeases({ client: fx.client(), tableName, clock }) };
});
