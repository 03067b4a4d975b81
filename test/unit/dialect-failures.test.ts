/**
 * The refusal classifier on real messages: every failing step of the recorded runs (each release's own
 * nat-gateway.sh run in a network namespace by local/record-gateway-runs.ts; test/fixtures/gateway-runs/) is
 * classified, and each has its expected class below — a new failure in a re-recorded run fails this test until it
 * is judged. Observed on the recording machine (kernel in each fixture): it has no tc police action, no fq_codel
 * and no matchall, so QoS without stand-ins fails there with the kernel's own message ("kernel-lacks-feature").
 */
import { describe, expect, it } from 'vitest';
import {
  classifyFailure,
  DIALECTS,
  FAILURE_PATTERNS,
  type FailureClass,
  type ReleaseLine,
} from '../../shared/domain/dialect/index.js';
import { RECORDED, type Recorded, run } from '../support/gateway-runs.js';

const LINE_OF: Record<Recorded, ReleaseLine> = {
  'v1.12.35': '1.12',
  'v1.13.0': '1.13',
  'v1.14.0': '1.13',
  'v1.15.0': '1.15',
  'v1.16.0': '1.16',
  master: 'master',
};

type Expected = Pick<FailureClass, 'permanent' | 'reason'> & { dialectMismatch?: boolean };
const permanent = (reason: string, extra: object = {}): Expected =>
  ({ permanent: true, reason, ...extra }) as Expected;
const retryable = (reason: string): Expected => ({ permanent: false, reason }) as Expected;

/** The expected class of each failing step, by step name; a function where the release matters. */
const EXPECTED: Record<string, Expected | ((line: ReleaseLine) => Expected)> = {
  'eip-add before init': retryable('not-initialised'),
  // The 1.12 form sent to 1.13+ and the 1.13 form sent to 1.12: refused, and recognised as the wrong dialect.
  'eip-add in the other release form': permanent('malformed-argument', { dialectMismatch: true }),
  'eip-add of a malformed address': permanent('malformed-argument'),
  'eip-add with a prefix length over 32': permanent('malformed-argument'),
  'eip-add with a gateway outside the subnet': permanent('unreachable-gateway'),
  // Duplicate address detection (arping -D) on 1.12, 1.13.0 and 1.14.0; 1.15+ succeed (unsolicited ARP).
  'eip-add of an address another host holds': permanent('address-in-use'),
  'ingress QoS on this kernel, no stand-in': permanent('kernel-lacks-feature'),
  'egress QoS on this kernel, no stand-in': permanent('kernel-lacks-feature'),
  'ingress QoS with a malformed rate': permanent('malformed-argument'),
  // 1.16+ turns a malformed burst into 0 bytes (awk) and gets as far as the fq_codel leaf on this kernel.
  'egress QoS with a malformed burst': (l) =>
    l === '1.16' || l === 'master' ? permanent('kernel-lacks-feature') : permanent('malformed-argument'),
  // 1.16+ creates the class and its leaf before the filter; without fq_codel it stops at the leaf.
  'ingress QoS with a malformed priority': (l) =>
    l === '1.16' || l === 'master' ? permanent('kernel-lacks-feature') : permanent('malformed-argument'),
  'ingress QoS with a malformed priority, with the stand-in': permanent('malformed-argument'),
  'unknown operation': permanent('unknown-operation'),
  // tc prints refusal-like lines after the missing device (e.g. 'Error: argument "protocol" is wrong: Invalid
  // parent ID' on 1.12–1.15): the earlier refusal list called this permanent; it passes once net1 is back.
  'eip-add without net1': retryable('missing-device'),
  'QoS without net1': retryable('missing-device'),
};

/** The dialect the failing call was built for: the other release's, for the other-form step. */
function builtFor(name: string, line: ReleaseLine): ReleaseLine {
  if (name !== 'eip-add in the other release form') return line;
  return line === '1.12' ? '1.13' : '1.12';
}

describe.each(RECORDED)('every failing op of the %s run', (release) => {
  const line = LINE_OF[release];
  const failing = run(release).steps.filter((s) => s.kind === 'op' && s.exitCode !== 0);

  it('has an expected class, and gets it', () => {
    expect(failing.length).toBeGreaterThan(10);
    for (const s of failing) {
      const want = EXPECTED[s.name];
      expect(want, `no expected class for failing step ${JSON.stringify(s.name)}`).toBeDefined();
      const expected = typeof want === 'function' ? want(line) : want!;
      const got = classifyFailure(s, DIALECTS[builtFor(s.name, line)]);
      expect({ step: s.name, permanent: got.permanent, reason: got.reason }).toEqual({
        step: s.name,
        permanent: expected.permanent,
        reason: expected.reason,
      });
      expect(got.permanent && got.dialectMismatch === true, s.name).toBe(expected.dialectMismatch === true);
      if (got.permanent) expect(`${s.stderr}\n${s.stdout}`).toContain(got.evidence);
    }
  });

  it('duplicate address detection fails eip-add only where the script probes with arping -D', () => {
    const dup = run(release).steps.find((s) => s.name === 'eip-add of an address another host holds')!;
    expect(dup.exitCode === 0).toBe(DIALECTS[line].duplicateProbe === 'never');
  });
});

describe('classification', () => {
  it('no exit status (a broken stream, a timeout) and unrecognised failures stay retryable', () => {
    expect(classifyFailure({ exitCode: undefined, stdout: '', stderr: 'Illegal "rate"' })).toEqual({
      permanent: false,
      reason: 'no-exit-status',
    });
    expect(classifyFailure({ exitCode: 2, stdout: '', stderr: 'RTNETLINK answers: File exists' })).toEqual({
      permanent: false,
      reason: 'unrecognised',
    });
    expect(
      classifyFailure({
        exitCode: 4,
        stdout: '',
        stderr: 'Another app is currently holding the xtables lock. Perhaps you want to use the -w option?',
      }).reason,
    ).toBe('xtables-lock');
  });

  it('a comma in the refused prefix is a dialect mismatch only for a call in the 1.12 form', () => {
    const said = {
      exitCode: 1,
      stdout: '',
      stderr: 'Error: any valid prefix is expected rather than "172.19.0.40/24,172.19.0.1".\n',
    };
    expect(classifyFailure(said, DIALECTS['1.12'])).toMatchObject({ permanent: true, dialectMismatch: true });
    expect(classifyFailure(said)).toMatchObject({ permanent: true, dialectMismatch: true });
    expect(classifyFailure(said, DIALECTS['1.15'])).not.toHaveProperty('dialectMismatch');
  });

  it('an arping -D failure without an answer is not an address in use', () => {
    const said = {
      exitCode: 2,
      stdout: 'ARPING 172.19.0.9 from 0.0.0.0 net1\nSent 3 probes (3 broadcast(s))\nReceived 0 response(s)\n',
      stderr: 'failed to exec command "arping -I net1 -c 3 -D 172.19.0.9"\n',
    };
    expect(classifyFailure(said).reason).toBe('unrecognised');
  });

  it('every pattern said to be recorded matches a recorded failure', () => {
    const failures = RECORDED.flatMap((r) => run(r).steps.filter((s) => s.kind === 'op' && s.exitCode !== 0));
    for (const p of FAILURE_PATTERNS) {
      if (p.seen.includes('not recorded')) continue;
      expect(
        failures.some((s) => p.test.test(`${s.stderr}\n${s.stdout}`)),
        `${p.reason}: ${p.seen}`,
      ).toBe(true);
    }
  });
});
