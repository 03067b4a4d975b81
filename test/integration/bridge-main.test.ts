/**
 * The bridge container's entry point as a real process — the esbuild bundle the image runs, started outside the
 * repository: configuration from the environment, --help, the lambda
 * and eventbridge sinks talking to a local stand-in for the AWS endpoints (the SDK's AWS_ENDPOINT_URL_* settings),
 * the health server on an ephemeral port, and a SIGTERM drain that exits 0.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { kubeConfigFor } from '../../local/kube-api/testing.js';
import { bundleBridge } from '../../scripts/build-bridge.js';
import { GROUP, Plural, VERSION } from '../../shared/domain/kube-ovn.js';
import { EVENT_SOURCE, parseEipEvent, parseEipEvents } from '../../shared/events.js';
import { eventually } from '../support/eventually.js';

interface AwsCall {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** Answers Lambda Invoke (202) and EventBridge PutEvents (all entries accepted), recording every call. */
async function fakeAws(): Promise<{ url: string; calls: AwsCall[]; close(): Promise<void> }> {
  const calls: AwsCall[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      calls.push({ path: req.url ?? '', headers: req.headers, body });
      if (req.headers['x-amz-target'] === 'AWSEvents.DescribeEventBus') {
        const name = (JSON.parse(body) as { Name: string }).Name;
        if (name.startsWith('missing')) {
          res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' });
          res.end(
            JSON.stringify({
              __type: 'ResourceNotFoundException',
              message: `Event bus ${name} does not exist.`,
            }),
          );
        } else {
          res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
          res.end(
            JSON.stringify({ Name: name, Arn: `arn:aws:events:eu-west-1:123456789012:event-bus/${name}` }),
          );
        }
      } else if (req.headers['x-amz-target'] === 'AWSEvents.PutEvents') {
        const n = (JSON.parse(body) as { Entries: unknown[] }).Entries.length;
        res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
        res.end(
          JSON.stringify({
            FailedEntryCount: 0,
            Entries: Array.from({ length: n }, (_, i) => ({ EventId: `e${i}` })),
          }),
        );
      } else if (req.url?.startsWith('/2015-03-31/functions/')) {
        res.writeHead(202, { 'content-type': 'application/json' }).end();
      } else {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, calls, close: () => new Promise((r) => server.close(() => r())) };
}

interface Proc {
  child: ChildProcess;
  lines: Record<string, unknown>[];
  exit: Promise<number | null>;
  stderr: () => string;
}

/** The bundle the container runs, built once for the suite (scripts/build-bridge.ts). */
let bundle = '';

function run(env: Record<string, string>, args: string[] = []): Proc {
  const child = spawn(process.execPath, ['--enable-source-maps', bundle, ...args], {
    cwd: tmpdir(), // the bundle needs nothing from the repository
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => {
    out += d;
    let nl = out.indexOf('\n');
    while (nl >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        lines.push({ text: line });
      }
      nl = out.indexOf('\n');
    }
  });
  child.stderr!.on('data', (d) => {
    err += d;
  });
  const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, lines, exit, stderr: () => err };
}

