import { afterAll, beforeAll } from 'vitest';
import { describeIpamContract, describeLeasesContract } from '../contract/ipam.js';
import type { ManualClock } from '../support/clock.js';
import { type DynamoFixture, startDynamoFixture } from './dynamo-fixture.js';

let fx: DynamoFixture;
beforeAll(async () => {
  fx = await startDynamoFixture();
});
afterAll(async () => {
  await fx?.close();
});

const make = async (clock: ManualClock) => {
  const { ipam, leases } = await fx.freshTable({ clock });
  return { ipam, leases };
};

describeIpamContract('DynamoDB (dynalite)', make);
describeLeasesContract('DynamoDB (dynalite)', make);
