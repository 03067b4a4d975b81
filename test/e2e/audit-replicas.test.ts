/**
 * The audit on kube-ovn master's replicated gateways, on the local stack (docs/adr/0120-audit-reads-every-replica.md):
 * a VpcNatGateway with 2, then 3 replicas (its spec.replicas scaled with kubectl), EIPs made Ready on every pod by
 * the handlers; drift put on one replica only with the gateway's own tools (an address removed from its net1, a
 * foreign address added, an EIP's ingress limit deleted with the script) is named by `npm run audit --json` on that
 * pod alone, and `--repair` runs nat-gateway.sh in that pod only, every exec counted per pod from the local API's
 * request log. Then a gateway in its own spec.namespace under ovn-vpc-nat-config's natGwNamePrefix, on a second
 * stack. The stack's own drift passes are off, so that the audit run here is the one that finds and repairs. The
 * replicas are the gateway stand-in's (checked against master's controller in
 * test/integration/k8s-standins-replicas.test.ts); their gateways the simulator of master's nat-gateway.sh.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { kubectl, kubectlWith } from '../../local/kube-api/testing.js';
import type { Drift } from '../../shared/audit/model.js';
import { DIALECTS, inspectionExecs, qosDel } from '../../shared/domain/dialect/index.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { natGatewayArgv } from '../../shared/domain/nat-gateway.js';
import { unusedAddresses } from '../support/addresses.js';
import { auditCli } from '../support/audit-cli.js';
import { eventuallyValue } from '../support/eventually.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { startTestStack, type TestStack } from '../support/stack.js';

const { skip } = kubectlOrSkip();
const root = join(import.meta.dirname, '../..');
const NS = 'kube-system';

interface AuditJson {
  report: { drift: Drift[]; gateways: { gateway: string; pod: string; carries: string[] }[] };
  repair?: { kind: string; target: string; result: string }[];
  after?: { drift: Drift[] };
}

/**
 * Until no exec has reached a gateway pod for `ms`: the handlers are done configuring (a new replica's sweep, its
 * QoS), so that the execs counted next are the audit's own.
 */
async function quiet(t: TestStack, ms = 3_000): Promise<void> {
  let last = Date.now();
  const stop = t.stack.api.requests.subscribe((r) => {
    if (r.path.endsWith('/exec')) last = Date.now();
  });
  try {
    await eventuallyValue(() => Date.now() - last >= ms || undefined, {
      timeoutMs: 60_000,
      stepMs: 100,
      what: 'no exec for a while',
    });
  } finally {
    stop();
  }
}

/** `npm run audit -- args --json` against the stack, with the execs sent meanwhile counted per pod (`<ns>/<name>`). */
async function audit(
  t: TestStack,
  ...args: string[]
): Promise<{ code: number; json: AuditJson; execs: Map<string, string[]>; stderr: string }> {
  const execs = new Map<string, string[]>();
  const stop = t.stack.api.requests.subscribe((r) => {
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/exec$/.exec(r.path);
    if (!m) return;
    const argv = new URLSearchParams(r.query).getAll('command');
    const pod = `${m[1]}/${m[2]}`;
    execs.set(pod, [...(execs.get(pod) ?? []), argv.join(' ')]);
  });
  try {
    const r = await auditCli(join(t.dir, 'stack.json'), t.dir, '--json', ...args);
    return { code: r.code, json: JSON.parse(r.stdout) as AuditJson, execs, stderr: r.stderr };
  } finally {
    stop();
  }
}

/** The nat-gateway.sh execs (the writes; the inspection's are read-only tools), per pod. */
const writes = (execs: Map<string, string[]>) =>
  Object.fromEntries(
    [...execs]
      .map(([pod, argv]) => [pod, argv.filter((a) => a.includes('nat-gateway.sh')).length] as const)
      .filter(([, n]) => n > 0),
  );

const apply = async (t: TestStack, yaml: string) => {
  const r = await kubectlWith(t.stack.api, { stdin: yaml }, 'apply', '-f', '-');
  expect(r.code, r.stderr).toBe(0);
};

const gatewayYaml = (name: string, spec: string) =>
  `apiVersion: kubeovn.io/v1\nkind: VpcNatGateway\nmetadata: { name: ${name} }\nspec: { vpc: vpc1, subnet: vpc1-subnet1, lanIp: "", ${spec} }\n`;

