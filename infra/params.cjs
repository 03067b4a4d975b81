// Deploy parameters of serverless.yml, validated when the template is built (`npm run package`, `osls deploy`).
// serverless.yml reads them once as `${file(infra/params.cjs)}`; every problem is reported at once, naming the
// parameter and where its value comes from, so a stack that could only fill the dead-letter queue is never built.
// Reference: docs/configuration.md. Plain CommonJS: osls loads it with require().
'use strict';

const { readFileSync } = require('node:fs');
const { homedir } = require('node:os');
const { join } = require('node:path');

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
  bridgePodIdentity: 'false',
  tracing: 'false',
  stackTags: '',
  permissionsBoundary: '',
  execTimeoutMs: '20000',
  kubeOvnRelease: 'auto',
  sourceMaps: 'false',
  addConcurrency: '10',
  updateConcurrency: '10',
  resetConcurrency: '5',
  deleteConcurrency: '5',
  gcConcurrency: '1',
  driftPeriodSeconds: '30',
  gcEveryMinutes: '60',
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

  for (const flag of ['sourceMaps', 'bridgePodIdentity', 'tracing'])
    if (!['true', 'false'].includes(v[flag]))
      problems.push(`parameter ${flag} must be true or false, got "${v[flag]}"`);
  const podIdentity = v.bridgePodIdentity === 'true';
  if (podIdentity && issuer)
    problems.push(
      'parameters bridgeOidcIssuer (IRSA) and bridgePodIdentity=true (EKS Pod Identity) each give the bridge its role: choose one',
    );
  if (
    v.permissionsBoundary &&
    !/^arn:aws[a-z-]*:iam::(\d{12}|aws):policy\/[\w+=,.@/-]{1,128}$/.test(v.permissionsBoundary)
  )
    problems.push(`parameter permissionsBoundary "${v.permissionsBoundary}" is not an IAM policy ARN`);
  const stackTags = tagsOf(v.stackTags, problems);
  // The region, when the caller resolved one (the entry point always does; '' = found nowhere).
  if (raw.region === '')
    problems.push(
      'no region: give --region, or set AWS_REGION (or AWS_DEFAULT_REGION), or a region in the AWS profile (--aws-profile or AWS_PROFILE, ~/.aws/config)',
    );
  else if (raw.region !== undefined && !/^[a-z]{2,4}(-[a-z]+)+-\d+$/.test(String(raw.region)))
    problems.push(`region "${raw.region}" is not an AWS region name`);

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

  // The gc function runs once a minute (ADR 0088): its drift passes divide the minute, its collection the day.
  if (!['10', '12', '15', '20', '30', '60'].includes(v.driftPeriodSeconds))
    problems.push(
      `parameter driftPeriodSeconds must be 10, 12, 15, 20, 30 or 60 (a divisor of the scheduled minute), got "${v.driftPeriodSeconds}"`,
    );
  const gcEvery = Number(v.gcEveryMinutes);
  if (!Number.isInteger(gcEvery) || gcEvery < 1 || gcEvery > 1440)
    problems.push(`parameter gcEveryMinutes must be an integer 1..1440, got "${v.gcEveryMinutes}"`);

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
    alarmActions: v.alarmTopicArn ? [v.alarmTopicArn] : { Ref: 'AWS::NoValue' },
    // Lambda active tracing (X-Ray), off by default: each function's TracingConfig, and the write permission
    // it needs (TracingPolicy) on each function's role.
    tracingConfig: v.tracing === 'true' ? { Mode: 'Active' } : { Ref: 'AWS::NoValue' },
    managedPolicies: managedPolicies(subnets.length > 0, v.tracing === 'true'),
    permissionsBoundary: v.permissionsBoundary || { Ref: 'AWS::NoValue' },
    stackTags,
    optionalResources: optionalResources({
      issuer,
      podIdentity,
      clusterName: v.eksClusterName,
      tracing: v.tracing === 'true',
      boundary: v.permissionsBoundary,
    }),
    concurrency,
    driftPeriodSeconds: v.driftPeriodSeconds,
    gcEveryMinutes: String(gcEvery),
  };
}

