/**
 * The thin Kubernetes REST client (shared/adapters/k8s/rest.ts) against the local Kubernetes API over TLS, on the
 * kept-alive sockets of a burst of writes that sat idle for as long as the server keeps an idle connection (the
 * local API: Node's, which announces `Keep-Alive: timeout=5` and closes an idle connection after 6 s). The next burst must not go out on sockets the
 * server is closing: a write that fails there with no answer is not sent again (its caller reads and decides), so
 * one such reset fails the caller's event — what made the 40-EIP benchmark (test/e2e/bench-e2e.test.ts) fail with
 * `read ECONNRESET` once its phases took about 5 s.
 *
 * The event loop is held while the sockets idle (as a loaded process holds it), so that the server's idle timer and
 * the client's next requests come due in the same turn, the requests first: the server then closes connections
 * with unread requests on them, which resets them. The client must have let those sockets go before.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { KubeRest } from '../../shared/adapters/k8s/rest.js';

let api: KubeApi | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

/** Holds this thread (timers, sockets and all) for `ms`. */
function hold(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('KubeRest on kept-alive TLS sockets the local API is about to close', () => {
  it('sends the writes of a burst that follows an idle period on sockets that are still open', async () => {
    api = await startKubeApi();
    const rest = new KubeRest({
      server: api.tlsUrl,
      ca: api.ca,
      headers: () => ({ Authorization: `Bearer ${ADMIN_TOKEN.token}` }),
    });
    const burst = (round: number) =>
      Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          rest.request('POST', '/api/v1/namespaces/default/configmaps', {
            body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `r${round}-${i}` } },
          }),
        ),
      );
    const first = await burst(0);
    expect(first.filter((r) => r.status === 'rejected')).toEqual([]);
    // Due just before the server's 6 s idle timer of the sockets the first burst left idle.
    const second = new Promise<PromiseSettledResult<unknown>[]>((resolve) => {
      setTimeout(() => resolve(burst(1)), 5_950);
    });
    hold(6_600);
    const failed = (await second).flatMap((r) =>
      r.status === 'rejected' ? [String((r.reason as { code?: string }).code ?? r.reason)] : [],
    );
    expect(failed).toEqual([]);
    const created = api.requests
      .all()
      .filter((r) => r.method === 'POST' && r.status === 201)
      .map((r) => r.path);
    expect(created).toHaveLength(20);
  }, 30_000);
});
