import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import type { Outcome } from '../../shared/core/outcome.js';
import { DeadlineError, GatewayNotReadyError } from '../../shared/domain/errors.js';
import type { EipEvent } from '../../shared/events.js';
import { type BatchOutcome, eipHandler } from '../../shared/lambda/eip-handler.js';
import { world } from '../support/world.js';

const dir = join(import.meta.dirname, '../../events');
const samples = readdirSync(dir)
  .filter((f) => f.endsWith('.json') && f !== 'schema.json')
  .map((f) => [f, JSON.parse(readFileSync(join(dir, f), 'utf8'))] as const);

const handlerOf = (event: Record<string, unknown>): EipEvent['handler'] =>
  ((event.detail as EipEvent | undefined) ?? (event as unknown as EipEvent)).handler;
/** The outcomes of a single event or of a batch. */
const outcomesOf = (o: Outcome | BatchOutcome): Outcome[] => ('batch' in o ? o.batch : [o]);

function lambdaContext(remainingMs: number): Context {
  const end = Date.now() + remainingMs;
  return { awsRequestId: 'req-1', getRemainingTimeInMillis: () => end - Date.now() } as unknown as Context;
}

describe('the handlers with the sample events', () => {
  it.each(samples)('%s resolves to an outcome against a cluster that has the demo EIP', async (_f, event) => {
    const w = world();
    w.qos('qos-demo', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '10' }], {
      shared: true,
    });
    w.eip('demo-eip', { qosPolicy: 'qos-demo' });
    const handler = eipHandler(handlerOf(event), async () => w.deps);
    const outcomes = outcomesOf(await handler(event as unknown, {} as Context));
    for (const outcome of outcomes) expect(['applied', 'unchanged', 'skipped']).toContain(outcome.status);
    expect(outcomes[0]!.eip).toBe('demo-eip');
  });

  it('add.json configures the demo EIP end to end', async () => {
    const w = world();
    w.eip('demo-eip');
    const event = JSON.parse(readFileSync(join(dir, 'add.json'), 'utf8'));
    const outcome = await eipHandler('add', async () => w.deps)(event, {} as Context);
    expect(outcome).toMatchObject({ status: 'applied', eip: 'demo-eip', ip: '172.18.0.2' });
    expect(w.metrics.counts.get('Outcomes{handler=add,status=applied}')).toBe(1);
    expect(w.log.lines.find((l) => l.message === 'outcome')).toMatchObject({
      eventId: '-:-:added',
      eip: 'demo-eip',
      handler: 'add',
    });
  });
});

describe('the error policy', () => {
  it('rejects an invalid event with a message naming the bad field, and does nothing else', async () => {
    const w = world();
    w.eip('demo-eip');
    const outcome = await eipHandler('add', async () => w.deps)(
      {
        version: 1,
        id: 'x',
        handler: 'add',
        reason: 'added',
        object: { name: 'Demo_EIP' },
      } as unknown as EipEvent,
      {} as Context,
    );
    expect(outcome).toMatchObject({
      status: 'rejected',
      code: 'InvalidEvent',
      message: expect.stringMatching(/event\.object\.name/),
    });
    expect(w.cluster.writes).toEqual([]);
    expect(w.gateway.calls).toEqual([]);
  });

  it('rejects an event meant for another handler', async () => {
    const w = world();
    const event = JSON.parse(readFileSync(join(dir, 'reset.json'), 'utf8'));
    expect(await eipHandler('add', async () => w.deps)(event, {} as Context)).toMatchObject({
      status: 'rejected',
      message: 'invalid event: handler is "reset" but this is the add handler',
    });
  });

  it('rethrows a retryable error so Lambda retries it', async () => {
    const w = world();
    w.pod().phase = 'Pending';
    w.eip('demo-eip');
    const event = JSON.parse(readFileSync(join(dir, 'add.json'), 'utf8'));
    await expect(eipHandler('add', async () => w.deps)(event, {} as Context)).rejects.toBeInstanceOf(
      GatewayNotReadyError,
    );
    expect(w.metrics.counts.get('Outcomes{handler=add,status=retry}')).toBe(1);
  });

  it('gives up before the Lambda deadline, abandons the exec and releases the lease', async () => {
    const w = world();
    w.eip('demo-eip');
    w.gateway.slowNext(5_000);
    const event = JSON.parse(readFileSync(join(dir, 'add.json'), 'utf8'));
    const handler = eipHandler('add', async () => w.deps, { timeoutEarlyInMillis: 1_000 });
    await expect(handler(event, lambdaContext(1_200))).rejects.toBeInstanceOf(DeadlineError);
    // The abandoned operation unwinds on the aborted signal: the exec never ran and the lease is given back.
    await expect.poll(() => w.leases.held.size, { timeout: 2_000 }).toBe(0);
    expect(w.gateway.calls).toEqual([]);
    expect(w.get('demo-eip')?.status?.ready).toBeUndefined();
  });
});
