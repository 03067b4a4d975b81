/**
 * dynalite in-process: the local stack's DynamoDB. In memory by default; `dataDir` keeps the data on disk
 * (LevelDB) across restarts. Listens on 127.0.0.1, on an ephemeral port unless `port` is given.
 */
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';

/**
 * dynalite 4 reads through Readable streams over abstract-level iterators and, on destroy, closes the iterator
 * only if it has a `return()` method — which abstract-level 3 iterators do not have. Every Query and Scan thus
 * left an open iterator registered with the database (in memory and on disk alike): the stack's memory grew with
 * every resync. Giving the iterators that method (closing them) lets each stream release its iterator. Resolved
 * from dynalite's own location, so this patches the copy dynalite uses.
 */
function closeIteratorsOnReturn(): void {
  const level = createRequire(createRequire(import.meta.url).resolve('dynalite'))('abstract-level') as {
    AbstractValueIterator: { prototype: object };
  };
  const common = Object.getPrototypeOf(level.AbstractValueIterator.prototype) as {
    return?: unknown;
    close(): Promise<void>;
  };
  if (typeof common.return === 'function') return;
  Object.defineProperty(common, 'return', {
    configurable: true,
    writable: true,
    value: async function (this: { close(): Promise<void> }) {
      await this.close();
      return { done: true, value: undefined };
    },
  });
}
// LOCAL_DYNALITE_ITERATOR_FIX=off leaves dynalite as it ships, only to measure the difference
// (`npm run bench -- memory --without-iterator-fix`).
if (process.env.LOCAL_DYNALITE_ITERATOR_FIX !== 'off') closeIteratorsOnReturn();

export interface LocalDynamo {
  /** http://127.0.0.1:<port>, for `new DynamoDBClient({ endpoint })` or AWS_ENDPOINT_URL_DYNAMODB. */
  endpoint: string;
  close(): Promise<void>;
}

/**
 * A DynamoDB client for a local endpoint (dynalite, or a proxy in front of it): any credentials pass there, so
 * placeholders keep the SDK from consulting the credential chain. `config` adds to or overrides the defaults.
 */
export function localDynamoClient(endpoint: string, config: DynamoDBClientConfig = {}): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    ...config,
  });
}

export async function startLocalDynamo(
  options: { port?: number; dataDir?: string } = {},
): Promise<LocalDynamo> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, path: options.dataDir });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closed: Promise<void> | undefined;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () => {
      closed ??= new Promise<void>((resolve, reject) => {
        // Keep-alive sockets of SDK clients would hold close() open until they time out.
        server.closeAllConnections?.();
        server.close((err) => (err ? reject(err) : resolve()));
      });
      return closed;
    },
  };
}