/** `key=value,key=value` → a tag map; keys as CloudFormation stack tags allow them, `aws:` reserved. */
function tagsOf(text, problems) {
  const tags = {};
  for (const pair of list(text)) {
    const at = pair.indexOf('=');
    const key = at < 0 ? pair : pair.slice(0, at).trim();
    const value = at < 0 ? '' : pair.slice(at + 1).trim();
    if (at < 0 || !/^[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,128}$/u.test(key) || /^aws:/i.test(key))
      problems.push(
        `parameter stackTags: "${pair}" is not key=value with a usable tag key (1-128 characters, not aws:)`,
      );
    else if (!/^[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}$/u.test(value))
      problems.push(
        `parameter stackTags: the value of "${key}" is not a usable tag value (0-256 characters)`,
      );
    else tags[key] = value;
  }
  return tags;
}

/** The managed policies of every function role: Lambda's VPC access in a VPC, the X-Ray write policy with tracing. */
function managedPolicies(inVpc, tracing) {
  const arns = [
    ...(inVpc
      ? // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub string
        [{ 'Fn::Sub': 'arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole' }]
      : []),
    ...(tracing ? [{ Ref: 'TracingPolicy' }] : []),
  ];
  return arns.length ? arns : { Ref: 'AWS::NoValue' };
}

