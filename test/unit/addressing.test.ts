import { describe, expect, it } from 'vitest';
import {
  allocatableRanges,
  capacity,
  formatAddress,
  poolsOf,
  staticAddressProblem,
} from '../../shared/domain/addressing.js';
import type { Pool } from '../../shared/ports.js';

const subnet = (cidrBlock: string, extra: Record<string, unknown> = {}) => ({
  metadata: { name: 'ext', uid: 'u', resourceVersion: '1' },
  spec: { cidrBlock, ...extra },
});

describe('poolsOf', () => {
  it('gives one pool per family of a dual-stack cidrBlock, with defaulted gateways', () => {
    const pools = poolsOf(subnet('10.0.0.0/24,fd00::/120'));
    expect(pools).toEqual([
      { subnet: 'ext', family: 4, cidr: '10.0.0.0/24', gateway: '10.0.0.1', exclude: [] },
      { subnet: 'ext', family: 6, cidr: 'fd00::/120', gateway: 'fd00::1', exclude: [] },
    ]);
  });
  it('takes the gateway of each family from spec.gateway', () => {
    const [v4, v6] = poolsOf(subnet('10.0.0.0/24,fd00::/120', { gateway: '10.0.0.254,fd00::fe' }));
    expect(v4?.gateway).toBe('10.0.0.254');
    expect(v6?.gateway).toBe('fd00::fe');
  });
  it('rejects a gateway outside the CIDR and a malformed cidrBlock', () => {
    expect(() => poolsOf(subnet('10.0.0.0/24', { gateway: '10.0.1.1' }))).toThrow(/not inside/);
    expect(() => poolsOf(subnet('10.0.0.0/33'))).toThrow(/invalid cidrBlock/);
  });
});

describe('allocatable ranges', () => {
  const pool: Pool = {
    subnet: 'ext',
    family: 4,
    cidr: '10.0.0.0/24',
    gateway: '10.0.0.1',
    exclude: ['10.0.0.10..10.0.0.20', '10.0.0.100'],
  };
  it('exclude network, broadcast, gateway and excludeIps (ranges and single addresses)', () => {
    const ranges = allocatableRanges(pool).map((r) => [formatAddress(4, r.start), formatAddress(4, r.end)]);
    expect(ranges).toEqual([
      ['10.0.0.2', '10.0.0.9'],
      ['10.0.0.21', '10.0.0.99'],
      ['10.0.0.101', '10.0.0.254'],
    ]);
    expect(capacity(pool)).toBe(254n - 1n - 11n - 1n);
  });
  it('a /16 is a few ranges, not 65k addresses', () => {
    const big: Pool = { subnet: 'ext', family: 4, cidr: '172.16.0.0/16', gateway: '172.16.0.1', exclude: [] };
    expect(allocatableRanges(big)).toHaveLength(1);
    expect(capacity(big)).toBe(65_533n);
  });
});

describe('staticAddressProblem', () => {
  const pool: Pool = {
    subnet: 'ext',
    family: 4,
    cidr: '10.0.0.0/24',
    gateway: '10.0.0.1',
    exclude: ['10.0.0.50'],
  };
  it.each([
    ['10.0.0.0', /network address/],
    ['10.0.0.255', /broadcast address/],
    ['10.0.0.1', /gateway/],
    ['10.0.0.50', /excluded/],
    ['10.0.1.5', /out of the range/],
    ['fd00::5', /not an IPv4 address/],
    ['10.0.0.5/24', /invalid IP address/],
    ['10.0.0.256', /invalid IP address/],
  ])('refuses %s', (address, reason) => {
    expect(staticAddressProblem(pool, address)).toMatch(reason);
  });
  it('accepts an ordinary host address', () => {
    expect(staticAddressProblem(pool, '10.0.0.7')).toBeUndefined();
  });
});

describe('a dedicated EIP range (coexistence with kube-ovn IPAM)', () => {
  const sub = {
    metadata: {
      name: 'ext',
      annotations: { 'eip-lambdas.io/eip-range': '10.0.0.100..10.0.0.103,fd00::10..fd00::11' },
    },
    spec: { cidrBlock: '10.0.0.0/24,fd00::/120', excludeIps: ['10.0.0.100..10.0.0.199', '10.0.0.5'] },
  };
  it('hands out only the range, ignoring the excludeIps entry that keeps kube-ovn out of it', () => {
    const [v4, v6] = poolsOf(sub);
    expect(v4?.only).toEqual(['10.0.0.100..10.0.0.103']);
    expect(allocatableRanges(v4!).map((r) => [formatAddress(4, r.start), formatAddress(4, r.end)])).toEqual([
      ['10.0.0.100', '10.0.0.103'],
    ]);
    expect(capacity(v6!)).toBe(2n);
  });
  it('refuses a static address outside the range, even an ordinary one', () => {
    const [v4] = poolsOf(sub);
    expect(staticAddressProblem(v4!, '10.0.0.50')).toMatch(/outside the dedicated EIP range/);
    expect(staticAddressProblem(v4!, '10.0.0.101')).toBeUndefined();
  });
  it('rejects a malformed annotation', () => {
    expect(() =>
      poolsOf({
        ...sub,
        metadata: { name: 'ext', annotations: { 'eip-lambdas.io/eip-range': 'ten..eleven' } },
      }),
    ).toThrow(/invalid entry "ten..eleven"/);
  });
});
