/** The value rules of shared/domain/validation.ts, at their edges. */
import { describe, expect, it } from 'vitest';
import { blockedRetryDelay } from '../../shared/domain/retry.js';
import { macProblem, nameProblem, QosLimits, qosValueProblem } from '../../shared/domain/validation.js';

describe('names', () => {
  it.each(['gw1', 'a', 'ovn-vpc-external-network', 'a.b-c.d', 'x'.repeat(253)])('accepts %j', (name) => {
    expect(nameProblem(name)).toBeUndefined();
  });
  it.each(['', '.', '..', '-a', 'a-', 'A', 'a..b', 'a/b', 'a b', 'x'.repeat(254), '../secrets'])(
    'refuses %j',
    (name) => {
      expect(nameProblem(name)).toBeDefined();
    },
  );
});

describe('MAC addresses', () => {
  it.each(['00:00:00:0A:0B:0C', '02-42-ac-11-00-02', 'fe:ff:ff:ff:ff:ff'])('accepts %j', (mac) => {
    expect(macProblem(mac)).toBeUndefined();
  });
  it.each([
    ['multicast', '01:00:5E:00:00:01'],
    ['broadcast', 'FF:FF:FF:FF:FF:FF'],
    ['mixed separators', '00:00-00:00:00:01'],
    ['too short', '00:00:00:00:01'],
    ['too long', '00:00:00:00:00:00:01'],
    ['not hex', '00:00:00:00:00:0G'],
    ['shell text', '00:00:00:00:00:01;reboot'],
  ])('refuses %s', (_what, mac) => {
    expect(macProblem(mac)).toBeDefined();
  });
});

describe('QoS values', () => {
  const { rateMaxMbit, burstMaxMb } = QosLimits;
  it('accepts both ends of each range and refuses just outside them', () => {
    expect(qosValueProblem('rateMax', String(rateMaxMbit.min))).toBeUndefined();
    expect(qosValueProblem('rateMax', String(rateMaxMbit.max))).toBeUndefined();
    expect(qosValueProblem('burstMax', String(burstMaxMb.min))).toBeUndefined();
    expect(qosValueProblem('burstMax', String(burstMaxMb.max))).toBeUndefined();
    expect(qosValueProblem('rateMax', '0.000999')).toMatch(/between/);
    expect(qosValueProblem('rateMax', '100000.000001')).toMatch(/between/);
    expect(qosValueProblem('burstMax', '0.000999')).toMatch(/between/);
    expect(qosValueProblem('burstMax', '4095.000001')).toMatch(/between/);
  });
  it.each([undefined, '', '1e3', '-1', '1.1234567', '1Mbit', ' 1'])('refuses the non-decimal %j', (v) => {
    expect(qosValueProblem('rateMax', v)).toMatch(/must be a decimal number/);
  });
});

describe('blocked retry delay', () => {
  it('is the time already waited, at least one second and at most twenty', () => {
    expect(blockedRetryDelay(undefined, 50_000)).toBe(1_000);
    expect(blockedRetryDelay(50_000, 50_000)).toBe(1_000);
    expect(blockedRetryDelay(40_000, 50_000)).toBe(10_000);
    expect(blockedRetryDelay(0, 50_000)).toBe(20_000);
    expect(blockedRetryDelay(60_000, 50_000)).toBe(1_000); // a clock that went back
    expect(blockedRetryDelay(Number.NaN, 50_000)).toBe(1_000);
  });
});
