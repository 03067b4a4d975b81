/**
 * docs/deploy-eks.md, read as an operator reads it, top to bottom:
 * - every shell block is valid bash (`bash -n`), and every variable a block uses is set by an earlier line of the
 *   guide (a scan that knows quoting, heredocs and comments; shown to catch planted mistakes);
 * - the blocks that write the overlays (steps 5 and 7) run in a scratch copy of the checkout's infra/, and
 *   `kubectl kustomize` renders what they wrote, for IRSA and for EKS Pod Identity;
 * - where moto_server is installed, the AWS CLI blocks run against it: step 1's identity and kubeconfig, the
 *   by-hand IRSA role of step 7, the removal of step 10 (in order: a by-hand role detached and deleted before the
 *   stack goes; moto, like IAM, refuses to delete a role that still has a policy attached) and reading the
 *   dead-letter queue of step 11 with the guide's jq, on records shaped as Lambda's on-failure destination and
 *   EventBridge's dead-letter queue write them (their documented formats). The stack itself is a stand-in created
 *   in moto with the outputs the guide reads; osls and kubectl are recorded, not run, in the removal.
 * The exec checks of step 5 are tested against the local API elsewhere (RBAC of the local API).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadBridgeConfig } from '../../shared/bridge/config.js';

const root = join(import.meta.dirname, '../..');
const GUIDE = readFileSync(join(root, 'docs/deploy-eks.md'), 'utf8');

interface Block {
  section: string;
  /** 1-based line of the opening fence; the block's first line is the next one. */
  line: number;
  text: string;
}

