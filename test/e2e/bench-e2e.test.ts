/**
 * The quick end-to-end benchmark as a test (bench/e2e.ts): 40 EIPs created at once through the Kubernetes API on
 * the local stack, then deleted. It fails on what must never happen — two EIPs with one address, an EIP that never
 * becomes Ready, one that is never gone, an event given up — and on nothing about time (numbers come from
 * `npm run bench -- e2e`, not from tests).
 */
import { describe, expect, it } from 'vitest';
import { runE2e } from '../../bench/e2e.js';

describe('npm run bench -- e2e --quick', () => {
  it('makes 40 EIPs created at once Ready with distinct addresses, and deletes them all', async () => {
    const r = await runE2e({ n: 40, gateways: 2, concurrency: 40, cacheMs: 5000, timeoutMs: 240_000 });
    expect(r.duplicates).toBe(0);
    expect(r.notReady).toBe(0);
    expect(r.add.done).toBe(40);
    expect(r.delete.done).toBe(40);
    expect(r.deadLetters).toBe(0);
    // The counts the benchmark reports come from the request log and the DynamoDB client: they saw the run.
    expect(r.add.kube.execs).toBeGreaterThanOrEqual(1);
    // Adds waiting together on one gateway share an exec (ADR 0110): fewer execs than EIPs.
    expect(r.add.kube.execs).toBeLessThan(40);
    expect(r.add.dynamo.perEip).toBeGreaterThan(0);
  }, 300_000);

  it('as on Lambda (one-invocation containers, local/lambda-model.ts): one gateway’s burst shares execs only when grouped', async () => {
    const run = (groupEvents: number) =>
      runE2e({
        n: 24,
        gateways: 1,
        concurrency: 24,
        cacheMs: 5000,
        timeoutMs: 240_000,
        lambda: { containers: 6, groupEvents },
      });
    const alone = await run(1);
    const grouped = await run(8);
    for (const r of [alone, grouped]) {
      expect(r.duplicates).toBe(0);
      expect(r.notReady).toBe(0);
      expect(r.delete.done).toBe(24);
      expect(r.deadLetters).toBe(0);
    }
    // One event an invocation: every add its own exec, whatever the containers (ADR 0110's Lambda case).
    expect(alone.add.kube.execs).toBe(24);
    // Grouped (ADR 0112): the members of an invocation share execs.
    expect(grouped.add.kube.execs).toBeLessThan(24);
    console.log(
      `24 adds on one gateway as on Lambda: ${alone.add.kube.execs} execs alone, ${grouped.add.kube.execs} grouped`,
    );
  }, 600_000);
});
