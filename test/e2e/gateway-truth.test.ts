/**
 * Gateway truth, end to end on the local stack, with kubectl as the user: a Ready EIP's address is on its gateway,
 * clean-up happens where the address really is, bad values are refused before anything is held, and blocked EIPs
 * recover by themselves. One numbered case per behaviour, cited by number from ADRs 0015–0017
 * (docs/kube-ovn-differences.md lists what stays different from kube-ovn).
 */
import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localDynamoClient } from '../../local/dynamo.js';
import { kubectl, kubectlWith } from '../../local/kube-api/testing.js';
import type { LocalStack } from '../../local/stack.js';
import { createDynamoIpam } from '../../shared/adapters/dynamo/index.js';
import type { Condition, IptablesEip } from '../../shared/domain/kube-ovn.js';
import type { Ipam } from '../../shared/ports.js';
import { unusedAddresses } from '../support/addresses.js';
import { eventuallyValue, type Polling } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { startTestStack, type TestStack } from '../support/stack.js';

const { skip } = kubectlOrSkip();
const NS = 'kube-system';
const ALLOCATION_LABELS = [
  'ovn.kubernetes.io/subnet',
  'ovn.kubernetes.io/vpc-nat-gw-name',
  'ovn.kubernetes.io/eip_v4_ip',
  'ovn.kubernetes.io/qos',
];

let t: TestStack | undefined;
let stack: LocalStack;
let custom: CustomObjectsApi;
let core: CoreV1Api;

const yamlOf = (kind: string, name: string, spec: Record<string, unknown>) =>
  JSON.stringify({ apiVersion: 'kubeovn.io/v1', kind, metadata: { name }, spec });

async function apply(doc: string): Promise<void> {
  const r = await kubectlWith(stack.api, { stdin: doc }, 'apply', '-f', '-');
  expect(r.code, r.stderr).toBe(0);
}
const applyEip = (name: string, spec: Record<string, string>) => apply(yamlOf('IptablesEIP', name, spec));
const applyQos = (name: string, rules: Record<string, unknown>[], shared = false) =>
  apply(yamlOf('QoSPolicy', name, { shared, bindingType: 'EIP', bandwidthLimitRules: rules }));

