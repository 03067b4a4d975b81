/**
 * pods/exec under concurrency: 100 kubectl and 400 client-node execs held open together (500 sessions in
 * flight at once, counted by the server), then released; every one must print exactly its own output, with
 * nothing on kubectl's stderr. Before the exec server waited for the client's pong, about 0.5 % of kubectl
 * execs under load lost their frames ("Unknown stream id 1, discarding message", then "closed all streams").
 * EXEC_LOAD_KUBECTL / EXEC_LOAD_NODE change the counts (EIP_LONG=1 runs 200 + 800).
 */
import { PassThrough } from 'node:stream';
import { Exec } from '@kubernetes/client-node';
import { beforeAll, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { kubectlSuite, useApi } from './harness.js';

const LONG = process.env.EIP_LONG === '1';
const KUBECTL = Number(process.env.EXEC_LOAD_KUBECTL ?? (LONG ? 200 : 100));
const NODE = Number(process.env.EXEC_LOAD_NODE ?? (LONG ? 800 : 400));

kubectlSuite('pods/exec under concurrency', () => {
  const env = useApi();

  beforeAll(async () => {
    await env.core.createNamespacedPod({
      namespace: 'default',
      body: { metadata: { name: 'busy' }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    });
  });

  function nodeExec(word: string): Promise<string> {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = '';
    let err = '';
    stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    return new Promise((resolve) => {
      new Exec(env.kc)
        .exec('default', 'busy', 'c', ['echo', word], stdout, stderr, null, false, (status) =>
          setImmediate(() =>
            resolve(
              status.status === 'Success' && out === `${word}\n` && err === ''
                ? 'ok'
                : `client-node ${word}: ${JSON.stringify(status)} stdout=${JSON.stringify(out)} stderr=${JSON.stringify(err)}`,
            ),
          ),
        )
        .then(
          (ws) =>
            ws.on('close', () =>
              setTimeout(() => resolve(`client-node ${word}: closed without a status`), 100),
            ),
          (e: Error) => resolve(`client-node ${word}: ${e.message}`),
        );
    });
  }

  async function kubectlExec(word: string): Promise<string> {
    const r = await env.kWith({ timeoutMs: 300_000 }, 'exec', 'busy', '-c', 'c', '--', 'echo', word);
    return r.code === 0 && r.stdout === `${word}\n` && r.stderr === ''
      ? 'ok'
      : `kubectl ${word}: exit ${r.code} stdout=${JSON.stringify(r.stdout)} stderr=${JSON.stringify(r.stderr)}`;
  }

  it(`runs ${KUBECTL} kubectl and ${NODE} client-node execs, all in flight together, with 0 failures`, async () => {
    const total = KUBECTL + NODE;
    const hold = env.api.faults.holdExec({ pod: 'busy', times: total });
    const runs = [
      ...Array.from({ length: KUBECTL }, (_, i) => kubectlExec(`kubectl-${i}`)),
      ...Array.from({ length: NODE }, (_, i) => nodeExec(`node-${i}`)),
    ];
    // Every session connected and waiting at the server: `total` execs in flight at the same moment.
    await eventually(() => expect(hold.hits).toBe(total), { timeoutMs: 240_000, stepMs: 100 });
    hold.release();
    const results = await Promise.all(runs);
    const failures = results.filter((r) => r !== 'ok');
    console.log(
      `[exec-load] ${total} execs (${KUBECTL} kubectl, ${NODE} client-node) in flight together: ${failures.length} failed`,
    );
    expect(failures).toEqual([]);
  }, 600_000);

  it(`runs ${KUBECTL} + ${NODE} execs again as one burst, each answered as soon as it connects, with 0 failures`, async () => {
    const results = await Promise.all([
      ...Array.from({ length: KUBECTL }, (_, i) => kubectlExec(`burst-kubectl-${i}`)),
      ...Array.from({ length: NODE }, (_, i) => nodeExec(`burst-node-${i}`)),
    ]);
    const failures = results.filter((r) => r !== 'ok');
    console.log(`[exec-load] burst of ${results.length} execs: ${failures.length} failed`);
    expect(failures).toEqual([]);
  }, 600_000);
});