const eipYaml = (name: string, gw: string, qos?: string) =>
  `apiVersion: kubeovn.io/v1\nkind: IptablesEIP\nmetadata: { name: ${name} }\nspec: { natGwDp: ${gw}${qos ? `, qosPolicy: ${qos}` : ''} }\n`;

/** The initialised pods of a gateway (`app=<app>`) in `ns`, once there are `n`, by name. */
async function pods(t: TestStack, ns: string, app: string, n: number): Promise<string[]> {
  return eventuallyValue(
    async () => {
      const r = await kubectl(t.stack.api, 'get', 'pods', '-n', ns, '-l', `app=${app}`, '-o', 'json');
      const items = (
        JSON.parse(r.stdout) as {
          items: {
            metadata: { name: string; deletionTimestamp?: string; annotations?: Record<string, string> };
          }[];
        }
      ).items.filter(
        (p) =>
          !p.metadata.deletionTimestamp &&
          p.metadata.annotations?.['ovn.kubernetes.io/vpc_nat_gw_init'] === 'true',
      );
      return items.length === n ? items.map((p) => p.metadata.name).sort() : undefined;
    },
    { timeoutMs: 60_000, what: `${n} initialised pods of ${app} in ${ns}` },
  );
}

async function readyIp(t: TestStack, name: string): Promise<string> {
  let last: IptablesEip | undefined;
  return eventuallyValue(
    async () => {
      last = (await t.custom
        .getClusterCustomObject({ group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips', name })
        .catch(() => undefined)) as IptablesEip | undefined;
      return last?.status?.ready === true && last.status.ip ? last.status.ip : undefined;
    },
    { timeoutMs: 60_000, what: `${name} Ready` },
  ).catch((e: unknown) => {
    throw new Error(`${(e as Error).message}; last seen: ${JSON.stringify(last?.status)}`);
  });
}

const sim = (t: TestStack, ns: string, pod: string) => {
  const g = t.stack.api.gateways.get(ns, pod);
  if (!g) throw new Error(`no simulated gateway for ${ns}/${pod}`);
  return g;
};
const carries = (t: TestStack, ns: string, pod: string, ip: string) =>
  sim(t, ns, pod)
    .net1Addresses()
    .some((a) => a.startsWith(`${ip}/`));

/** Until every pod of `names` carries every address (the handlers add a new replica's as it comes up). */
const allCarry = (t: TestStack, ns: string, names: string[], ips: string[]) =>
  eventuallyValue(() => names.every((p) => ips.every((ip) => carries(t, ns, p, ip))) || undefined, {
    timeoutMs: 60_000,
    what: `${ips.join(', ')} on ${names.join(', ')}`,
  });

const of = (json: AuditJson, gw: string) =>
  json.report.drift.filter((d) => d.gateway === gw).map((d) => [d.kind, d.pod, d.eip ?? d.address]);

describe.skipIf(skip)('the audit on replicated gateways, on the local stack (kube-ovn master)', () => {
  let t: TestStack;
  let names: string[];
  const ip: Record<string, string> = {};
  beforeAll(async () => {
    t = await startTestStack('audit-replicas-', {
      kubeOvnRelease: 'master',
      driftRepairMs: 0,
      readCacheMs: 0,
    });
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('reads every replica, with the same read-only execs per pod: 1, 2 and 3 replicas clean', async () => {
    await apply(t, gatewayYaml('gw-ha', 'replicas: 2'));
    names = await pods(t, NS, 'vpc-nat-gw-gw-ha', 2);
    await apply(t, eipYaml('ha-a', 'gw-ha', 'qos-demo'));
    await apply(t, eipYaml('ha-b', 'gw-ha'));
    ip.a = await readyIp(t, 'ha-a');
    ip.b = await readyIp(t, 'ha-b');
    await allCarry(t, NS, names, [ip.a, ip.b]);
    await quiet(t);
    const two = await audit(t);
    expect(two.code, JSON.stringify(two.json.report.drift)).toBe(0);
    const perPod = (execs: Map<string, string[]>, p: string) => execs.get(`${NS}/${p}`)?.length ?? 0;
    const one = perPod(two.execs, 'vpc-nat-gw-gw1-0'); // the demo's gateway, one pod
    const twoPods = names.map((p) => perPod(two.execs, p));

    const r = await kubectl(
      t.stack.api,
      'patch',
      'vpc-nat-gateway',
      'gw-ha',
      '--type',
      'merge',
      '-p',
      '{"spec":{"replicas":3}}',
    );
    expect(r.code, r.stderr).toBe(0);
    names = await pods(t, NS, 'vpc-nat-gw-gw-ha', 3);
    await allCarry(t, NS, names, [ip.a, ip.b]);
    await quiet(t);
    const three = await audit(t);
    expect(three.code, JSON.stringify(three.json.report.drift)).toBe(0);
    const threePods = names.map((p) => perPod(three.execs, p));
    expect(three.json.report.gateways.filter((g) => g.gateway === 'gw-ha').map((g) => g.pod)).toEqual(
      names.map((p) => `${NS}/${p}`),
    );
    console.log(
      `audit-replicas: inspection execs per pod per pass on master: 1 replica ${one}; 2 replicas ${twoPods.join('+')}; 3 replicas ${threePods.join('+')}`,
    );
    // Each pod costs its release's inspection (the env file, net1's addresses and filters, the nat table: 7 or 8 on
    // master), plus 2 reads (nat table, env file) when its spec alone cannot tell its release (the dialect choice).
    const { min, max } = inspectionExecs(DIALECTS.master);
    for (const [p, argv] of [...two.execs, ...three.execs])
      if (argv.length > max)
        console.log(`audit-replicas: ${p} read with ${argv.length} execs: ${argv.join(' | ')}`);
    for (const n of [one, ...twoPods, ...threePods]) {
      expect(n).toBeGreaterThanOrEqual(min);
      expect(n).toBeLessThanOrEqual(max + 2);
    }
    expect(writes(two.execs)).toEqual({});
    expect(writes(three.execs)).toEqual({});
  }, 240_000);

  it('an address removed from one replica: missing there only; --repair re-adds it in that pod alone', async () => {
    const target = names[1]!;
    expect(sim(t, NS, target).exec(['ip', 'addr', 'del', `${ip.b}/24`, 'dev', 'net1']).exitCode).toBe(0);
    const found = await audit(t);
    expect(found.code).toBe(1);
    expect(of(found.json, 'gw-ha')).toEqual([['missing-address', `${NS}/${target}`, 'ha-b']]);
    const fixed = await audit(t, '--repair');
    expect(
      of({ report: fixed.json.after! } as AuditJson, 'gw-ha'),
      JSON.stringify(fixed.json.repair),
    ).toEqual([]);
    expect(Object.keys(writes(fixed.execs))).toEqual([`${NS}/${target}`]);
    for (const p of names) expect(carries(t, NS, p, ip.b!)).toBe(true);
  }, 120_000);

  it('a foreign address on one replica: an orphan there only; --repair --grace 0s removes it from that pod alone', async () => {
    const target = names[2]!;
    // An address no EIP or pod has (random EIPs are spread over the pool: test/support/addresses.ts).
    const [stray] = unusedAddresses([
      ...Object.values(ip),
      await readyIp(t, 'demo-eip'),
      ...sim(t, NS, target).net1Addresses(),
    ]) as [string];
    expect(sim(t, NS, target).exec(['ip', 'addr', 'add', `${stray}/24`, 'dev', 'net1']).exitCode).toBe(0);
    const found = await audit(t);
    expect(of(found.json, 'gw-ha')).toEqual([['orphan-address', `${NS}/${target}`, stray]]);
    const fixed = await audit(t, '--repair', '--grace', '0s');
    expect(
      of({ report: fixed.json.after! } as AuditJson, 'gw-ha'),
      JSON.stringify(fixed.json.repair),
    ).toEqual([]);
    expect(writes(fixed.execs)).toEqual({ [`${NS}/${target}`]: expect.any(Number) });
    expect(carries(t, NS, target, stray)).toBe(false);
  }, 120_000);

  it("an EIP's ingress limit deleted on one replica: qos-drift there only; --repair re-applies it in that pod alone", async () => {
    const target = names[0]!;
    const call = qosDel(DIALECTS.master, ip.a!, 'ingress');
    expect(sim(t, NS, target).exec(natGatewayArgv(call.op, call.args)).exitCode).toBe(0);
    const found = await audit(t);
    expect(of(found.json, 'gw-ha')).toEqual([['qos-drift', `${NS}/${target}`, 'ha-a']]);
    const fixed = await audit(t, '--repair');
    expect(
      of({ report: fixed.json.after! } as AuditJson, 'gw-ha'),
      JSON.stringify(fixed.json.repair),
    ).toEqual([]);
    expect(Object.keys(writes(fixed.execs))).toEqual([`${NS}/${target}`]);
  }, 120_000);
});

describe.skipIf(skip)(
  'the audit on a gateway in its spec.namespace under another name prefix (kube-ovn master)',
  () => {
    const TEAM = 'team-b';
    let t: TestStack;
    beforeAll(async () => {
      t = await startTestStack('audit-replicas-ns-', {
        kubeOvnRelease: 'master',
        driftRepairMs: 0,
        readCacheMs: 0,
      });
    }, 60_000);
    afterAll(async () => {
      await t?.stop();
    });

    it('reads its replicas there, names the one without the address, and --repair re-adds it in that pod alone', async () => {
      const r = await kubectl(
        t.stack.api,
        'patch',
        'configmap',
        'ovn-vpc-nat-config',
        '-n',
        NS,
        '--type',
        'merge',
        '-p',
        '{"data":{"natGwNamePrefix":"edge"}}',
      );
      expect(r.code, r.stderr).toBe(0);
      // The exec policy admits the new prefix, as infra/rbac/name-prefix renders it with natGwNamePrefix=edge.
      const text = readFileSync(join(root, 'infra/rbac/exec-policy.yaml'), 'utf8');
      const policy = text.replace(`"'vpc-nat-gw' + '-'"`, `"'edge' + '-'"`);
      expect(policy).not.toBe(text);
      // Replaced whole (deleted, then created): an apply would merge the lists of the live object.
      const del = await kubectl(
        t.stack.api,
        'delete',
        'validatingadmissionpolicy',
        'eip-lambdas-exec-gateway-pods-only',
      );
      expect(del.code, del.stderr).toBe(0);
      const created = await kubectlWith(
        t.stack.api,
        { stdin: policy.split(/^---$/m)[0]! },
        'create',
        '-f',
        '-',
      );
      expect(created.code, created.stderr).toBe(0);
      await apply(t, `apiVersion: v1\nkind: Namespace\nmetadata: { name: ${TEAM} }\n`);
      // The handlers' pods and exec grant in that namespace (infra/rbac/gateway-namespace with `namespace: team-b`).
      const file = join(import.meta.dirname, '../../infra/rbac/gateway-namespace/gateway-pods.yaml');
      for (const d of parseAllDocuments(readFileSync(file, 'utf8')).map(
        (x) => x.toJS() as { metadata: object },
      ))
        await apply(t, JSON.stringify({ ...d, metadata: { ...d.metadata, namespace: TEAM } }));
      await apply(t, gatewayYaml('gw-team', `replicas: 2, namespace: ${TEAM}`));
      const names = await pods(t, TEAM, 'edge-gw-team', 2);
      for (const n of names) expect(n).toMatch(/^edge-gw-team-[4-9bcdf]+-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
      await apply(t, eipYaml('team-eip', 'gw-team'));
      const addr = await readyIp(t, 'team-eip');
      await allCarry(t, TEAM, names, [addr]);
      const clean = await audit(t);
      expect(clean.json.report.gateways.filter((g) => g.gateway === 'gw-team').map((g) => g.pod)).toEqual(
        names.map((p) => `${TEAM}/${p}`),
      );
      expect(of(clean.json, 'gw-team')).toEqual([]);

      const target = names[1]!;
      expect(sim(t, TEAM, target).exec(['ip', 'addr', 'del', `${addr}/24`, 'dev', 'net1']).exitCode).toBe(0);
      const found = await audit(t);
      expect(of(found.json, 'gw-team')).toEqual([['missing-address', `${TEAM}/${target}`, 'team-eip']]);
      const fixed = await audit(t, '--repair');
      expect(
        of({ report: fixed.json.after! } as AuditJson, 'gw-team'),
        JSON.stringify(fixed.json.repair),
      ).toEqual([]);
      const wrote = writes(fixed.execs);
      expect(Object.keys(wrote).filter((p) => p.startsWith(`${TEAM}/`))).toEqual([`${TEAM}/${target}`]);
      for (const p of names) expect(carries(t, TEAM, p, addr)).toBe(true);
    }, 240_000);
  },
);
