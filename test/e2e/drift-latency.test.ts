/**
 * Drift on a gateway and hand edits of an EIP, repaired by the local stack itself with its default schedule (a drift
 * pass every 30 s, ADR 0088), through kubectl and the gateway's own tools as an operator would make them, all at
 * once: an address removed from net1, a QoS filter removed, a filter added, a foreign address added, a label, the
 * status.ip and the status.qosPolicy edited, and an unshared policy's holder stripped of its label while a second
 * EIP asks for the policy. Each is timed from the edit until it is put right (none is seen by the event path:
 * nothing routes a status or label change, and a gateway's net1 is outside Kubernetes), and must be within 60 s —
 * the foreign address within its grace plus a pass. It prints drift latency per kind and hand-edit case × outcome
 * (docs/audit.md records the figures).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl } from '../../local/kube-api/testing.js';
import { memoryLogger } from '../../local/memory/logger.js';
import type { NatGatewaySim } from '../../local/natgw/sim.js';
import { type LocalStack, startLocalStack } from '../../local/stack.js';
import { DEFAULT_ORPHAN_GRACE_MS } from '../../shared/audit/audit.js';
import { DEFAULT_DRIFT_PERIOD_MS } from '../../shared/audit/schedule.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { unusedAddresses } from '../support/addresses.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';

const { skip } = kubectlOrSkip();
const NS = 'kube-system';
const POD = 'vpc-nat-gw-gw1-0';
const EIPS = { group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips' } as const;
/** The bound: one period to the next pass, the pass itself well inside the rest of the minute. */
const BOUND_S = 60;
let dir: string;
let stack: LocalStack;
let custom: CustomObjectsApi;

