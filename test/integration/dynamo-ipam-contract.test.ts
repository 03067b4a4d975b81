import { describeIpamContract } from '../contract/ipam.js';
import type { ManualClock } from '../support/clock.js';
import { useDynamo } from '../support/dynamo.js';

const fx = useDynamo();

describeIpamContract('DynamoDB (dynalite)', async (clock: ManualClock) => {
  const { ipam } = await fx.freshTable({ clock });
  return { ipam };
});
