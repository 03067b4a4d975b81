/**
 * A batch event on the real adapters (docs/adr/0112-one-gateways-burst-in-one-invocation.md): the local Kubernetes
 * API (its exec over WebSocket reaches the simulated kube-ovn 1.12 gateway), DynamoDB (dynalite), the handlers' own
 * identity under infra/rbac. One invocation in ONE container (one Deps, so one gateway batcher) configures a burst
 * of adds on one gateway with fewer execs than EIPs, counted from the local API's request log; a member whose
 * address another host answers for (duplicate address detection refuses it) does not spoil the others; and the
 * batch's retry costs each member that succeeded what the request counts below say.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
} from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import { IDENTITIES } from '../../local/identities.js';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { memoryLogger } from '../../local/memory/logger.js';
import { buildDeps } from '../../shared/adapters/live.js';
import { loadConfig } from '../../shared/config/config.js';
import type { Outcome } from '../../shared/core/outcome.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { leaseKey } from '../../shared/domain/lease.js';
import { detailOf, type EipEvent } from '../../shared/events.js';
import { BatchMembersFailedError, type BatchOutcome, eipHandler } from '../../shared/lambda/eip-handler.js';
import type { Deps } from '../../shared/ports.js';
import {
  type CountingClient,
  type DynamoFixture,
  PRODUCT_RETRIES,
  startDynamoFixture,
} from '../support/dynamo.js';
import { eventuallyValue } from '../support/eventually.js';

const root = join(import.meta.dirname, '../..');
const TABLE = 'handlers-batch-it';
const TOKEN = 'handlers-batch-token';
const POD = 'vpc-nat-gw-gw1-0';
const N = 16;
/** Another host on the external segment answers ARP for it: 1.12's `arping -D` refuses the eip-add. */
const TAKEN = '172.18.0.50';

let api: KubeApi;
let dynamo: DynamoFixture;
let client: CountingClient;
let deps: Deps;
let custom: CustomObjectsApi;
let stop: () => Promise<void>;

const execs = () => api.requests.all().filter((r) => r.path.endsWith('/exec'));
const handlerRequests = () => api.requests.all().filter((r) => r.user === IDENTITIES.handlers.user);
const batchOf = (o: Outcome | BatchOutcome): Outcome[] => ('batch' in o ? o.batch : [o]);

async function createEip(name: string, spec: Record<string, unknown> = {}): Promise<IptablesEip> {
  return (await custom.createClusterCustomObject({
    group: 'kubeovn.io',
    version: 'v1',
    plural: 'iptables-eips',
    body: {
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: { name },
      spec: { natGwDp: 'gw1', ...spec },
    },
  })) as IptablesEip;
}

const addEvent = (eip: IptablesEip): EipEvent => ({
  version: 1,
  id: `${eip.metadata.uid}:${eip.metadata.resourceVersion}:added`,
  handler: 'add',
  reason: 'added',
  // What the bridge's rule informers see: no NAT rule names it (ADR 0041).
  nat: '',
  object: {
    kind: 'IptablesEIP',
    name: eip.metadata.name,
    uid: eip.metadata.uid,
    resourceVersion: eip.metadata.resourceVersion,
  },
});

beforeAll(async () => {
  api = await startKubeApi({ kubeOvnRelease: '1.12', tokens: [{ token: TOKEN, ...IDENTITIES.handlers }] });
  const adminKc = new KubeConfig();
  adminKc.loadFromString(api.kubeconfigYaml());
  dynamo = await startDynamoFixture();
  client = await dynamo.table(TABLE, PRODUCT_RETRIES);
  const standIns = await startStandIns({ kubeConfig: adminKc, release: '1.12' });
  const objects = KubernetesObjectApi.makeApiClient(adminKc);
  for (const file of ['handlers.yaml', 'exec-policy.yaml'])
    for (const d of parseAllDocuments(readFileSync(join(root, 'infra/rbac', file), 'utf8')))
      await objects.create(d.toJS() as KubernetesObject);
  for (const o of demoObjects('kube-system')) await objects.create(o as KubernetesObject);
  custom = adminKc.makeApiClient(CustomObjectsApi);
  const handlersKc = new KubeConfig();
  handlersKc.loadFromString(api.kubeconfigYaml(TOKEN));
  // One container: one Deps, so one gateway adapter and one batcher for every member of a batch.
  deps = buildDeps(
    loadConfig({ TABLE_NAME: TABLE, DYNAMODB_ENDPOINT: dynamo.endpoint, KUBECONFIG: '/dev/null' }),
    {
      kubeConfig: handlersKc,
      dynamo: client,
      log: memoryLogger('warn'),
    },
  );
  await eventuallyValue(() => api.gateways.get('kube-system', POD), { what: "the stand-in's gateway pod" });
  api.gateways.segment.addHost(TAKEN);
  stop = async () => {
    await standIns.stop();
    await api.close();
    await dynamo.close();
  };
}, 60_000);

