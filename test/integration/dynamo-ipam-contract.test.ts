import { describeIpamContract, describeLeasesContract } from '../contract/ipam.js';
import type { ManualClock } from '../support/clock.js';
import { useDynamo } from '../support/dynamo.js';

const fx = useDynamo();

const make = async (clock: ManualClock) => {
  const { ipam, leases } = await fx.freshTable({ clock });
  return { ipam, leases };
};

describeIpamContract('DynamoDB (dynalite)', make);
describeLeasesContract('DynamoDB (dynalite)', make);
