/**
 * The real adapters on one machine, for the crash, fault and corpus suites: the local Kubernetes API with the
 * stand-in controllers and the demo objects (gateway gw1 with its simulated nat-gateway.sh, subnet
 * ovn-vpc-external-network 172.18.0.0/24, shared QoS policy qos-demo), and dynalite behind an SDK client with a
 * fault seam — a middleware that answers chosen DynamoDB operations with a throttling or server error instead of
 * sending them. The handlers' clock is a ManualClock, so abandoned leases expire when a test says so.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
} from '@kubernetes/client-node';
import { HttpResponse } from '@smithy/protocol-http';
import { startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { memoryLogger } from '../../local/memory/logger.js';
import type { NatGatewaySim } from '../../local/natgw/sim.js';
import {
  createDynamoHolds,
  createDynamoIpam,
  createDynamoLeases,
} from '../../shared/adapters/dynamo/index.js';
import { createK8sCluster, createK8sGateway } from '../../shared/adapters/k8s/index.js';
import type { Invocation } from '../../shared/core/invocation.js';
import { operations } from '../../shared/core/operations.js';
import type { Outcome } from '../../shared/core/outcome.js';
import { RetryableError } from '../../shared/domain/errors.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import type { EipEvent, HandlerName, Reason } from '../../shared/events.js';
import { TallyMetrics } from '../../shared/observability/metrics.js';
import type { Deps } from '../../shared/ports.js';
import { ManualClock } from '../support/clock.js';
import { startDynamoFixture } from '../support/dynamo.js';
import { eventuallyValue } from '../support/eventually.js';

export const NS = 'kube-system';
export const POD = 'vpc-nat-gw-gw1-0';
const eipApi = { group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips' } as const;

/** A DynamoDB fault: the next `times` requests of `op` (e.g. 'PutItem', or '*') fail without being sent. */
export interface DynamoFault {
  op: string;
  kind: 'throttle' | 'server-error';
  times: number;
  hits: number;
}

export interface Lab {
  api: KubeApi;
  /** A temporary directory removed by close(). */
  dir: string;
  kubeconfig: string;
  kc: KubeConfig;
  custom: CustomObjectsApi;
  clock: ManualClock;
  deps: Deps;
  metrics: TallyMetrics;
  log: ReturnType<typeof memoryLogger>;
  dynamoFaults: DynamoFault[];
  /** The handlers' DynamoDB client and table (for the audit's store, or a consistent Scan). */
  dynamo: { client: DynamoDBClient; table: string };
  /** Makes the next `times` DynamoDB requests of `op` fail (a 400 ThrottlingException or a 500). */
  failDynamo(op: string, kind: DynamoFault['kind'], times?: number): DynamoFault;
  sim(): NatGatewaySim;
  createEip(
    name: string,
    spec?: Record<string, unknown>,
    labels?: Record<string, string>,
  ): Promise<IptablesEip>;
  getEip(name: string): Promise<IptablesEip | undefined>;
  deleteEip(name: string): Promise<void>;
  event(handler: HandlerName, name: string, reason?: Reason, uid?: string): Promise<EipEvent>;
  invoke(event: EipEvent, deps?: Deps): Promise<Outcome>;
  /** Delivers as Lambda does: retryable errors are retried (the clock moved past any abandoned lease). */
  deliver(event: EipEvent, attempts?: number): Promise<Outcome>;
  close(): Promise<void>;
}

const LEASE_EXPIRY_MS = 121_000;

