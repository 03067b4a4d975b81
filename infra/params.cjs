// Deploy parameters of serverless.yml, validated when the template is built (`npm run package`, `osls deploy`).
// serverless.yml reads them once as `${file(infra/params.cjs)}`; every problem is reported at once, naming the
// parameter and where its value comes from, so a stack that could only fill the dead-letter queue is never built.
// Reference: docs/configuration.md. Plain CommonJS: osls loads it with require().
'use strict';

const REQUIRED = {
  eksClusterName: 'the EKS cluster name (aws eks list-clusters)',
  eksEndpoint: "the cluster's API endpoint (aws eks describe-cluster --name NAME --query cluster.endpoint)",
  eksCaData:
    "the cluster's CA bundle, base64 (aws eks describe-cluster --name NAME --query cluster.certificateAuthority.data)",
};

const FUNCTIONS = ['add', 'update', 'reset', 'delete', 'gc'];

const DEFAULTS = {
  natGwNamespace: 'kube-system',
  logLevel: 'info',
  alarmTopicArn: '',
  vpcSubnetIds: '',
  vpcSecurityGroupIds: '',
  bridgeOidcIssuer: '',
  execTimeoutMs: '20000',
  kubeOvnRelease: 'auto',
  sourceMaps: 'false',
  addConcurrency: '10',
  updateConcurrency: '10',
  resetConcurrency: '5',
  deleteConcurrency: '5',
  gcConcurrency: '1',
};

