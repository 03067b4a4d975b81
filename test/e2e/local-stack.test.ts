/**
 * End to end on the local stack: kubectl and client-node as users, the bridge routing, the handlers on the real
 * adapters (DynamoDB IPAM in dynalite, pods/exec into the simulated gateway).
 */
import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDynamoClient } from '../../local/dynamo.js';
import { kubectl, kubectlWith } from '../../local/kube-api/testing.js';
import type { LocalStack } from '../../local/stack.js';
import { createDynamoIpam } from '../../shared/adapters/dynamo/index.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { unusedAddresses } from '../support/addresses.js';
import { eventuallyValue, type Polling } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { startTestStack, type TestStack } from '../support/stack.js';

const { skip } = kubectlOrSkip();
const NS = 'kube-system';
const POD = 'vpc-nat-gw-gw1-0';
const group = 'kubeovn.io';
const version = 'v1';

let t: TestStack | undefined;
let stack: LocalStack;
let custom: CustomObjectsApi;
let core: CoreV1Api;

const eipYaml = (name: string, spec: Record<string, string>) =>
  `apiVersion: kubeovn.io/v1\nkind: IptablesEIP\nmetadata:\n  name: ${name}\nspec:\n${Object.entries(spec)
    .map(([k, v]) => `  ${k}: ${v}`)
    .join('\n')}\n`;

async function getEip(name: string): Promise<IptablesEip | undefined> {
  try {
    return (await custom.getClusterCustomObject({
      group,
      version,
      plural: 'iptables-eips',
      name,
    })) as IptablesEip;
  } catch {
    return undefined;
  }
}

/** How these tests poll the stack: each try reads through the API. */
const polling: Polling = { timeoutMs: 10_000, stepMs: 100 };

const sim = () => {
  const s = stack.api.gateways.get(NS, POD);
  if (!s) throw new Error('no simulated gateway behind the gateway pod');
  return s;
};
const net1 = () => sim().net1Addresses();
const tcOf = (ip: string) =>
  sim()
    .tcFilters()
    .filter((f) => f.ip === ip)
    .map((f) => `${f.direction} ${f.rate}`)
    .sort();

async function ready(name: string): Promise<IptablesEip> {
  return eventuallyValue(
    async () => {
      const e = await getEip(name);
      return e?.status?.ready && e.status.ip ? e : undefined;
    },
    { ...polling, what: `${name} Ready` },
  );
}

async function apply(yaml: string): Promise<void> {
  const r = await kubectlWith(stack.api, { stdin: yaml }, 'apply', '-f', '-');
  expect(r.code, r.stderr).toBe(0);
}

async function ipamHolds(uid: string): Promise<string[]> {
  const client = localDynamoClient(stack.dynamodbEndpoint);
  try {
    return (await createDynamoIpam({ client, tableName: stack.tableName }).findByOwner(uid)).map(
      (a) => a.address,
    );
  } finally {
    client.destroy();
  }
}

