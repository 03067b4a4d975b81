/**
 * The one place where DynamoDB errors become domain errors. Every request of the adapters goes through
 * `Store.send` (or `Store.sendConditional` for writes guarded by a condition), or, for reads of many pages,
 * `Store.queryItems` / `Store.scanItems` (the SDK's paginators, every page observed and every failure translated):
 *
 * - `ConditionalCheckFailedException` is not an error here: `sendConditional` reports it as `{ ok: false }`
 *   and the caller turns it into the domain outcome (a conflict, a held lease, a no-op release);
 * - throttling, 5xx and network failures are retried by the SDK client's own retry strategy (configure it on the
 *   client: `dynamoClientOf` in shared/adapters/live.ts sets DYNAMO_MAX_ATTEMPTS, standard mode — exponential
 *   backoff with jitter and a retry quota), not by a second loop here; what is still failing then surfaces as
 *   `StoreUnavailableError` (retryable: Lambda retries the event). Retries the SDK made are counted from the
 *   response metadata (`IpamStoreRetries`);
 * - anything else (validation, missing table, access denied) is a deployment fault: it surfaces at once as
 *   `StoreUnavailableError` with the SDK error as `cause`, so it ends in the on-failure destination.
 */
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  paginateQuery,
  paginateScan,
  QueryCommand,
  type QueryCommandInput,
  ScanCommand,
  type ScanCommandInput,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { StoreUnavailableError } from '../../domain/errors.js';
import type { Logger, Metrics } from '../../ports.js';

type Item = Record<string, AttributeValue>;

/** Error names that a later attempt can cure. */
const TRANSIENT = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'InternalServerError',
  'ServiceUnavailable',
  'ServiceUnavailableException',
  'TransactionConflictException',
  'LimitExceededException',
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
]);
const TRANSIENT_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
]);

/** Attempts per request (the first and three retries) the product's DynamoDB client is configured with. */
export const DYNAMO_MAX_ATTEMPTS = 4;

export interface StoreOptions {
  client: DynamoDBClient;
  tableName: string;
  log?: Logger;
  metrics?: Metrics;
}

/** Any DynamoDB command object (PutItemCommand, QueryCommand, ...). */
type AnyCommand = { readonly input: object };

export type Conditional<T> = { ok: true; output: T } | { ok: false; item?: Record<string, AttributeValue> };

export function isTransient(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  if (TRANSIENT.has(e.name)) return true;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return true;
  const meta = (e as { $metadata?: { httpStatusCode?: number } }).$metadata;
  const status = meta?.httpStatusCode;
  if (typeof status === 'number' && status >= 500) return true;
  const fault = (e as { $fault?: string }).$fault;
  return fault === 'server';
}

export class Store {
  readonly client: DynamoDBClient;
  readonly tableName: string;
  private readonly log: Logger | undefined;
  private readonly metrics: Metrics | undefined;

  constructor(options: StoreOptions) {
    if (!options.tableName || options.tableName.length < 3)
      throw new StoreUnavailableError(`invalid DynamoDB table name "${options.tableName}"`);
    this.client = options.client;
    this.tableName = options.tableName;
    this.log = options.log;
    this.metrics = options.metrics;
  }

  /** Sends a request; every failure becomes StoreUnavailableError (after retries for transient ones). */
  async send<T>(command: AnyCommand): Promise<T> {
    const r = await this.attempt<T>(command, false);
    if (!r.ok) throw new StoreUnavailableError('unexpected conditional check failure');
    return r.output;
  }

  /**
   * Like send, but a failed ConditionExpression is a result (`ok: false`), not an error. `item` is the item as
   * it was, when the request asked for it with ReturnValuesOnConditionCheckFailure (AWS sends it; dynalite not).
   */
  sendConditional<T>(command: AnyCommand): Promise<Conditional<T>> {
    return this.attempt<T>(command, true);
  }

  private async attempt<T>(command: AnyCommand, conditional: boolean): Promise<Conditional<T>> {
    const op = operationOf(command);
    try {
      // The SDK's overloads do not unify over command types; the caller names the output type.
      const output = (await this.client.send(command as never)) as T;
      this.observe(op, output);
      return { ok: true, output };
    } catch (e) {
      if (conditional && (e instanceof ConditionalCheckFailedException || isNamed(e, CCF))) {
        this.observe(op, e);
        return { ok: false, item: (e as ConditionalCheckFailedException).Item };
      }
      throw this.failure(op, e);
    }
  }

  /** Every item a Query returns, page after page, through the SDK's paginator (break out to stop reading). */
  queryItems(input: Omit<QueryCommandInput, 'TableName' | 'ExclusiveStartKey'>): AsyncGenerator<Item> {
    return this.pages(
      'Query',
      paginateQuery({ client: this.client }, { ...input, TableName: this.tableName }),
    );
  }

  /** Every item of a Scan, page after page, through the SDK's paginator. */
  scanItems(input: Omit<ScanCommandInput, 'TableName' | 'ExclusiveStartKey'>): AsyncGenerator<Item> {
    return this.pages('Scan', paginateScan({ client: this.client }, { ...input, TableName: this.tableName }));
  }

  private async *pages(op: string, pages: AsyncIterator<{ Items?: Item[] }>): AsyncGenerator<Item> {
    for (;;) {
      let next: IteratorResult<{ Items?: Item[] }>;
      try {
        next = await pages.next();
      } catch (e) {
        throw this.failure(op, e);
      }
      if (next.done) return;
      this.observe(op, next.value);
      yield* next.value.Items ?? [];
    }
  }

  /** Counts the retries the SDK made for one request (from its response or error metadata). */
  observe(op: string, outputOrError: unknown): void {
    this.countRetries(op, (outputOrError as { $metadata?: { attempts?: number } }).$metadata?.attempts);
  }

  /** A failed request as the domain sees it (for requests the SDK's paginators send). */
  failure(op: string, e: unknown): StoreUnavailableError {
    this.observe(op, e);
    const transient = isTransient(e);
    const attempts = (e as { $metadata?: { attempts?: number } }).$metadata?.attempts ?? 1;
    this.log?.warn('dynamodb request failed', { op, attempts, error: errorName(e), transient });
    return new StoreUnavailableError(
      transient
        ? `DynamoDB ${op} on ${this.tableName} still failing after ${attempts} attempts: ${errorName(e)}`
        : `DynamoDB ${op} on ${this.tableName} failed: ${errorName(e)}: ${(e as Error).message ?? e}`,
      { cause: e },
    );
  }

  private countRetries(op: string, attempts: number | undefined): void {
    if (attempts && attempts > 1) this.metrics?.count('IpamStoreRetries', attempts - 1, { op });
  }
}

const CCF = 'ConditionalCheckFailedException';

/** Operation names by instanceof, not by class name (a minified bundle renames classes). */
const OPERATIONS: [new (...args: never[]) => object, string][] = [
  [PutItemCommand, 'PutItem'],
  [UpdateItemCommand, 'UpdateItem'],
  [DeleteItemCommand, 'DeleteItem'],
  [GetItemCommand, 'GetItem'],
  [QueryCommand, 'Query'],
  [ScanCommand, 'Scan'],
];

function operationOf(command: AnyCommand): string {
  return OPERATIONS.find(([cls]) => command instanceof cls)?.[1] ?? 'DynamoDB';
}

function isNamed(e: unknown, name: string): boolean {
  return e instanceof Error && e.name === name;
}

function errorName(e: unknown): string {
  return e instanceof Error ? e.name : String(e);
}
