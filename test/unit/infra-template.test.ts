// biome-ignore-all lint/suspicious/noTemplateCurlyInString: CloudFormation Fn::Sub strings, not templates
/**
 * The deploy path, through its public contract: `osls package` (what `npm run package` runs) builds the template
 * offline, and the template is read back. Parameters are validated while it is built; every function has its own
 * role with only what it uses; rule targets retry and dead-letter; the table is protected; the outputs an operator
 * needs are there; and the template passes the cfn-lint rules this stack once broke (checked here directly, and by
 * cfn-lint itself where it is installed).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../shared/config/config.js';
import { profileRegion } from '../../shared/config/region.js';

const root = join(import.meta.dirname, '../..');
const require = createRequire(import.meta.url);
const params = require('../../infra/params.cjs') as {
  validate(raw: Record<string, string>): Record<string, unknown>;
  regionOf(
    options: Record<string, string>,
    env: Record<string, string>,
    read?: (path: string) => string | undefined,
  ): { region: string; from: string } | undefined;
  profileRegion(text: string, profile: string): string | undefined;
  PARAMETERS: string[];
};

const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIBexample\n-----END CERTIFICATE-----\n').toString(
  'base64',
);
const EKS = {
  eksClusterName: 'prod-1',
  eksEndpoint: 'https://ABCDEF0123456789.gr7.eu-west-1.eks.amazonaws.com',
  eksCaData: CA,
};
const SUBNETS = ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1'];
const SG = 'sg-0123456789abcdef0';
const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:ops';
const BOUNDARY = 'arn:aws:iam::123456789012:policy/eip-boundary';
const ISSUER = 'oidc.eks.eu-west-1.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF';

function osls(args: string[], env: Record<string, string> = {}) {
  const base = { ...process.env };
  for (const k of ['AWS_REGION', 'AWS_DEFAULT_REGION', 'AWS_PROFILE', 'AWS_CONFIG_FILE']) delete base[k];
  return spawnSync(
    process.execPath,
    [join(root, 'node_modules/osls/bin/serverless.js'), 'package', ...args],
    {
      cwd: root,
      encoding: 'utf8',
      env: {
        ...base,
        AWS_CONFIG_FILE: join(tmpdir(), 'eip-no-aws-config'),
        SLS_TELEMETRY_DISABLED: '1',
        SLS_NOTIFICATIONS_MODE: 'off',
        ...env,
      },
    },
  );
}
const paramArgs = (p: Record<string, string>) => Object.entries(p).map(([k, v]) => `--param=${k}=${v}`);

// biome-ignore lint/suspicious/noExplicitAny: a CloudFormation template is read as plain JSON
type Json = any;
/** Left out of the stack: no value, or AWS::NoValue, which CloudFormation removes. */
const absent = (v: Json): boolean => v === undefined || JSON.stringify(v) === '{"Ref":"AWS::NoValue"}';

