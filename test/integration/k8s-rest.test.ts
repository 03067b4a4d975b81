/**
 * The thin Kubernetes REST client (shared/adapters/k8s/rest.ts) and kept-alive sockets: a server that closes an idle
 * connection just as the next request goes out on it fails that request with no answer. A GET is sent once more on
 * a new socket; a write is not, and a failure on a fresh socket is not either.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeRest } from '../../shared/adapters/k8s/rest.js';

let server: Server | undefined;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

/**
 * A server that answers the first request on each connection and, while `drop` says so, resets the connection on
 * a later one (what an idle timeout meeting the next request looks like to the client).
 */
async function serve(
  drop: (n: { onSocket: number }) => boolean,
): Promise<{ url: string; requests: string[] }> {
  const requests: string[] = [];
  const perSocket = new WeakMap<object, number>();
  server = createServer((req, res) => {
    const onSocket = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, onSocket);
    requests.push(`${req.method} ${req.url} #${onSocket}`);
    if (drop({ onSocket })) {
      req.socket.destroy();
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ ok: requests.length }));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, requests };
}

describe('KubeRest on a kept-alive socket the server has closed', () => {
  it('sends a GET once more on a new socket', async () => {
    const s = await serve(({ onSocket }) => onSocket === 2);
    const rest = new KubeRest({ server: s.url });
    expect(await rest.request('GET', '/api/v1/namespaces/a')).toEqual({ ok: 1 });
    expect(await rest.request('GET', '/api/v1/namespaces/b')).toEqual({ ok: 3 });
    expect(s.requests).toEqual([
      'GET /api/v1/namespaces/a #1',
      'GET /api/v1/namespaces/b #2',
      'GET /api/v1/namespaces/b #1',
    ]);
  });

  it('does not send a write again: its caller reads and decides', async () => {
    const s = await serve(({ onSocket }) => onSocket === 2);
    const rest = new KubeRest({ server: s.url });
    await rest.request('GET', '/x');
    await expect(rest.request('PATCH', '/y', { body: {} })).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(s.requests).toEqual(['GET /x #1', 'PATCH /y #2']);
  });

  it('does not send a GET again when a fresh connection fails: that is the server, not a stale socket', async () => {
    const s = await serve(() => true);
    const rest = new KubeRest({ server: s.url });
    await expect(rest.request('GET', '/z')).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(s.requests).toEqual(['GET /z #1']);
  });
});
