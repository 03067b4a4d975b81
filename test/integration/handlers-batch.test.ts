import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDENTITIES } from '../../local/identities.js';
import type { KubeApi } from '../../local/kube-api/index.js';
import type { Outcome } from '../../shared/core/outcome.js';
import { poolsOf } from '../../shared/domain/addressing.js';
import type { IptablesEip, Subnet } from '../../shared/domain/kube-ovn.js';
import { leaseKey } from '../../shared/domain/lease.js';
import { detailOf, type EipEvent } from '../../shared/events.js';
import { BatchMembersFailedError, type BatchOutcome, eipHandler } from '../../shared/lambda/eip-handler.js';
import type { Deps } from '../../shared/ports.js';
import type { CountingClient } from '../support/dynamo.js';
import { type HandlersLab, startHandlersLab } from '../support/handlers-lab.js';

const TABLE = 'handlers-batch-it';
const TOKEN = 'handlers-batch-token';
const POD = 'vpc-nat-gw-gw1-0';
const N = 16;
/** Another host on the external segment answers ARP for it: 1.12's `arping -D` refuses the eip-add. */
const TAKEN = '172.18.0.50';

let lab: HandlersLab;
let api: KubeApi;
let client: CountingClient;
let deps: Deps;
let custom: CustomObjectsApi;

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
  lab = await startHandlersLab({ table: TABLE, token: TOKEN, release: '1.12' });
  ({ api, client, deps, custom } = lab);
  api.gateways.segment.addHost(TAKEN);
}, 60_000);

afterAll(async () => {
  await lab?.stop();
});

describe('a batch event in one container, on the real adapters', () => {
  let good: IptablesEip[] = [];
  let events: EipEvent[] = [];

  it(`configures ${N} adds on one gateway with fewer than ${N} execs; a refused member spoils none`, async () => {
    good = [];
    for (let i = 0; i < N; i++) good.push(await createEip(`batch-eip-${i}`));
    const bad = await createEip('batch-eip-taken', { v4ip: TAKEN });
    // Its claim is made before the batch, as an earlier attempt of its add would have left it: the allocator spreads
    // random EIPs over the whole pool, so a random member could otherwise be handed TAKEN first and be refused by
    // the other host too (test/support/addresses.ts).
    const [pool] = poolsOf(
      (await custom.getClusterCustomObject({
        group: 'kubeovn.io',
        version: 'v1',
        plural: 'subnets',
        name: 'ovn-vpc-external-network',
      })) as Subnet,
    );
    await deps.ipam.claimAddress(pool!, TAKEN, { uid: bad.metadata.uid, name: bad.metadata.name });
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