export async function startLab(
  table = `lab-${process.pid}`,
  options: { execTimeoutMs?: number } = {},
): Promise<Lab> {
  const dir = mkdtempSync(join(tmpdir(), 'eip-lab-'));
  const execTimeoutMs = options.execTimeoutMs ?? 5_000;
  const kubeconfig = join(dir, 'kubeconfig');
  const api = await startKubeApi({ restartDelayMs: 20 });
  await api.writeKubeconfig(kubeconfig);
  const dynamo = await startDynamoFixture();
  const dynamoFaults: DynamoFault[] = [];
  // Two SDK attempts per request (the product's client makes four): the adapter's own retries and Lambda's
  // redelivery are what the fault suite exercises, and a fault that outlasts them costs seconds rather than tens of
  // seconds.
  const client = await dynamo.table(table, { maxAttempts: 2 });
  // The fault seam: in the deserialize step, below the SDK's retry middleware, so its retries see the fault as
  // they would see DynamoDB's own answer.
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const op = String(context.commandName ?? '').replace(/Command$/, '');
      const fault = dynamoFaults.find((f) => f.hits < f.times && (f.op === '*' || f.op === op));
      if (!fault) return next(args);
      fault.hits += 1;
      const body =
        fault.kind === 'throttle'
          ? {
              __type: 'com.amazonaws.dynamodb.v20120810#ThrottlingException',
              message: 'Rate of requests exceeds the allowed throughput.',
            }
          : {
              __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError',
              message: 'Internal server error',
            };
      const response = new HttpResponse({
        statusCode: fault.kind === 'throttle' ? 400 : 500,
        headers: { 'content-type': 'application/x-amz-json-1.0' },
        body: Readable.from([Buffer.from(JSON.stringify(body))]),
      });
      return { response, output: undefined as never };
    },
    { step: 'deserialize', priority: 'low', name: 'labDynamoFaults' },
  );
  const kc = new KubeConfig();
  kc.loadFromString(api.kubeconfigYaml());
  const standIns = await startStandIns({ kubeConfig: kc });
  const objects = KubernetesObjectApi.makeApiClient(kc);
  for (const o of demoObjects(NS)) {
    if (o.kind === 'IptablesEIP') continue;
    await objects.create(o as KubernetesObject);
  }
  const custom = kc.makeApiClient(CustomObjectsApi);
  const clock = new ManualClock(Date.now());
  const log = memoryLogger('error');
  const metrics = new TallyMetrics();
  let ids = 0;
  const deps: Deps = {
    cluster: createK8sCluster({ kubeConfig: kc, namespace: NS }),
    gateway: createK8sGateway({ kubeConfig: kc, timeoutMs: execTimeoutMs }),
    ipam: createDynamoIpam({ client, tableName: table, log, metrics }),
    holds: createDynamoHolds({ client, tableName: table, log, metrics }),
    leases: createDynamoLeases({ client, tableName: table, clock }),
    clock,
    log,
    metrics,
    newId: () => `lab-inv-${++ids}`,
    // As shared/adapters/live.ts wires EXEC_TIMEOUT_MS: the batcher gives each exec this limit (plus its rules'
    // share), which is what the adapter then enforces; the adapter's own is only its fallback.
    batching: { execTimeoutMs },
  };
  await eventuallyValue(() => api.gateways.get(NS, POD)?.initialised);

  const lab: Lab = {
    api,
    dir,
    kubeconfig,
    kc,
    custom,
    clock,
    deps,
    metrics,
    log,
    dynamoFaults,
    dynamo: { client, table },
    failDynamo(op, kind, times = 1) {
      const f = { op, kind, times, hits: 0 };
      dynamoFaults.push(f);
      return f;
    },
    sim: () => {
      const s = api.gateways.get(NS, POD);
      if (!s) throw new Error(`no simulated gateway behind ${POD}`);
      return s;
    },
    async createEip(name, spec = { natGwDp: 'gw1' }, labels) {
      return (await custom.createClusterCustomObject({
        ...eipApi,
        body: {
          apiVersion: 'kubeovn.io/v1',
          kind: 'IptablesEIP',
          metadata: { name, ...(labels && { labels }) },
          spec,
        },
      })) as IptablesEip;
    },
    async getEip(name) {
      return (await custom.getClusterCustomObject({ ...eipApi, name }).catch((e: { code?: number }) => {
        if (e.code === 404) return undefined;
        throw e;
      })) as IptablesEip | undefined;
    },
    async deleteEip(name) {
      await custom.deleteClusterCustomObject({ ...eipApi, name });
    },
    async event(handler, name, reason = 'manual', uid) {
      const e = await lab.getEip(name);
      const u = uid ?? e?.metadata.uid;
      return {
        version: 1,
        id: `${u}:${e?.metadata.resourceVersion}:${reason}`,
        handler,
        reason,
        object: { name, ...(u && { uid: u }) },
      };
    },
    invoke(event, d = deps) {
      const inv: Invocation = {
        event,
        signal: new AbortController().signal,
        deadline: clock.now() + 60_000,
        log,
      };
      return operations[event.handler](inv, d);
    },
    async deliver(event, attempts = 6) {
      let last: unknown;
      for (let i = 0; i < attempts; i++) {
        try {
          return await lab.invoke(event);
        } catch (e) {
          if (!(e instanceof RetryableError)) throw e;
          last = e;
          clock.advance(LEASE_EXPIRY_MS);
        }
      }
      throw new Error(`${event.handler} ${event.object.name} never resolved: ${String(last)}`);
    },
    async close() {
      await standIns.stop();
      await api.close();
      await dynamo.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return lab;
}
