/**
 * Replicated gateways end to end (docs/adr/0105-ha-gateways.md, docs/adr/0115-ha-gateways-phase-2.md): the local stack
 * playing kube-ovn master (`npm start -- --kube-ovn-version=master`), a VpcNatGateway with `spec.replicas`, and every
 * step a user takes through kubectl — EIPs created (random, static, with QoS), a QoS change, one pod restarted
 * (`kubectl exec … kill 1`), one pod deleted (the ReplicaSet makes a new one), one pod failing then healing (the lab's
 * exec fault on that pod), scaling up by one, back, and to 1 (master leaves the Deployment's pods when it goes back to
 * a StatefulSet: ADR 0106), and deletion with a pod gone. After each step every pod's net1 addresses and tc limits are
 * read from its simulated gateway with the inspection commands a person would type into `kubectl exec` (the simulator
 * is checked against kube-ovn's scripts by its own tests, local/natgw/README.md), and must be exact: the pod's own
 * address and every EIP's, each EIP's limits. The flow runs with 2 replicas in kube-ovn's namespace, and with 3 for a
 * gateway in a namespace of its own under a custom name prefix (natGwNamePrefix in ovn-vpc-nat-config), with the RBAC
 * overlays an operator applies for that (infra/rbac/gateway-namespace, infra/rbac/name-prefix).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { kubectl, kubectlWith } from '../../local/kube-api/testing.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { jsonLogger } from '../../shared/observability/log.js';
import { unusedAddresses } from '../support/addresses.js';
import { auditCli } from '../support/audit-cli.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { kustomizeOverlay } from '../support/kustomize.js';
import { startTestStack, type TestStack } from '../support/stack.js';

const { skip } = kubectlOrSkip();
const root = join(import.meta.dirname, '../..');
const polling = { timeoutMs: 30_000, stepMs: 100 };

interface Flow {
  title: string;
  gateway: string;
  namespace: string;
  prefix: string;
  /** The StatefulSet's pod needs it (scaling back to 1); the Deployment's replicas get theirs from kube-ovn's IPAM. */
  lanIp: string;
  /** The gateway's spec.replicas at the start (the acceptance asks for the flow with 2 and with 3). */
  replicas: number;
}

const FLOWS: Flow[] = [
  {
    title: "in kube-ovn's namespace",
    gateway: 'gw-ha',
    namespace: 'kube-system',
    prefix: 'vpc-nat-gw',
    lanIp: '10.0.1.250',
    replicas: 2,
  },
  {
    title: 'in a namespace of its own, under a custom prefix',
    gateway: 'gw-ns',
    namespace: 'team-b',
    prefix: 'ha-gw',
    lanIp: '10.0.1.249',
    replicas: 3,
  },
];

interface PodView {
  name: string;
  uid: string;
  own: string;
}

