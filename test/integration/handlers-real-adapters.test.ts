/**
 * The handlers on the real adapters: the Kubernetes API (the local one, over HTTP and WebSocket exec) and DynamoDB
 * (dynalite), driven with the sample events — in-process through the middy chain, and through `npm run invoke`.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CustomObjectsApi } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDENTITIES } from '../../local/identities.js';
import type { KubeApi } from '../../local/kube-api/index.js';
import { collectGarbage, isGarbageCollector } from '../../shared/core/gc.js';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import type { EipEvent } from '../../shared/events.js';
import { eipHandler } from '../../shared/lambda/eip-handler.js';
import type { Deps } from '../../shared/ports.js';
import { type HandlersLab, startHandlersLab } from '../support/handlers-lab.js';
import { allowed, attributesOf, loadGrants } from '../support/rbac.js';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const sample = (f: string) => JSON.parse(readFileSync(join(root, 'events', f), 'utf8')) as EipEvent;
const TABLE = 'handlers-it-ipam';
const HANDLERS_TOKEN = 'handlers-it-token';

let lab: HandlersLab;
let api: KubeApi;
let deps: Deps;
let kubeconfig: string;
let custom: CustomObjectsApi;

const getEip = async (name: string) =>
  (await custom
    .getClusterCustomObject({ group: 'kubeovn.io', version: 'v1', plural: 'iptables-eips', name })
    .catch(() => undefined)) as IptablesEip | undefined;

beforeAll(async () => {
  // The handlers run as their own identity (as EKS maps their role), under infra/rbac and its exec policy.
  lab = await startHandlersLab({ table: TABLE, token: HANDLERS_TOKEN });
  ({ api, deps, custom, kubeconfig } = lab);
}, 60_000);

afterAll(async () => {
  await lab?.stop();
});

describe('handlers on the real adapters', () => {
  it('add.json configures demo-eip: allocation in DynamoDB, address on the simulated gateway, status via the API', async () => {
    const outcome = await eipHandler('add', async () => deps)(sample('add.json'), {} as Context);
    expect(outcome).toMatchObject({ status: 'applied', eip: 'demo-eip' });
    const ip = outcome.status === 'applied' ? outcome.ip! : '';
    // The demo subnet is 172.18.0.0/24 with 172.18.0.1..172.18.0.10 excluded.
    expect(Number(ip.split('.')[3])).toBeGreaterThan(10);
    const eip = await getEip('demo-eip');
    expect(eip?.status).toMatchObject({ ready: true, ip, qosPolicy: 'qos-demo' });
    const sim = api.gateways.get('kube-system', 'vpc-nat-gw-gw1-0')!;
    expect(sim.net1Addresses()).toContain(`${ip}/24`);
    expect(
      sim
        .tcFilters()
        .map((f) => f.direction)
        .sort(),
    ).toEqual(['egress', 'ingress']);
    expect((await deps.ipam.findByOwner(eip!.metadata.uid)).map((a) => a.address)).toEqual([ip]);
    // The gateway pod's own external address (from kube-ovn's annotation) is never an EIP's; the add writes no
    // reservation for it, the garbage collector does (ADR 0042).
    const [pod] = await deps.cluster.listGatewayPods();
    const own = pod?.addresses?.['ovn-vpc-external-network'];
    expect(own).toMatch(/^172\.18\.0\.\d+$/);
    expect(ip).not.toBe(own);
    expect(await deps.ipam.findByOwner(`pod:${pod!.uid}`)).toEqual([]);
    if (!isGarbageCollector(deps.ipam)) throw new Error('the DynamoDB IPAM collects garbage');
    await collectGarbage(deps, deps.ipam);
    expect((await deps.ipam.findByOwner(`pod:${pod!.uid}`)).map((a) => a.address)).toEqual([own]);
    // The second run finds nothing to do.
    expect(await eipHandler('add', async () => deps)(sample('add.json'), {} as Context)).toEqual({
      status: 'unchanged',
      eip: 'demo-eip',
    });
  });

  it('a failed exec is retried by Lambda (thrown), and the retry converges without allocating again', async () => {
    await custom.createClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-eips',
      body: {
        apiVersion: 'kubeovn.io/v1',
        kind: 'IptablesEIP',
        metadata: { name: 'flaky' },
        spec: { natGwDp: 'gw1' },
      },
    });
    api.faults.failExec({ command: 'eip-add', times: 1, stderr: 'arping: DAD found a duplicate\n' });
    const event = { ...sample('add.json'), object: { name: 'flaky' } };
    await expect(eipHandler('add', async () => deps)(event, {} as Context)).rejects.toMatchObject({
      code: 'GatewayCommandFailed',
    });
    const first = await deps.ipam.findByOwner((await getEip('flaky'))!.metadata.uid);
    expect(first).toHaveLength(1);
    expect(await eipHandler('add', async () => deps)(event, {} as Context)).toMatchObject({
      status: 'applied',
      ip: first[0]!.address,
    });
  });

  it('sends only requests that infra/rbac/handlers.yaml allows (least privilege), with no wildcard in it', async () => {
    const text = readFileSync(join(root, 'infra/rbac/handlers.yaml'), 'utf8');
    expect(text).not.toMatch(/['"]?\*['"]?\s*[\],]/);
    const grants = loadGrants(join(root, 'infra/rbac/handlers.yaml'));
    const mine = api.requests.all().filter((r) => r.user === IDENTITIES.handlers.user);
    // The local API enforced handlers.yaml on each of them: nothing was refused.
    expect(mine.filter((r) => r.status === 401 || r.status === 403)).toEqual([]);
    const attrs = mine.map((r) => attributesOf(r.method, r.path, r.query));
    // The flows above read, patch status and metadata, list rules and pods, and exec.
    for (const needed of [
      'get iptables-eips',
      'patch iptables-eips',
      'patch iptables-eips/status',
      'list pods',
      'get pods/exec',
    ])
      expect(attrs.map((a) => `${a.verb} ${a.resource}`)).toContain(needed);
    expect(attrs.filter((a) => !allowed(grants, a))).toEqual([]);
  });

  it('npm run invoke prints the outcome JSON against a cluster and table given by flags', async () => {
    const { stdout } = await run(
      process.execPath,
      [
        join(root, 'node_modules/tsx/dist/cli.mjs'),
        join(root, 'scripts/invoke.ts'),
        'reset',
        join(root, 'events/reset.json'),
        '--kubeconfig',
        kubeconfig,
        '--table',
        TABLE,
        '--dynamodb-endpoint',
        lab.dynamo.endpoint,
      ],
      {
        cwd: root,
        env: { ...process.env, LOG_LEVEL: 'error', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      },
    );
    expect(JSON.parse(stdout)).toMatchObject({
      eip: 'demo-eip',
      status: expect.stringMatching(/^(applied|unchanged)$/),
    });
  });

  it('npm run invoke --memory runs the demo world offline and rejects a bad event with exit 0 and the field named', async () => {
    const tsx = [join(root, 'node_modules/tsx/dist/cli.mjs'), join(root, 'scripts/invoke.ts')];
    const ok = await run(process.execPath, [...tsx, 'add', join(root, 'events/add.json'), '--memory'], {
      cwd: root,
    });
    expect(JSON.parse(ok.stdout)).toMatchObject({ status: 'applied', eip: 'demo-eip', ip: '172.18.0.2' });
    const usage = await run(process.execPath, [...tsx, 'create', 'x.json'], { cwd: root }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(usage).toMatchObject({ code: 2, stderr: expect.stringMatching(/unknown handler "create"/) });
  });
});