describe('deploy parameters (infra/params.cjs)', () => {
  it('name every missing EKS parameter and where its value comes from, all at once', () => {
    expect(() => params.validate({})).toThrow(
      /eksClusterName is required.*list-clusters[\s\S]*eksEndpoint is required.*cluster\.endpoint[\s\S]*eksCaData is required.*certificateAuthority\.data/,
    );
  });

  it.each([
    [{ eksEndpoint: 'http://x.example' }, /eksEndpoint .* must be an https:\/\/ URL/],
    [{ eksCaData: 'bm90IGEgY2VydA==' }, /eksCaData must be the base64 of a PEM certificate/],
    [{ vpcSubnetIds: SUBNETS.join(',') }, /vpcSubnetIds and vpcSecurityGroupIds go together/],
    [{ vpcSecurityGroupIds: SG }, /vpcSubnetIds and vpcSecurityGroupIds go together/],
    [{ vpcSubnetIds: 'subnet-1', vpcSecurityGroupIds: SG }, /"subnet-1" is not a subnet id/],
    [{ vpcSubnetIds: SUBNETS[0]!, vpcSecurityGroupIds: 'default' }, /"default" is not a security group id/],
    [{ addConcurrency: '0' }, /addConcurrency .* must be an integer 1\.\.1000/],
    [{ gcConcurrency: 'x' }, /gcConcurrency/],
    [{ alarmTopicArn: 'ops' }, /alarmTopicArn "ops" is not an SNS topic ARN/],
    [{ logLevel: 'trace' }, /logLevel "trace"/],
    [{ natGwNamespace: 'Kube_System' }, /natGwNamespace/],
    [{ execTimeoutMs: '30000' }, /execTimeoutMs/],
    [{ kubeOvnRelease: '1.11' }, /kubeOvnRelease must be auto or a kube-ovn release the product speaks/],
    [{ kubeOvnRelease: 'latest' }, /kubeOvnRelease/],
    [{ driftPeriodSeconds: '45' }, /driftPeriodSeconds must be 10, 12, 15, 20, 30 or 60/],
    [{ gcEveryMinutes: '0' }, /gcEveryMinutes must be an integer 1\.\.1440/],
    [{ bridgeOidcIssuer: 'oidc.eks.eu-west-1.amazonaws.com/id/AB' }, /bridgeOidcIssuer .* OIDC issuer URL/],
    [{ bridgeOidcIssuer: `https://${ISSUER}`, bridgePodIdentity: 'true' }, /choose one/],
    [{ bridgePodIdentity: 'yes' }, /bridgePodIdentity must be true or false/],
    [{ tracing: 'on' }, /tracing must be true or false/],
    [{ permissionsBoundary: 'eip-boundary' }, /permissionsBoundary "eip-boundary" is not an IAM policy ARN/],
    [{ stackTags: 'team' }, /stackTags: "team" is not key=value/],
    [{ stackTags: 'aws:owner=me' }, /stackTags: "aws:owner=me"/],
    [{ region: '' }, /no region: give --region, or set AWS_REGION .* AWS profile/],
    [{ region: 'eu-west-1;x' }, /region "eu-west-1;x" is not an AWS region name/],
  ])('refuse %o', (bad, message) => {
    expect(() => params.validate({ ...EKS, ...bad })).toThrow(message);
  });

  it('leave VpcConfig, the VPC policy and alarm actions out when not configured', () => {
    const v = params.validate(EKS);
    expect(v.vpcConfig).toEqual({ Ref: 'AWS::NoValue' });
    expect(v.managedPolicies).toEqual({ Ref: 'AWS::NoValue' });
    expect(v.alarmActions).toEqual({ Ref: 'AWS::NoValue' });
    expect(v.tracingConfig).toEqual({ Ref: 'AWS::NoValue' });
    expect(v.permissionsBoundary).toEqual({ Ref: 'AWS::NoValue' });
    expect(v.stackTags).toEqual({});
    expect(v.optionalResources).toEqual({});
    expect(v.concurrency).toEqual({ add: 10, update: 10, reset: 5, delete: 5, gc: 1 });
  });

  it('every parameter has a default in serverless.yml and a row in docs/configuration.md', () => {
    const sls = readFileSync(join(root, 'serverless.yml'), 'utf8');
    const doc = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
    for (const p of params.PARAMETERS) {
      expect(sls, p).toMatch(new RegExp(`^    ${p}: `, 'm'));
      expect(doc, p).toContain(`| \`${p}\``);
    }
  });
});

describe('the region of the stack (infra/params.cjs)', () => {
  const CONFIG = '[default]\nregion = eu-north-1\n[profile prod]\nregion = ap-south-2\n';
  const read = (p: string) => (p === '/cfg' ? CONFIG : undefined);

  it('is --region, else AWS_REGION, AWS_DEFAULT_REGION, the profile of --aws-profile or AWS_PROFILE', () => {
    const env = { AWS_CONFIG_FILE: '/cfg' };
    const all = { ...env, AWS_REGION: 'eu-west-2', AWS_DEFAULT_REGION: 'eu-west-3' };
    expect(params.regionOf({ region: 'eu-west-1' }, all, read)).toEqual({
      region: 'eu-west-1',
      from: '--region',
    });
    expect(params.regionOf({}, all, read)?.region).toBe('eu-west-2');
    expect(params.regionOf({}, { ...env, AWS_DEFAULT_REGION: 'eu-west-3' }, read)?.region).toBe('eu-west-3');
    expect(params.regionOf({}, env, read)?.region).toBe('eu-north-1');
    expect(params.regionOf({}, { ...env, AWS_PROFILE: 'prod' }, read)?.region).toBe('ap-south-2');
    expect(params.regionOf({ 'aws-profile': 'prod' }, env, read)?.region).toBe('ap-south-2');
    expect(params.regionOf({}, { AWS_CONFIG_FILE: '/none' }, read)).toBeUndefined();
  });

  it('reads the config file as the handlers do (shared/config/region.ts)', () => {
    const texts = [
      CONFIG,
      '[profile prod]\ns3 =\n  region = us-west-2\nregion = sa-east-1 # comment\n',
      '[prod]\nregion = us-east-2\n',
      '; only a comment\n',
      '[profile default]\nregion=cn-north-1',
    ];
    for (const text of texts)
      for (const profile of ['default', 'prod'])
        expect(params.profileRegion(text, profile), `${profile} in ${JSON.stringify(text)}`).toBe(
          profileRegion(text, profile),
        );
  });
});