for (const flow of FLOWS) {
  describe.skipIf(skip)(`a replicated gateway ${flow.title}, end to end (kube-ovn master)`, () => {
    let t: TestStack;
    const { gateway, namespace: NS, prefix, replicas: R } = flow;
    const app = `${prefix}-${gateway}`;
    const eips = new Map<string, string>(); // name → address
    const qosOf = new Map<string, string[]>(); // name → expected limits

    const apply = async (yaml: string) => {
      const r = await kubectlWith(t.stack.api, { stdin: yaml }, 'apply', '-f', '-');
      expect(r.code, r.stderr).toBe(0);
    };
    const getEip = async (name: string) =>
      (await t.custom
        .getClusterCustomObject({ group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips', name })
        .catch(() => undefined)) as IptablesEip | undefined;
    const condition = (e: IptablesEip | undefined, type: string) =>
      e?.status?.conditions?.find((c) => c.type === type);
    /** The gateway's initialised pods as `kubectl get pods -n … -l …` shows them, with their own net1 address. */
    const pods = async (): Promise<PodView[]> => {
      const r = await kubectl(
        t.stack.api,
        ...['get', 'pods', '-n', NS, '-l', `app=${app},ovn.kubernetes.io/vpc-nat-gw=true`, '-o', 'json'],
      );
      expect(r.code, r.stderr).toBe(0);
      const items = (JSON.parse(r.stdout) as { items: PodJson[] }).items;
      return items
        .filter((p) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp)
        .filter((p) => p.metadata.annotations?.['ovn.kubernetes.io/vpc_nat_gw_init'] === 'true')
        .map((p) => ({
          name: p.metadata.name,
          uid: p.metadata.uid,
          own:
            Object.entries(p.metadata.annotations ?? {}).find(([k]) =>
              /^ovn-vpc-external-network\.[^.]+\.kubernetes\.io\/ip_address$/.test(k),
            )?.[1] ?? '(no own address)',
        }))
        .sort((a, b) => (a.name < b.name ? -1 : 1));
    };
    const settled = (n: number, what = `${n} pods of ${gateway}`) =>
      eventuallyValue(
        async () => {
          const p = await pods();
          return p.length === n ? p : undefined;
        },
        { ...polling, what },
      );
    /** A pod's simulated gateway, and what its inspection commands show. */
    const sim = (pod: string) => {
      const s = t.stack.api.gateways.get(NS, pod);
      if (!s) throw new Error(`no simulated gateway behind ${NS}/${pod}`);
      return s;
    };
    const shown = (pod: string, argv: string[]) => sim(pod).exec(argv).stdout;
    const net1 = (pod: string) =>
      [...shown(pod, ['ip', '-o', 'addr', 'show', 'dev', 'net1']).matchAll(/inet (\S+)/g)]
        .map((m) => m[1]!)
        .sort();
    /** `<direction> <address> <rate>` of every EIP limit in the pod (master's HTB: a u32 filter and its class). */
    const limits = (pod: string) => {
      const out: string[] = [];
      for (const [direction, dev] of [
        ['ingress', 'ifb-net1'],
        ['egress', 'net1'],
      ] as const) {
        const filters = shown(pod, ['tc', '-p', 'filter', 'show', 'dev', dev, 'parent', '1:']);
        const classes = shown(pod, ['tc', 'class', 'show', 'dev', dev]);
        for (const block of filters.split(/\n(?=filter )/)) {
          const ip = /match IP (?:dst|src) (\S+)\/32/.exec(block)?.[1];
          const flowid = /flowid (\S+)/.exec(block)?.[1];
          if (!ip || !flowid) continue;
          const rate = new RegExp(`class htb ${flowid} .*rate (\\S+)`).exec(classes)?.[1] ?? 'no class';
          out.push(`${direction} ${ip} ${rate}`);
        }
      }
      return out.sort();
    };
    /** Every pod carries exactly its own address and every EIP's, and exactly their limits; every EIP says so. */
    const exact = async (expected: PodView[]) => {
      const want = (p: PodView) => [`${p.own}/24`, ...[...eips.values()].map((ip) => `${ip}/24`)].sort();
      const wantLimits = [...qosOf.entries()].flatMap(([name, l]) =>
        l.map((x) => x.replace('@', eips.get(name)!)),
      );
      const says = `on ${expected.length} of ${expected.length} pods: ${expected.map((p) => p.name).join(', ')}`;
      const everyEipSays = async () => {
        for (const name of eips.keys()) {
          const e = await getEip(name);
          const c = condition(e, 'GatewayPods');
          if (!e?.status?.ready || c?.status !== 'True' || c.message !== says) return false;
        }
        return true;
      };
      const sameNet1 = (p: PodView) => JSON.stringify(net1(p.name)) === JSON.stringify(want(p));
      await eventuallyValue(async () => (expected.every(sameNet1) && (await everyEipSays())) || undefined, {
        ...polling,
        what: `every EIP on ${expected.map((p) => p.name).join(', ')}`,
      }).catch(async (e) => {
        const seen = await Promise.all(
          [...eips.keys()].map(async (n) => [n, (await getEip(n))?.status] as const),
        );
        console.log(
          'not converged:',
          JSON.stringify({
            want: expected.map((p) => [p.name, want(p)]),
            net1: expected.map((p) => net1(p.name)),
            seen,
          }),
        );
        throw e;
      });
      for (const p of expected) {
        expect(net1(p.name), p.name).toEqual(want(p));
        expect(limits(p.name), p.name).toEqual(wantLimits.sort());
      }
    };
    const scriptCalls = (pod: string, from: number) =>
      sim(pod)
        .history()
        .slice(from)
        .filter((h) => h.argv[1] === '/kube-ovn/nat-gateway.sh');
    const eipYaml = (name: string, spec: Record<string, string>) =>
      `apiVersion: kubeovn.io/v1\nkind: IptablesEIP\nmetadata: { name: ${name} }\nspec: ${JSON.stringify(spec)}\n`;
    const readyIp = (name: string) =>
      eventuallyValue(
        async () => {
          const e = await getEip(name);
          return e?.status?.ready && e.status.ip ? e.status.ip : undefined;
        },
        { ...polling, what: `${name} Ready` },
      ).catch(async (e) => {
        // What it shows instead, and what each pod's net1 carries, for whoever reads the failure.
        const now = await getEip(name);
        const onPods = await pods().then((ps) => ps.map((p) => [p.name, net1(p.name)]));
        console.log('not Ready:', JSON.stringify({ name, spec: now?.spec, status: now?.status, onPods }));
        throw e;
      });

    /** The namespace, and the handlers' and the bridge's grants in it, as the operator's overlays render them. */
    const grantNamespace = async () => {
      await apply(`apiVersion: v1\nkind: Namespace\nmetadata: { name: ${NS} }\n`);
      // The handlers' and the bridge's grants in that namespace, as the operator's overlays render them.
      for (const dir of ['infra/rbac/gateway-namespace', 'infra/bridge/gateway-namespace']) {
        const file = join(root, dir, 'gateway-pods.yaml');
        for (const d of parseAllDocuments(readFileSync(file, 'utf8')).map((x) => x.toJS()))
          await apply(JSON.stringify({ ...d, metadata: { ...d.metadata, namespace: NS } }));
      }
    };
    /** kube-ovn's natGwNamePrefix, and the exec policy admitting that prefix (infra/rbac/name-prefix). */
    const usePrefix = async () => {
      const policy = kustomizeOverlay('rbac', (rel) => [
        `resources: [${rel}]`,
        `components: [${rel}/name-prefix]`,
        'configMapGenerator:',
        '  - name: eip-lambdas-handlers-params',
        `    literals: [natGwNamePrefix=${prefix}]`,
        '    options:',
        '      disableNameSuffixHash: true',
        '      annotations: { config.kubernetes.io/local-config: "true" }',
      ]).find((d) => d.kind === 'ValidatingAdmissionPolicy');
      // Replaced whole, as an operator's overlay would be applied over the base (one object either way).
      const replaced = await kubectlWith(
        t.stack.api,
        { stdin: JSON.stringify(policy) },
        'replace',
        '-f',
        '-',
      );
      expect(replaced.code, replaced.stderr).toBe(0);
      const r = await kubectl(
        t.stack.api,
        ...['patch', 'configmap', 'ovn-vpc-nat-config', '-n', 'kube-system', '--type=merge'],
        '-p',
        JSON.stringify({ data: { natGwNamePrefix: prefix } }),
      );
      expect(r.code, r.stderr).toBe(0);
    };

    let current: PodView[] = [];

    beforeAll(async () => {
      // A resync every 3 s: a scaled-down replica's entry goes at the next write, which a resync makes.
      t = await startTestStack(`stack-ha-${gateway}-`, {
        kubeOvnRelease: 'master',
        retries: 20,
        retryBackoffMs: 100,
        resyncMs: 3_000,
        driftRepairMs: 0,
        ...(process.env.HA_DEBUG && {
          log: jsonLogger({ level: 'warn', write: (l) => process.stderr.write(`LOG ${l}\n`) }),
        }),
      });
      if (NS !== 'kube-system') await grantNamespace();
      if (prefix !== 'vpc-nat-gw') await usePrefix();
      await apply(
        'apiVersion: kubeovn.io/v1\nkind: QoSPolicy\nmetadata: { name: ha-slow }\nspec:\n  bindingType: EIP\n  bandwidthLimitRules:\n  - { name: in, direction: ingress, priority: 1, rateMax: "3", burstMax: "3" }\n',
      );
      await apply(
        `apiVersion: kubeovn.io/v1\nkind: VpcNatGateway\nmetadata: { name: ${gateway} }\nspec: { vpc: vpc1, subnet: vpc1-subnet1, lanIp: ${flow.lanIp}, replicas: ${R}${NS !== 'kube-system' ? `, namespace: ${NS}` : ''} }\n`,
      );
      current = await settled(R);
      if (NS !== 'kube-system')
        // The bridge watches the gateway pods where the VpcNatGateway puts them.
        await eventuallyValue(
          async () =>
            t.stack.bridge.stats().watches.find((x) => x.kind === `Pod/${NS}`)?.watching || undefined,
          { ...polling, what: `the bridge watching the gateway pods in ${NS}` },
        );
    }, 90_000);

    afterAll(async () => {
      await t?.stop();
    });

    it('random, static and QoS EIPs on every pod; a QoS change on every pod', async () => {
      for (const p of current)
        expect(p.name).toMatch(new RegExp(`^${app}-[4-9bcdf]+-[bcdfghjklmnpqrstvwxz2456789]{5}$`));
      // The static one first, at an address no EIP or pod has, then the others (test/support/addresses.ts).
      const all = (await t.custom.listClusterCustomObject({
        group: 'kubeovn.io',
        version: 'v1',
        plural: 'iptables-eips',
      })) as { items: IptablesEip[] };
      const [fixed] = unusedAddresses([
        ...all.items.flatMap((e) => (e.status?.ip ? [e.status.ip] : [])),
        ...current.map((p) => p.own),
      ]) as [string];
      await apply(eipYaml(`${gateway}-static`, { natGwDp: gateway, v4ip: fixed }));
      eips.set(`${gateway}-static`, await readyIp(`${gateway}-static`));
      expect(eips.get(`${gateway}-static`)).toBe(fixed);
      await apply(eipYaml(`${gateway}-random`, { natGwDp: gateway }));
      await apply(eipYaml(`${gateway}-qos`, { natGwDp: gateway, qosPolicy: 'qos-demo' }));
      for (const n of ['random', 'qos']) eips.set(`${gateway}-${n}`, await readyIp(`${gateway}-${n}`));
      qosOf.set(`${gateway}-qos`, ['egress @ 10Mbit', 'ingress @ 20Mbit']);
      await exact(current);
      const r = await kubectl(
        t.stack.api,
        'patch',
        'iptables-eip',
        `${gateway}-qos`,
        '--type=merge',
        '-p',
        '{"spec":{"qosPolicy":"ha-slow"}}',
      );
      expect(r.code, r.stderr).toBe(0);
      await eventuallyValue(
        async () => (await getEip(`${gateway}-qos`))?.status?.qosPolicy === 'ha-slow' || undefined,
        {
          ...polling,
          what: 'qosPolicy ha-slow applied',
        },
      );
      qosOf.set(`${gateway}-qos`, ['ingress @ 3Mbit']);
      await exact(current);
    }, 60_000);

    it('one pod restarted (kill 1): only it is redone; the others get no call', async () => {
      const [restarted, ...others] = current as [PodView, ...PodView[]];
      const marks = others.map((o) => sim(o.name).history().length);
      const before = (await getEip(`${gateway}-random`))!.status!.redo;
      const k = await kubectl(
        t.stack.api,
        'exec',
        '-n',
        NS,
        restarted.name,
        '-c',
        'vpc-nat-gw',
        '--',
        'kill',
        '1',
      );
      expect(k.code).not.toBe(0); // the container dies with its PID 1
      await eventuallyValue(
        async () => {
          const e = await getEip(`${gateway}-random`);
          return e?.status?.redo !== before && e?.status?.ready ? true : undefined;
        },
        { ...polling, what: 'the restarted pod redone' },
      );
      await exact(current);
      for (const [i, o] of others.entries()) expect(scriptCalls(o.name, marks[i]!), o.name).toEqual([]);
    }, 60_000);

    it('one pod deleted: its replacement gets every EIP', async () => {
      const gone = current[1]!;
      const r = await kubectl(t.stack.api, 'delete', 'pod', '-n', NS, gone.name);
      expect(r.code, r.stderr).toBe(0);
      current = await eventuallyValue(
        async () => {
          const p = await pods();
          return p.length === R && !p.some((x) => x.name === gone.name) ? p : undefined;
        },
        { ...polling, what: 'the replacement pod' },
      );
      await exact(current);
    }, 60_000);

    it('one pod failing then healing: PartiallyConfigured naming it, then Ready without anyone acting', async () => {
      const bad = current[0]!;
      const fault = t.stack.api.faults.failExec({
        namespace: NS,
        pod: bad.name,
        command: 'eip-add',
        times: 3,
        exitCode: 1,
        stderr: 'injected failure\n',
      });
      await apply(eipYaml(`${gateway}-late`, { natGwDp: gateway }));
      eips.set(`${gateway}-late`, await readyIp(`${gateway}-late`));
      expect(fault.hits).toBe(3);
      await exact(current);
      const events = await kubectl(
        t.stack.api,
        ...['get', 'events', '-A', '--field-selector', `involvedObject.name=${gateway}-late`, '-o', 'json'],
      );
      const partial = (
        JSON.parse(events.stdout) as { items: { reason: string; message: string }[] }
      ).items.find((e) => e.reason === 'PartiallyConfigured');
      expect(partial?.message).toContain(`${bad.name}: nat-gateway.sh eip-add`);
      expect(partial?.message).toContain('injected failure');
      fault.cancel();
    }, 60_000);

    it(`scaling ${R}→${R + 1}→${R}→1: the new pod gets every EIP, the removed one is dropped, the StatefulSet pod joins`, async () => {
      const scale = async (replicas: number) => {
        const r = await kubectl(
          t.stack.api,
          'patch',
          'vpc-nat-gateway',
          gateway,
          '--type=merge',
          '-p',
          JSON.stringify({ spec: { replicas } }),
        );
        expect(r.code, r.stderr).toBe(0);
      };
      await scale(R + 1);
      current = await settled(R + 1);
      await exact(current);
      await scale(R);
      current = await settled(R);
      await exact(current); // the condition follows at the next write (a resync), without an exec
      // Back to 1 on master: a StatefulSet pod `<app>-0` beside the Deployment's pods, all of them replicas.
      await scale(1);
      current = await settled(R + 1, `the StatefulSet pod beside the ${R}`);
      expect(current.some((p) => p.name === `${app}-0`)).toBe(true);
      await exact(current);
    }, 90_000);

    it('npm run audit on every replica: clean', async () => {
      const r = await auditCli(join(t.dir, 'stack.json'), t.dir);
      expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(/^clean: /);
    }, 120_000);

    it('deletion with a pod gone: every EIP goes, none sticks, nothing left on the pods', async () => {
      const gone = current.find((p) => p.name !== `${app}-0`)!;
      const r = await kubectl(t.stack.api, 'delete', 'pod', '-n', NS, gone.name, '--wait=false');
      expect(r.code, r.stderr).toBe(0);
      const d = await kubectl(t.stack.api, 'delete', 'iptables-eip', ...eips.keys(), '--wait=false');
      expect(d.code, d.stderr).toBe(0);
      await eventuallyValue(
        async () => {
          for (const name of eips.keys()) if (await getEip(name)) return undefined;
          return true;
        },
        { ...polling, what: 'every EIP deleted' },
      );
      eips.clear();
      qosOf.clear();
      const left = await pods();
      for (const p of left) {
        expect(net1(p.name), p.name).toEqual([`${p.own}/24`]);
        expect(limits(p.name), p.name).toEqual([]);
      }
    }, 60_000);
  });
}

interface PodJson {
  metadata: { name: string; uid: string; deletionTimestamp?: string; annotations?: Record<string, string> };
  status?: { phase?: string };
}