/** Resources and outputs that exist only with some parameters: the bridge's role, the tracing policy. */
function optionalResources({ issuer, podIdentity, clusterName, tracing, boundary }) {
  const Resources = {};
  const Outputs = {};
  if (issuer || podIdentity) {
    Object.assign(
      Resources,
      bridgeRole(issuer ? irsaTrust(issuer) : podIdentityTrust(clusterName), boundary),
    );
    if (podIdentity) Resources.BridgePodIdentityAssociation = podIdentityAssociation(clusterName);
    Outputs.BridgeRoleArn = {
      Description: issuer
        ? 'roleArn of the bridge overlay (infra/bridge): IRSA role of eip-lambdas/eip-lambdas-bridge'
        : 'EKS Pod Identity role of eip-lambdas/eip-lambdas-bridge (associated by the stack)',
      Value: { 'Fn::GetAtt': ['BridgeRole', 'Arn'] },
    };
  }
  if (tracing)
    Resources.TracingPolicy = {
      Type: 'AWS::IAM::ManagedPolicy',
      Properties: {
        Description:
          'Lambda active tracing: send trace segments to X-Ray (no resource-level permissions exist)',
        PolicyDocument: {
          Version: '2012-10-17',
          Statement: [
            { Effect: 'Allow', Action: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'], Resource: '*' },
          ],
        },
      },
    };
  return Object.keys(Resources).length ? { Resources, Outputs } : {};
}

const BRIDGE_NAMESPACE = 'eip-lambdas';
const BRIDGE_SERVICE_ACCOUNT = 'eip-lambdas-bridge';

/** IRSA: only the bridge's ServiceAccount (infra/bridge/base), through the cluster's OIDC provider. */
function irsaTrust(issuer) {
  return {
    Effect: 'Allow',
    Principal: {
      Federated: { 'Fn::Sub': `arn:\${AWS::Partition}:iam::\${AWS::AccountId}:oidc-provider/${issuer}` },
    },
    Action: 'sts:AssumeRoleWithWebIdentity',
    Condition: {
      StringEquals: {
        [`${issuer}:sub`]: `system:serviceaccount:${BRIDGE_NAMESPACE}:${BRIDGE_SERVICE_ACCOUNT}`,
        [`${issuer}:aud`]: 'sts.amazonaws.com',
      },
    },
  };
}

/**
 * EKS Pod Identity: the Pod Identity service assumes the role and tags the session (sts:AssumeRole and
 * sts:TagSession); the session tags it sets restrict the role to this cluster and the bridge's ServiceAccount.
 */
function podIdentityTrust(clusterName) {
  return {
    Effect: 'Allow',
    Principal: { Service: 'pods.eks.amazonaws.com' },
    Action: ['sts:AssumeRole', 'sts:TagSession'],
    Condition: {
      StringEquals: {
        'aws:RequestTag/eks-cluster-name': clusterName,
        'aws:RequestTag/kubernetes-namespace': BRIDGE_NAMESPACE,
        'aws:RequestTag/kubernetes-service-account': BRIDGE_SERVICE_ACCOUNT,
      },
    },
  };
}

function podIdentityAssociation(clusterName) {
  return {
    Type: 'AWS::EKS::PodIdentityAssociation',
    Properties: {
      ClusterName: clusterName,
      Namespace: BRIDGE_NAMESPACE,
      ServiceAccount: BRIDGE_SERVICE_ACCOUNT,
      RoleArn: { 'Fn::GetAtt': ['BridgeRole', 'Arn'] },
    },
  };
}

/**
 * The bridge's IAM role (IRSA or EKS Pod Identity): only the bridge's ServiceAccount (infra/bridge/base:
 * eip-lambdas/eip-lambdas-bridge) may assume it, and it carries BridgePublishPolicy.
 */
function bridgeRole(trust, boundary) {
  return {
    BridgeRole: {
      Type: 'AWS::IAM::Role',
      Properties: {
        AssumeRolePolicyDocument: { Version: '2012-10-17', Statement: [trust] },
        ManagedPolicyArns: [{ Ref: 'BridgePublishPolicy' }],
        ...(boundary && { PermissionsBoundary: boundary }),
      },
    },
  };
}

/** The region of the stack: --region, then where the AWS CLI finds it (the environment, the profile). */
function regionOf(options, env, read = readIfExists) {
  for (const [value, from] of [
    [options.region, '--region'],
    [env.AWS_REGION, '$AWS_REGION'],
    [env.AWS_DEFAULT_REGION, '$AWS_DEFAULT_REGION'],
  ])
    if (value && String(value).trim()) return { region: String(value).trim(), from };
  const file = env.AWS_CONFIG_FILE || join(env.HOME || env.USERPROFILE || homedir(), '.aws', 'config');
  const profile = options['aws-profile'] || env.AWS_PROFILE || 'default';
  const text = read(file);
  const region = text === undefined ? undefined : profileRegion(text, profile);
  return region ? { region, from: `profile ${profile} in ${file}` } : undefined;
}

/** The `region` of one profile in the shared config file (the same reading as shared/config/region.ts). */
function profileRegion(text, profile) {
  let inProfile = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/\s[#;].*$/, '').trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const section = /^\[\s*(?:profile\s+)?([^\]]+?)\s*\]$/.exec(line);
    if (section) {
      inProfile = section[1] === profile && (profile === 'default' || /^\[\s*profile\s/.test(line));
      continue;
    }
    if (!inProfile || /^\s/.test(raw)) continue;
    const kv = /^([A-Za-z0-9_]+)\s*=\s*(.*)$/.exec(line);
    if (kv?.[1] === 'region' && kv[2]) return kv[2].trim();
  }
  return undefined;
}

function readIfExists(path) {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

const NAMES = [...Object.keys(REQUIRED), ...Object.keys(DEFAULTS)];

/**
 * osls entry point: resolves every parameter (`--param="name=value"` or `params:` in serverless.yml), and the
 * region (never a default: deploying to a region nobody chose is worse than stopping here).
 */
module.exports = async ({ resolveVariable, options = {} }) => {
  const raw = {};
  for (const name of NAMES) raw[name] = await resolveVariable(`param:${name}`);
  const region = regionOf(options, process.env)?.region ?? '';
  return { ...validate({ ...raw, region }), region };
};
module.exports.validate = validate;
module.exports.regionOf = regionOf;
module.exports.profileRegion = profileRegion;
module.exports.PARAMETERS = NAMES;
