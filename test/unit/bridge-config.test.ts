import { describe, expect, it } from 'vitest';
import { loadBridgeConfig } from '../../shared/bridge/config.js';
import { ConfigError } from '../../shared/config/config.js';

/** No AWS profile of the machine running the tests leaks in. */
const NO_PROFILE = { AWS_CONFIG_FILE: '/nonexistent/aws-config' };
/** What a deployed bridge is given besides the rest: its stack's stage and region (infra/bridge/base). */
const DEPLOYED = { ...NO_PROFILE, STAGE: 'prod', AWS_REGION: 'eu-west-1' };

const problemsOf = (env: NodeJS.ProcessEnv): string[] => {
  try {
    loadBridgeConfig({ ...NO_PROFILE, ...env });
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
};

describe('bridge configuration', () => {
  it('defaults to the EventBridge sink in kube-system, resyncing every 10 minutes, health on 8080', () => {
    expect(loadBridgeConfig({ ...DEPLOYED, KUBERNETES_SERVICE_HOST: '10.96.0.1' })).toEqual({
      namespace: 'kube-system',
      sink: 'eventbridge',
      resyncMs: 600_000,
      resyncRate: 20,
      concurrency: 16,
      eventBatchMax: 8,
      eventBatchWindowMs: 100,
      healthPort: 8080,
      healthHost: '0.0.0.0',
      drainMs: 25_000,
      statsMs: 60_000,
      logLevel: 'info',
      queueLimit: 10_000,
      metrics: 'cloudwatch',
      metricsNamespace: 'EipLambdas/prod',
      region: 'eu-west-1',
      heartbeatMs: 60_000,
      coexistenceCheck: 'refuse',
    });
  });

  it('takes the grouping of one gateway’s events (ADR 0112) within its bounds', () => {
    const env = { ...DEPLOYED, KUBERNETES_SERVICE_HOST: '10.96.0.1' };
    expect(loadBridgeConfig({ ...env, EVENT_BATCH_MAX: '1', EVENT_BATCH_WINDOW_MS: '0' })).toMatchObject({
      eventBatchMax: 1,
      eventBatchWindowMs: 0,
    });
    expect(problemsOf({ ...env, EVENT_BATCH_MAX: '33', EVENT_BATCH_WINDOW_MS: '-1' })).toEqual([
      'EVENT_BATCH_MAX must be an integer from 1 to 32, got "33"',
      'EVENT_BATCH_WINDOW_MS must be an integer from 0 to 1000, got "-1"',
    ]);
  });

  it('needs the stage for its metrics and a region for AWS, found as the AWS CLI finds it', () => {
    expect(problemsOf({ KUBERNETES_SERVICE_HOST: '10.96.0.1' })).toEqual([
      "BRIDGE_METRICS=cloudwatch needs STAGE: the stack's alarms watch the namespace EipLambdas/<stage> (or set BRIDGE_METRICS=none)",
      'no AWS region: set AWS_REGION (the kustomize parameter region), or a region in the AWS profile',
    ]);
    const c = loadBridgeConfig({
      KUBECONFIG: '/k',
      STAGE: 'dev',
      AWS_DEFAULT_REGION: 'cn-north-1',
      ...NO_PROFILE,
    });
    expect(c).toMatchObject({ metricsNamespace: 'EipLambdas/dev', region: 'cn-north-1' });
    expect(problemsOf({ KUBECONFIG: '/k', STAGE: 'prod east', AWS_REGION: 'x' })).toEqual([
      'STAGE "prod east" is not a stage name (letters, digits, - and _, up to 64)',
      'the AWS region "x" (from $AWS_REGION) is not a region name',
    ]);
    // The lab's bridge (in-process sink, no metrics) needs neither.
    expect(loadBridgeConfig({ KUBECONFIG: '/k', BRIDGE_SINK: 'in-process', ...NO_PROFILE })).toMatchObject({
      metrics: 'none',
      metricsNamespace: 'EipLambdas',
    });
  });

  it('reads the coexistence check mode and refuses an unknown one', () => {
    expect(
      loadBridgeConfig({ KUBECONFIG: '/k', ...DEPLOYED, BRIDGE_COEXISTENCE_CHECK: 'warn' }),
    ).toMatchObject({
      coexistenceCheck: 'warn',
    });
    expect(problemsOf({ KUBECONFIG: '/k', ...DEPLOYED, BRIDGE_COEXISTENCE_CHECK: 'maybe' })).toEqual([
      expect.stringMatching(/BRIDGE_COEXISTENCE_CHECK must be one of refuse, warn, off/),
    ]);
  });

  it('publishes no metrics by default with the in-process sink, and reads the queue and heartbeat settings', () => {
    expect(loadBridgeConfig({ ...NO_PROFILE, KUBECONFIG: '/k', BRIDGE_SINK: 'in-process' })).toMatchObject({
      metrics: 'none',
    });
    expect(
      loadBridgeConfig({
        ...DEPLOYED,
        KUBECONFIG: '/k',
        BRIDGE_METRICS: 'emf',
        QUEUE_LIMIT: '500',
        HEARTBEAT_SECONDS: '0',
      }),
    ).toMatchObject({ metrics: 'emf', queueLimit: 500, heartbeatMs: 0 });
    expect(problemsOf({ ...DEPLOYED, KUBECONFIG: '/k', BRIDGE_METRICS: 'statsd', QUEUE_LIMIT: '0' })).toEqual(
      [
        'QUEUE_LIMIT must be an integer from 1 to 1000000, got "0"',
        'BRIDGE_METRICS must be one of cloudwatch, emf, none, got "statsd"',
      ],
    );
  });

  it('reads the lambda sink’s four function names and the first KUBECONFIG file', () => {
    const c = loadBridgeConfig({
      ...DEPLOYED,
      KUBECONFIG: '/tmp/a:/tmp/b',
      BRIDGE_SINK: 'lambda',
      ADD_FUNCTION: 'eip-add',
      UPDATE_FUNCTION: 'eip-update:live',
      RESET_FUNCTION: 'arn:aws:lambda:eu-west-1:123456789012:function:eip-reset',
      DELETE_FUNCTION: 'eip-delete',
      RESYNC_SECONDS: '0',
      HEALTH_PORT: '0',
    });
    expect(c).toMatchObject({
      kubeconfig: '/tmp/a',
      sink: 'lambda',
      resyncMs: 0,
      healthPort: 0,
      functions: {
        add: 'eip-add',
        update: 'eip-update:live',
        reset: 'arn:aws:lambda:eu-west-1:123456789012:function:eip-reset',
        delete: 'eip-delete',
      },
    });
  });

  it('reports every problem at once', () => {
    expect(
      problemsOf({
        ...DEPLOYED,
        EIP_NAMESPACE: 'Kube_System',
        BRIDGE_SINK: 'lambda',
        ADD_FUNCTION: 'eip add',
        EVENT_BUS_NAME: 'bad bus',
        CONCURRENCY: '0',
        DRAIN_SECONDS: '1.5',
      }),
    ).toEqual([
      'EIP_NAMESPACE "Kube_System" is not a namespace name',
      'EVENT_BUS_NAME "bad bus" is not a bus name or ARN',
      'the lambda sink needs UPDATE_FUNCTION, RESET_FUNCTION, DELETE_FUNCTION',
      'ADD_FUNCTION "eip add" is not a function name or ARN',
      'CONCURRENCY must be an integer from 1 to 1000, got "0"',
      'DRAIN_SECONDS must be an integer from 0 to 3600, got "1.5"',
      'no Kubernetes API: set KUBECONFIG, or run in a pod (KUBERNETES_SERVICE_HOST)',
    ]);
  });

  it('rejects an unknown sink', () => {
    expect(problemsOf({ ...DEPLOYED, KUBECONFIG: '/k', BRIDGE_SINK: 'sqs' })).toEqual([
      'BRIDGE_SINK must be one of eventbridge, lambda, in-process, got "sqs"',
    ]);
  });
});
