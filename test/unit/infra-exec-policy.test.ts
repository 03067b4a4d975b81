/**
 * The ValidatingAdmissionPolicy that limits the handlers' pods/exec to the NAT gateway pods and to the commands the
 * product sends (infra/rbac/exec-policy.yaml), applied with the handlers' RBAC to the local Kubernetes API and
 * exercised through it: exec upgrades (WebSocket, as the product's gateway adapter and kubectl 1.32 send them) as the
 * handlers' identity, accepted (101) or refused with the API server's Status. The policy's CEL runs on a CEL
 * implementation tested against the CEL spec (local/kube-api/admission.ts), not on a model written for this test.
 *
 * Also kept in step here: the policy's operation list with NAT_GW_OPS, its inspection commands with those the
 * gateway dialects read with (shared/domain/dialect/inspect.ts, each release's, for any external interface), and
 * its argument check with the product's own (natGatewayArgv accepts exactly what the policy admits).
 * test/conformance/admission.test.ts runs the same policy through kubectl and client-node. And where kube-ovn puts
 * gateway pods: a replica of master's replicated gateway, pods in another namespace (with infra/rbac/gateway-namespace),
 * and the pod prefix the component infra/rbac/name-prefix sets from kube-ovn's natGwNamePrefix.
 *
 * What this does not prove: that a given API server version evaluates CEL identically (its library has Kubernetes
 * extensions this policy does not use); docs/deploy-eks.md shows the check on a real cluster.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isCelError, run } from '@bufbuild/cel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { parseAllDocuments } from 'yaml';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { adminFetch } from '../../local/kube-api/testing.js';
import {
  DIALECTS,
  ENV_FILE_ARGV,
  eipAdd,
  ifbOf,
  inspectionArgv,
  isDialectInspectionArgv,
  NAT_TABLE_ARGV,
  qosAdd,
  qosDel,
} from '../../shared/domain/dialect/index.js';
import { GATEWAY_CONTAINER } from '../../shared/domain/kube-ovn.js';
import { NAT_GW_OPS, natGatewayArgv } from '../../shared/domain/nat-gateway.js';
import { argBytes, MAX_EXEC_ARG_BYTES } from '../../shared/domain/nat-gateway-batch.js';
import { kubectlOrSkip } from '../support/kubectl.js';
import { kustomizeOverlay } from '../support/kustomize.js';

const root = join(import.meta.dirname, '../..');
// biome-ignore lint/suspicious/noExplicitAny: YAML documents are dynamic
type Any = any;
const docs = (file: string): Any[] =>
  parseAllDocuments(readFileSync(join(root, file), 'utf8')).map((d) => d.toJS());
const [policy, binding] = docs('infra/rbac/exec-policy.yaml');
const variable = (name: string) =>
  policy.spec.variables.find((v: Any) => v.name === name).expression as string;

const HANDLERS = 'handlers-token';
const WIDE = 'wide-token';
const GW = 'vpc-nat-gw-gw1-0';
const EIP_ADD = natGatewayArgv('eip-add', ['172.18.0.11/24,172.18.0.1']);

/** Every command the dialects read a gateway with, for the external interface `ext` (its IFB device included). */
const readsOf = (ext: string): (readonly string[])[] => [
  ENV_FILE_ARGV,
  ...NAT_TABLE_ARGV,
  ...(['police', 'htb'] as const).flatMap((qos) => Object.values(inspectionArgv({ qos }, ext))),
];

/** Every nat-gateway.sh call the dialects send, in each release's form. */
const callsOfEachRelease = (): (readonly string[])[] =>
  Object.values(DIALECTS).flatMap((d) => {
    const rule = { priority: 1, rateMax: '10.5', burstMax: '1' };
    return [
      eipAdd(d, { address: '172.18.0.11', prefix: 24, gateway: '172.18.0.1' }),
      qosAdd(d, '172.18.0.11', { direction: 'ingress', ...rule }),
      qosAdd(d, '172.18.0.11', { direction: 'egress', ...rule }),
      qosDel(d, '172.18.0.11', 'ingress'),
      qosDel(d, '172.18.0.11', 'egress'),
    ].map((c) => natGatewayArgv(c.op, c.args));
  });

