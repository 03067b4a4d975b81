/**
 * The local dashboard: a read-only page on loopback, served by the local stack (`npm start`). The page (page/) is
 * bundled with its chart library (uPlot) by esbuild when the server starts; it polls /api/state every half second.
 * Nothing on the page comes from anywhere but this server (Content-Security-Policy `default-src 'self'`).
 * See local/dashboard/README.md.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { paginateScan } from '@aws-sdk/client-dynamodb';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { build } from 'esbuild';
import type { RepairAction } from '../../shared/audit/audit.js';
import type { DriftRepairSummary } from '../../shared/audit/live.js';
import type { Drift } from '../../shared/audit/model.js';
import type { Outcome } from '../../shared/core/outcome.js';
import { capacity, hostCount, poolsOf } from '../../shared/domain/addressing.js';
import {
  externalNetworkOf,
  type GatewayPod,
  GROUP,
  type IptablesEip,
  type Subnet,
  VERSION,
  type VpcNatGateway,
} from '../../shared/domain/kube-ovn.js';
import type { EipEvent } from '../../shared/events.js';
import { eipPods, gatewayPodRows } from './pods.js';
import { localWidgets, type MetricRecorder } from './recorder.js';
import type { DashboardState, EipRow, OutcomeRow, SubnetUse } from './state.js';

export type { OutcomeRow } from './state.js';

export interface DeadLetterRow {
  event: EipEvent;
  error: string;
  attempts: number;
  at: string;
}

/** The last run of the drift check and repair (shared/audit), or that it failed. */
export type DriftCheck = { at: string } & (
  | {
      drift: Drift[];
      actions: RepairAction[];
      gateways?: DriftRepairSummary['gateways'];
      failed?: undefined;
    }
  | { failed: true }
);

export interface DashboardOptions {
  recorder: MetricRecorder;
  kubeConfig: KubeConfig;
  dynamo: DynamoDBClient;
  tableName: string;
  deadLetters: () => DeadLetterRow[];
  outcomes: () => readonly OutcomeRow[];
  /** The last drift check, when one has run. */
  drift?: () => DriftCheck | undefined;
  /** Every gateway pod, in every namespace the gateways are in (the handlers' Cluster.listGatewayPods). */
  gatewayPods?: () => Promise<GatewayPod[]>;
  /** Port on 127.0.0.1 (0 = a free one). */
  port?: number;
  /** The kube-ovn release the lab plays, shown in the header. */
  kubeOvnRelease?: string;
}

export interface Dashboard {
  url: string;
  close(): Promise<void>;
}

