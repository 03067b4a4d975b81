/**
 * The thin Kubernetes REST client (shared/adapters/k8s/rest.ts) against the local Kubernetes API over TLS.
 *
 * Kept-alive sockets: the sockets of a burst of writes sit idle for as long as the server keeps an idle connection
 * (the local API is Node's server: it announces `Keep-Alive: timeout=5` and closes an idle connection after 6 s). The
 * next burst must not go out on sockets the server is closing: a write that fails there with no answer is not sent
 * again (its caller reads and decides), so one such reset fails the caller's event. That is what made the 40-EIP
 * benchmark (test/e2e/bench-e2e.test.ts) fail with `read ECONNRESET` once a phase took about 6 s. The event loop is
 * held while the sockets idle (as a loaded process holds it), so that the client's next requests and the server's
 * idle timer come due in the same turn, the requests first: the server then closes connections with unread
 * requests on them, which resets them. The client must have let those sockets go before.
 *
 * Trust: the kubeconfig's CA decides whom REST and the exec WebSocket trust.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, type KubeApi, startKubeApi } from '../../local/kube-api/index.js';
import { servingCertificate } from '../../local/kube-api/tls.js';
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

describe('KubeRest exec over TLS', () => {
  const handlers = { stdout: () => {}, stderr: () => {}, status: () => {} };
  const client = (a: KubeApi, ca: string) =>
    new KubeRest({ server: a.tlsUrl, ca, headers: () => ({ Authorization: `Bearer ${ADMIN_TOKEN.token}` }) });

  it('trusts the API through the kubeconfig CA, for REST and for the exec WebSocket alike', async () => {
    api = await startKubeApi();
    const rest = client(api, api.ca);
    await expect(rest.request('GET', '/api/v1/namespaces/default')).resolves.toMatchObject({
      kind: 'Namespace',
    });
    // No such pod: the upgrade reaches the API (TLS done) and is refused there.
    await expect(rest.exec('default', 'none', 'c', ['true'], handlers)).rejects.toThrow(/404/);
  });

  it('refuses a server whose certificate another CA signed, for REST and for the exec WebSocket alike', async () => {
    api = await startKubeApi();
    const rest = client(api, servingCertificate(['127.0.0.1']).ca);
    await expect(rest.request('GET', '/api/v1/namespaces/default')).rejects.toMatchObject({
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
    await expect(rest.exec('default', 'none', 'c', ['true'], handlers)).rejects.toMatchObject({
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
    expect(api.requests.all()).toEqual([]);
  });
});
