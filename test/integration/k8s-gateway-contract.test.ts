import { afterAll } from 'vitest';
import { startStandIns } from '../../local/controllers/index.js';
import { createK8sCluster, createK8sGateway } from '../../shared/adapters/k8s/index.js';
import { describeGatewayContract } from '../contract/gateway.js';
import { eventuallyValue } from '../support/eventually.js';
import { createGateway, createSubnets, startWorld } from './k8s-fixtures.js';

const stops: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
});

describeGatewayContract('pods/exec on the local Kubernetes API', async () => {
  const w = await startWorld({ kubeOvnRelease: '1.12' }); // 1.12's argument forms are exec'd below
  stops.push(() => w.close());
  const standIns = await startStandIns({ kubeConfig: w.kc, release: '1.12' });
  stops.push(() => standIns.stop());
  await createSubnets(w);
  await createGateway(w, 'gw1');
  const cluster = createK8sCluster({ kubeConfig: w.kc, namespace: 'kube-system' });
  const pod = await eventuallyValue(async () => {
    const p = await cluster.findGatewayPod('gw1');
    return p?.phase === 'Running' && p.container?.ready ? p : undefined;
  });
  const sim = await eventuallyValue(() => {
    const s = w.api.gateways.get('kube-system', pod.name);
    return s?.initialised ? s : undefined;
  });
  return {
    gateway: createK8sGateway({ kubeConfig: w.kc, timeoutMs: 5_000 }),
    pod,
    net1: () => sim.net1Addresses(),
    tc: () => sim.tcFilters().map((f) => ({ direction: f.direction, ip: f.ip, rate: f.rate })),
    history: () => sim.history().map((h) => [...h.argv]),
    failNext: (op, exitCode, stderr) => {
      w.api.faults.failExec({ command: op, exitCode, stderr });
    },
  };
});