describe('docs/configuration.md', () => {
  const doc = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
  /** The variable tables of one section: each row's variables (first cell) and its cells. */
  const rows = (heading: string) => {
    const start = doc.indexOf(`## ${heading}`);
    const end = doc.indexOf('\n## ', start + 1);
    return doc
      .slice(start, end)
      .split('\n')
      .filter((l) => l.startsWith('| `'))
      .map((l) => {
        const cells = l.split('|').map((c) => c.trim());
        return { vars: [...cells[1]!.matchAll(/`([A-Z_][A-Z0-9_]+)`/g)].map((m) => m[1]!), cells };
      });
  };
  const handlers = rows('Handlers (`add`, `update`, `reset`, `delete`, `gc`) and the local tools');
  const bridge = rows('Bridge (container)');

  /** Every environment variable some code reads: `env.X`, `process.env.X`, the bridge's `text('X')`/`int('X', …)`. */
  function read(paths: string[], skip: string[] = []): Set<string> {
    const out = new Set<string>();
    const files = (p: string): string[] =>
      skip.some((x) => p.endsWith(x))
        ? []
        : statSync(p).isDirectory()
          ? readdirSync(p).flatMap((f) => files(join(p, f)))
          : p.endsWith('.ts')
            ? [p]
            : [];
    for (const file of paths.flatMap((p) => files(join(root, p))))
      for (const m of readFileSync(file, 'utf8').matchAll(
        /\benv\.([A-Z_][A-Z0-9_]+)|\b(?:text|int|intIn|choice)\('([A-Z_][A-Z0-9_]+)'/g,
      ))
        out.add((m[1] ?? m[2])!);
    return out;
  }
  const handlerReads = read(['shared', 'functions'], ['shared/bridge', 'functions/bridge']);
  const bridgeReads = new Set([
    ...read(['shared/bridge', 'functions/bridge', 'shared/config/region.ts']),
    ...['ADD', 'UPDATE', 'RESET', 'DELETE'].map((h) => `${h}_FUNCTION`), // functionVariable()
  ]);
  // The provider's environment (every function) and each function's own (the gc function's schedule).
  const sls = parse(readFileSync(join(root, 'serverless.yml'), 'utf8').replace(/<<: \*\w+/g, '')) as Json;
  const stackSets = [
    ...new Set([
      ...Object.keys(sls.provider.environment),
      ...Object.values(sls.functions as Record<string, Json>).flatMap((f) =>
        Object.keys(f.environment ?? {}),
      ),
    ]),
  ];

  it('lists each variable once per table, and only variables that are read or set', () => {
    for (const [name, table, reads] of [
      ['handlers', handlers, handlerReads],
      ['bridge', bridge, bridgeReads],
    ] as const) {
      const listed = table.flatMap((r) => r.vars);
      expect(
        listed.filter((v, i) => listed.indexOf(v) !== i),
        `${name}: listed twice`,
      ).toEqual([]);
      // Listed but neither read by the code nor set by the stack: a variable that does nothing.
      const inert = listed.filter((v) => !reads.has(v) && !(name === 'handlers' && stackSets.includes(v)));
      expect(inert, `${name}: listed, never read or set`).toEqual([]);
    }
  });

  it("lists every variable the handlers' and the bridge's code reads", () => {
    const handlerListed = handlers.flatMap((r) => r.vars);
    // HOME and USERPROFILE only locate ~/.aws/config (AWS_CONFIG_FILE's default); AWS_ACCESS_KEY_ID is the SDK's.
    const unlisted = (reads: Set<string>, listed: string[]) =>
      [...reads].filter(
        (v) => !listed.includes(v) && !['HOME', 'USERPROFILE', 'AWS_ACCESS_KEY_ID'].includes(v),
      );
    expect(unlisted(handlerReads, handlerListed)).toEqual([]);
    expect(unlisted(bridgeReads, [...bridge.flatMap((r) => r.vars), ...handlerListed])).toEqual([]);
  });

  it('says "the stack" for exactly the variables serverless.yml sets on the functions', () => {
    const byStack = handlers.filter((r) => r.cells[4]!.startsWith('the stack')).flatMap((r) => r.vars);
    expect(byStack.sort()).toEqual([...stackSets].sort());
  });

  it('lists every environment variable the handlers and the bridge document in their configuration code', () => {
    const doc = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
    for (const file of ['shared/config/config.ts', 'shared/bridge/config.ts']) {
      const table = readFileSync(join(root, file), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith(' * | `'));
      expect(table.length, file).toBeGreaterThan(5);
      for (const line of table)
        for (const [, v] of line.split('|')[1]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g))
          expect(doc, `${file}: ${v}`).toContain(`\`${v}\``);
    }
  });
});