describe.skipIf(skip)('the local stack, end to end', () => {
  beforeAll(async () => {
    t = await startTestStack('eip-e2e-', { retries: 20, retryBackoffMs: 100 });
    ({ stack, custom, core } = t);
    await ready('demo-eip');
  }, 60_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('makes the demo EIP Ready with its QoS, visible through kubectl get and kubectl exec', async () => {
    const eip = await ready('demo-eip');
    expect(eip.status?.qosPolicy).toBe('qos-demo');
    const get = await kubectl(stack.api, 'get', 'iptables-eips', 'demo-eip');
    expect(get.stdout).toMatch(/NAME\s+NAMESPACE\s+EXTERNALSUBNET\s+IP\s+MAC\s+NAT\s+NATGWDP\s+READY/);
    expect(get.stdout).toMatch(
      new RegExp(`demo-eip\\s+${eip.status!.ip!.replace(/\./g, '\\.')}\\s+\\S+\\s+gw1\\s+true`),
    );
    const exec = await kubectl(
      stack.api,
      'exec',
      '-n',
      NS,
      POD,
      '-c',
      'vpc-nat-gw',
      '--',
      'ip',
      '-o',
      'addr',
      'show',
      'dev',
      'net1',
    );
    expect(exec.code, exec.stderr).toBe(0);
    expect(exec.stdout).toContain(`inet ${eip.status!.ip}/24`);
    expect(tcOf(eip.status!.ip!)).toEqual(['egress 10Mbit', 'ingress 20Mbit']);
  });

  it('creates a random and a static EIP applied with kubectl', async () => {
    // The static one first, at an address no EIP has (test/support/addresses.ts says why).
    const [wanted] = unusedAddresses(net1()) as [string];
    await apply(eipYaml('e2e-static', { natGwDp: 'gw1', v4ip: wanted }));
    const fixed = await ready('e2e-static');
    await apply(eipYaml('e2e-random', { natGwDp: 'gw1' }));
    const random = await ready('e2e-random');
    expect(fixed.status?.ip).toBe(wanted);
    expect(random.status?.ip).not.toBe(fixed.status?.ip);
    expect(net1()).toEqual(expect.arrayContaining([`${random.status!.ip}/24`, `${wanted}/24`]));
    expect(await ipamHolds(fixed.metadata.uid)).toEqual([wanted]);
  });

  it('rejects a static request for the subnet gateway with a condition, before any exec', async () => {
    await apply(eipYaml('e2e-gw', { natGwDp: 'gw1', v4ip: '172.18.0.1' }));
    const e = await eventuallyValue(
      async () => {
        const x = await getEip('e2e-gw');
        return x?.status?.conditions?.find((c) => c.type === 'Validated' && c.status === 'False');
      },
      { ...polling, what: 'a Validated=False condition' },
    );
    expect(e.message).toMatch(/172\.18\.0\.1 is the gateway of subnet ovn-vpc-external-network/);
    expect(net1()).not.toContain('172.18.0.1/24');
  });

  it('binds, changes and unbinds QoS with kubectl patch, and the tc filters follow', async () => {
    await apply(
      'apiVersion: kubeovn.io/v1\nkind: QoSPolicy\nmetadata:\n  name: e2e-slow\nspec:\n  bindingType: EIP\n  bandwidthLimitRules:\n  - name: in\n    direction: ingress\n    priority: 1\n    rateMax: "3"\n    burstMax: "3"\n',
    );
    await apply(eipYaml('e2e-qos', { natGwDp: 'gw1' }));
    const ip = (await ready('e2e-qos')).status!.ip!;
    const patch = (body: string) =>
      kubectl(stack.api, 'patch', 'iptables-eip', 'e2e-qos', '--type=merge', '-p', body);
    expect((await patch('{"spec":{"qosPolicy":"e2e-slow"}}')).code).toBe(0);
    await eventuallyValue(async () => tcOf(ip).join() === 'ingress 3Mbit', {
      ...polling,
      what: 'slow QoS on the gateway',
    });
    expect((await patch('{"spec":{"qosPolicy":"qos-demo"}}')).code).toBe(0);
    await eventuallyValue(async () => tcOf(ip).join() === 'egress 10Mbit,ingress 20Mbit', {
      ...polling,
      what: 'demo QoS on the gateway',
    });
    expect(
      (
        await kubectl(
          stack.api,
          'patch',
          'iptables-eip',
          'e2e-qos',
          '--type=json',
          '-p',
          '[{"op":"remove","path":"/spec/qosPolicy"}]',
        )
      ).code,
    ).toBe(0);
    await eventuallyValue(async () => tcOf(ip).length === 0, { ...polling, what: 'no QoS on the gateway' });
    const eip = await eventuallyValue(
      async () => {
        const x = await getEip('e2e-qos');
        return x?.status?.qosPolicy === '' ? x : undefined;
      },
      { ...polling, what: 'status.qosPolicy cleared' },
    );
    expect(eip.metadata.labels).not.toHaveProperty(['ovn.kubernetes.io/qos']);
  });

  it('follows a NAT rule added and removed in status.nat, and deletion waits while the rule uses the EIP', async () => {
    await apply(eipYaml('e2e-nat', { natGwDp: 'gw1' }));
    const eip = await ready('e2e-nat');
    await apply(
      'apiVersion: kubeovn.io/v1\nkind: IptablesFIPRule\nmetadata:\n  name: e2e-fip\nspec:\n  eip: e2e-nat\n  internalIp: 10.0.1.10\n',
    );
    await eventuallyValue(async () => (await getEip('e2e-nat'))?.status?.nat === 'fip', {
      ...polling,
      what: 'status.nat=fip',
    });

    const del = await kubectl(stack.api, 'delete', 'iptables-eip', 'e2e-nat', '--wait=false');
    expect(del.code, del.stderr).toBe(0);
    const waiting = await eventuallyValue(
      async () =>
        (await getEip('e2e-nat'))?.status?.conditions?.find(
          (c) => c.type === 'Deleting' && c.status === 'True',
        ),
      { ...polling, what: 'a Deleting condition' },
    );
    expect(waiting.message).toMatch(/still in use by fip\/e2e-fip/);
    expect(net1()).toContain(`${eip.status!.ip}/24`);

    expect((await kubectl(stack.api, 'delete', 'iptables-fip-rule', 'e2e-fip')).code).toBe(0);
    await eventuallyValue(async () => !(await getEip('e2e-nat')), { ...polling, what: 'the EIP gone' });
    expect(net1()).not.toContain(`${eip.status!.ip}/24`);
    expect(await ipamHolds(eip.metadata.uid)).toEqual([]);
  });

  it('deletes through the finalizer: address off net1, allocation released, object gone', async () => {
    await apply(eipYaml('e2e-del', { natGwDp: 'gw1', qosPolicy: 'qos-demo' }));
    const eip = await ready('e2e-del');
    expect(eip.metadata.finalizers).toContain('kubeovn.io/kube-ovn-controller');
    const r = await kubectl(stack.api, 'delete', 'iptables-eip', 'e2e-del', '--timeout=20s');
    expect(r.code, r.stderr).toBe(0);
    expect(await getEip('e2e-del')).toBeUndefined();
    expect(net1()).not.toContain(`${eip.status!.ip}/24`);
    expect(tcOf(eip.status!.ip!)).toEqual([]);
    expect(await ipamHolds(eip.metadata.uid)).toEqual([]);
  });

  it('restores addresses and QoS on a re-created gateway pod (redo)', async () => {
    const demo = await ready('demo-eip');
    const oldPod = await core.readNamespacedPod({ name: POD, namespace: NS });
    expect((await kubectl(stack.api, 'delete', 'pod', '-n', NS, POD)).code).toBe(0);
    await eventuallyValue(
      async () => {
        const p = await core.readNamespacedPod({ name: POD, namespace: NS }).catch(() => undefined);
        return p && p.metadata?.uid !== oldPod.metadata?.uid && p.status?.phase === 'Running';
      },
      { ...polling, what: 'a new gateway pod' },
    );
    await eventuallyValue(async () => net1().includes(`${demo.status!.ip}/24`), {
      ...polling,
      what: 'the demo address back on the new pod',
    });
    await eventuallyValue(async () => tcOf(demo.status!.ip!).length === 2, {
      ...polling,
      what: 'its QoS back',
    });
    const after = await eventuallyValue(
      async () => {
        const e = await getEip('demo-eip');
        return e?.status?.ready && e.status.redo !== demo.status?.redo ? e : undefined;
      },
      { ...polling, what: 'status.redo moved' },
    );
    expect(after.status?.ip).toBe(demo.status?.ip);
  });

  it('restores addresses and QoS after a container restart (kill 1)', async () => {
    const demo = await ready('demo-eip');
    const before = sim().net1Addresses();
    expect(before).toContain(`${demo.status!.ip}/24`);
    await kubectl(stack.api, 'exec', '-n', NS, POD, '-c', 'vpc-nat-gw', '--', 'kill', '1');
    await eventuallyValue(
      async () => {
        const p = await core.readNamespacedPod({ name: POD, namespace: NS });
        return (p.status?.containerStatuses?.find((c) => c.name === 'vpc-nat-gw')?.restartCount ?? 0) > 0;
      },
      { ...polling, what: 'the container restarted' },
    );
    await eventuallyValue(async () => net1().includes(`${demo.status!.ip}/24`), {
      ...polling,
      what: 'the demo address back after the restart',
    });
    await eventuallyValue(async () => tcOf(demo.status!.ip!).length === 2, {
      ...polling,
      what: 'its QoS back',
    });
    expect(stack.deadLetters()).toEqual([]);
  });
});
