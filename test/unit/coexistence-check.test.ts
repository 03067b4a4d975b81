/**
 * The coexistence check's pure part (shared/domain/coexistence.ts, ADR 0096): a dedicated EIP range wholly inside
 * the subnet's excludeIps and free of kube-ovn's allocations passes; a range partly outside excludeIps, a kube-ovn
 * address inside it, or an unreadable subnet is a conflict; no range at all is a warning.
 */
import { describe, expect, it } from 'vitest';
import { coexistenceProblems, uncovered } from '../../shared/domain/coexistence.js';

const subnet = (annotation: string | undefined, excludeIps: string[], cidrBlock = '172.18.0.0/24') => ({
  metadata: {
    name: 'ovn-vpc-external-network',
    uid: 'u1',
    resourceVersion: '1',
    ...(annotation !== undefined && { annotations: { 'eip-lambdas.io/eip-range': annotation } }),
  },
  spec: { cidrBlock, gateway: '172.18.0.1', excludeIps },
});

describe('coexistence check', () => {
  it('passes a range that excludeIps covers, in pieces or whole, with kube-ovn allocations outside it', () => {
    const pods = [
      { subnet: 'ovn-vpc-external-network', address: '172.18.0.11', owner: 'pod/kube-system/gw' },
    ];
    expect(
      coexistenceProblems([subnet('172.18.0.200..172.18.0.250', ['172.18.0.200..172.18.0.250'])], pods),
    ).toEqual([]);
    expect(
      coexistenceProblems(
        [
          subnet('172.18.0.200..172.18.0.250', [
            '172.18.0.1',
            '172.18.0.190..172.18.0.220',
            '172.18.0.221..172.18.0.254',
          ]),
        ],
        pods,
      ),
    ).toEqual([]);
  });

  it('names the parts of the range that excludeIps leaves out', () => {
    const p = coexistenceProblems([subnet('172.18.0.200..172.18.0.250', ['172.18.0.210..172.18.0.240'])], []);
    expect(p).toEqual([expect.objectContaining({ code: 'RangeNotExcluded', severity: 'conflict' })]);
    expect(p[0]!.message).toContain('172.18.0.200..172.18.0.209, 172.18.0.241..172.18.0.250');
  });

  it('refuses a kube-ovn allocation inside the range, in this subnet only', () => {
    const p = coexistenceProblems(
      [subnet('172.18.0.200..172.18.0.250', ['172.18.0.200..172.18.0.250'])],
      [
        { subnet: 'ovn-vpc-external-network', address: '172.18.0.201', owner: 'ip/gw1.kube-system' },
        { subnet: 'other', address: '172.18.0.202', owner: 'ip/x' },
        {
          subnet: 'ovn-vpc-external-network',
          address: '172.18.0.199',
          owner: 'pod/kube-system/vpc-nat-gw-gw1-0',
        },
      ],
    );
    expect(p.map((x) => [x.code, x.severity])).toEqual([['KubeOvnAddressInRange', 'conflict']]);
    expect(p[0]!.message).toContain('172.18.0.201 (ip/gw1.kube-system)');
  });

  it('warns about a subnet without a range, and refuses one it cannot read', () => {
    expect(coexistenceProblems([subnet(undefined, [])], []).map((x) => [x.code, x.severity])).toEqual([
      ['NoDedicatedRange', 'warning'],
    ]);
    expect(
      coexistenceProblems([subnet('172.18.0.200..172.18.0.250', ['not-an-ip'])], []).map((x) => [
        x.code,
        x.severity,
      ]),
    ).toEqual([['InvalidSubnet', 'conflict']]);
    expect(coexistenceProblems([subnet('x..y', [])], []).map((x) => x.code)).toEqual(['InvalidSubnet']);
  });

  it('subtracts covering ranges exactly at the edges', () => {
    expect(uncovered([{ start: 10n, end: 20n }], [{ start: 10n, end: 20n }])).toEqual([]);
    expect(uncovered([{ start: 10n, end: 20n }], [{ start: 11n, end: 19n }])).toEqual([
      { start: 10n, end: 10n },
      { start: 20n, end: 20n },
    ]);
    expect(uncovered([{ start: 10n, end: 20n }], [])).toEqual([{ start: 10n, end: 20n }]);
  });
});