describe('functions/bridge/main.ts', () => {
  let api: KubeApi;
  let aws: Awaited<ReturnType<typeof fakeAws>>;
  let dir: string;
  let kubeconfig: string;
  const baseEnv = () => ({
    KUBECONFIG: kubeconfig,
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    HEALTH_PORT: '0',
    HEALTH_HOST: '127.0.0.1',
    RESYNC_SECONDS: '0',
    STATS_SECONDS: '0',
    BRIDGE_METRICS: 'none',
  });

  beforeAll(async () => {
    api = await startKubeApi();
    aws = await fakeAws();
    dir = mkdtempSync(join(tmpdir(), 'bridge-main-'));
    bundle = await bundleBridge(join(dir, 'bridge.mjs'));
    kubeconfig = join(dir, 'kubeconfig');
    await api.writeKubeconfig(kubeconfig);
  });
  afterAll(async () => {
    await aws.close();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const createEip = (name: string) =>
    kubeConfigFor(api)
      .makeApiClient(CustomObjectsApi)
      .createClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: Plural.eip,
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'IptablesEIP',
          metadata: { name },
          spec: { natGwDp: 'gw1' },
        },
      });

  it('bundles the userland punycode, so Node 22 prints no DEP0040 warning at start-up', () => {
    // client-node → node-fetch 2 → whatwg-url 5 → tr46 0.0.3 require('punycode'); unaliased, that is Node's
    // deprecated built-in, loaded on the first API request (Node 21+ warns).
    const code = readFileSync(bundle, 'utf8');
    expect(code).not.toMatch(/__require\("punycode"\)/);
    expect(code).toContain('node_modules/punycode/punycode.js');
  });

  it('prints its usage and exits 0 with --help', async () => {
    const p = run({}, ['--help']);
    expect(await p.exit).toBe(0);
    expect(p.lines.map((l) => l.text).join('\n')).toMatch(/usage: bridge \[--help\][\s\S]*BRIDGE_SINK/);
  });

  it('refuses a bad configuration with exit 2, naming every problem', async () => {
    const p = run({
      KUBECONFIG: kubeconfig,
      BRIDGE_SINK: 'lambda',
      ADD_FUNCTION: 'eip-add',
      CONCURRENCY: 'many',
      AWS_CONFIG_FILE: join(tmpdir(), 'no-aws-config'),
    });
    expect(await p.exit).toBe(2);
    const error = p.lines.find((l) => l.message === 'invalid configuration')!;
    expect(error.problems).toEqual([
      'the lambda sink needs UPDATE_FUNCTION, RESET_FUNCTION, DELETE_FUNCTION',
      'CONCURRENCY must be an integer from 1 to 1000, got "many"',
      "BRIDGE_METRICS=cloudwatch needs STAGE: the stack's alarms watch the namespace EipLambdas/<stage> (or set BRIDGE_METRICS=none)",
      'no AWS region: set AWS_REGION (the kustomize parameter region), or a region in the AWS profile',
    ]);
  });

  it('invokes the add function asynchronously for a new EIP, and drains and exits 0 on SIGTERM', async () => {
    const p = run({
      ...baseEnv(),
      BRIDGE_SINK: 'lambda',
      AWS_ENDPOINT_URL_LAMBDA: aws.url,
      ADD_FUNCTION: 'eip-add',
      UPDATE_FUNCTION: 'eip-update',
      RESET_FUNCTION: 'eip-reset',
      DELETE_FUNCTION: 'eip-delete',
    });
    try {
      const started = await eventually(() => {
        const l = p.lines.find((x) => x.message === 'bridge started');
        if (!l) throw new Error(`not started yet: ${p.stderr()}`);
        return l;
      });
      const healthUrl = String(started.healthUrl);
      await eventually(async () => expect((await fetch(`${healthUrl}/readyz`)).status).toBe(200));
      await createEip('from-main');
      const call = await eventually(() => {
        const c = aws.calls.find(
          (x) => x.path.includes('/functions/eip-add/') && x.body.includes('from-main'),
        );
        if (!c) throw new Error('no invoke yet');
        return c;
      });
      expect(call.headers['x-amz-invocation-type']).toBe('Event');
      const event = parseEipEvent(JSON.parse(call.body));
      expect(event).toMatchObject({ handler: 'add', reason: 'added', object: { name: 'from-main' } });
      const metrics = await (await fetch(`${healthUrl}/metrics`)).text();
      expect(metrics).toMatch(/eip_bridge_events_out_total\{handler="add"\} [1-9]/);

      p.child.kill('SIGTERM');
      expect(await p.exit).toBe(0);
      expect(p.lines.find((l) => l.message === 'drained')).toMatchObject({ outcome: 'done' });
      // node's deprecated punycode module is not loaded (the bundle uses the userland package)
      expect(p.stderr()).not.toMatch(/punycode|DEP0040/);
    } finally {
      p.child.kill('SIGKILL');
    }
  });

  it('puts events on the configured EventBridge bus with the sink set to eventbridge', async () => {
    const p = run({
      ...baseEnv(),
      BRIDGE_SINK: 'eventbridge',
      EVENT_BUS_NAME: 'eip-bus',
      AWS_ENDPOINT_URL_EVENTBRIDGE: aws.url,
    });
    try {
      await eventually(() => {
        if (!p.lines.some((x) => x.message === 'ready: every watch has listed')) throw new Error(p.stderr());
      });
      await createEip('via-bus');
      const entry = await eventually(() => {
        for (const c of aws.calls.filter((x) => x.headers['x-amz-target'] === 'AWSEvents.PutEvents')) {
          const put = JSON.parse(c.body) as {
            Entries: { Source: string; DetailType: string; Detail: string; EventBusName: string }[];
          };
          // One event's detail, or a gateway's burst grouped into one (ADR 0112): read as the handlers read it.
          const found = put.Entries.find((e) =>
            parseEipEvents(JSON.parse(e.Detail)).members.some(
              (m) => 'event' in m && m.event.object.name === 'via-bus',
            ),
          );
          if (found) return found;
        }
        throw new Error('no PutEvents yet');
      });
      expect(entry).toMatchObject({
        Source: EVENT_SOURCE,
        DetailType: 'IptablesEIP add',
        EventBusName: 'eip-bus',
      });
      p.child.kill('SIGTERM');
      expect(await p.exit).toBe(0);
    } finally {
      p.child.kill('SIGKILL');
    }
  });

  it('fails /readyz and counts every event as failed, none delivered, while the bus does not exist', async () => {
    const p = run({
      ...baseEnv(),
      BRIDGE_SINK: 'eventbridge',
      EVENT_BUS_NAME: 'missing-bus',
      AWS_ENDPOINT_URL_EVENTBRIDGE: aws.url,
    });
    try {
      const started = await eventually(() => {
        const l = p.lines.find((x) => x.message === 'bridge started');
        if (!l) throw new Error(`not started yet: ${p.stderr()}`);
        return l;
      });
      const healthUrl = String(started.healthUrl);
      await eventually(() => {
        if (!p.lines.some((x) => x.message === 'ready: every watch has listed')) throw new Error(p.stderr());
      });
      await createEip('lost-on-missing-bus');
      await eventually(async () => {
        const ready = await fetch(`${healthUrl}/readyz`);
        expect(ready.status).toBe(503);
        const body = (await ready.json()) as { sink?: { failingPermanently?: string } };
        expect(body.sink?.failingPermanently).toMatch(/missing-bus does not exist/);
      });
      const metrics = await (await fetch(`${healthUrl}/metrics`)).text();
      expect(metrics).toMatch(/eip_bridge_permanent_failures_total [1-9]/);
      expect(metrics).toMatch(/eip_bridge_failures_total [1-9]/);
      expect(metrics).toContain('eip_bridge_delivered_total 0');
      expect(metrics).toContain('eip_bridge_sink_failing 1');
      const puts = aws.calls.filter(
        (c) => c.headers['x-amz-target'] === 'AWSEvents.PutEvents' && c.body.includes('lost-on-missing-bus'),
      );
      expect(puts).toEqual([]);
      p.child.kill('SIGTERM');
      expect(await p.exit).toBe(0);
    } finally {
      p.child.kill('SIGKILL');
    }
  });

  it('emits the BridgeHeartbeat metric every HEARTBEAT_SECONDS while its watches are healthy', async () => {
    const p = run({
      ...baseEnv(),
      BRIDGE_SINK: 'eventbridge',
      EVENT_BUS_NAME: 'eip-bus',
      AWS_ENDPOINT_URL_EVENTBRIDGE: aws.url,
      BRIDGE_METRICS: 'emf',
      STAGE: 'staging',
      HEARTBEAT_SECONDS: '1',
    });
    try {
      const beat = await eventually(() => {
        const l = p.lines.find((x) => '_aws' in x && 'BridgeHeartbeat' in x);
        if (!l) throw new Error(`no heartbeat yet: ${p.stderr()}`);
        return l;
      });
      expect(beat).toMatchObject({
        service: 'eip-bridge',
        BridgeHeartbeat: 1,
        // In the stage's own namespace, where that stack's heartbeat alarm looks (ADR 0080).
        _aws: { CloudWatchMetrics: [{ Namespace: 'EipLambdas/staging', Dimensions: [['service']] }] },
      });
      expect(p.lines.some((x) => '_aws' in x && 'BridgeQueueDepth' in x)).toBe(true);
      p.child.kill('SIGTERM');
      expect(await p.exit).toBe(0);
    } finally {
      p.child.kill('SIGKILL');
    }
  });
});
