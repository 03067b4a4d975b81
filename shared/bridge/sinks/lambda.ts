/**
 * Direct asynchronous Lambda invoke (`InvocationType: 'Event'`): one function per handler, the bare event as the
 * payload. Lambda queues the event and owns retries and the on-failure destination from there; this sink only
 * retries getting it accepted (throttling, network, 5xx) with exponential backoff and jitter.
 */
import type { InvokeCommand, InvokeCommandOutput } from '@aws-sdk/client-lambda';
import type { EipEvent, HandlerName } from '../../events.js';
import type { Logger } from '../../ports.js';
import { backoffDelay, sleep } from '../backoff.js';
import {
  emptySinkStats,
  errorText,
  isPermanentAwsError,
  type Sink,
  SinkGaveUp,
  type SinkStats,
} from './sink.js';

/** The seam: a real `LambdaClient`, or a fake with the same `send`. */
export interface InvokeClient {
  send(command: InvokeCommand): Promise<InvokeCommandOutput>;
}

export interface LambdaSinkOptions {
  client: InvokeClient;
  /** Function name or ARN per handler. */
  functions: Record<HandlerName, string>;
  /** Attempts per event before it is given up. Default 6. */
  maxAttempts?: number;
  /** First retry delay, doubling up to maxBackoffMs. Defaults 200 ms and 10 s. */
  backoffMs?: number;
  maxBackoffMs?: number;
  log?: Logger;
  random?: () => number;
}

export class LambdaInvokeError extends SinkGaveUp {
  override readonly name = 'LambdaInvokeError';
}

export function lambdaSink(options: LambdaSinkOptions): Sink {
  const maxAttempts = options.maxAttempts ?? 6;
  const backoffMs = options.backoffMs ?? 200;
  const maxBackoffMs = options.maxBackoffMs ?? 10_000;
  const stats: SinkStats = emptySinkStats();
  let Command: typeof InvokeCommand | undefined;
  const encoder = new TextEncoder();

  return {
    name: 'lambda',
    async send(event: EipEvent): Promise<void> {
      Command ??= (await import('@aws-sdk/client-lambda')).InvokeCommand;
      const FunctionName = options.functions[event.handler];
      const Payload = encoder.encode(JSON.stringify(event));
      for (let attempt = 1; ; attempt++) {
        let failure: string;
        let permanent = false;
        try {
          const out = await options.client.send(
            new Command({ FunctionName, InvocationType: 'Event', Payload }),
          );
          if (out.StatusCode === 202) {
            stats.delivered++;
            delete stats.failingPermanently;
            return;
          }
          failure = `unexpected status ${out.StatusCode}`;
        } catch (e) {
          failure = errorText(e);
          permanent = isPermanentAwsError(e);
        }
        if (permanent) {
          stats.failures++;
          stats.permanentFailures++;
          stats.failingPermanently = failure;
          options.log?.error('event not delivered: permanent error', {
            eventId: event.id,
            eip: event.object.name,
            function: FunctionName,
            error: failure,
          });
          throw new LambdaInvokeError(`invoke ${FunctionName} failed: ${failure}`, true);
        }
        if (attempt >= maxAttempts) {
          stats.failures++;
          options.log?.error('event dropped after retries', {
            eventId: event.id,
            eip: event.object.name,
            function: FunctionName,
            attempts: attempt,
            error: failure,
          });
          throw new LambdaInvokeError(`invoke ${FunctionName} failed ${attempt} times: ${failure}`);
        }
        stats.retries++;
        options.log?.warn('invoke will be retried', { eventId: event.id, attempts: attempt, error: failure });
        await sleep(backoffDelay(attempt, backoffMs, maxBackoffMs, options.random));
      }
    },
    stats: () => ({ ...stats }),
  };
}
