/**
 * The exec cost model at the local API's exec seam (local/kube-api/exec.ts): the product's own gateway adapter and
 * kubectl exec both pay it, into a gateway pod's gateway container only; the model counts those execs. How the
 * model's figures were checked against a real gateway: test/unit/exec-model.test.ts and `npm run bench -- exec-cost`.
 * Only lower bounds on time are asserted: the machine may be slow, never faster than the model.
 */
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { forgetKubectlWorkspace, kubectl } from '../../local/kube-api/testing.js';
import { MEASURED_COSTS } from '../../local/natgw/exec-model.js';
import { createK8sCluster, createK8sGateway } from '../../shared/adapters/k8s/index.js';
import type { GatewayPod } from '../../shared/ports.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { createGateway, createSubnets, type World } from './k8s-fixtures.js';

const START_MS = 300;
let w: World;
let api: KubeApi;
let standIns: StandIns;
let pod: GatewayPod;
const { skip: noKubectl } = kubectlOrSkip();

beforeAll(async () => {
  api = await startKubeApi({ restartDelayMs: 20, execModel: { startMs: START_MS, commands: 'measured' } });
  const kc = new KubeConfig();
  kc.loadFromString(api.kubeconfigYaml());
  w = {
    api,
    kc,
    custom: kc.makeApiClient(CustomObjectsApi),
    core: kc.makeApiClient(CoreV1Api),
    close: () => api.close(),
  };
  standIns = await startStandIns({ kubeConfig: kc });
  await createSubnets(w);
  await createGateway(w, 'gw1');
  const cluster = createK8sCluster({ kubeConfig: kc, namespace: 'kube-system' });
  pod = await eventuallyValue(async () => {
    const p = await cluster.findGatewayPod('gw1');
    return p?.phase === 'Running' &&
      p.container?.ready &&
      api.gateways.get('kube-system', p.name)?.initialised
      ? p
      : undefined;
  });
}, 60_000);

afterAll(async () => {
  await standIns?.stop();
  forgetKubectlWorkspace(api);
  await w?.close();
});

describe('exec costs at the local API', () => {
  it("the product's gateway adapter waits the start latency and the script's commands: eip-add's three arping probes", async () => {
    // The lab's default release (1.13+'s eip-add form: the address alone; one `arping -c 3` since 1.13).
    expect(api.gateways.get('kube-system', pod.name)?.release).not.toBe('1.12');
    const gateway = createK8sGateway({ kubeConfig: w.kc, timeoutMs: 20_000 });
    const before = api.execModel.stats().byPod[`kube-system/${pod.name}`] ?? 0;
    const t0 = performance.now();
    await gateway.run(pod, 'eip-add', ['172.18.0.10/16']);
    const ms = performance.now() - t0;
    expect(api.gateways.get('kube-system', pod.name)?.net1Addresses()).toContain('172.18.0.10/16');
    expect(ms).toBeGreaterThanOrEqual(START_MS + 3 * MEASURED_COSTS.arpingProbe);
    expect(api.execModel.stats().byPod[`kube-system/${pod.name}`]).toBe(before + 1);
  }, 30_000);

  it.skipIf(noKubectl)(
    'kubectl exec into the gateway container waits the start latency too',
    async () => {
      const t0 = performance.now();
      const r = await kubectl(
        api,
        'exec',
        '-n',
        'kube-system',
        pod.name,
        '-c',
        'vpc-nat-gw',
        '--',
        'ip',
        'route',
      );
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('default via');
      expect(performance.now() - t0).toBeGreaterThanOrEqual(START_MS);
    },
    60_000,
  );

  it.skipIf(noKubectl)(
    'leaves execs into other pods out of the model',
    async () => {
      await w.core.createNamespacedPod({
        namespace: 'default',
        body: { metadata: { name: 'plain' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
      });
      await eventuallyValue(async () => {
        const p = await w.core.readNamespacedPod({ namespace: 'default', name: 'plain' });
        return p.status?.phase === 'Running';
      });
      const before = api.execModel.stats().execs;
      const r = await kubectl(api, 'exec', 'plain', '--', 'echo', 'hi');
      expect(r).toMatchObject({ code: 0, stdout: 'hi\n' });
      expect(api.execModel.stats().execs).toBe(before);
    },
    60_000,
  );
});
