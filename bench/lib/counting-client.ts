/** A DynamoDBClient that counts the requests it really sends (reads and writes), by operation. */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { localDynamoClient } from '../../local/dynamo.js';

const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem']);

export class RequestCounter {
  reads = 0;
  writes = 0;
  readonly byOp = new Map<string, number>();
  get total(): number {
    return this.reads + this.writes;
  }
  snapshot(): { reads: number; writes: number } {
    return { reads: this.reads, writes: this.writes };
  }
}

/**
 * `latencyMs` is added before every request, to model the network round trip of a real table (in-process
 * dynalite has none, so without it every allocator is bound by the one CPU it shares with the server).
 */
export function countingClient(
  endpoint: string,
  counter = new RequestCounter(),
  latencyMs = 0,
): { client: DynamoDBClient; counter: RequestCounter } {
  const client = localDynamoClient(endpoint);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const op = String(context.commandName ?? '').replace(/Command$/, '');
      counter.byOp.set(op, (counter.byOp.get(op) ?? 0) + 1);
      if (WRITES.has(op)) counter.writes++;
      else counter.reads++;
      if (latencyMs > 0) await new Promise((r) => setTimeout(r, latencyMs));
      return next(args);
    },
    { step: 'finalizeRequest', name: 'countRequests' },
  );
  return { client, counter };
}
