/**
 * The one place where DynamoDB errors become domain errors. Every request of the adapters goes through
 * `Store.send` (or `Store.sendConditional` for writes guarded by a condition):
 *
 * - `ConditionalCheckFailedException` is not an error here: `sendConditional` reports it as `{ ok: false }`
 *   and the caller turns it into the domain outcome (a conflict, a held lease, a no-op release);
 * - throttling, 5xx and network failures are retried with jittered exponential backoff (on top of the SDK's
 *   own retries), then surface as `StoreUnavailableError` (retryable: Lambda retries the event);
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
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { StoreUnavailableError } from '../../domain/errors.js';
import type { Logger, Metrics } from '../../ports.js';

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

export interface RetryPolicy {
  /** Attempts per request, including the first (the SDK client may retry inside each). Default 4. */
  maxAttempts: number;
  /** First backoff; doubles per attempt, full jitter. Default 20 ms. */
  baseDelayMs: number;
  /** Cap of one backoff. Default 500 ms. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 4, baseDelayMs: 20, maxDelayMs: 500 };

export interface StoreOptions {
  client: DynamoDBClient;
  tableName: string;
  log?: Logger;
  metrics?: Metrics;
  retry?: Partial<RetryPolicy>;
  /** Seam for tests: how to wait between attempts. */
  sleep?: (ms: number) => Promise<void>;
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
  private readonly retry: RetryPolicy;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(options: StoreOptions) {
    if (!options.tableName || options.tableName.length < 3)
      throw new StoreUnavailableError(`invalid DynamoDB table name "${options.tableName}"`);
    this.client = options.client;
    this.tableName = options.tableName;
    this.log = options.log;
    this.metrics = options.metrics;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
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
    for (let attempt = 1; ; attempt++) {
      try {
        // The SDK's overloads do not unify over command types; the caller names the output type.
        const output = (await this.client.send(command as never)) as T;
        return { ok: true, output };
      } catch (e) {
        if (conditional && (e instanceof ConditionalCheckFailedException || isNamed(e, CCF)))
          return { ok: false, item: (e as ConditionalCheckFailedException).Item };
        if (isTransient(e) && attempt < this.retry.maxAttempts) {
          const cap = Math.min(this.retry.maxDelayMs, this.retry.baseDelayMs * 2 ** (attempt - 1));
          const delay = Math.round(Math.random() * cap);
          this.metrics?.count('IpamStoreRetries', 1, { op });
          this.log?.debug('dynamodb request retried', { op, attempt, delayMs: delay, error: errorName(e) });
          await this.sleep(delay);
          continue;
        }
        const transient = isTransient(e);
        this.log?.warn('dynamodb request failed', { op, attempts: attempt, error: errorName(e), transient });
        throw new StoreUnavailableError(
          transient
            ? `DynamoDB ${op} on ${this.tableName} still failing after ${attempt} attempts: ${errorName(e)}`
            : `DynamoDB ${op} on ${this.tableName} failed: ${errorName(e)}: ${(e as Error).message ?? e}`,
          { cause: e },
        );
      }
    }
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
