import { describeGatewayContract } from '../contract/gateway.js';
import { world } from '../support/world.js';

describeGatewayContract('in-memory fake (local/memory/gateway.ts)', async () => {
  const w = world();
  const pod = w.pod();
  const sim = () => w.gateway.sim(pod);
  return {
    gateway: w.gateway,
    pod,
    net1: () => sim().net1Addresses(),
    tc: () =>
      sim()
        .tcFilters()
        .map((f) => ({ direction: f.direction, ip: f.ip, rate: f.rate })),
    history: () =>
      sim()
        .history()
        .map((h) => [...h.argv]),
    failNext: (op, exitCode, stderr) => w.gateway.failNext(1, { op, exitCode, stderr }),
  };
});
