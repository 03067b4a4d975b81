// biome-ignore-all lint/suspicious/noTemplateCurlyInString: CloudFormation Fn::Sub strings, not templates
/**
 * The deploy path, through its public contract: `osls package` (what `npm run package` runs) builds the template
 * offline, and the template is read back. Parameters are validated while it is built; every function has its own
 * role with only what it uses; rule targets retry and dead-letter; the table is protected; the outputs an operator
 * needs are there; and the template passes the cfn-lint rules this stack once broke (checked here directly, and by
 * cfn-lint itself where it is installed).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const require = createRequire(import.meta.url);
const params = require('../../infra/params.cjs') as {
  validate(raw: Record<string, string>): Record<string, unknown>;
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
const ISSUER = 'oidc.eks.eu-west-1.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF';

function osls(args: string[]) {
  return spawnSync(
    process.execPath,
    [join(root, 'node_modules/osls/bin/serverless.js'), 'package', ...args],
    {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, SLS_TELEMETRY_DISABLED: '1', SLS_NOTIFICATIONS_MODE: 'off' },
    },
  );
}
const paramArgs = (p: Record<string, string>) => Object.entries(p).map(([k, v]) => `--param=${k}=${v}`);

// biome-ignore lint/suspicious/noExplicitAny: a CloudFormation template is read as plain JSON
type Json = any;

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
    [{ bridgeOidcIssuer: 'oidc.eks.eu-west-1.amazonaws.com/id/AB' }, /bridgeOidcIssuer .* OIDC issuer URL/],
  ])('refuse %o', (bad, message) => {
    expect(() => params.validate({ ...EKS, ...bad })).toThrow(message);
  });

  it('leave VpcConfig, the VPC policy and alarm actions out when not configured', () => {
    const v = params.validate(EKS);
    expect(v.vpcConfig).toEqual({ Ref: 'AWS::NoValue' });
    expect(v.vpcManagedPolicies).toEqual({ Ref: 'AWS::NoValue' });
    expect(v.alarmActions).toEqual({ Ref: 'AWS::NoValue' });
    expect(v.bridgeResources).toEqual({});
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

describe('docs/configuration.md', () => {
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

  beforeAll(() => {
    out = mkdtempSync(join(tmpdir(), 'eip-package-'));
    const run = osls([
      '--package',
      out,
      ...paramArgs({
        ...EKS,
        vpcSubnetIds: SUBNETS.join(','),
        vpcSecurityGroupIds: SG,
        alarmTopicArn: TOPIC,
        addConcurrency: '7',
        bridgeOidcIssuer: `https://${ISSUER}`,
      }),
    ]);
    expect(run.status, run.stdout + run.stderr).toBe(0);
    template = JSON.parse(readFileSync(join(out, 'cloudformation-template-update-stack.json'), 'utf8'));
    r = template.Resources;
  }, 240_000);
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('fails without the EKS parameters, naming each one', () => {
    const run = osls(['--package', join(out, 'never')]);
    expect(run.status).not.toBe(0);
    const text = run.stdout + run.stderr;
    for (const p of ['eksClusterName', 'eksEndpoint', 'eksCaData'])
      expect(text).toContain(`parameter ${p} is required`);
  }, 120_000);

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
      ]);
    }
    expect(roles.size).toBe(5);
    expect(r.IamRoleLambdaExecution).toBeUndefined(); // no shared role
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
    // gc alone may Scan: the table (its drift check) and the byOwner index (collection), nothing else.
    const scans = statements(r.GcRole).filter((s: Json) => s.Action.includes('dynamodb:Scan'));
    expect(scans.map((s: Json) => s.Resource)).toEqual([
      { 'Fn::GetAtt': ['IpamTable', 'Arn'] },
      { 'Fn::Sub': '${IpamTable.Arn}/index/byOwner' },
    ]);
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
    expect(alarms.length).toBeGreaterThan(10);
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
    const run = spawnSync('cfn-lint', [join(out, 'cloudformation-template-update-stack.json')], {
      encoding: 'utf8',
    });
    expect(run.stdout + run.stderr).toBe('');
    expect(run.status).toBe(0);
  }, 120_000);
});
