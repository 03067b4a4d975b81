/**
 * dynalite in-process: the local stack's DynamoDB. In memory by default; `dataDir` keeps the data on disk
 * (LevelDB) across restarts. Listens on 127.0.0.1, on an ephemeral port unless `port` is given.
 */
import type { AddressInfo } from 'node:net';
import dynalite from 'dynalite';

export interface LocalDynamo {
  /** http://127.0.0.1:<port>, for `new DynamoDBClient({ endpoint })` or AWS_ENDPOINT_URL_DYNAMODB. */
  endpoint: string;
  close(): Promise<void>;
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
