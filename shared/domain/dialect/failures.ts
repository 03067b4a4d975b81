/**
 * What a failed nat-gateway.sh call means: a refusal the gateway will give every time (permanent), or a failure
 * that may pass (retryable). The patterns are the messages the scripts and their tools really print; each one
 * names the releases and the recorded run it was seen in (test/fixtures/gateway-runs/, checked by
 * test/unit/dialect-failures.test.ts). Anything not recognised stays retryable, as before: a wrong "permanent"
 * stops an EIP for good, a wrong "retryable" only retries.
 */
import type { Dialect } from './dialects.js';

export type PermanentReason =
  /** iproute2 or tc refused a value: the same argument is refused again. */
  | 'malformed-argument'
  /** The script does not know the operation (its usage line, or `Unknown command:`). */
  | 'unknown-operation'
  /** The node's kernel lacks a tc action, qdisc or classifier the release uses. */
  | 'kernel-lacks-feature'
  /** eip-add's duplicate address detection got an answer: another host holds the address. */
  | 'address-in-use'
  /** The gateway given with the address is not reachable from it (kube-ovn 1.12's default route). */
  | 'unreachable-gateway';

export type RetryableReason =
  | 'no-exit-status'
  | 'missing-device'
  | 'not-initialised'
  | 'xtables-lock'
  | 'unrecognised';

export type FailureClass =
  | {
      permanent: true;
      reason: PermanentReason;
      /** True when it may clear without the EIP changing (another node's kernel, the other host going away). */
      mayClear: boolean;
      /** The line that decided it, as the gateway printed it. */
      evidence: string;
      /** The refusal is what a gateway of another release line says to this call (the dialect is wrong). */
      dialectMismatch?: boolean;
    }
  | { permanent: false; reason: RetryableReason; evidence?: string };

/** A failed call as the Gateway port reports it (GatewayCommandError's fields). */
export interface FailedCall {
  exitCode: number | undefined | null;
  stdout: string;
  stderr: string;
}

interface Rule {
  test: RegExp;
  /** A second message that must be there too. */
  also?: RegExp;
  /** Where the message was seen: releases and how (all from the recorded runs unless said otherwise). */
  seen: string;
}

const RETRYABLE: ReadonlyArray<Rule & { reason: RetryableReason }> = [
  // Before any refusal: a missing interface makes tc print refusal-like lines after it ("Error: argument
  // "protocol" is wrong: Invalid parent ID" on 1.12–1.15, 'Qdisc "1:" is classless' on 1.16), and it passes
  // once the pod has its attachment again.
  { reason: 'missing-device', test: /^Cannot find device "[^"]*"/m, seen: 'all releases, net1 deleted' },
  {
    reason: 'not-initialised',
    test: /^nat gateway not (initialized|inited)$/m,
    seen: 'all releases, before init',
  },
  {
    reason: 'xtables-lock',
    test: /Another app is currently holding the xtables lock/,
    seen: 'iptables without -w while another process holds the lock (iptables documentation; not recorded)',
  },
];

const PERMANENT: ReadonlyArray<Rule & { reason: PermanentReason; mayClear: boolean }> = [
  {
    reason: 'unknown-operation',
    mayClear: false,
    test: /^(Usage: \S*nat-gateway\.sh \[init\|.*|Unknown command: .*)$/m,
    seen: 'usage line on 1.12–1.14, "Unknown command:" on 1.15+',
  },
  {
    reason: 'kernel-lacks-feature',
    mayClear: true,
    test: /^Error: (Failed to load TC action module|Specified qdisc kind is unknown|TC classifier not found)\.$/m,
    seen: 'police action on 1.12–1.15, fq_codel on 1.16+, on a kernel without them',
  },
  {
    reason: 'address-in-use',
    mayClear: true,
    test: /^failed to exec command "arping -I \S+ -c \d+ -D \S+ ?"$/m,
    also: /^Received [1-9]\d* response/m,
    seen: '1.12 and 1.13.0/1.14.0 with another host holding the address',
  },
  {
    reason: 'unreachable-gateway',
    mayClear: false,
    test: /^Error: Nexthop has invalid gateway\.$/m,
    seen: '1.12 with a gateway outside the address prefix',
  },
  {
    reason: 'malformed-argument',
    mayClear: false,
    test: /^Error: any valid (prefix|address) is expected rather than ".*"\.$/m,
    seen: 'malformed address or prefix length on all releases; the 1.12 form on 1.13+ and the 1.13 form on 1.12',
  },
  {
    reason: 'malformed-argument',
    mayClear: false,
    test: /^Error: argument ".*" is wrong: .*$/m,
    seen: 'malformed rate, burst or priority in a tc filter (1.12–1.15, and 1.16 priority)',
  },
  {
    reason: 'malformed-argument',
    mayClear: false,
    test: /^Illegal ".*"$/m,
    seen: 'malformed HTB rate on 1.16+',
  },
  {
    reason: 'malformed-argument',
    mayClear: false,
    // Kept from the earlier refusal list: iproute2's other argument refusals.
    test: /\b(What is "|MUST be specified|requires "|invalid )/,
    seen: 'iproute2 argument parsing (not recorded)',
  },
];

function firstMatch(rule: Rule, text: string): string | undefined {
  if (rule.also && !rule.also.test(text)) return undefined;
  return rule.test.exec(text)?.[0];
}

/**
 * Classifies a failed call. `d` is the dialect the call was built for, when known: a refusal that the other
 * eip-add form draws (a comma where 1.13+ expects a prefix, an empty gateway on 1.12) is then marked as a dialect
 * mismatch, so the EIP's condition can say to check the release setting.
 */
export function classifyFailure(failed: FailedCall, d?: Dialect): FailureClass {
  if (failed.exitCode === undefined || failed.exitCode === null)
    return { permanent: false, reason: 'no-exit-status' };
  const said = `${failed.stderr}\n${failed.stdout}`;
  for (const r of RETRYABLE) {
    const evidence = firstMatch(r, said);
    if (evidence) return { permanent: false, reason: r.reason, evidence };
  }
  for (const r of PERMANENT) {
    const evidence = firstMatch(r, said);
    if (!evidence) continue;
    const mismatch = r.reason === 'malformed-argument' && isFormMismatch(evidence, d);
    return {
      permanent: true,
      reason: r.reason,
      mayClear: r.mayClear,
      evidence,
      ...(mismatch && { dialectMismatch: true }),
    };
  }
  return { permanent: false, reason: 'unrecognised' };
}

/**
 * The two eip-add forms as the wrong release refuses them: 1.13+ reads `<ip>/<len>,<gw>` as one prefix; 1.12 runs
 * `ip route replace default via  dev net1` when no gateway follows the comma.
 */
function isFormMismatch(evidence: string, d: Dialect | undefined): boolean {
  if (/^Error: any valid prefix is expected rather than "[0-9.]+\/\d+,[0-9.]+"\.$/.test(evidence))
    return d === undefined || d.eipAdd === 'address-and-gateway';
  if (evidence === 'Error: any valid address is expected rather than "dev".')
    return d === undefined || d.eipAdd === 'address';
  return false;
}

/** The patterns and where each was seen, for the compatibility table and the tests. */
export const FAILURE_PATTERNS: ReadonlyArray<{
  permanent: boolean;
  reason: string;
  test: RegExp;
  seen: string;
}> = [
  ...RETRYABLE.map(({ reason, test, seen }) => ({ permanent: false, reason, test, seen })),
  ...PERMANENT.map(({ reason, test, seen }) => ({ permanent: true, reason, test, seen })),
];