const list = (v) =>
  String(v ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/**
 * Validates raw parameter values (strings, as osls passes them) and returns the values serverless.yml uses.
 * @throws Error listing every problem
 */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: every deploy parameter validated in one place, in the order of docs/configuration.md; pinned by test/unit/infra-template.test.ts
function validate(raw) {
  const v = { ...DEFAULTS };
  for (const [k, val] of Object.entries(raw))
    if (val !== undefined && val !== null) v[k] = String(val).trim();
  const problems = [];

  for (const [name, where] of Object.entries(REQUIRED))
    if (!v[name]) problems.push(`parameter ${name} is required: ${where}`);
  if (v.eksClusterName && !/^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/.test(v.eksClusterName))
    problems.push(`parameter eksClusterName "${v.eksClusterName}" is not an EKS cluster name`);
  if (v.eksEndpoint && !/^https:\/\/[A-Za-z0-9.-]+(:\d+)?\/?$/.test(v.eksEndpoint))
    problems.push(`parameter eksEndpoint "${v.eksEndpoint}" must be an https:// URL with no path`);
  if (v.eksCaData) {
    const pem = /^[A-Za-z0-9+/]+={0,2}$/.test(v.eksCaData)
      ? Buffer.from(v.eksCaData, 'base64').toString()
      : '';
    if (!pem.includes('-----BEGIN CERTIFICATE-----'))
      problems.push(
        'parameter eksCaData must be the base64 of a PEM certificate (certificateAuthority.data)',
      );
  }

  const subnets = list(v.vpcSubnetIds);
  const groups = list(v.vpcSecurityGroupIds);
  for (const s of subnets)
    if (!/^subnet-[0-9a-f]{8,17}$/.test(s))
      problems.push(`parameter vpcSubnetIds: "${s}" is not a subnet id`);
  for (const g of groups)
    if (!/^sg-[0-9a-f]{8,17}$/.test(g))
      problems.push(`parameter vpcSecurityGroupIds: "${g}" is not a security group id`);
  if (!subnets.length !== !groups.length)
    problems.push(
      'parameters vpcSubnetIds and vpcSecurityGroupIds go together: give both (functions in the VPC) or neither',
    );

  const issuer = v.bridgeOidcIssuer.replace(/^https:\/\//, '').replace(/\/$/, '');
  if (v.bridgeOidcIssuer && !/^https:\/\/[a-z0-9.-]+(\/[A-Za-z0-9._-]+)*\/?$/.test(v.bridgeOidcIssuer))
    problems.push(
      `parameter bridgeOidcIssuer "${v.bridgeOidcIssuer}" must be the cluster's OIDC issuer URL (aws eks describe-cluster --query cluster.identity.oidc.issuer)`,
    );

  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(v.natGwNamespace) || v.natGwNamespace.length > 63)
    problems.push(`parameter natGwNamespace "${v.natGwNamespace}" is not a namespace name`);
  if (!['debug', 'info', 'warn', 'error'].includes(v.logLevel))
    problems.push(`parameter logLevel "${v.logLevel}" must be debug, info, warn or error`);
  if (v.alarmTopicArn && !/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/.test(v.alarmTopicArn))
    problems.push(`parameter alarmTopicArn "${v.alarmTopicArn}" is not an SNS topic ARN`);
  const execTimeoutMs = Number(v.execTimeoutMs);
  if (!Number.isInteger(execTimeoutMs) || execTimeoutMs < 1000 || execTimeoutMs > 25000)
    problems.push(
      `parameter execTimeoutMs must be an integer between 1000 and 25000 (below the 30 s function timeout), got "${v.execTimeoutMs}"`,
    );

  // The release lines of shared/domain/dialect/dialects.ts (1.13 and 1.14 are one line; 1.17 is master).
  if (!/^(auto|master|v?1\.(1[2-7])(\.\d{1,4})?([-+._][0-9A-Za-z.+_-]*)?)$/.test(v.kubeOvnRelease))
    problems.push(
      `parameter kubeOvnRelease must be auto or a kube-ovn release the product speaks (1.12 to 1.16, master), got "${v.kubeOvnRelease}"`,
    );

  if (!['true', 'false'].includes(v.sourceMaps))
    problems.push(`parameter sourceMaps must be true or false, got "${v.sourceMaps}"`);

  const concurrency = {};
  for (const fn of FUNCTIONS) {
    const key = `${fn}Concurrency`;
    const n = Number(v[key]);
    if (!Number.isInteger(n) || n < 1 || n > 1000)
      problems.push(
        `parameter ${key} (reserved concurrency of ${fn}) must be an integer 1..1000, got "${v[key]}"`,
      );
    concurrency[fn] = n;
  }

  if (problems.length) {
    const error = new Error(`invalid deploy parameters:\n  - ${problems.join('\n  - ')}`);
    error.stack = error.message; // osls prints the stack: keep it to the message
    throw error;
  }
  return {
    eksClusterName: v.eksClusterName,
    eksEndpoint: v.eksEndpoint.replace(/\/$/, ''),
    eksCaData: v.eksCaData,
    natGwNamespace: v.natGwNamespace,
    logLevel: v.logLevel,
    alarmTopicArn: v.alarmTopicArn,
    execTimeoutMs: String(execTimeoutMs),
    kubeOvnRelease: v.kubeOvnRelease,
    // A source map in each zip only when asked: it doubles the artifact and is read only with --enable-source-maps.
    sourceMaps: v.sourceMaps === 'true' ? 'linked' : false,
    // Each function's VpcConfig (serverless.yml, resources.extensions); AWS::NoValue leaves the property out.
    vpcConfig: subnets.length ? { SubnetIds: subnets, SecurityGroupIds: groups } : { Ref: 'AWS::NoValue' },
    vpcManagedPolicies: subnets.length
      ? // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub string
        [{ 'Fn::Sub': 'arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole' }]
      : { Ref: 'AWS::NoValue' },
    alarmActions: v.alarmTopicArn ? [v.alarmTopicArn] : { Ref: 'AWS::NoValue' },
    bridgeResources: issuer ? bridgeRole(issuer) : {},
    concurrency,
  };
}

/**
 * The bridge's IAM role for IRSA, when the cluster's OIDC issuer is given: only the bridge's ServiceAccount
 * (infra/bridge/base: eip-lambdas/eip-lambdas-bridge) may assume it, and it carries BridgePublishPolicy.
 */
function bridgeRole(issuer) {
  return {
    Resources: {
      BridgeRole: {
        Type: 'AWS::IAM::Role',
        Properties: {
          AssumeRolePolicyDocument: {
            Version: '2012-10-17',
            Statement: [
              {
                Effect: 'Allow',
                Principal: {
                  Federated: {
                    'Fn::Sub': `arn:\${AWS::Partition}:iam::\${AWS::AccountId}:oidc-provider/${issuer}`,
                  },
                },
                Action: 'sts:AssumeRoleWithWebIdentity',
                Condition: {
                  StringEquals: {
                    [`${issuer}:sub`]: 'system:serviceaccount:eip-lambdas:eip-lambdas-bridge',
                    [`${issuer}:aud`]: 'sts.amazonaws.com',
                  },
                },
              },
            ],
          },
          ManagedPolicyArns: [{ Ref: 'BridgePublishPolicy' }],
        },
      },
    },
    Outputs: {
      BridgeRoleArn: {
        Description:
          'roleArn of the bridge overlay (infra/bridge): IRSA role of eip-lambdas/eip-lambdas-bridge',
        Value: { 'Fn::GetAtt': ['BridgeRole', 'Arn'] },
      },
    },
  };
}

const NAMES = [...Object.keys(REQUIRED), ...Object.keys(DEFAULTS)];

/** osls entry point: resolves every parameter (`--param="name=value"` or `params:` in serverless.yml). */
module.exports = async ({ resolveVariable }) => {
  const raw = {};
  for (const name of NAMES) raw[name] = await resolveVariable(`param:${name}`);
  return validate(raw);
};
module.exports.validate = validate;
module.exports.PARAMETERS = NAMES;