let api: KubeApi;

async function apply(on: KubeApi, obj: Any): Promise<void> {
  const group = obj.apiVersion.includes('/') ? `apis/${obj.apiVersion}` : `api/${obj.apiVersion}`;
  const plural = `${obj.kind.toLowerCase().replace(/y$/, 'ie')}s`;
  const ns = obj.metadata.namespace ? `namespaces/${obj.metadata.namespace}/` : '';
  const r = await adminFetch(`${on.url}/${group}/${ns}${plural}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(obj),
  });
  expect(r.status, await r.clone().text()).toBe(201);
}

/** A pod with these labels and containers (image `local`). */
const podOf = (
  name: string,
  labels: Record<string, string>,
  containers: string[],
  namespace = 'kube-system',
) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace, labels },
  spec: { containers: containers.map((c) => ({ name: c, image: 'local' })) },
});

/** A local API with the handlers' RBAC, `execPolicy` and its binding, a gateway pod, a look-alike and CoreDNS. */
async function startLab(execPolicy: Any): Promise<KubeApi> {
  const lab = await startKubeApi({
    tokens: [
      // The handlers as EKS maps their role (an access entry with the group infra/rbac binds).
      {
        token: HANDLERS,
        user: 'arn:aws:sts::123456789012:assumed-role/eip-lambdas-prod-add-eu-west-1/fn',
        groups: ['eip-lambdas:handlers'],
      },
      // Someone in the handlers' group whom RBAC lets attach and port-forward too: the policy still refuses.
      { token: WIDE, user: 'wide', groups: ['eip-lambdas:handlers'] },
    ],
  });
  for (const d of [...docs('infra/rbac/handlers.yaml'), execPolicy, binding]) await apply(lab, d);
  await apply(lab, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'wide', namespace: 'kube-system' },
    rules: [{ apiGroups: [''], resources: ['pods/attach', 'pods/portforward'], verbs: ['get', 'create'] }],
  });
  await apply(lab, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'wide', namespace: 'kube-system' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'wide' },
    subjects: [{ kind: 'User', name: 'wide' }],
  });
  const pod = podOf;
  await apply(lab, pod(GW, { 'ovn.kubernetes.io/vpc-nat-gw': 'true' }, [GATEWAY_CONTAINER, 'debug']));
  await apply(lab, pod('my-vpc-nat-gw-gw1-0', {}, [GATEWAY_CONTAINER]));
  await apply(lab, pod('coredns-5d78c9869d-abcde', { 'k8s-app': 'kube-dns' }, ['coredns']));
  return lab;
}

beforeAll(async () => {
  api = await startLab(policy);
}, 30_000);

afterAll(async () => {
  await api?.close();
});

interface Upgrade {
  status: number;
  body?: Any;
}

/** One exec-style upgrade (GET, WebSocket) as `token`, optionally impersonating: 101, or the refusal. */
function connect(
  token: string,
  pod: string,
  o: {
    sub?: 'exec' | 'attach' | 'portforward';
    container?: string | null;
    command?: readonly string[];
    stdin?: boolean;
    tty?: boolean;
    as?: { user: string; groups: string[] };
    /** Another lab than the one with infra/rbac's policy as it is. */
    on?: KubeApi;
    /** The pod's namespace (default kube-system). */
    namespace?: string;
  } = {},
): Promise<Upgrade> {
  const q = new URLSearchParams();
  if (o.container !== null) q.set('container', o.container ?? GATEWAY_CONTAINER);
  for (const c of o.command ?? EIP_ADD) q.append('command', c);
  q.set('stdout', 'true');
  q.set('stderr', 'true');
  if (o.stdin !== undefined) q.set('stdin', String(o.stdin));
  if (o.tty !== undefined) q.set('tty', String(o.tty));
  const headers: Record<string, string | string[]> = { authorization: `Bearer ${token}` };
  if (o.as) {
    headers['Impersonate-User'] = o.as.user;
    headers['Impersonate-Group'] = o.as.groups;
  }
  const lab = o.on ?? api;
  const url = `${lab.tlsUrl.replace('https', 'wss')}/api/v1/namespaces/${o.namespace ?? 'kube-system'}/pods/${pod}/${o.sub ?? 'exec'}?${q}`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v5.channel.k8s.io'], { headers, ca: lab.ca });
    ws.on('open', () => {
      ws.terminate();
      resolve({ status: 101 });
    });
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => {
        text += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    ws.on('error', (e) => {
      if (!/Unexpected server response/.test(e.message)) reject(e);
    });
  });
}

const DENIED_BY =
  "ValidatingAdmissionPolicy 'eip-lambdas-exec-gateway-pods-only' with binding 'eip-lambdas-exec-gateway-pods-only' denied request: ";

describe('exec policy (infra/rbac/exec-policy.yaml) in the local API', () => {
  it('is a v1 policy on CONNECT for pod exec, attach and portforward, bound with Deny, for the group handlers.yaml binds', () => {
    expect(policy).toMatchObject({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      spec: { failurePolicy: 'Fail' },
    });
    expect(policy.spec.matchConstraints.resourceRules).toEqual([
      {
        apiGroups: [''],
        apiVersions: ['v1'],
        operations: ['CONNECT'],
        resources: ['pods/exec', 'pods/attach', 'pods/portforward'],
      },
    ]);
    expect(binding).toMatchObject({
      kind: 'ValidatingAdmissionPolicyBinding',
      spec: { policyName: policy.metadata.name, validationActions: ['Deny'] },
    });
    const groups = docs('infra/rbac/handlers.yaml')
      .filter((d) => d.kind.endsWith('Binding'))
      .flatMap((d) => d.subjects.map((s: Any) => s.name));
    expect(new Set(groups)).toEqual(new Set(['eip-lambdas:handlers']));
    expect(policy.spec.matchConditions[0].expression).toContain("'eip-lambdas:handlers'");
  });

  it("lists exactly the product's nat-gateway.sh operations and the commands each release is read with (update the policy's variables when these change)", () => {
    const ops = run(variable('natGatewayOps'));
    const inspections = run(variable('inspections'));
    if (isCelError(ops) || isCelError(inspections)) throw new Error('the policy variables do not evaluate');
    expect([...(ops as Iterable<string>)].sort()).toEqual([...NAT_GW_OPS].sort());
    // The product's reads for one external interface, its name (and its IFB device's) written as the policy does.
    const EXT = 'eth9';
    const asTemplate = (argv: readonly string[]) =>
      argv.map((w) => (w === EXT || w === ifbOf(EXT) ? '<interface>' : w)).join(' ');
    const listed = [...(inspections as Iterable<Iterable<string>>)].map((a) => [...a].join(' '));
    expect(new Set(listed).size).toBe(listed.length);
    expect(listed.sort()).toEqual([...new Set(readsOf(EXT).map(asTemplate))].sort());
  });

  it('admits the handlers every command the product sends into the vpc-nat-gw container of a gateway pod', async () => {
    const sent = [
      ...NAT_GW_OPS.map((op) => natGatewayArgv(op, ['172.18.0.11/24,172.18.0.1'])),
      ...callsOfEachRelease(),
      ...readsOf('net1'),
    ];
    for (const command of sent)
      expect(await connect(HANDLERS, GW, { command }), command.join(' ')).toEqual({ status: 101 });
    expect(await connect(HANDLERS, GW, { stdin: false, tty: false })).toEqual({ status: 101 });
  });

  it('admits a batched call: as many rules of one op as an exec carries (ADR 0110), each checked alike', async () => {
    const rules = Array.from({ length: 6000 }, (_, i) => `172.18.${Math.floor(i / 250)}.${(i % 250) + 1}/16`);
    expect(rules.reduce((n, r) => n + argBytes(r), 0)).toBeLessThanOrEqual(MAX_EXEC_ARG_BYTES);
    expect(await connect(HANDLERS, GW, { command: natGatewayArgv('eip-del', rules) })).toEqual({
      status: 101,
    });
    const tainted = [...rules.slice(0, 100), '172.18.9.9/16;id', ...rules.slice(100, 200)];
    expect(
      await connect(HANDLERS, GW, { command: ['bash', '/kube-ovn/nat-gateway.sh', 'eip-del', ...tainted] }),
    ).toMatchObject({ status: 403 });
  });

  it('admits the reads for any external interface the product may read, and refuses what is not an interface name', async () => {
    // What the product may read: any name isInterfaceName accepts (and its IFB device); 12 to 15 characters are
    // admitted too (the policy does not tie a word to its position), which the product sends only as ifb-<name>.
    for (const ext of ['eth1', 'ens5.100', '_x', 'x-', 'a'.repeat(11)])
      for (const command of readsOf(ext)) {
        expect(isDialectInspectionArgv(command)).toBe(true);
        expect(await connect(HANDLERS, GW, { command }), command.join(' ')).toEqual({ status: 101 });
      }
    for (const name of ['.', '..', 'a'.repeat(16), 'net1;id', '$(id)', 'net 1', 'ä', ''])
      for (const template of [
        ['ip', '-o', 'addr', 'show', 'dev', name],
        ['tc', 'class', 'show', 'dev', name],
      ]) {
        expect(isDialectInspectionArgv(template)).toBe(false);
        const r = await connect(HANDLERS, GW, { command: template });
        expect(r.status, JSON.stringify(template)).toBe(403);
      }
  });

  it.each([
    ['coredns-5d78c9869d-abcde', { container: 'coredns' }],
    ['my-vpc-nat-gw-gw1-0', {}],
    [GW, { container: 'debug' }],
    [GW, { container: null }],
    [GW, { stdin: true }],
    [GW, { tty: true }],
  ])('refuses the handlers an exec into %s %o with 403 and the reason', async (pod, opts) => {
    const r = await connect(HANDLERS, pod, opts as Any);
    expect(r.status).toBe(403);
    const message = `${DENIED_BY}eip-lambdas may only exec, without stdin or tty, into the vpc-nat-gw container of a NAT gateway pod (vpc-nat-gw-*); refused: exec on kube-system/${pod}`;
    expect(r.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `pods "${pod}" is forbidden: ${message}`,
      reason: 'Forbidden',
      details: { name: pod, kind: 'pods', causes: [{ message }] },
      code: 403,
    });
  });

  it.each([
    [['sh', '-c', 'ip addr']],
    [['bash', '-c', 'bash /kube-ovn/nat-gateway.sh eip-add 1.2.3.4/24']],
    [['bash', '/kube-ovn/nat-gateway.sh', 'init', '10.0.1.254']],
    [['bash', '/kube-ovn/nat-gateway.sh']],
    [['bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '1.2.3.4/24;reboot']],
    [['bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '$(reboot)']],
    [['bash', '/tmp/nat-gateway.sh', 'eip-add', '1.2.3.4/24']],
    [['/kube-ovn/nat-gateway.sh', 'eip-add', '1.2.3.4/24']],
    [['ip', 'addr', 'add', '1.2.3.4/24', 'dev', 'net1']],
    [['ip', '-o', 'addr', 'show', 'dev', '<interface>']],
    [['ip', '-o', 'addr', 'show', 'dev']],
    [['ip', '-o', 'link', 'set', 'dev', 'net1', 'down']],
    [['tc', 'qdisc', 'del', 'dev', 'net1', 'root']],
    [['iptables-save', '-t', 'filter']],
    [['iptables-save']],
    [['iptables', '-t', 'nat', '-F']],
    [['cat', '/etc/kube-ovn/nat-gateway.env', '/etc/shadow']],
    [['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', 'ffff:', 'extra']],
    [['kill', '1']],
    [['cat', '/etc/shadow']],
  ])('refuses the handlers the command %j in a gateway pod, naming it', async (command) => {
    const r = await connect(HANDLERS, GW, { command });
    expect(r.status).toBe(403);
    expect(r.body.message).toBe(
      `pods "${GW}" is forbidden: ${DENIED_BY}eip-lambdas may only run bash /kube-ovn/nat-gateway.sh with an operation it sends, or a read-only inspection command, in a NAT gateway pod; refused: ${command.join(' ')} on kube-system/${GW}`,
    );
  });

  it('refuses attach and port-forward to the handlers even where RBAC would allow them', async () => {
    for (const sub of ['attach', 'portforward'] as const) {
      expect((await connect(HANDLERS, GW, { sub })).body.message).toMatch(
        `User "arn:aws:sts::123456789012:assumed-role/eip-lambdas-prod-add-eu-west-1/fn" cannot get resource "pods/${sub}"`,
      );
      const r = await connect(WIDE, GW, { sub, command: [] });
      expect(r.status).toBe(403);
      expect(r.body.message).toMatch(`refused: ${sub} on kube-system/${GW}`);
    }
  });

  it('accepts exactly the arguments the product itself accepts (natGatewayArgv)', async () => {
    const args = [
      '172.18.0.11/24,172.18.0.1',
      'fd00::5/64',
      '172.18.0.5,1,10.5,1',
      'a'.repeat(200),
      'a'.repeat(201),
      '',
      '1.2.3.4 5.6.7.8',
      '1.2.3.4\n',
      "1.2.3.4'",
      '1.2.3.4|x',
      '1.2.3.4&',
      '../../etc',
      'ä',
      '-h',
    ];
    for (const a of args) {
      let product = true;
      try {
        natGatewayArgv('eip-del', [a]);
      } catch {
        product = false;
      }
      const r = await connect(HANDLERS, GW, { command: ['bash', '/kube-ovn/nat-gateway.sh', 'eip-del', a] });
      expect(r.status === 101, JSON.stringify(a)).toBe(product);
    }
  });

  it('leaves everyone else alone, whatever RBAC allows them', async () => {
    const admin = 'local-token';
    expect(
      await connect(admin, 'coredns-5d78c9869d-abcde', { container: 'coredns', command: ['true'] }),
    ).toEqual({
      status: 101,
    });
    expect(await connect(admin, GW, { container: 'debug', command: ['sh', '-c', 'true'] })).toEqual({
      status: 101,
    });
    // The same request as someone in the handlers' group (and in system:masters, so RBAC allows it): refused.
    const r = await connect(admin, GW, {
      container: 'debug',
      command: ['true'],
      as: { user: 'probe', groups: ['eip-lambdas:handlers', 'system:masters'] },
    });
    expect([r.status, r.body.message]).toEqual([
      403,
      expect.stringContaining(`${DENIED_BY}eip-lambdas may only exec`),
    ]);
  });
});

describe("the exec policy's inspections list, extended as a later audit would need it", () => {
  // Commands a later audit might read besides today's: class statistics of any interface, another iptables table.
  const extended = [
    ...[...(run(variable('inspections')) as Iterable<Iterable<string>>)].map((a) => [...a]),
    ['tc', '-s', 'class', 'show', 'dev', '<interface>'],
    ['iptables-save', '-t', 'mangle'],
  ];
  const cel = (list: readonly (readonly string[])[]) =>
    `[${list.map((a) => `[${a.map((w) => `'${w}'`).join(', ')}]`).join(', ')}]`;
  let lab: KubeApi;

  beforeAll(async () => {
    const edited = structuredClone(policy);
    edited.spec.variables.find((v: Any) => v.name === 'inspections').expression = cel(extended);
    lab = await startLab(edited);
  }, 30_000);

  afterAll(async () => {
    await lab?.close();
  });

  it('admits every listed command, with any interface name where the list says <interface>', async () => {
    const admitted = [
      ...readsOf('net1'),
      ['tc', '-s', 'class', 'show', 'dev', 'net1'],
      ['tc', '-s', 'class', 'show', 'dev', 'ifb-eth1'],
      ['iptables-save', '-t', 'mangle'],
      EIP_ADD,
    ];
    for (const command of admitted)
      expect(await connect(HANDLERS, GW, { command, on: lab }), command.join(' ')).toEqual({ status: 101 });
  });

  it.each([
    [['tc', '-s', 'class', 'show', 'dev', 'net1;id']],
    [['tc', '-s', 'class', 'show', 'dev', '<interface>']],
    [['tc', '-s', 'class', 'show', 'dev', 'net1', 'extra']],
    [['tc', '-s', 'class', 'del', 'dev', 'net1']],
    [['iptables-save', '-t', 'raw']],
    [['sh', '-c', 'iptables-save -t mangle']],
  ])('still refuses %j', async (command) => {
    const r = await connect(HANDLERS, GW, { command, on: lab });
    expect([r.status, r.body?.message]).toEqual([
      403,
      expect.stringContaining(`refused: ${command.join(' ')} on`),
    ]);
  });
});

describe("the exec policy where kube-ovn puts gateway pods: master's replicas, spec.namespace, natGwNamePrefix", () => {
  const TEAM = 'team-a';
  const REPLICA = 'vpc-nat-gw-gw1-7d4f8c9b5-x2z4k';
  let lab: KubeApi;
  let prefixed: KubeApi | undefined;

  /** Gateway pods in kube-system (a replica) and in another namespace, where infra/rbac/gateway-namespace lets in. */
  async function addPods(on: KubeApi, names: string[]): Promise<void> {
    await apply(on, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: TEAM } });
    // What `namespace: team-a` over infra/rbac/gateway-namespace renders (test/unit/rbac-manifests.test.ts).
    for (const d of docs('infra/rbac/gateway-namespace/gateway-pods.yaml'))
      await apply(on, { ...d, metadata: { ...d.metadata, namespace: TEAM } });
    const gw = { 'ovn.kubernetes.io/vpc-nat-gw': 'true' };
    for (const name of names) {
      await apply(on, podOf(name, gw, [GATEWAY_CONTAINER]));
      await apply(on, podOf(name, gw, [GATEWAY_CONTAINER], TEAM));
    }
    await apply(on, podOf('coredns-5d78c9869d-abcde', {}, ['coredns'], TEAM));
  }

  beforeAll(async () => {
    lab = await startLab(policy);
    await addPods(lab, [REPLICA, 'vpc-nat-gw-gw2-0']);
  }, 30_000);

  afterAll(async () => {
    await lab?.close();
    await prefixed?.close();
  });

  it("admits a replica of master's replicated gateway, and gateway pods in another namespace", async () => {
    expect(await connect(HANDLERS, REPLICA, { on: lab })).toEqual({ status: 101 });
    for (const pod of [REPLICA, 'vpc-nat-gw-gw2-0'])
      expect(await connect(HANDLERS, pod, { on: lab, namespace: TEAM }), pod).toEqual({ status: 101 });
    const r = await connect(HANDLERS, 'coredns-5d78c9869d-abcde', {
      on: lab,
      namespace: TEAM,
      container: 'coredns',
    });
    expect([r.status, r.body?.message]).toEqual([
      403,
      expect.stringContaining(
        'a NAT gateway pod (vpc-nat-gw-*); refused: exec on team-a/coredns-5d78c9869d-abcde',
      ),
    ]);
  });

  it.skipIf(kubectlOrSkip().skip)(
    'with ./name-prefix and natGwNamePrefix=egress: admits egress-*, refuses vpc-nat-gw-*, saying which prefix',
    async () => {
      const rendered = kustomizeOverlay('rbac', (rel) => [
        `resources: [${rel}]`,
        `components: [${rel}/name-prefix]`,
        'configMapGenerator:',
        '  - name: eip-lambdas-handlers-params',
        '    literals: [natGwNamePrefix=egress]',
        '    options:',
        '      disableNameSuffixHash: true',
        '      annotations: { config.kubernetes.io/local-config: "true" }',
      ]);
      const edited = rendered.find((d) => d.kind === 'ValidatingAdmissionPolicy') as Any;
      expect(edited.spec.variables.find((v: Any) => v.name === 'podPrefix').expression).toBe(
        "'egress' + '-'",
      );
      prefixed = await startLab(edited);
      await addPods(prefixed, ['egress-gw1-0', 'egress-gw1-7d4f8c9b5-x2z4k']);
      for (const namespace of ['kube-system', TEAM])
        for (const pod of ['egress-gw1-0', 'egress-gw1-7d4f8c9b5-x2z4k'])
          expect(await connect(HANDLERS, pod, { on: prefixed, namespace }), pod).toEqual({ status: 101 });
      const r = await connect(HANDLERS, GW, { on: prefixed });
      expect([r.status, r.body?.message]).toEqual([
        403,
        expect.stringContaining(`a NAT gateway pod (egress-*); refused: exec on kube-system/${GW}`),
      ]);
    },
    60_000,
  );
});