async function kc(...args: string[]): Promise<string> {
  const r = await kubectl(stack.api, ...args);
  expect(r.code, `kubectl ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

async function getEip(name: string): Promise<IptablesEip | undefined> {
  try {
    return (await custom.getClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-eips',
      name,
    })) as IptablesEip;
  } catch {
    return undefined;
  }
}

/** How these tests poll the stack: each try reads through the API. */
const polling: Polling = { timeoutMs: 15_000, stepMs: 150 };

const conditionOf = (e: IptablesEip | undefined, type: string): Condition | undefined =>
  e?.status?.conditions?.find((c) => c.type === type);

async function ready(name: string, timeoutMs = polling.timeoutMs): Promise<IptablesEip> {
  return eventuallyValue(
    async () => {
      const e = await getEip(name);
      return e?.status?.ready && e.status.ip && conditionOf(e, 'Ready')?.status === 'True' ? e : undefined;
    },
    { ...polling, what: `${name} Ready`, timeoutMs },
  );
}

async function condition(name: string, type: string, status: string, reason?: string): Promise<Condition> {
  return eventuallyValue(
    async () => {
      const c = conditionOf(await getEip(name), type);
      return c?.status === status && (!reason || c.reason === reason) ? c : undefined;
    },
    { ...polling, what: `${name} ${type}=${status}${reason ? ` (${reason})` : ''}` },
  );
}

const gwPod = (gw: string) => `vpc-nat-gw-${gw}-0`;
const net1 = (gw: string): string[] => stack.api.gateways.get(NS, gwPod(gw))?.net1Addresses() ?? [];
const tcOf = (gw: string, ip: string) =>
  (stack.api.gateways.get(NS, gwPod(gw))?.tcFilters() ?? [])
    .filter((f) => f.ip === ip)
    .map((f) => f.direction);

/** The gateway's net1 as `ip -o addr show dev net1` run with kubectl exec prints it. */
async function net1ByExec(gw: string): Promise<string> {
  return kc('exec', '-n', NS, gwPod(gw), '-c', 'vpc-nat-gw', '--', 'ip', '-o', 'addr', 'show', 'dev', 'net1');
}

async function withIpam<T>(fn: (ipam: Ipam) => Promise<T>): Promise<T> {
  const client = localDynamoClient(stack.dynamodbEndpoint);
  try {
    return await fn(createDynamoIpam({ client, tableName: stack.tableName }));
  } finally {
    client.destroy();
  }
}

const ipamHolds = (uid: string): Promise<string[]> =>
  withIpam(async (ipam) => (await ipam.findByOwner(uid)).map((a) => a.address));

async function restartGatewayPod(gw: string): Promise<void> {
  const old = await core.readNamespacedPod({ name: gwPod(gw), namespace: NS });
  await kc('delete', 'pod', '-n', NS, gwPod(gw));
  await eventuallyValue(
    async () => {
      const p = await core.readNamespacedPod({ name: gwPod(gw), namespace: NS }).catch(() => undefined);
      return p && p.metadata?.uid !== old.metadata?.uid && p.status?.phase === 'Running';
    },
    { ...polling, what: `a new pod for ${gw}` },
  );
}

const noAllocationLabels = (e: IptablesEip | undefined) =>
  Object.keys(e?.metadata.labels ?? {}).filter((k) => ALLOCATION_LABELS.includes(k));

describe.skipIf(skip)('gateway truth on the local stack', () => {
  beforeAll(async () => {
    t = await startTestStack('eip-truth-', { retries: 20, retryBackoffMs: 100 });
    ({ stack, custom, core } = t);
    await apply(
      yamlOf('VpcNatGateway', 'gw2', {
        vpc: 'vpc1',
        subnet: 'vpc1-subnet1',
        lanIp: '10.0.1.253',
        externalSubnets: ['ovn-vpc-external-network'],
      }),
    );
    await ready('demo-eip');
    await eventuallyValue(async () => stack.api.gateways.get(NS, gwPod('gw2')), {
      ...polling,
      what: 'the gw2 gateway pod',
    });
  }, 60_000);

  afterAll(async () => {
    await t?.stop();
  });

  it('case 1: a refused natGwDp change (label removed by hand) is cleaned up on the gateway the address is on', async () => {
    await applyEip('t1-move', { natGwDp: 'gw1' });
    const eip = await ready('t1-move');
    const ip = eip.status!.ip!;
    await kc('label', 'iptables-eip', 't1-move', 'ovn.kubernetes.io/vpc-nat-gw-name-');
    await kc('patch', 'iptables-eip', 't1-move', '--type=merge', '-p', '{"spec":{"natGwDp":"gw2"}}');
    const refused = await condition('t1-move', 'Validated', 'False', 'UnsupportedChange');
    expect(refused.message).toBe("not support eip change natGwDp, old 'gw1', new 'gw2'");
    expect(net1('gw2')).not.toContain(`${ip}/24`);
    await eventuallyValue(
      async () => {
        const e = await getEip('t1-move');
        return e?.metadata.labels?.['ovn.kubernetes.io/vpc-nat-gw-name'] === 'gw1';
      },
      { ...polling, what: 'the vpc-nat-gw-name label back on gw1' },
    );

    await kc('delete', 'iptables-eip', 't1-move', '--timeout=20s');
    expect(await net1ByExec('gw1')).not.toContain(`inet ${ip}/`);
    expect(net1('gw2')).not.toContain(`${ip}/24`);
    expect(await ipamHolds(eip.metadata.uid)).toEqual([]);

    // A natGwDp of "." on a configured EIP neither crashes the handlers nor keeps the EIP Terminating.
    await applyEip('t1-dot', { natGwDp: 'gw1' });
    const dot = await ready('t1-dot');
    await kc('patch', 'iptables-eip', 't1-dot', '--type=merge', '-p', '{"spec":{"natGwDp":"."}}');
    await condition('t1-dot', 'Validated', 'False', 'InvalidSpec');
    await kc('delete', 'iptables-eip', 't1-dot', '--timeout=20s');
    expect(net1('gw1')).not.toContain(`${dot.status!.ip}/24`);
    expect(stack.deadLetters().filter((d) => d.event.object.name.startsWith('t1-'))).toEqual([]);
  });

  it("case 2: deleting an EIP whose status.ip is another EIP's address leaves that address alone", async () => {
    await applyEip('t2-owner', { natGwDp: 'gw1' });
    const owner = await ready('t2-owner');
    const ip = owner.status!.ip!;
    await applyEip('t2-copy', { natGwDp: 'gw1', v4ip: ip });
    await condition('t2-copy', 'Validated', 'False', 'AddressConflict');
    await kc(
      'patch',
      'iptables-eip',
      't2-copy',
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status: { ip } }),
    );
    await eventuallyValue(async () => (await getEip('t2-copy'))?.status?.ip === ip, {
      ...polling,
      what: 'status.ip written by hand',
    });
    await kc('delete', 'iptables-eip', 't2-copy', '--timeout=20s');
    expect(await net1ByExec('gw1')).toContain(`inet ${ip}/24`);
    expect((await getEip('t2-owner'))?.status?.ready).toBe(true);
    expect(await ipamHolds(owner.metadata.uid)).toEqual([ip]);
  });

  it('case 3: the address comes back after a gateway restart despite a missing QoS policy and a refused change', async () => {
    await applyQos(
      't3-qos',
      [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '5', burstMax: '5' }],
      true,
    );
    await applyEip('t3-eip', { natGwDp: 'gw1', qosPolicy: 't3-qos' });
    const eip = await ready('t3-eip');
    const ip = eip.status!.ip!;
    await condition('t3-eip', 'QoSApplied', 'True');
    await kc('patch', 'iptables-eip', 't3-eip', '--type=merge', '-p', '{"spec":{"natGwDp":"gw2"}}');
    await condition('t3-eip', 'Validated', 'False', 'UnsupportedChange');
    await kc('delete', 'qos-policy', 't3-qos', '--timeout=20s');

    await restartGatewayPod('gw1');
    await eventuallyValue(async () => net1('gw1').includes(`${ip}/24`), {
      ...polling,
      what: 'the address back on the new gw1 pod',
    });
    const qos = await condition('t3-eip', 'QoSApplied', 'False', 'DependencyMissing');
    expect(qos.message).toMatch(/qos policy t3-qos not found/);
    const after = await getEip('t3-eip');
    expect(after?.status?.ready).toBe(true);
    expect(conditionOf(after, 'Ready')?.status).toBe('True');
    expect(net1('gw2')).not.toContain(`${ip}/24`);
    expect(await net1ByExec('gw1')).toContain(`inet ${ip}/24`);
  });

  it('case 4: QoS values and a MAC the gateway would refuse are refused with a condition, and nothing stays held', async () => {
    for (const [name, rate, burst] of [
      ['t4-zero', '0', '1'],
      ['t4-huge', '999999999.999999', '999999999.999999'],
    ] as const) {
      await applyQos(name, [
        { name: 'in', direction: 'ingress', priority: 1, rateMax: rate, burstMax: burst },
      ]);
      await applyEip(`${name}-eip`, { natGwDp: 'gw1', qosPolicy: name });
      const c = await condition(`${name}-eip`, 'Validated', 'False', 'QoSPolicyInvalid');
      expect(c.message).toMatch(/rateMax must be between|burstMax must be between/);
      const e = await getEip(`${name}-eip`);
      expect(e?.status?.ip ?? '').toBe('');
      expect(await ipamHolds(e!.metadata.uid)).toEqual([]);
    }
    await applyEip('t4-mac', { natGwDp: 'gw1', macAddress: `00:00:00:00:00:01;$(reboot)${'x'.repeat(280)}` });
    const mac = await condition('t4-mac', 'Validated', 'False', 'InvalidSpec');
    expect(mac.message).toMatch(/macAddress .* must be six hexadecimal octets/);
    expect(await ipamHolds((await getEip('t4-mac'))!.metadata.uid)).toEqual([]);
    expect(stack.deadLetters().filter((d) => d.event.object.name.startsWith('t4-'))).toEqual([]);
  });

  it('case 5: "." and ".." names are refused with a condition, also on a Ready EIP, and nothing is dead-lettered', async () => {
    await applyEip('t5-gw', { natGwDp: '..' });
    await applyEip('t5-subnet', { natGwDp: 'gw1', externalSubnet: '..' });
    await applyEip('t5-qos', { natGwDp: 'gw1', qosPolicy: '.' });
    for (const name of ['t5-gw', 't5-subnet', 't5-qos']) {
      const c = await condition(name, 'Validated', 'False', 'InvalidSpec');
      expect(c.message).toMatch(/is invalid: must consist of lower case alphanumeric/);
    }
    await applyEip('t5-ready', { natGwDp: 'gw1' });
    const ip = (await ready('t5-ready')).status!.ip!;
    await kc('patch', 'iptables-eip', 't5-ready', '--type=merge', '-p', '{"spec":{"qosPolicy":".."}}');
    await condition('t5-ready', 'Validated', 'False', 'InvalidSpec');
    expect((await getEip('t5-ready'))?.status?.ready).toBe(true);
    expect(net1('gw1')).toContain(`${ip}/24`);
    expect(stack.deadLetters().filter((d) => d.event.object.name.startsWith('t5-'))).toEqual([]);
  });

  it('case 6: an EIP rejected for an address conflict becomes Ready by itself once the address is freed', async () => {
    // Two addresses no EIP has (every allocated address of this stack is on net1; test/support/addresses.ts).
    const [held, outside] = unusedAddresses(net1('gw1'), { count: 2 }) as [string, string];
    await applyEip('t6-holder', { natGwDp: 'gw1', v4ip: held });
    await ready('t6-holder');
    await applyEip('t6-waiter', { natGwDp: 'gw1', v4ip: held });
    await condition('t6-waiter', 'Validated', 'False', 'AddressConflict');
    await kc('delete', 'iptables-eip', 't6-holder', '--timeout=20s');
    const e = await ready('t6-waiter', 30_000);
    expect(e.status?.ip).toBe(held);
    expect(conditionOf(e, 'Validated')).toBeUndefined();
    expect(net1('gw1')).toContain(`${held}/24`);

    // A blocker that clears with no Kubernetes change at all (an allocation freed in the table): only the capped
    // backoff brings the EIP back.
    const pool = {
      subnet: 'ovn-vpc-external-network',
      family: 4 as const,
      cidr: '172.18.0.0/24',
      exclude: [],
    };
    await withIpam((ipam) => ipam.claimAddress(pool, outside, { uid: 'outside', name: 'outside' }));
    await applyEip('t6-table', { natGwDp: 'gw1', v4ip: outside });
    await condition('t6-table', 'Validated', 'False', 'AddressConflict');
    await new Promise((r) => setTimeout(r, 3_000)); // blocked for a while: its backoff has grown
    expect(await withIpam((ipam) => ipam.release('ovn-vpc-external-network', outside, 'outside'))).toBe(true);
    expect((await ready('t6-table', 30_000)).status?.ip).toBe(outside);
  }, 60_000);

  it('case 7: a rejected EIP carries no allocation labels; they appear, with kube-ovn values, once it is configured', async () => {
    await applyQos('t7-solo', [
      { name: 'in', direction: 'ingress', priority: 1, rateMax: '3', burstMax: '3' },
    ]);
    await applyEip('t7-first', { natGwDp: 'gw1', qosPolicy: 't7-solo' });
    await ready('t7-first');
    await applyEip('t7-second', { natGwDp: 'gw1', qosPolicy: 't7-solo' });
    await condition('t7-second', 'Validated', 'False', 'QoSPolicyInUse');
    expect(noAllocationLabels(await getEip('t7-second'))).toEqual([]);
    expect(await kc('get', 'iptables-eips', '-l', 'ovn.kubernetes.io/qos=t7-solo', '-o', 'name')).toBe(
      'iptableseip.kubeovn.io/t7-first\n',
    );

    await kc('delete', 'iptables-eip', 't7-first', '--timeout=20s');
    const second = await ready('t7-second', 30_000);
    expect(second.metadata.labels).toMatchObject({
      'ovn.kubernetes.io/subnet': 'ovn-vpc-external-network',
      'ovn.kubernetes.io/vpc-nat-gw-name': 'gw1',
      'ovn.kubernetes.io/eip_v4_ip': second.status!.ip,
      'ovn.kubernetes.io/qos': 't7-solo',
    });
    expect(tcOf('gw1', second.status!.ip!)).toEqual(['ingress']);
  });

  it('case 8: switching the feature off makes EIPs not Ready with a clear condition; switching it on brings them back', async () => {
    await applyEip('t8-before', { natGwDp: 'gw1' });
    await ready('t8-before');
    const patch = (value: string) =>
      kc(
        'patch',
        'configmap',
        '-n',
        NS,
        'ovn-vpc-nat-gw-config',
        '--type=merge',
        '-p',
        JSON.stringify({ data: { 'enable-vpc-nat-gw': value } }),
      );
    await patch('false');
    const off = await condition('t8-before', 'Ready', 'False', 'NatGwDisabled');
    expect(off.message).toMatch(/enable-vpc-nat-gw/);
    await applyEip('t8-during', { natGwDp: 'gw1' });
    await condition('t8-during', 'Ready', 'False', 'NatGwDisabled');
    expect(noAllocationLabels(await getEip('t8-during'))).toEqual([]);

    await patch('true');
    const before = await ready('t8-before', 40_000);
    const during = await ready('t8-during', 40_000);
    await eventuallyValue(
      async () => [before, during].every((e) => net1('gw1').includes(`${e.status!.ip}/24`)),
      { ...polling, what: 'both addresses on gw1' },
    );
  }, 90_000);
});