/** File names in a zip's central directory (enough of the format to list an artifact; no unzip on CI). */
function zipEntries(zip: Buffer): string[] {
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0) throw new Error('not a zip: no end of central directory');
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error('corrupt central directory');
    const nameLength = zip.readUInt16LE(at + 28);
    names.push(zip.toString('utf8', at + 46, at + 46 + nameLength));
    at += 46 + nameLength + zip.readUInt16LE(at + 30) + zip.readUInt16LE(at + 32);
  }
  return names;
}

describe('npm run package', () => {
  let out: string;
  let template: Json;
  let r: Json;
  let state: Json;
  /** A second stack: no VPC, no tracing, the bridge's role for EKS Pod Identity, region from the environment. */
  let podIdentity: Json;

  beforeAll(() => {
    out = mkdtempSync(join(tmpdir(), 'eip-package-'));
    // The region comes from the AWS profile (no --region, no AWS_REGION), as it would on an operator's machine.
    const awsConfig = join(out, 'aws-config');
    writeFileSync(awsConfig, '[default]\nregion = us-east-2\n[profile ops]\nregion = eu-west-1\n');
    const run = osls(
      [
        '--package',
        out,
        ...paramArgs({
          ...EKS,
          vpcSubnetIds: SUBNETS.join(','),
          vpcSecurityGroupIds: SG,
          alarmTopicArn: TOPIC,
          addConcurrency: '7',
          bridgeOidcIssuer: `https://${ISSUER}`,
          tracing: 'true',
          permissionsBoundary: BOUNDARY,
          stackTags: 'team=netops,cost-centre=42',
        }),
      ],
      { AWS_CONFIG_FILE: awsConfig, AWS_PROFILE: 'ops' },
    );
    expect(run.status, run.stdout + run.stderr).toBe(0);
    template = JSON.parse(readFileSync(join(out, 'cloudformation-template-update-stack.json'), 'utf8'));
    state = JSON.parse(readFileSync(join(out, 'serverless-state.json'), 'utf8'));
    r = template.Resources;
    const second = join(out, 'pod-identity');
    const run2 = osls(
      ['--package', second, '--stage', 'prod', ...paramArgs({ ...EKS, bridgePodIdentity: 'true' })],
      {
        AWS_REGION: 'eu-central-1',
      },
    );
    expect(run2.status, run2.stdout + run2.stderr).toBe(0);
    podIdentity = JSON.parse(readFileSync(join(second, 'cloudformation-template-update-stack.json'), 'utf8'));
  }, 400_000);
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('fails without the EKS parameters, naming each one', () => {
    const run = osls(['--package', join(out, 'never')]);
    expect(run.status).not.toBe(0);
    const text = run.stdout + run.stderr;
    for (const p of ['eksClusterName', 'eksEndpoint', 'eksCaData'])
      expect(text).toContain(`parameter ${p} is required`);
    // No --region, no AWS_REGION, no profile with a region: stopped, not deployed to a default region.
    expect(text).toContain('no region: give --region');
  }, 120_000);

  it("take the region from the AWS profile, or the environment's, when --region is not given", () => {
    expect(state.service.provider.region).toBe('eu-west-1'); // profile ops, not [default]
    expect(JSON.stringify(r.AddRole.Properties.RoleName)).toContain('-add-eu-west-1');
    expect(JSON.stringify(podIdentity.Resources.AddRole.Properties.RoleName)).toContain('-add-eu-central-1');
  });

  it('tag the stack with the stackTags parameter', () => {
    expect(state.service.provider.stackTags).toEqual({ team: 'netops', 'cost-centre': '42' });
  });

  it('put the permissions boundary on every role the stack creates', () => {
    const roles = Object.entries(r as Record<string, Json>).filter(([, x]) => x.Type === 'AWS::IAM::Role');
    expect(roles.map(([k]) => k).sort()).toEqual([
      'AddRole',
      'BridgeRole',
      'DeleteRole',
      'GcRole',
      'ResetRole',
      'UpdateRole',
    ]);
    for (const [name, role] of roles) expect(role.Properties.PermissionsBoundary, name).toBe(BOUNDARY);
    // Without the parameter, no boundary at all.
    for (const x of Object.values(podIdentity.Resources as Record<string, Json>))
      if (x.Type === 'AWS::IAM::Role') expect(absent(x.Properties.PermissionsBoundary)).toBe(true);
  });

  it('trace every function with X-Ray when tracing=true, with only the two write actions X-Ray needs', () => {
    const policy = r.TracingPolicy;
    expect(policy.Type).toBe('AWS::IAM::ManagedPolicy');
    expect(policy.Properties.PolicyDocument.Statement).toEqual([
      { Effect: 'Allow', Action: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'], Resource: '*' },
    ]);
    for (const C of ['Add', 'Update', 'Reset', 'Delete', 'Gc']) {
      expect(r[`${C}LambdaFunction`].Properties.TracingConfig).toEqual({ Mode: 'Active' });
      expect(r[`${C}Role`].Properties.ManagedPolicyArns).toContainEqual({ Ref: 'TracingPolicy' });
      const off = podIdentity.Resources;
      expect(absent(off[`${C}LambdaFunction`].Properties.TracingConfig)).toBe(true);
      expect(absent(off[`${C}Role`].Properties.ManagedPolicyArns)).toBe(true);
    }
    expect(podIdentity.Resources.TracingPolicy).toBeUndefined();
  });

  it('name the partition, never aws: every ARN the template builds is arn:${AWS::Partition}:…', () => {
    for (const t of [template, podIdentity]) {
      const given = [TOPIC, BOUNDARY];
      const literal = JSON.stringify(t).match(/arn:aws[a-z-]*:[^"]*/g) ?? [];
      expect(literal.filter((a) => !given.includes(a))).toEqual([]);
    }
  });

  it('let the bridge publish to and describe its own bus only, and write metrics only in its namespace', () => {
    const [events, metrics] = r.BridgePublishPolicy.Properties.PolicyDocument.Statement;
    expect(events).toEqual({
      Effect: 'Allow',
      Action: ['events:PutEvents', 'events:DescribeEventBus'],
      Resource: { 'Fn::GetAtt': ['EventBus', 'Arn'] },
    });
    expect(metrics.Action).toEqual(['cloudwatch:PutMetricData']);
    expect(metrics.Condition).toEqual({ StringEquals: { 'cloudwatch:namespace': expect.any(String) } });
  });

  it("alarm and plot, per stage, in the namespace that stage's functions and bridge publish in", () => {
    for (const [stage, t] of [
      ['dev', template],
      ['prod', podIdentity],
    ] as const) {
      const want = `EipLambdas/${stage}`;
      for (const C of ['Add', 'Update', 'Reset', 'Delete', 'Gc']) {
        const env = t.Resources[`${C}LambdaFunction`].Properties.Environment.Variables;
        expect(env.STAGE).toBe(stage);
        expect(loadConfig({ ...env, AWS_REGION: 'eu-west-1' }).metricsNamespace).toBe(want);
      }
      const [, metrics] = t.Resources.BridgePublishPolicy.Properties.PolicyDocument.Statement;
      expect(metrics.Condition.StringEquals['cloudwatch:namespace']).toBe(want);
      const own = (Object.values(t.Resources) as Json[])
        .filter((x) => x.Type === 'AWS::CloudWatch::Alarm')
        .flatMap((a) =>
          a.Properties.Metrics
            ? a.Properties.Metrics.map((m: Json) => /SCHEMA\("([^"]+)"/.exec(m.Expression)![1])
            : [a.Properties.Namespace],
        )
        .filter((n: string) => !n.startsWith('AWS/'));
      expect(own.length).toBeGreaterThanOrEqual(4);
      expect(new Set(own)).toEqual(new Set([want]));
      // The dashboard of the stage: every SEARCH in the namespace CloudFormation substitutes, which is the stage's.
      const [body, vars] = t.Resources.Dashboard.Properties.DashboardBody['Fn::Sub'];
      expect(vars).toEqual({ MetricsNamespace: want });
      const searches = (body as string).match(/SEARCH\('\{[^,]+,/g) ?? [];
      expect(searches.length).toBeGreaterThan(10);
      expect(new Set(searches)).toEqual(new Set(["SEARCH('{${MetricsNamespace},"]));
    }
  });

  it('create the bridge role for EKS Pod Identity, trusted by the Pod Identity service for its ServiceAccount only', () => {
    const res = podIdentity.Resources;
    const [stmt] = res.BridgeRole.Properties.AssumeRolePolicyDocument.Statement;
    expect(stmt).toEqual({
      Effect: 'Allow',
      Principal: { Service: 'pods.eks.amazonaws.com' },
      Action: ['sts:AssumeRole', 'sts:TagSession'],
      Condition: {
        StringEquals: {
          'aws:RequestTag/eks-cluster-name': EKS.eksClusterName,
          'aws:RequestTag/kubernetes-namespace': 'eip-lambdas',
          'aws:RequestTag/kubernetes-service-account': 'eip-lambdas-bridge',
        },
      },
    });
    expect(res.BridgeRole.Properties.ManagedPolicyArns).toEqual([{ Ref: 'BridgePublishPolicy' }]);
    expect(res.BridgePodIdentityAssociation).toEqual({
      Type: 'AWS::EKS::PodIdentityAssociation',
      Properties: {
        ClusterName: EKS.eksClusterName,
        Namespace: 'eip-lambdas',
        ServiceAccount: 'eip-lambdas-bridge',
        RoleArn: { 'Fn::GetAtt': ['BridgeRole', 'Arn'] },
      },
    });
    expect(podIdentity.Outputs.BridgeRoleArn.Value).toEqual({ 'Fn::GetAtt': ['BridgeRole', 'Arn'] });
    expect(r.BridgePodIdentityAssociation).toBeUndefined(); // the IRSA stack has none
  });

  it('ship each function as its bundle alone: no source map in the zip unless sourceMaps=true', () => {
    for (const fn of ['add', 'update', 'reset', 'delete', 'gc'])
      expect(zipEntries(readFileSync(join(out, `${fn}.zip`)))).toEqual([`functions/${fn}/handler.cjs`]);
  });

  const FUNCTIONS = { add: 'Add', update: 'Update', reset: 'Reset', delete: 'Delete', gc: 'Gc' } as const;
  const statements = (role: Json): Json[] =>
    role.Properties.Policies.flatMap((p: Json) => p.PolicyDocument.Statement);
  const actionsOn = (role: Json, service: string): string[] =>
    statements(role)
      .flatMap((s: Json) => s.Action)
      .filter((a: string) => a.startsWith(`${service}:`));

  it('give every function its own role, reserved concurrency, the EKS settings and the VPC', () => {
    const roles = new Set<string>();
    for (const [fn, C] of Object.entries(FUNCTIONS)) {
      const f = r[`${C}LambdaFunction`];
      expect(f.Properties.Role).toEqual({ 'Fn::Sub': `\${${C}Role.Arn}` });
      roles.add(f.Properties.Role['Fn::Sub']);
      expect(f.Properties.ReservedConcurrentExecutions).toBe(
        fn === 'add' ? 7 : (params.validate(EKS).concurrency as Record<string, number>)[fn],
      );
      expect(f.Properties.VpcConfig).toEqual({ SubnetIds: SUBNETS, SecurityGroupIds: [SG] });
      expect(f.Properties.Environment.Variables).toMatchObject({
        EKS_CLUSTER_NAME: EKS.eksClusterName,
        EKS_ENDPOINT: EKS.eksEndpoint,
        EKS_CA_DATA: CA,
        TABLE_NAME: expect.stringMatching(/-ipam$/),
        KUBE_OVN_RELEASE: 'auto',
      });
      expect(r[`${C}Role`].Properties.ManagedPolicyArns).toEqual([
        { 'Fn::Sub': 'arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole' },
        { Ref: 'TracingPolicy' },
      ]);
    }
    expect(roles.size).toBe(5);
    expect(r.IamRoleLambdaExecution).toBeUndefined(); // no shared role
  });

  it('run gc once a minute, with its drift period and collection interval (ADR 0088)', () => {
    expect(r.GcLambdaFunction.Properties.Environment.Variables).toMatchObject({
      DRIFT_PERIOD_SECONDS: '30',
      GC_EVERY_MINUTES: '60',
    });
    const schedules = Object.values(r as Record<string, Json>)
      .filter((x) => x.Type === 'AWS::Events::Rule' && x.Properties.ScheduleExpression)
      .map((x) => [x.Properties.ScheduleExpression, x.Properties.Targets.map((t: Json) => t.Arn)]);
    expect(schedules).toEqual([['rate(1 minute)', [{ 'Fn::GetAtt': ['GcLambdaFunction', 'Arn'] }]]]);
  });

  it('grant the handlers no Scan, and the exact index ARNs; gc alone may Scan', () => {
    const exactIndexes = [
      { 'Fn::Sub': '${IpamTable.Arn}/index/byOwner' },
      { 'Fn::Sub': '${IpamTable.Arn}/index/byFree' },
    ];
    for (const C of ['Add', 'Update', 'Reset', 'Delete']) {
      const role = r[`${C}Role`];
      expect(actionsOn(role, 'dynamodb')).not.toContain('dynamodb:Scan');
      const onIndexes = statements(role).filter((s: Json) => Array.isArray(s.Resource));
      expect(onIndexes).toEqual([{ Effect: 'Allow', Action: ['dynamodb:Query'], Resource: exactIndexes }]);
      expect(actionsOn(role, 'sqs')).toEqual(['sqs:SendMessage']);
    }
    // gc alone may Scan, and only the table (collection and drift check read it consistently; ADR 0085).
    const scans = statements(r.GcRole).filter((s: Json) => s.Action.includes('dynamodb:Scan'));
    expect(scans.map((s: Json) => s.Resource)).toEqual([{ 'Fn::GetAtt': ['IpamTable', 'Arn'] }]);
    // No wildcard resource in any function role.
    for (const C of Object.values(FUNCTIONS))
      expect(JSON.stringify(statements(r[`${C}Role`]))).not.toMatch(/"Resource":"\*"|index\/\*/);
    // Each role writes only its own function's log group.
    for (const [fn, C] of Object.entries(FUNCTIONS)) {
      const logs = statements(r[`${C}Role`]).find((s: Json) => s.Action.includes('logs:PutLogEvents'));
      expect(logs.Resource['Fn::Sub']).toMatch(
        new RegExp(`:log-group:/aws/lambda/eip-lambdas-dev-${fn}:\\*$`),
      );
    }
  });

  it('give every rule target a retry policy and the dead-letter queue, which lets exactly those rules send', () => {
    const rules = Object.values(r).filter((x: Json) => x.Type === 'AWS::Events::Rule') as Json[];
    expect(rules).toHaveLength(5);
    const policy = r.DeadLetterQueuePolicy.Properties.PolicyDocument.Statement[0];
    expect(policy.Principal).toEqual({ Service: 'events.amazonaws.com' });
    const patterns: string[] = policy.Condition.ArnLike['aws:SourceArn'].map((p: Json) =>
      p['Fn::Sub'].replace(/^.*:rule\//, ''),
    );
    for (const rule of rules) {
      const [target] = rule.Properties.Targets;
      expect(target.RetryPolicy).toEqual({ MaximumEventAgeInSeconds: 3600, MaximumRetryAttempts: 10 });
      expect(target.DeadLetterConfig).toEqual({ Arn: { 'Fn::GetAtt': ['DeadLetterQueue', 'Arn'] } });
      const path = rule.Properties.EventBusName
        ? `eip-lambdas-dev/${rule.Properties.Name}`
        : rule.Properties.Name;
      const glob = (p: string) => new RegExp(`^${p.replace(/[.]/g, '\\.').replace(/\*/g, '.*')}$`);
      expect(
        patterns.some((p) => glob(p).test(path)),
        `${path} not in ${patterns}`,
      ).toBe(true);
    }
  });

  it('protect the table from deletion, and output what the operator needs', () => {
    expect(r.IpamTable.DeletionPolicy).toBe('Retain');
    expect(r.IpamTable.Properties.DeletionProtectionEnabled).toBe(true);
    const outputs = Object.keys(template.Outputs);
    for (const o of [
      'EventBusName',
      'EventBusArn',
      'TableName',
      'TableArn',
      'DeadLetterQueueUrl',
      'DeadLetterQueueArn',
      'BridgePublishPolicyArn',
      'AddRoleArn',
      'UpdateRoleArn',
      'ResetRoleArn',
      'DeleteRoleArn',
      'GcRoleArn',
      'BridgeRoleArn',
    ])
      expect(outputs).toContain(o);
    // Every output is explained where an operator looks for it.
    const docs = ['docs/configuration.md', 'docs/deploy-eks.md'].map((f) =>
      readFileSync(join(root, f), 'utf8'),
    );
    // (The framework's own outputs — deployment bucket, function versions — are left out.)
    for (const o of outputs.filter((x) => !/^ServerlessDeploymentBucketName$|QualifiedArn$/.test(x)))
      expect(docs.join('\n'), o).toContain(o);
  });

  it('create the bridge IRSA role for exactly its ServiceAccount when the OIDC issuer is given', () => {
    const role = r.BridgeRole.Properties;
    const [stmt] = role.AssumeRolePolicyDocument.Statement;
    expect(stmt.Principal.Federated).toEqual({
      'Fn::Sub': `arn:\${AWS::Partition}:iam::\${AWS::AccountId}:oidc-provider/${ISSUER}`,
    });
    expect(stmt.Condition.StringEquals).toEqual({
      [`${ISSUER}:sub`]: 'system:serviceaccount:eip-lambdas:eip-lambdas-bridge',
      [`${ISSUER}:aud`]: 'sts.amazonaws.com',
    });
    expect(role.ManagedPolicyArns).toEqual([{ Ref: 'BridgePublishPolicy' }]);
    expect(template.Outputs.BridgeRoleArn.Value).toEqual({ 'Fn::GetAtt': ['BridgeRole', 'Arn'] });
  });

  it('send alarms to the topic given', () => {
    const alarms = Object.values(r).filter((x: Json) => x.Type === 'AWS::CloudWatch::Alarm') as Json[];
    expect(alarms.length).toBeGreaterThanOrEqual(8);
    for (const a of alarms) expect(a.Properties.AlarmActions).toEqual([TOPIC]);
  });

  it('pass the cfn-lint rules this stack relies on: no empty strings, no constant conditions, no redundant DependsOn', () => {
    const empty: string[] = [];
    // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
    const walk = (v: Json, path: string) => {
      if (v === '' && !path.endsWith('.Fn::Join[0]'))
        empty.push(path); // a join's delimiter may be ''
      else if (Array.isArray(v)) for (const [i, x] of v.entries()) walk(x, `${path}[${i}]`);
      else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, `${path}.${k}`);
    };
    walk(r, 'Resources');
    expect(empty).toEqual([]); // E3033
    for (const [name, c] of Object.entries((template.Conditions ?? {}) as Record<string, Json>)) {
      const eq = JSON.stringify(c).match(/"Fn::Equals":\[("[^"]*"),("[^"]*")\]/);
      expect(eq, `condition ${name} compares two constants`).toBeNull(); // W8003
    }
    for (const [name, res] of Object.entries(r as Record<string, Json>)) {
      const body = JSON.stringify(res.Properties ?? {});
      for (const dep of [res.DependsOn ?? []].flat() as string[]) {
        const referenced =
          body.includes(`{"Ref":"${dep}"}`) ||
          body.includes(`["${dep}",`) ||
          new RegExp(`\\$\\{${dep}[.}]`).test(body);
        expect(referenced, `${name} DependsOn ${dep}, already referenced`).toBe(false); // W3005
      }
    }
  });

  it('is clean for cfn-lint itself, where it is installed', (ctx) => {
    const probe = spawnSync('cfn-lint', ['--version'], { encoding: 'utf8' });
    if (probe.error || probe.status !== 0) {
      console.warn('cfn-lint is not installed here: only the rules above were checked');
      ctx.skip();
    }
    const run = spawnSync(
      'cfn-lint',
      [
        join(out, 'cloudformation-template-update-stack.json'),
        join(out, 'pod-identity/cloudformation-template-update-stack.json'),
      ],
      { encoding: 'utf8' },
    );
    expect(run.stdout + run.stderr).toBe('');
    expect(run.status).toBe(0);
  }, 120_000);
});
