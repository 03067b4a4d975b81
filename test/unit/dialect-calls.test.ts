/**
 * What the product sends per kube-ovn release line: every op's argv, checked against the recorded runs of each
 * release's own nat-gateway.sh (test/fixtures/gateway-runs/, local/record-gateway-runs.ts): the argv a dialect
 * builds is the argv that release's script was run with and accepted (exit 0), and the other release's form is
 * what it refused. QoS steps ran with the kernel stand-ins the fixture names (no tc police or fq_codel on the
 * recording machine); the arguments are parsed before the kernel is asked, so acceptance of the format is real.
 */
import { describe, expect, it } from 'vitest';
import {
  DIALECTS,
  effectiveRules,
  eipAdd,
  eipDel,
  type QosRuleValues,
  qosAdd,
  qosApply,
  qosChange,
  qosDel,
  qosRemove,
  type ReleaseLine,
} from '../../shared/domain/dialect/index.js';
import { InvalidSpecError } from '../../shared/domain/errors.js';
import { natGatewayArgv, natGatewayCall } from '../../shared/domain/nat-gateway.js';
import { type Recorded, step } from '../support/gateway-runs.js';

const LINE_OF: Record<Recorded, ReleaseLine> = {
  'v1.12.35': '1.12',
  'v1.13.0': '1.13',
  'v1.14.0': '1.13',
  'v1.15.0': '1.15',
  'v1.16.0': '1.16',
  master: 'master',
};

const GW = '172.19.0.1';
const argvOf = (c: { op: Parameters<typeof natGatewayArgv>[0]; args: string[] }) =>
  natGatewayArgv(c.op, c.args);
const ingress = (priority: number, rateMax: string, burstMax = '1'): QosRuleValues => ({
  direction: 'ingress',
  priority,
  rateMax,
  burstMax,
});
const egress = (priority: number, rateMax: string, burstMax = '1'): QosRuleValues => ({
  ...ingress(priority, rateMax, burstMax),
  direction: 'egress',
});

describe.each(Object.entries(LINE_OF) as Array<[Recorded, ReleaseLine]>)(
  '%s (dialect %s)',
  (release, line) => {
    const d = DIALECTS[line];

    it('eip-add is what that release accepted, and the other form is what it refused', () => {
      const call = eipAdd(d, { address: '172.19.0.247', prefix: 24, gateway: GW });
      expect(call).toEqual({
        op: 'eip-add',
        args: [line === '1.12' ? '172.19.0.247/24,172.19.0.1' : '172.19.0.247/24'],
      });
      const accepted = step(release, 'eip-add');
      expect(accepted.argv).toEqual(argvOf(call));
      expect(accepted.exitCode).toBe(0);
      const refused = step(release, 'eip-add in the other release form');
      expect(refused.exitCode).not.toBe(0);
      expect(refused.argv[3]).toBe(line === '1.12' ? '172.19.0.40/24' : `172.19.0.40/24,${GW}`);
    });

    it('eip-del takes <ip>/<len>, and deleting an address that is not there succeeds', () => {
      const call = eipDel(d, { address: '172.19.0.24', prefix: 24 });
      expect(call).toEqual({ op: 'eip-del', args: ['172.19.0.24/24'] });
      expect(step(release, 'eip-del').argv).toEqual(argvOf(call));
      expect(step(release, 'eip-del').exitCode).toBe(0);
      expect(step(release, 'eip-del of an address that is not there').exitCode).toBe(0);
    });

    it('QoS add and delete take the same arguments on every release', () => {
      const add = qosAdd(d, '172.19.0.247', egress(1, '10.5', '2'));
      expect(add).toEqual({ op: 'eip-egress-qos-add', args: ['172.19.0.247,1,10.5,2'] });
      expect(step(release, 'egress QoS for .247').argv).toEqual(argvOf(add));
      expect(step(release, 'egress QoS for .247').exitCode).toBe(0);
      const del = qosDel(d, '172.19.0.24', 'ingress');
      expect(del).toEqual({ op: 'eip-ingress-qos-del', args: ['172.19.0.24'] });
      expect(step(release, 'ingress QoS deletion for .24').argv).toEqual(argvOf(del));
      expect(step(release, 'ingress QoS deletion for .24').exitCode).toBe(0);
      // Deleting QoS that is not there succeeds too (before any QoS, and for an address with no filter).
      for (const name of [
        'QoS deletion before any QoS (ingress)',
        'QoS deletion before any QoS (egress)',
        'QoS deletion of an address with no filter (egress)',
      ])
        expect(step(release, name).exitCode, name).toBe(0);
    });

    it('a QoS change: delete-then-add on 1.12–1.15, a re-add on 1.16+', () => {
      const plan = qosChange(d, '172.19.0.24', 'unknown', [egress(2, '20')]).map((c) => `${c.op} ${c.args}`);
      if (line === '1.16' || line === 'master')
        expect(plan).toEqual(['eip-ingress-qos-del 172.19.0.24', 'eip-egress-qos-add 172.19.0.24,2,20,1']);
      else
        expect(plan).toEqual([
          'eip-ingress-qos-del 172.19.0.24',
          'eip-egress-qos-del 172.19.0.24',
          'eip-egress-qos-add 172.19.0.24,2,20,1',
        ]);
    });
  },
);

