/**
 * Settling a batch: several rules of one op run as one call, and each rule gets what its own call would have given
 * (docs/adr/0110-gateway-work-batched-per-pod.md). The script runs the rules in order and stops at the first rule
 * whose command fails (its `exec_cmd` exits), so:
 *
 * - exit 0 and no failed command on stderr: every rule's own call would have exited 0;
 * - no exit status (a timeout, a lost stream) or a failure of the whole call (the pod not initialised, its
 *   interface missing, the xtables lock): every rule gets that failure, and a retry of each is safe;
 * - a failure whose last failed command names one rule's address: the rules before it ran clean (when nothing else
 *   failed), that rule runs again alone for its own answer, and the rules after it go on as a batch;
 * - anything else (a failure that names no rule, a failed command in a subshell the script went on after, or a
 *   request too large for a proxy on the way, 414 or 431): the rules are split in halves, each run as a batch, down
 *   to single rules, whose answer is their own.
 *
 * Every rule op is safe to repeat (re-adding replaces, deleting what is gone changes nothing), so running a rule
 * again to isolate it never does harm.
 */
import { classifyFailure, type Dialect } from '../domain/dialect/index.js';
import { ClusterUnavailableError, GatewayCommandError } from '../domain/errors.js';
import { failedCommands, ruleNamedBy } from '../domain/nat-gateway-batch.js';
import type { ExecResult } from '../ports.js';

export type Outcome = { ok: true; result: ExecResult } | { ok: false; error: unknown };

/** One exec of `args` (of the batch's op, in order). */
export type ExecArgs = (args: readonly string[]) => Promise<ExecResult>;

/** Failures of the whole call: a retry of every rule is safe and isolating would only repeat them. */
const CALL_FAILURES = new Set(['no-exit-status', 'missing-device', 'not-initialised', 'xtables-lock']);

async function attempt(exec: ExecArgs, args: readonly string[]): Promise<Outcome> {
  try {
    return { ok: true, result: await exec(args) };
  } catch (error) {
    return { ok: false, error };
  }
}

const isClean = (o: Outcome): boolean => o.ok && failedCommands(o.result.stderr).length === 0;

/**
 * True when a failed batch is worth isolating: the script ran and said something that may be about one rule, or the
 * request was too large for something between the product and the pod (414, 431: halves are smaller).
 */
function isolates(o: Extract<Outcome, { ok: false }>, d: Dialect | undefined): boolean {
  const e = o.error;
  if (e instanceof ClusterUnavailableError) return e.status === 414 || e.status === 431;
  if (!(e instanceof GatewayCommandError) || e.exitCode === undefined) return false;
  return !CALL_FAILURES.has(classifyFailure(e, d).reason);
}

/**
 * Runs `args` as batches and returns each rule's outcome. `exec` may be called several times when a batch has to
 * be taken apart; it is called with `args` first.
 */
export async function settleRules(
  exec: ExecArgs,
  args: readonly string[],
  d: Dialect | undefined,
): Promise<Map<string, Outcome>> {
  const out = new Map<string, Outcome>();
  let rest: readonly string[] = args;
  while (rest.length > 0) rest = await settleOnce(exec, rest, d, out);
  return out;
}

/** Runs `args` once as one batch, records what that settles, and returns what still has to run. */
async function settleOnce(
  exec: ExecArgs,
  args: readonly string[],
  d: Dialect | undefined,
  out: Map<string, Outcome>,
): Promise<readonly string[]> {
  const o = await attempt(exec, args);
  if (args.length === 1 || isClean(o) || (!o.ok && !isolates(o, d))) {
    for (const a of args) out.set(a, o);
    return [];
  }
  const failure = !o.ok && o.error instanceof GatewayCommandError ? o.error : undefined;
  const k = failure ? stoppedAt(failure, args) : -1;
  if (!failure || k < 0) {
    // Nothing names the rule: the first half as batches of its own, the second half goes on.
    const mid = Math.ceil(args.length / 2);
    for (const [a, x] of await settleRules(exec, args.slice(0, mid), d)) out.set(a, x);
    return args.slice(mid);
  }
  await settleHead(exec, args.slice(0, k), failure, d, out);
  out.set(args[k]!, await attempt(exec, [args[k]!]));
  return args.slice(k + 1);
}

/** The rule whose failed command stopped the script: the last failed command names it, or -1. */
function stoppedAt(e: GatewayCommandError, args: readonly string[]): number {
  const failed = failedCommands(e.stderr);
  const last = failed[failed.length - 1];
  return last === undefined ? -1 : ruleNamedBy(last, args);
}

/**
 * The rules before the one that stopped the script: they ran clean when nothing else failed, else (a failed command
 * in a subshell the script went on after) they are settled again on their own.
 */
async function settleHead(
  exec: ExecArgs,
  head: readonly string[],
  e: GatewayCommandError,
  d: Dialect | undefined,
  out: Map<string, Outcome>,
): Promise<void> {
  if (failedCommands(e.stderr).length === 1) {
    for (const a of head) out.set(a, { ok: true, result: { stdout: e.stdout, stderr: '' } });
    return;
  }
  for (const [a, x] of await settleRules(exec, head, d)) out.set(a, x);
}