const sim = (): NatGatewaySim => {
  const s = stack.api.gateways.get(NS, POD);
  if (!s) throw new Error('no simulated gateway');
  return s;
};
const run = (...argv: string[]) => {
  const r = sim().exec(argv);
  if (r.exitCode !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr}`);
};
const onNet1 = (ip: string) =>
  sim()
    .net1Addresses()
    .some((c) => c.startsWith(`${ip}/`));
const filters = (ip: string) =>
  sim()
    .tcFilters()
    .filter((f) => f.ip === ip);
const get = async (name: string) =>
  (await custom.getClusterCustomObject({ ...EIPS, name }).catch(() => undefined)) as IptablesEip | undefined;
async function k(...args: string[]): Promise<void> {
  const r = await kubectl(stack.api, ...args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
}
async function eip(name: string, spec: Record<string, string> = {}): Promise<IptablesEip> {
  await custom.createClusterCustomObject({
    ...EIPS,
    body: {
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: { name },
      spec: { natGwDp: 'gw1', ...spec },
    },
  });
  return eventuallyValue(
    async () => {
      const e = await get(name);
      return e?.status?.ready ? e : undefined;
    },
    { timeoutMs: 90_000, stepMs: 200, what: `${name} Ready` },
  );
}

beforeAll(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'eip-latency-'));
  // The defaults under test: the drift period and the orphan grace are not set here.
  stack = await startLocalStack({
    kubeconfig: join(dir, 'kubeconfig'),
    log: memoryLogger('warn'),
    say: () => {},
  });
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  custom = kc.makeApiClient(CustomObjectsApi);
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(skip)('drift and hand edits repaired by the local stack on its default schedule', () => {
  it('every kind within 60 s of the edit; every hand edit corrected, none doubled', async () => {
    expect(DEFAULT_DRIFT_PERIOD_MS).toBe(30_000);
    const own = await (async () => {
      await custom.createClusterCustomObject({
        group: 'kubeovn.io',
        version: 'v1',
        plural: 'qos-policies',
        body: {
          apiVersion: 'kubeovn.io/v1',
          kind: 'QoSPolicy',
          metadata: { name: 'lat-own' },
          spec: {
            shared: false,
            bindingType: 'EIP',
            bandwidthLimitRules: [
              { name: 'in', direction: 'ingress', priority: 1, rateMax: '5', burstMax: '5' },
            ],
          },
        },
      });
      return 'lat-own';
    })();
    const [addr, unpoliced, policed, , status, qosStatus, holder] = await Promise.all([
      eip('lat-addr'),
      eip('lat-unpoliced', { qosPolicy: 'qos-demo' }),
      eip('lat-policed'),
      eip('lat-label'),
      eip('lat-status'),
      eip('lat-qos-status', { qosPolicy: 'qos-demo' }),
      eip('lat-holder', { qosPolicy: own }),
    ]);
    const ip = (e: IptablesEip) => e.status!.ip!;
    const [foreign] = unusedAddresses(sim().net1Addresses(), { from: 180 }) as [string];
    const [wrongIp] = unusedAddresses([...sim().net1Addresses(), foreign], { from: 120 }) as [string];

    // All edits at once.
    const t0 = Date.now();
    run('ip', 'addr', 'del', `${ip(addr)}/24`, 'dev', 'net1');
    run('bash', '/kube-ovn/nat-gateway.sh', 'eip-ingress-qos-del', ip(unpoliced));
    run('bash', '/kube-ovn/nat-gateway.sh', 'eip-egress-qos-add', `${ip(policed)},1,5,5`);
    run('ip', 'addr', 'add', `${foreign}/24`, 'dev', 'net1');
    await k(
      'label',
      'iptables-eip',
      'lat-label',
      '--overwrite',
      'ovn.kubernetes.io/vpc-nat-gw-name=elsewhere',
    );
    const patch = (name: string, status: Record<string, string>) =>
      k(
        'patch',
        'iptables-eip',
        name,
        '--subresource=status',
        '--type=merge',
        '-p',
        JSON.stringify({ status }),
      );
    await patch('lat-status', { ip: wrongIp });
    await patch('lat-qos-status', { qosPolicy: '' });
    await k('label', 'iptables-eip', 'lat-holder', 'ovn.kubernetes.io/qos-');
    await custom.createClusterCustomObject({
      ...EIPS,
      body: {
        apiVersion: 'kubeovn.io/v1',
        kind: 'IptablesEIP',
        metadata: { name: 'lat-second' },
        spec: { natGwDp: 'gw1', qosPolicy: own },
      },
    });

    const timed = async (what: string, done: () => Promise<boolean> | boolean) => {
      await eventuallyValue(async () => (await done()) || undefined, {
        timeoutMs: 150_000,
        stepMs: 250,
        what,
      });
      return (Date.now() - t0) / 1000;
    };
    const [addrS, unpolicedS, policedS, foreignS, labelS, statusS, qosStatusS, holderS] = await Promise.all([
      timed('address back on net1', () => onNet1(ip(addr))),
      timed('ingress filter back', () => filters(ip(unpoliced)).some((f) => f.direction === 'ingress')),
      timed('filter added by hand gone', () => filters(ip(policed)).length === 0),
      timed('foreign address removed', () => !onNet1(foreign)),
      timed(
        'label put back',
        async () =>
          (await get('lat-label'))?.metadata.labels?.['ovn.kubernetes.io/vpc-nat-gw-name'] === 'gw1',
      ),
      timed('status.ip put back', async () => (await get('lat-status'))?.status?.ip === ip(status)),
      timed(
        'status.qosPolicy put back',
        async () => (await get('lat-qos-status'))?.status?.qosPolicy === 'qos-demo',
      ),
      timed(
        'holder label put back',
        async () => (await get('lat-holder'))?.metadata.labels?.['ovn.kubernetes.io/qos'] === own,
      ),
    ]);

    // Hand edits: corrected, none doubled.
    const second = (await get('lat-second'))!;
    const events = await kubectl(stack.api, 'get', 'events', '-A', '-o', 'json');
    const restored = (
      JSON.parse(events.stdout) as { items: { reason: string; involvedObject: { name: string } }[] }
    ).items
      .filter((e) => e.reason === 'OutputRestored')
      .map((e) => e.involvedObject.name);
    const cases = [
      {
        case: 'status.ip patched to a free address',
        corrected: (await get('lat-status'))?.status?.ip === ip(status),
        doubled: onNet1(wrongIp) || filters(wrongIp).length > 0,
        event: restored.includes('lat-status'),
      },
      {
        case: 'status.qosPolicy patched to ""',
        corrected: (await get('lat-qos-status'))?.status?.qosPolicy === 'qos-demo',
        doubled: filters(ip(qosStatus)).length > 2,
        event: restored.includes('lat-qos-status'),
      },
      {
        case: 'gateway label edited',
        corrected: (await get('lat-label'))?.metadata.labels?.['ovn.kubernetes.io/vpc-nat-gw-name'] === 'gw1',
        doubled: false,
        event: restored.includes('lat-label'),
      },
      {
        case: "unshared policy holder's qos label removed, a second EIP binds it",
        corrected:
          (await get('lat-holder'))?.metadata.labels?.['ovn.kubernetes.io/qos'] === own &&
          !second.status?.ready,
        doubled:
          filters(ip(holder)).length !== 1 ||
          (second.status?.ip ? filters(second.status.ip).length > 0 : false),
        event: restored.includes('lat-holder'),
      },
    ];
    const kinds = [
      { kind: 'address removed from net1', seconds: addrS, bound: BOUND_S },
      { kind: 'QoS filter removed', seconds: unpolicedS, bound: BOUND_S },
      { kind: 'QoS filter added by hand', seconds: policedS, bound: BOUND_S },
      {
        kind: `foreign address on net1 (grace ${DEFAULT_ORPHAN_GRACE_MS / 1000} s: two passes)`,
        seconds: foreignS,
        bound: BOUND_S + 10,
      },
      { kind: 'label edited', seconds: labelS, bound: BOUND_S },
      { kind: 'status.ip edited', seconds: statusS, bound: BOUND_S },
      { kind: 'status.qosPolicy edited', seconds: qosStatusS, bound: BOUND_S },
      { kind: 'unshared holder label removed', seconds: holderS, bound: BOUND_S },
    ].map((r) => ({ ...r, seconds: Number(r.seconds.toFixed(1)) }));
    console.log('[drift-latency] drift latency per kind (a pass every 30 s)');
    console.table(kinds);
    console.log('[drift-latency] hand-edit cases × outcome');
    console.table(cases);
    for (const r of kinds) expect(r.seconds, r.kind).toBeLessThanOrEqual(r.bound);
    for (const c of cases) expect(c, c.case).toMatchObject({ corrected: true, doubled: false, event: true });
    expect(second.status?.conditions?.find((c) => c.reason === 'QoSPolicyInUse')).toBeDefined();
  }, 300_000);
});