/** The ```sh blocks, de-indented (a block inside a list item is indented in the markdown only). */
function shellBlocks(md: string): Block[] {
  const lines = md.split('\n');
  const blocks: Block[] = [];
  let section = '';
  for (let i = 0; i < lines.length; i++) {
    const heading = /^## (.*)/.exec(lines[i]!);
    if (heading) section = heading[1]!;
    const open = /^(\s*)```sh\s*$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const body: string[] = [];
    const start = i + 1; // i is 0-based
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]!); i++) body.push(lines[i]!.slice(indent));
    blocks.push({ section, line: start, text: body.join('\n') });
  }
  return blocks;
}

const BUILTIN = new Set(['PWD', 'HOME', 'PATH']);

/** A variable used or set, where (the set: where its command ends). */
interface Ref {
  name: string;
  line: number;
  col: number;
}

/**
 * The variables a piece of shell uses and sets, in order, with their line. Knows: single quotes (nothing expands,
 * also across lines), double quotes, `$(…)`, comments, `<<EOF` (expands) and `<<'EOF'` (does not) heredocs,
 * assignments at the start of a command (`X=`, `X+=`, `export X=`), `for X in`. Positional and special
 * parameters (`$1`, `$?`) are not variables.
 */
function scan(text: string): { uses: Ref[]; sets: Ref[] } {
  const uses: Ref[] = [];
  const sets: Ref[] = [];
  let inSingle = false;
  let heredoc: { end: string; expands: boolean } | undefined;
  for (const [n, raw] of text.split('\n').entries()) {
    if (heredoc) {
      if (raw.trim() === heredoc.end) heredoc = undefined;
      else if (heredoc.expands) uses.push(...expansions(raw, n + 1));
      continue;
    }
    const cut = expanded(raw, inSingle);
    inSingle = cut.inSingle;
    uses.push(...expansions(cut.live, n + 1));
    sets.push(...assignments(cut.live, n + 1));
    const here = /<<-?\s*(['"]?)([A-Za-z_]+)\1/.exec(raw);
    if (here) heredoc = { end: here[2]!, expands: here[1] === '' };
  }
  return { uses, sets };
}

/** `$NAME`, `${NAME…}`, `${#NAME}` in text the shell expands. */
function expansions(s: string, line: number): Ref[] {
  return [...s.matchAll(/\$(?:\{#?([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_]*))/g)].map((m) => ({
    name: (m[1] ?? m[2])!,
    line,
    col: m.index,
  }));
}

/**
 * The part of a line the shell expands, same length, blanks where it does not: single-quoted text (which may go on
 * from an earlier line, or to a later one), escaped characters, and a comment.
 */
function expanded(raw: string, startInSingle: boolean): { live: string; inSingle: boolean } {
  const st = { inSingle: startInSingle, inDouble: false, comment: false };
  const text = raw.replace(/\\./g, '  '); // an escaped character expands nothing
  let live = '';
  for (let i = 0; i < text.length && !st.comment; i++) live += shellChar(st, text[i]!, text[i - 1] ?? '');
  return { live, inSingle: st.inSingle };
}

/** One character of a line, as `expanded` keeps it, updating the quoting state. */
function shellChar(
  st: { inSingle: boolean; inDouble: boolean; comment: boolean },
  c: string,
  prev: string,
): string {
  if (st.inSingle || (c === "'" && !st.inDouble)) {
    if (c === "'") st.inSingle = !st.inSingle;
    return ' ';
  }
  if (c === '#' && !st.inDouble && /^\s?$/.test(prev)) {
    st.comment = true;
    return '';
  }
  if (c === '"') st.inDouble = !st.inDouble;
  return c;
}

/** `X=`, `X+=`, `export X=` at the start of a command, `for X in`: in effect where their command ends. */
function assignments(live: string, line: number): Ref[] {
  const endOf = (from: number) => from + (/[;&|]|$/.exec(live.slice(from))?.index ?? 0);
  const sets: Ref[] = [];
  for (const m of live.matchAll(/(?:^|[;&|(]|\bthen|\bdo|\bexport)\s*([A-Za-z_][A-Za-z0-9_]*)\+?=/g))
    sets.push({ name: m[1]!, line, col: endOf(m.index + m[0].length) });
  for (const m of live.matchAll(/\bfor\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b/g))
    sets.push({ name: m[1]!, line, col: endOf(m.index) });
  return sets;
}

/** Variables used before any line of the guide sets them: `NAME (section, line)`. */
function undefinedVariables(blocks: Block[]): string[] {
  const known = new Set(BUILTIN);
  const problems: string[] = [];
  for (const b of blocks) {
    const { uses, sets } = scan(b.text);
    const events = [
      ...uses.map((r) => ({ ...r, set: false })),
      ...sets.map((r) => ({ ...r, set: true })),
    ].sort((a, x) => a.line - x.line || a.col - x.col);
    for (const e of events) {
      if (e.set) known.add(e.name);
      else if (!known.has(e.name)) problems.push(`${e.name} (${b.section}, line ${b.line + e.line})`);
    }
  }
  return problems;
}

const blocks = shellBlocks(GUIDE);
/** The one block that contains `needle`. */
const block = (needle: string): string => {
  const found = blocks.filter((b) => b.text.includes(needle));
  expect(
    found.map((b) => b.line),
    needle,
  ).toHaveLength(1);
  return found[0]!.text;
};

describe('the shell blocks of docs/deploy-eks.md', () => {
  it('are there, and each is valid bash', () => {
    expect(blocks.length).toBeGreaterThan(15);
    for (const b of blocks) {
      const r = spawnSync('bash', ['-n', '-c', b.text], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      expect(r.status, `${b.section}, line ${b.line}: ${r.stderr}`).toBe(0);
    }
  });

  it('use only variables an earlier line of the guide has set', () => {
    expect(undefinedVariables(blocks)).toEqual([]);
  });

  it('the scan catches a variable used too early, and ignores quoted and heredoc text that does not expand', () => {
    const md = [
      '## 1. A',
      '```sh',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell, not a template
      'A=1; echo "$A ${B%%/*}"   # $C in a comment',
      "jq '.x | $d' <<'EOF'",
      '$E',
      'EOF',
      'cat <<EOF',
      '$F',
      'EOF',
      "echo '",
      '$G spans lines',
      "' $H",
      '```',
      '',
      '## 2. B',
      '  ```sh',
      '  for x in 1; do echo $x; done; B=2; echo $B $1 $?',
      '  ```',
    ].join('\n');
    expect(undefinedVariables(shellBlocks(md))).toEqual([
      'B (1. A, line 3)',
      'F (1. A, line 8)',
      'H (1. A, line 12)',
    ]);
  });
});

function kubectlWorks(): boolean {
  const r = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  return !r.error && r.status === 0;
}
const noKubectl = !kubectlWorks();
if (noKubectl) console.warn('kubectl is not on PATH: the overlays of docs/deploy-eks.md are not rendered');

type Doc = {
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  data?: Record<string, string>;
  spec?: {
    template?: { spec?: { containers?: { env?: { name: string; value?: string; valueFrom?: Any }[] }[] } };
  };
};
// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are dynamic
type Any = any;

function bash(script: string, cwd: string, env: Record<string, string> = {}) {
  return spawnSync('bash', ['-euo', 'pipefail', '-c', script], {
    cwd,
    encoding: 'utf8',
    // Not a socket on stdin: bash would take itself for a remote shell and read the system's bashrc.
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', HOME: cwd, ...env },
  });
}

function render(dir: string): Doc[] {
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return parseAllDocuments(r.stdout).map((d) => d.toJS() as Doc);
}

describe.skipIf(noKubectl)(
  'the overlays the guide writes (steps 5 and 7), rendered with kubectl kustomize',
  () => {
    let parent: string;
    const ROLE = 'arn:aws-cn:iam::123456789012:role/eip-lambdas-prod-bridge';
    // The values earlier steps give these variables; `output` stands in for the stack's outputs.
    const prelude = [
      'STAGE=prod REGION=cn-north-1 NATGW_NAMESPACE=ovn-system TAG=abc1234',
      'REPO=123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/eip-lambdas-bridge',
      `BRIDGE_ROLE_ARN=${ROLE}`,
      'output() { case $1 in EventBusName) echo eip-lambdas-$STAGE ;; *) return 1 ;; esac; }',
      'kubectl() { :; }', // the test renders what the blocks wrote; nothing is applied
    ].join('\n');

    beforeAll(() => {
      parent = mkdtempSync(join(tmpdir(), 'guide-overlays-'));
      // A checkout beside which the overlays are written, as the guide assumes (`../$(basename $PWD)/infra/...`).
      for (const d of ['infra/bridge', 'infra/rbac'])
        cpSync(join(root, d), join(parent, 'eip-lambdas', d), { recursive: true });
    });
    afterAll(() => rmSync(parent, { recursive: true, force: true }));

    const bridgeEnv = (docs: Doc[]) => {
      const cm = docs.find(
        (d) => d.kind === 'ConfigMap' && d.metadata.name.startsWith('eip-lambdas-bridge-params'),
      )!;
      const env: Record<string, string> = {
        KUBERNETES_SERVICE_HOST: '10.0.0.1',
        AWS_CONFIG_FILE: '/nonexistent',
      };
      const deployment = docs.find((d) => d.kind === 'Deployment')!;
      for (const e of deployment.spec!.template!.spec!.containers![0]!.env!)
        env[e.name] = e.value ?? cm.data![e.valueFrom.configMapKeyRef.key]!;
      return env;
    };

    it('step 7 (IRSA): the bridge gets the stage, the bus, the region and the role, and starts with them', () => {
      const cwd = join(parent, 'eip-lambdas');
      const r = bash(`${prelude}\n${block('cat > ../eip-bridge-$STAGE/kustomization.yaml')}`, cwd);
      expect(r.status, r.stderr).toBe(0);
      const docs = render(join(parent, 'eip-bridge-prod'));
      const sa = docs.find((d) => d.kind === 'ServiceAccount')!;
      expect(sa.metadata.annotations).toEqual({ 'eks.amazonaws.com/role-arn': ROLE });
      const env = bridgeEnv(docs);
      expect(env).toMatchObject({
        STAGE: 'prod',
        EVENT_BUS_NAME: 'eip-lambdas-prod',
        AWS_REGION: 'cn-north-1',
      });
      const config = loadBridgeConfig(env);
      expect(config).toMatchObject({
        metricsNamespace: 'EipLambdas/prod',
        region: 'cn-north-1',
        namespace: 'ovn-system',
      });
      for (const d of docs.filter((x) => x.kind === 'Role' || x.kind === 'RoleBinding'))
        expect(d.metadata.namespace).toBe('ovn-system');
    });

    it('step 7 (EKS Pod Identity): the patch the guide appends removes the IRSA annotation, nothing else', () => {
      const cwd = join(parent, 'eip-lambdas');
      const before = render(join(parent, 'eip-bridge-prod'));
      const r = bash(`${prelude}\n${block('eks.amazonaws.com~1role-arn')}`, cwd);
      expect(r.status, r.stderr).toBe(0);
      const after = render(join(parent, 'eip-bridge-prod'));
      const sa = after.find((d) => d.kind === 'ServiceAccount')!;
      expect(sa.metadata.annotations?.['eks.amazonaws.com/role-arn']).toBeUndefined();
      const strip = (docs: Doc[]) => docs.filter((d) => d.kind !== 'ServiceAccount');
      expect(strip(after)).toEqual(strip(before));
    });

    it('step 5: the RBAC overlay moves the gateway-pod Role and RoleBinding to the gateways namespace', () => {
      const cwd = join(parent, 'eip-lambdas');
      const r = bash(`${prelude}\n${block('cat > ../eip-rbac-$STAGE/kustomization.yaml')}`, cwd);
      expect(r.status, r.stderr).toBe(0);
      const docs = render(join(parent, 'eip-rbac-prod'));
      const gateway = docs.filter(
        (d) => (d.kind === 'Role' || d.kind === 'RoleBinding') && d.metadata.name === 'eip-lambdas-handlers',
      );
      expect(gateway.map((d) => d.metadata.namespace)).toEqual(['ovn-system', 'ovn-system']);
      // Events about cluster-scoped EIPs stay in the default namespace.
      const events = docs.filter((d) => d.metadata.name === 'eip-lambdas-handlers-events');
      expect(events.map((d) => d.metadata.namespace)).toEqual(['default', 'default']);
      expect(docs.some((d) => d.kind === 'ConfigMap')).toBe(false); // the parameters are local-config only
    });

    it("step 5, kube-ovn master's spec.namespace: list and exec on pods in each gateway namespace, nothing more", () => {
      const cwd = join(parent, 'eip-lambdas');
      const r = bash(`${prelude}\n${block('GATEWAY_NAMESPACES=')}`, cwd);
      expect(r.status, r.stderr).toBe(0);
      for (const ns of ['team-a', 'team-b']) {
        const docs = render(join(parent, 'eip-rbac-prod-gateways', ns));
        expect(docs.map((d) => `${d.kind}/${d.metadata.namespace}/${d.metadata.name}`)).toEqual([
          `Role/${ns}/eip-lambdas-handlers-gateway-pods`,
          `RoleBinding/${ns}/eip-lambdas-handlers-gateway-pods`,
        ]);
        const role = docs[0] as unknown as { rules: { resources: string[] }[] };
        expect(role.rules.flatMap((x) => x.resources)).toEqual(['pods', 'pods/exec']);
      }
    });
  },
);

function motoWorks(): boolean {
  const a = spawnSync('moto_server', ['--help'], { encoding: 'utf8' });
  const b = spawnSync('aws', ['--version'], { encoding: 'utf8' });
  const j = spawnSync('jq', ['--version'], { encoding: 'utf8' });
  return [a, b, j].every((r) => !r.error && r.status === 0);
}
const noMoto = !motoWorks();
if (noMoto)
  console.warn('moto_server, the AWS CLI or jq is missing: the AWS blocks of docs/deploy-eks.md are not run');

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe.skipIf(noMoto)('the AWS CLI blocks, against moto_server', () => {
  let moto: ChildProcess;
  let dir: string;
  let endpoint: string;
  let env: Record<string, string>;
  /** Every AWS CLI call of a block goes to moto; `kubectl` and `npx` are recorded in calls.log. */
  let prelude: string;
  const run = (script: string) => bash(`${prelude}\n${script}`, dir, env);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'guide-moto-'));
    const port = await freePort();
    endpoint = `http://127.0.0.1:${port}`;
    moto = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
    env = {
      AWS_ACCESS_KEY_ID: 'testing',
      AWS_SECRET_ACCESS_KEY: 'testing',
      AWS_CONFIG_FILE: join(dir, 'aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, 'aws-credentials'),
      KUBECONFIG: join(dir, 'kubeconfig'),
    };
    prelude = [
      `aws() { command aws --endpoint-url ${endpoint} "$@"; }`,
      `kubectl() { echo "kubectl $*" >> ${dir}/calls.log; }`,
      `npx() { echo "npx $*" >> ${dir}/calls.log; }`,
      'CLUSTER=prod-1 REGION=eu-west-1 STAGE=prod',
    ].join('\n');
    for (let i = 0; ; i++) {
      const r = run('aws sts get-caller-identity --region eu-west-1 >/dev/null');
      if (r.status === 0) break;
      if (i > 100) throw new Error(`moto_server did not start: ${r.stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // The cluster, and a stand-in for the stack: the outputs the guide reads, the queue and the publish policy.
    const stack = {
      Resources: {
        DeadLetterQueue: { Type: 'AWS::SQS::Queue', Properties: { QueueName: 'eip-lambdas-prod-dlq' } },
        BridgePublishPolicy: {
          Type: 'AWS::IAM::ManagedPolicy',
          Properties: {
            ManagedPolicyName: 'eip-lambdas-prod-bridge-publish',
            PolicyDocument: {
              Version: '2012-10-17',
              Statement: [{ Effect: 'Allow', Action: ['events:PutEvents'], Resource: '*' }],
            },
          },
        },
      },
      Outputs: {
        DeadLetterQueueUrl: { Value: { Ref: 'DeadLetterQueue' } },
        BridgePublishPolicyArn: { Value: { Ref: 'BridgePublishPolicy' } },
        ...Object.fromEntries(
          ['Add', 'Update', 'Reset', 'Delete', 'Gc'].map((f) => [
            `${f}RoleArn`,
            { Value: `arn:aws:iam::123456789012:role/eip-lambdas-prod-${f.toLowerCase()}-eu-west-1` },
          ]),
        ),
      },
    };
    writeFileSync(join(dir, 'stack.json'), JSON.stringify(stack));
    const setup = run(
      [
        'aws iam create-role --region $REGION --role-name eks --assume-role-policy-document "{}" >/dev/null',
        'aws eks create-cluster --region $REGION --name $CLUSTER --role-arn arn:aws:iam::123456789012:role/eks \\',
        '  --resources-vpc-config subnetIds=subnet-0123456789abcdef0 >/dev/null',
        'aws cloudformation create-stack --region $REGION --stack-name eip-lambdas-$STAGE \\',
        '  --template-body file://stack.json >/dev/null',
      ].join('\n'),
    );
    expect(setup.status, setup.stderr).toBe(0);
    mkdirSync(join(dir, 'out'));
  }, 120_000);
  afterAll(() => {
    moto?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  const step1 = () => block('PARTITION=$(aws sts get-caller-identity');
  const outputFn = () => block('output() {');
  const byHand = () => block('aws iam create-role --region $REGION --role-name $BRIDGE_ROLE');

  it('step 1 finds the account and partition and writes the kubeconfig; step 7 makes the by-hand IRSA role', () => {
    const r = run(
      [
        step1(),
        outputFn(),
        byHand(),
        'echo "$ACCOUNT $PARTITION $BRIDGE_ROLE_ARN $PUBLISH_POLICY_ARN $OIDC" > out/vars',
        'aws iam get-role --region $REGION --role-name $BRIDGE_ROLE --query Role.AssumeRolePolicyDocument > out/trust.json',
        'aws iam list-attached-role-policies --region $REGION --role-name $BRIDGE_ROLE > out/attached.json',
      ].join('\n'),
    );
    expect(r.status, r.stderr).toBe(0);
    const [account, partition, role, policy, oidc] = readFileSync(join(dir, 'out/vars'), 'utf8')
      .trim()
      .split(' ');
    expect([account, partition]).toEqual(['123456789012', 'aws']);
    expect(role).toBe('arn:aws:iam::123456789012:role/eip-lambdas-prod-bridge');
    expect(policy).toBe('arn:aws:iam::123456789012:policy/eip-lambdas-prod-bridge-publish');
    expect(oidc).toMatch(/^oidc\.eks\.eu-west-1\.amazonaws\.com\/id\/\w+$/); // the issuer, without https://
    expect(readFileSync(env.KUBECONFIG!, 'utf8')).toContain('cluster/prod-1');
    const trust = JSON.parse(readFileSync(join(dir, 'out/trust.json'), 'utf8')) as Any;
    expect(trust.Statement[0]).toEqual({
      Effect: 'Allow',
      Principal: { Federated: `arn:aws:iam::123456789012:oidc-provider/${oidc}` },
      Action: 'sts:AssumeRoleWithWebIdentity',
      Condition: {
        StringEquals: {
          [`${oidc}:sub`]: 'system:serviceaccount:eip-lambdas:eip-lambdas-bridge',
          [`${oidc}:aud`]: 'sts.amazonaws.com',
        },
      },
    });
    const attached = JSON.parse(readFileSync(join(dir, 'out/attached.json'), 'utf8')) as Any;
    expect(attached.AttachedPolicies.map((p: Any) => p.PolicyArn)).toEqual([policy]);
  }, 240_000);

  it('step 10 removes in order: bridge, the by-hand role (detached first), RBAC, access entries, then the stack', () => {
    // The role the previous test made still holds the publish policy: IAM (and moto) refuse to delete it so.
    const refused = run('aws iam delete-role --region $REGION --role-name eip-lambdas-prod-bridge');
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toMatch(/DeleteConflict/);
    // moto has no EKS access entries: record those calls, send the rest to moto.
    const removal = block('npx osls remove');
    const r = run(
      [
        outputFn(),
        'BRIDGE_ROLE=eip-lambdas-prod-bridge PUBLISH_POLICY_ARN=$(output BridgePublishPolicyArn)',
        'PARAMS=(--stage $STAGE --region $REGION --param="eksClusterName=$CLUSTER")',
        `aws() { if [ "$1 $2" = "eks delete-access-entry" ]; then echo "aws $*" >> ${dir}/calls.log; else command aws --endpoint-url ${endpoint} "$@"; fi; }`,
        removal,
      ].join('\n'),
    );
    expect(r.status, r.stderr).toBe(0);
    const calls = readFileSync(join(dir, 'calls.log'), 'utf8').trim().split('\n');
    expect(calls[0]).toBe('kubectl delete -k ../eip-bridge-prod');
    expect(calls[1]).toBe('kubectl delete -k infra/rbac');
    const entries = calls.slice(2, 7);
    expect(entries).toHaveLength(5);
    for (const [i, f] of ['add', 'update', 'reset', 'delete', 'gc'].entries())
      expect(entries[i]).toBe(
        `aws eks delete-access-entry --cluster-name prod-1 --region eu-west-1 --principal-arn arn:aws:iam::123456789012:role/eip-lambdas-prod-${f}-eu-west-1`,
      );
    expect(calls[7]).toBe('npx osls remove --stage prod --region eu-west-1 --param=eksClusterName=prod-1');
    expect(calls).toHaveLength(8);
    // The role is gone and nothing holds the publish policy any more: the stack can delete it.
    const after = run(
      [
        'aws iam get-role --region $REGION --role-name eip-lambdas-prod-bridge 2> out/get-role.err || true',
        'aws iam list-entities-for-policy --region $REGION --output json \\',
        '  --policy-arn arn:aws:iam::123456789012:policy/eip-lambdas-prod-bridge-publish > out/holders.json',
      ].join('\n'),
    );
    expect(after.status, after.stderr).toBe(0);
    expect(readFileSync(join(dir, 'out/get-role.err'), 'utf8')).toMatch(/NoSuchEntity/);
    expect(JSON.parse(readFileSync(join(dir, 'out/holders.json'), 'utf8')).PolicyRoles).toEqual([]);
  }, 240_000);

  it('step 11 reads both kinds of dead letter: EIP, handler, reason, why, attempts, error', () => {
    const detail = JSON.parse(readFileSync(join(root, 'events/add.json'), 'utf8'));
    const envelope = {
      version: '0',
      id: '6a7e8feb-b491-4cf7-a9f1-bf3703467718',
      'detail-type': `IptablesEIP ${detail.handler}`,
      source: 'eip-lambdas.bridge',
      account: '123456789012',
      time: '2026-12-01T10:00:00Z',
      region: 'eu-west-1',
      resources: [],
      detail,
    };
    // Lambda's on-failure destination record (asynchronous invocation record).
    const lambdaRecord = {
      version: '1.0',
      timestamp: '2026-12-01T10:04:12.000Z',
      requestContext: {
        requestId: 'e4b46cbf-b738-47b8-b3c5-f1e4dd2f5a61',
        functionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:eip-lambdas-prod-add:$LATEST',
        condition: 'RetriesExhausted',
        approximateInvokeCount: 3,
      },
      requestPayload: envelope,
      responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
      responsePayload: {
        errorType: 'GatewayNotReadyError',
        errorMessage: 'gateway pod not ready',
        trace: [],
      },
    };
    // A rule's dead letter: the event itself, the error in message attributes.
    const attrs = {
      ERROR_CODE: { DataType: 'String', StringValue: 'Throttling' },
      ERROR_MESSAGE: { DataType: 'String', StringValue: 'Rate exceeded' },
      RETRY_ATTEMPTS: { DataType: 'String', StringValue: '10' },
      RULE_ARN: {
        DataType: 'String',
        StringValue: 'arn:aws:events:eu-west-1:123456789012:rule/eip-lambdas-prod/x',
      },
    };
    writeFileSync(join(dir, 'lambda.json'), JSON.stringify(lambdaRecord));
    writeFileSync(
      join(dir, 'rule.json'),
      JSON.stringify({ ...envelope, detail: { ...detail, handler: 'add' } }),
    );
    writeFileSync(join(dir, 'attrs.json'), JSON.stringify(attrs));
    // A batch (ADR 0112) whose second member failed every retry: only that member is listed. A rule's dead letter
    // of a batch: every member.
    const batch = JSON.parse(readFileSync(join(root, 'events/add-batch.json'), 'utf8'));
    const failed = batch.events[1].object.name as string;
    writeFileSync(
      join(dir, 'batch.json'),
      JSON.stringify({
        ...lambdaRecord,
        requestPayload: { ...envelope, detail: batch },
        responsePayload: {
          errorType: 'BatchMembersFailedError',
          errorMessage: `1 of ${batch.events.length} events will be retried: ${failed} (LeaseHeld)`,
          trace: [],
        },
      }),
    );
    writeFileSync(join(dir, 'batch-rule.json'), JSON.stringify({ ...envelope, detail: batch }));
    const send = run(
      [
        outputFn(),
        'Q=$(output DeadLetterQueueUrl)',
        'aws sqs send-message --region $REGION --queue-url "$Q" --message-body file://lambda.json >/dev/null',
        'aws sqs send-message --region $REGION --queue-url "$Q" --message-body file://rule.json \\',
        '  --message-attributes file://attrs.json >/dev/null',
        'aws sqs send-message --region $REGION --queue-url "$Q" --message-body file://batch.json >/dev/null',
        'aws sqs send-message --region $REGION --queue-url "$Q" --message-body file://batch-rule.json \\',
        '  --message-attributes file://attrs.json >/dev/null',
      ].join('\n'),
    );
    expect(send.status, send.stderr).toBe(0);
    const r = run([outputFn(), block('jq -r')].join('\n'));
    expect(r.status, r.stderr).toBe(0);
    const rows = r.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('\t'))
      .sort((a, b) => a.join(' ').localeCompare(b.join(' ')));
    const name = detail.object.name as string;
    const members = batch.events.map((e: { object: { name: string } }) => e.object.name) as string[];
    expect(rows).toEqual(
      [
        [
          name,
          'add',
          detail.reason,
          'RetriesExhausted',
          '3',
          'GatewayNotReadyError',
          'gateway pod not ready',
        ],
        [name, 'add', detail.reason, 'undelivered', '10', 'Throttling', 'Rate exceeded'],
        [
          failed,
          'add',
          'added',
          'RetriesExhausted',
          '3',
          'BatchMembersFailedError',
          `1 of ${members.length} events will be retried: ${failed} (LeaseHeld)`,
        ],
        ...members.map((m) => [m, 'add', 'added', 'undelivered', '10', 'Throttling', 'Rate exceeded']),
      ].sort((a, b) => a.join(' ').localeCompare(b.join(' '))),
    );
  }, 240_000);
});