describe('QoS plans', () => {
  const d12 = DIALECTS['1.12'];
  const d16 = DIALECTS['1.16'];

  it('the last rule of each direction (name order) is the one sent, ingress first', () => {
    const rules = [egress(1, '5'), ingress(3, '7'), egress(2, '6')];
    expect(effectiveRules(rules)).toEqual([ingress(3, '7'), egress(2, '6')]);
    expect(qosApply(d12, '172.19.0.5', rules).map((c) => c.args[0])).toEqual([
      '172.19.0.5,3,7,1',
      '172.19.0.5,2,6,1',
    ]);
    expect(qosApply(d12, '172.19.0.5', [])).toEqual([]);
  });

  it('removal deletes both directions unless told which', () => {
    expect(qosRemove(d12, '172.19.0.5').map((c) => c.op)).toEqual([
      'eip-ingress-qos-del',
      'eip-egress-qos-del',
    ]);
    expect(qosRemove(d16, '172.19.0.5', ['egress']).map((c) => c.op)).toEqual(['eip-egress-qos-del']);
  });

  it('a policy swap from known directions deletes only what the dialect needs', () => {
    const next = [ingress(1, '50')];
    expect(qosChange(d16, '172.19.0.5', ['ingress', 'egress'], next).map((c) => c.op)).toEqual([
      'eip-egress-qos-del',
      'eip-ingress-qos-add',
    ]);
    expect(qosChange(d16, '172.19.0.5', ['ingress'], next).map((c) => c.op)).toEqual(['eip-ingress-qos-add']);
    expect(qosChange(d12, '172.19.0.5', ['ingress'], next).map((c) => c.op)).toEqual([
      'eip-ingress-qos-del',
      'eip-ingress-qos-add',
    ]);
    // To no rules at all: every old direction goes, on both.
    expect(qosChange(d16, '172.19.0.5', 'unknown', []).map((c) => c.op)).toEqual([
      'eip-ingress-qos-del',
      'eip-egress-qos-del',
    ]);
  });
});

describe('the check of every call (natGatewayCall)', () => {
  const refused = (f: () => unknown) => expect(f).toThrow(InvalidSpecError);

  it('eip-add: the form the release takes, and nothing else', () => {
    expect(natGatewayCall('eip-add', ['172.19.0.5/24'], { eipAdd: 'address' }).args).toEqual([
      '172.19.0.5/24',
    ]);
    refused(() => natGatewayCall('eip-add', ['172.19.0.5/24,172.19.0.1'], { eipAdd: 'address' }));
    refused(() => natGatewayCall('eip-add', ['172.19.0.5/24'], { eipAdd: 'address-and-gateway' }));
    expect(() => eipAdd(DIALECTS['1.12'], { address: '172.19.0.5', prefix: 24 })).toThrow(
      /<gateway> \(kube-ovn 1\.12\)/,
    );
    // Unknown form: either.
    for (const a of ['172.19.0.5/24', '172.19.0.5/24,172.19.0.1'])
      expect(natGatewayCall('eip-add', [a]).args).toEqual([a]);
    for (const a of [
      '300.19.0.5/24',
      '172.19.0.5/33',
      '172.19.0.5/0',
      '172.19.0.5/024',
      '010.19.0.5/24',
      '172.19.0.5',
      '172.19.0.5/24,',
      '172.19.0.5/24,172.19.0.1,x',
      'fd00::5/64',
      '172.19.0.5/24;reboot',
      '',
    ])
      refused(() => natGatewayCall('eip-add', [a]));
  });

  it('eip-del, QoS add and QoS delete formats', () => {
    expect(natGatewayCall('eip-del', ['172.19.0.5/24']).args).toEqual(['172.19.0.5/24']);
    refused(() => natGatewayCall('eip-del', ['172.19.0.5']));
    refused(() => natGatewayCall('eip-del', ['172.19.0.5/24,172.19.0.1']));
    expect(natGatewayCall('eip-ingress-qos-add', ['172.19.0.5,0,0.001,4095']).args).toEqual([
      '172.19.0.5,0,0.001,4095',
    ]);
    for (const a of [
      '172.19.0.5,1,ten,1',
      '172.19.0.5,1,10,lots',
      '172.19.0.5,first,10,1',
      '172.19.0.5,65536,10,1',
      '172.19.0.5,01,10,1',
      '172.19.0.5,1,0,1',
      '172.19.0.5,1,100001,1',
      '172.19.0.5,1,10',
      '172.19.0.5/32,1,10,1',
    ])
      refused(() => natGatewayCall('eip-egress-qos-add', [a]));
    expect(natGatewayCall('eip-egress-qos-del', ['172.19.0.5']).args).toEqual(['172.19.0.5']);
    refused(() => natGatewayCall('eip-egress-qos-del', ['172.19.0.5/32']));
  });

  it('one argument, a known op', () => {
    refused(() => natGatewayCall('eip-del', ['172.19.0.5/24', '172.19.0.6/24']));
    refused(() => natGatewayCall('eip-del', []));
    refused(() => natGatewayCall('init' as never, ['10.96.0.0/12,10.0.1.1']));
  });
});