const HEADERS = {
  'content-security-policy':
    "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

/** Keeps the outcomes of the last handler runs, newest first. */
export class OutcomeLog {
  private rows: OutcomeRow[] = [];
  constructor(private readonly max = 50) {}
  add(event: EipEvent, outcome: Outcome): void {
    const detail =
      outcome.status === 'applied'
        ? outcome.actions.join(', ')
        : outcome.status === 'skipped'
          ? outcome.reason
          : outcome.status === 'rejected'
            ? `${outcome.code}: ${outcome.message}`
            : '';
    this.rows.unshift({
      at: new Date().toISOString(),
      handler: event.handler,
      eip: event.object.name,
      reason: event.reason,
      status: outcome.status,
      detail,
    });
    if (this.rows.length > this.max) this.rows.length = this.max;
  }
  list(): readonly OutcomeRow[] {
    return this.rows;
  }
}

async function bundlePage(): Promise<{ js: string; css: string }> {
  const dir = join(import.meta.dirname, 'page');
  const out = await build({
    entryPoints: [join(dir, 'main.ts')],
    bundle: true,
    write: false,
    format: 'iife',
    target: 'es2020',
    minify: true,
    outdir: 'out',
    loader: { '.css': 'css' },
    logLevel: 'silent',
  });
  const js = out.outputFiles.find((f) => f.path.endsWith('.js'))?.text ?? '';
  const css = out.outputFiles.find((f) => f.path.endsWith('.css'))?.text ?? '';
  return { js, css };
}

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const html = (release: string | undefined): string => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>eip-lambdas: local dashboard</title>
<link rel="stylesheet" href="/app.css">
</head>
<body>
<header><h1>eip-lambdas <span class="sub">local dashboard</span>${release ? ` <span class="sub" id="kube-ovn">kube-ovn ${escapeHtml(release)}</span>` : ''}</h1><p id="status" role="status" aria-live="polite">loading…</p></header>
<main>
<section aria-labelledby="eips-h"><h2 id="eips-h">IptablesEIPs</h2><div class="scroll" tabindex="0"><table id="eips"><caption class="sr">IptablesEIPs, their address, gateway, QoS policy and readiness</caption><thead><tr><th scope="col">name</th><th scope="col">IP</th><th scope="col">gateway</th><th scope="col">QoS policy</th><th scope="col">Ready</th><th scope="col">last transition</th><th scope="col">on gateway pods (last check)</th></tr></thead><tbody></tbody></table></div></section>
<section aria-labelledby="pods-h"><h2 id="pods-h">Gateway pods</h2><div class="scroll" tabindex="0"><table id="gateway-pods"><caption class="sr">Every pod of every NAT gateway: where it runs, its container run and redo token, its kube-ovn release, and how many EIP addresses the last drift check read on it</caption><thead><tr><th scope="col">pod</th><th scope="col">gateway</th><th scope="col">namespace</th><th scope="col">phase</th><th scope="col">container</th><th scope="col">restarts</th><th scope="col">redo token</th><th scope="col">release</th><th scope="col">EIP addresses</th></tr></thead><tbody></tbody></table></div></section>
<section aria-labelledby="subnets-h"><h2 id="subnets-h">External subnets</h2><div id="subnets"></div></section>
<section aria-labelledby="dl-h"><h2 id="dl-h">Dead letters</h2><div class="scroll" tabindex="0"><table id="dead-letters"><caption class="sr">Events that failed every retry, with their last error</caption><thead><tr><th scope="col">parked at</th><th scope="col">handler</th><th scope="col">EIP</th><th scope="col">reason</th><th scope="col">attempts</th><th scope="col">error</th></tr></thead><tbody></tbody></table></div></section>
<section aria-labelledby="drift-h"><h2 id="drift-h">Gateway drift (last check)</h2><p id="drift-note" class="note"></p><div class="scroll" tabindex="0"><table id="drift"><caption class="sr">Drift found by the last check of the gateways against the allocations and the EIPs</caption><thead><tr><th scope="col">kind</th><th scope="col">EIP or address</th><th scope="col">what it means</th><th scope="col">repair</th></tr></thead><tbody></tbody></table></div></section>
<section aria-labelledby="out-h"><h2 id="out-h">Recent handler outcomes</h2><div class="scroll" tabindex="0"><table id="outcomes"><caption class="sr">The last handler runs, newest first</caption><thead><tr><th scope="col">at</th><th scope="col">handler</th><th scope="col">EIP</th><th scope="col">reason</th><th scope="col">outcome</th><th scope="col">detail</th></tr></thead><tbody></tbody></table></div></section>
<section aria-labelledby="widgets-h"><h2 id="widgets-h">The CloudWatch dashboard's widgets, from local metrics</h2><p class="note" id="widgets-note"></p><div id="widgets" class="grid"></div></section>
</main>
<script src="/app.js"></script>
</body>
</html>
`;

export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const page = { ...(await bundlePage()), html: html(options.kubeOvnRelease) };
  const customs = options.kubeConfig.makeApiClient(CustomObjectsApi);
  const list = async <T>(plural: string): Promise<T[]> =>
    ((await customs.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as { items: T[] })
      .items;

  async function heldPerPool(): Promise<Map<string, number>> {
    const held = new Map<string, number>();
    for await (const pageOut of paginateScan(
      { client: options.dynamo },
      {
        TableName: options.tableName,
        ProjectionExpression: '#s, #f, #a, #o',
        ExpressionAttributeNames: { '#s': 'subnet', '#f': 'family', '#a': 'address', '#o': 'ownerUid' },
        ConsistentRead: true,
      },
    ))
      for (const it of pageOut.Items ?? []) {
        if (!it.ownerUid?.S || !it.address?.S || !it.subnet?.S) continue;
        const k = `${it.subnet.S}|${it.family?.N ?? '4'}`;
        held.set(k, (held.get(k) ?? 0) + 1);
      }
    return held;
  }

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local dashboard's state or page assembled in one pass, pinned by test/e2e/dashboard-browser.test.ts
  async function state(): Promise<DashboardState> {
    const now = Date.now();
    options.recorder.prune();
    const errors: string[] = [];
    const [eips, subnets, gateways, held, pods] = await Promise.all([
      list<IptablesEip>('iptables-eips').catch((e: unknown) => {
        errors.push(`EIPs: ${String(e)}`);
        return [];
      }),
      list<Subnet>('subnets').catch(() => []),
      list<VpcNatGateway>('vpc-nat-gateways').catch(() => []),
      heldPerPool().catch((e: unknown) => {
        errors.push(`allocations: ${String(e)}`);
        return new Map<string, number>();
      }),
      (options.gatewayPods?.() ?? Promise.resolve([])).catch((e: unknown) => {
        errors.push(`gateway pods: ${String(e)}`);
        return [] as GatewayPod[];
      }),
    ]);
    const check = options.drift?.();
    const read = check && !check.failed ? check.gateways : undefined;
    const external = new Set<string>([
      ...eips.map((e) => externalNetworkOf(e)),
      ...gateways.flatMap((g) => g.spec.externalSubnets ?? []),
      ...[...held.keys()].map((k) => k.split('|')[0]!),
    ]);
    const subnetUse: SubnetUse[] = [];
    for (const name of [...external].sort()) {
      const sub = subnets.find((s) => s.metadata.name === name);
      if (!sub) {
        subnetUse.push(unreadable(name, 'no such Subnet'));
        continue;
      }
      try {
        for (const pool of poolsOf(sub)) {
          const cap = capacity(pool);
          const used = held.get(`${pool.subnet}|${pool.family}`) ?? 0;
          const big = cap > 1_000_000_000n;
          subnetUse.push({
            subnet: name,
            family: pool.family,
            cidr: pool.cidr,
            used,
            free: big ? Number.MAX_SAFE_INTEGER : Math.max(0, Number(cap) - used),
            excluded: big ? 0 : Number(hostCount(pool) - cap),
          });
        }
      } catch (e) {
        subnetUse.push(unreadable(name, String(e)));
      }
    }
    const eipRows: EipRow[] = eips
      .map((e) => {
        const last = [...(e.status?.conditions ?? [])]
          .filter((c) => c.lastTransitionTime)
          .sort((a, b) => (a.lastTransitionTime! < b.lastTransitionTime! ? 1 : -1))[0];
        return {
          name: e.metadata.name,
          ip: e.status?.ip ?? '',
          gateway: e.spec.natGwDp ?? '',
          qosPolicy: e.status?.qosPolicy ?? e.spec.qosPolicy ?? '',
          ready: e.status?.ready === true,
          lastTransition: last ? `${last.lastTransitionTime} (${last.type}=${last.status})` : '',
          pods: eipPods(e, read),
        };
      })
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    const deadLetters = options.deadLetters().map((d) => ({
      at: d.at,
      handler: d.event.handler,
      eip: d.event.object.name,
      reason: d.event.reason,
      attempts: d.attempts,
      error: d.error,
    }));
    const widgets = localWidgets(options.recorder.all(), now);
    const drift = check
      ? {
          at: check.at,
          failed: check.failed === true,
          items: check.failed
            ? []
            : check.drift.map((d) => ({
                kind: d.kind,
                target: d.eip ?? d.address ?? d.gateway ?? d.subnet ?? '',
                message: d.message,
                repair: check.actions.find(
                  (a) =>
                    a.kind === d.kind &&
                    (a.target === d.eip || (!!d.address && a.target.startsWith(d.address))),
                )?.result,
              })),
        }
      : undefined;
    return {
      at: new Date(now).toISOString(),
      errors,
      eips: eipRows,
      gatewayPods: gatewayPodRows(pods, read),
      subnets: subnetUse,
      deadLetters,
      outcomes: options.outcomes(),
      drift,
      widgets,
    };
  }

  const send = (res: ServerResponse, code: number, type: string, body: string) => {
    res.writeHead(code, { ...HEADERS, 'content-type': type });
    res.end(body);
  };
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      return send(res, 405, 'text/plain; charset=utf-8', 'read-only\n');
    }
    const path = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
    if (path === '/') return send(res, 200, 'text/html; charset=utf-8', page.html);
    if (path === '/app.js') return send(res, 200, 'text/javascript; charset=utf-8', page.js);
    if (path === '/app.css') return send(res, 200, 'text/css; charset=utf-8', page.css);
    if (path === '/favicon.ico') {
      res.writeHead(204, HEADERS);
      res.end();
      return;
    }
    if (path === '/api/state')
      return send(res, 200, 'application/json; charset=utf-8', JSON.stringify(await state()));
    return send(res, 404, 'text/plain; charset=utf-8', 'not found\n');
  };
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', `${String(e)}\n`);
      else res.end();
    });
  });
  await new Promise<void>((ok, ko) => {
    server.once('error', ko);
    server.listen(options.port ?? 0, '127.0.0.1', () => ok());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}

/** A subnet row the page shows with its error instead of a bar. */
function unreadable(subnet: string, error: string): SubnetUse {
  return { subnet, family: 4, cidr: '', used: 0, free: 0, excluded: 0, error };
}
