/**
 * The bridge's small HTTP server: /healthz (the process answers), /readyz (every watch has listed and is
 * watching, and the sink is not failing permanently; 503 with the watch and sink states otherwise), /metrics (Prometheus text).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type BridgeStats, prometheusText } from './stats.js';

export interface HealthServer {
  url: string;
  close(): Promise<void>;
}

export async function startHealthServer(
  port: number,
  host: string,
  stats: () => BridgeStats,
): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const s = stats();
      const body = `${JSON.stringify({
        ready: s.ready,
        watches: s.watches,
        ...(s.sinkFailingPermanently && { sink: { failingPermanently: s.sinkFailingPermanently } }),
      })}\n`;
      res.writeHead(s.ready ? 200 : 503, { 'content-type': 'application/json' }).end(body);
    } else if (path === '/metrics') {
      res
        .writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' })
        .end(prometheusText(stats()));
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