afterAll(async () => {
  await stop?.();
});

describe('a batch event in one container, on the real adapters', () => {
  let good: IptablesEip[] = [];
  let events: EipEvent[] = [];

  it(`configures ${N} adds on one gateway with fewer than ${N} execs; a refused member spoils none`, async () => {
    good = [];
    for (let i = 0; i < N; i++) good.push(await createEip(`batch-eip-${i}`));
    const bad = await createEip('batch-eip-taken', { v4ip: TAKEN });
    events = good.map(addEvent);
    const members = [...events.slice(0, N / 2), addEvent(bad), ...events.slice(N / 2)];
    api.requests.clear();
    const started = Date.now();
    const out = batchOf(
      await eipHandler('add', async () => deps)(detailOf(members), { awsRequestId: 'b1' } as Context),
    );
    const took = Date.now() - started;
    const refused = out[N / 2]!;
    expect(refused).toMatchObject({ status: 'rejected', eip: 'batch-eip-taken' });
    const applied = out.filter((o) => o.status === 'applied');
    expect(applied.map((o) => o.eip).sort()).toEqual(good.map((e) => e.metadata.name).sort());
    const sim = api.gateways.get('kube-system', POD)!;
    for (const o of applied)
      expect(sim.net1Addresses()).toContain(`${o.status === 'applied' ? o.ip : ''}/24`);
    const n = execs().length;
    console.log(
      `batch of ${N + 1} adds (one refused) in one container: ${n} execs, ${handlerRequests().length} API requests, ${took} ms`,
    );
    // Alone, each add sends its own eip-add exec (and the refused one its own): 17 at least. Together: 1.12's 6 s of
    // arping an address spread the adds over at most the pod's 8 lanes (ADR 0125), and the refused rule costs its
    // exec two or three more to isolate it (ADR 0110).
    expect(n).toBeLessThanOrEqual(8 + 3);
    for (const e of good)
      expect(
        (
          (await custom.getClusterCustomObject({
            group: 'kubeovn.io',
            version: 'v1',
            plural: 'iptables-eips',
            name: e.metadata.name,
          })) as IptablesEip
        ).status?.ready,
      ).toBe(true);
  }, 60_000);

  it('a member that fails retryably is thrown after the others; the retry costs the succeeded ones no exec', async () => {
    // Another container holds the lease of one member: LeaseHeld, retryable.
    const held = await deps.leases.acquire(
      leaseKey(good[3]!.metadata.name),
      'another-container',
      Date.now() + 60_000,
    );
    const error = await eipHandler('add', async () => deps)(detailOf(events), {
      awsRequestId: 'b2',
    } as Context).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BatchMembersFailedError);
    expect((error as BatchMembersFailedError).failed.map((f) => `${f.eip} ${f.code}`)).toEqual([
      `${good[3]!.metadata.name} LeaseHeld`,
    ]);
    await deps.leases.release(held);

    // Lambda's retry of the same batch: every member is configured already.
    api.requests.clear();
    client.requests.clear();
    const out = batchOf(
      await eipHandler('add', async () => deps)(detailOf(events), { awsRequestId: 'b3' } as Context),
    );
    expect(out.map((o) => o.status)).toEqual(events.map(() => 'unchanged'));
    expect(execs()).toEqual([]);
    const apiPerMember = handlerRequests().length / N;
    const dynamoPerMember = client.total() / N;
    console.log(
      `retry of a batch of ${N} configured EIPs: per member ${apiPerMember} API requests (${[
        ...new Set(handlerRequests().map((r) => `${r.method} ${r.path.replace(/batch-eip-\d+/, '*')}`)),
      ].join(
        ', ',
      )}), ${dynamoPerMember} DynamoDB requests (${[...client.requests].map(([op, c]) => `${op} ${c}`).join(', ')})`,
    );
    expect(handlerRequests().filter((r) => r.method !== 'GET')).toEqual([]); // no write
    expect(apiPerMember).toBeLessThanOrEqual(6);
    expect(dynamoPerMember).toBeLessThanOrEqual(4);
  }, 60_000);
});
