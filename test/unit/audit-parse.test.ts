/**
 * Parsing what a gateway reports: the simulator's real output (through the same constant argv the adapters send)
 * and hand-written samples in the formats of iproute2 on a real kernel (older and newer tc, IPv6 and link-local
 * lines, flags, raw u32 keys when -p is not honoured).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryCluster } from '../../local/memory/cluster.js';
import { MemoryGateway } from '../../local/memory/gateway.js';
import { memoryInspector } from '../../local/memory/inspect.js';
import {
  INSPECTION_ARGV,
  inspectGateway,
  parseNet1Addresses,
  parseTcFilters,
  parseTcRate,
} from '../../shared/audit/inspect.js';
import { parseAddress } from '../../shared/domain/addressing.js';
import type { GatewayPod } from '../../shared/ports.js';

const pod: GatewayPod = {
  namespace: 'kube-system',
  name: 'vpc-nat-gw-gw1-0',
  uid: 'pod-uid-1',
  phase: 'Running',
  creationTimestamp: '2026-11-29T10:00:00Z',
  app: 'vpc-nat-gw-gw1',
  // What kube-ovn 1.12's template puts on the pod, the release the simulator speaks.
  template: { image: 'kubeovn/vpc-nat-gateway:v1.12.4', env: {}, initRunsScript: true, routes: {} },
};

const inspectDeps = (gw: MemoryGateway) => ({ inspector: memoryInspector(gw), cluster: new MemoryCluster() });

describe('inspection of the simulated gateway', () => {
  it('reads addresses and both directions of QoS filters from the simulator', async () => {
    const gw = new MemoryGateway({ release: '1.12', net1: '172.18.0.254/24' });
    await gw.run(pod, 'eip-add', ['172.18.0.11/24,172.18.0.1']);
    await gw.run(pod, 'eip-add', ['172.18.0.12/24,172.18.0.1']);
    await gw.run(pod, 'eip-ingress-qos-add', ['172.18.0.11,1,10,1']);
    await gw.run(pod, 'eip-egress-qos-add', ['172.18.0.11,1,10.5,2']);
    await gw.run(pod, 'eip-ingress-qos-add', ['172.18.0.12,2,100,1']);
    const state = await inspectGateway(inspectDeps(gw), 'gw1', pod, () => 42);
    expect(state.addresses.map((a) => `${a.address}/${a.prefix}`)).toEqual([
      '172.18.0.254/24',
      '172.18.0.11/24',
      '172.18.0.12/24',
    ]);
    expect(state.addresses[1]).toMatchObject({ family: 4, scope: 'global', flags: ['secondary'] });
    expect(state.filters).toEqual([
      // tc shows a burst after the kernel kept it as transmit time: 1 MiB comes back a few bytes short, "1024Kb".
      {
        direction: 'ingress',
        ip: '172.18.0.11',
        prio: 1,
        rate: '10Mbit',
        burst: '1024Kb',
        rateBps: 10_000_000,
      },
      {
        direction: 'ingress',
        ip: '172.18.0.12',
        prio: 2,
        rate: '100Mbit',
        burst: '1024Kb',
        rateBps: 100_000_000,
      },
      {
        direction: 'egress',
        ip: '172.18.0.11',
        prio: 1,
        rate: '10500Kbit',
        burst: '2Mb',
        rateBps: 10_500_000,
      },
    ]);
    expect(state.readAt).toBe(42);
    // Only the three constant commands ran, after the init and the script calls above.
    const reads = gw
      .sim(pod)
      .history()
      .filter((h) => h.argv[0] !== 'bash');
    expect(reads.map((h) => h.argv)).toEqual([
      INSPECTION_ARGV.addresses,
      INSPECTION_ARGV.ingress,
      INSPECTION_ARGV.egress,
    ]);
  });

  it('an empty gateway (no qdiscs yet) has no filters, only the pod address', async () => {
    const gw = new MemoryGateway({ release: '1.12', net1: '172.18.0.254/24' });
    const state = await inspectGateway(inspectDeps(gw), 'gw1', pod, () => 0);
    expect(state.addresses.map((a) => a.address)).toEqual(['172.18.0.254']);
    expect(state.filters).toEqual([]);
  });
});

describe('ip -o addr show dev net1 (real iproute2 formats)', () => {
  const sample = [
    '3: net1    inet 172.18.0.254/16 brd 172.18.255.255 scope global net1\\       valid_lft forever preferred_lft forever',
    '3: net1    inet 172.18.0.30/16 brd 172.18.255.255 scope global secondary net1\\       valid_lft forever preferred_lft forever',
    '3: net1    inet 172.18.0.31/16 scope global secondary tentative net1\\       valid_lft forever preferred_lft forever',
    '3: net1    inet6 fe80::a8c1:abff:fe12:3456/64 scope link \\       valid_lft forever preferred_lft forever',
    '3: net1    inet6 fd00:10::5/64 scope global dadfailed tentative \\       valid_lft forever preferred_lft forever',
    '',
    'garbage line',
    '3: net1    inet 999.1.1.1/16 scope global net1',
    '3: net1    inet 172.18.0.32/40 scope global net1',
    '4: eth0    inet 10.0.1.254/24 brd 10.0.1.255 scope global eth0\\       valid_lft forever preferred_lft forever',
  ].join('\n');

  it('keeps every well-formed net1 line, with family, prefix, scope and flags', () => {
    expect(parseNet1Addresses(sample)).toEqual([
      { family: 4, address: '172.18.0.254', prefix: 16, scope: 'global', flags: [] },
      { family: 4, address: '172.18.0.30', prefix: 16, scope: 'global', flags: ['secondary'] },
      { family: 4, address: '172.18.0.31', prefix: 16, scope: 'global', flags: ['secondary', 'tentative'] },
      { family: 6, address: 'fe80::a8c1:abff:fe12:3456', prefix: 64, scope: 'link', flags: [] },
      { family: 6, address: 'fd00:10::5', prefix: 64, scope: 'global', flags: ['dadfailed', 'tentative'] },
    ]);
  });

  it('an interface name with its peer index (net1@if12) is still net1', () => {
    expect(
      parseNet1Addresses('7: net1@if12    inet 172.18.0.9/24 brd 172.18.0.255 scope global net1'),
    ).toMatchObject([{ address: '172.18.0.9', prefix: 24 }]);
  });
});

describe('tc -p filter show (real iproute2 formats)', () => {
  // iproute2 6.x: the police action printed as an action of the filter.
  const newer = [
    'filter parent ffff: protocol ip pref 10 u32 chain 0 ',
    'filter parent ffff: protocol ip pref 10 u32 chain 0 fh 800: ht divisor 1 ',
    'filter parent ffff: protocol ip pref 10 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid :1 not_in_hw ',
    '  match IP dst 172.18.0.30/32',
    '\taction order 1:  police 0x1 rate 20Mbit burst 2Mb mtu 2Kb action drop overhead 0b ',
    '\tref 1 bind 1',
    '',
    'filter parent ffff: protocol ip pref 10 u32 chain 0 fh 800::801 order 2049 key ht 800 bkt 0 flowid :1 not_in_hw ',
    '  match IP dst 172.18.0.31/32',
    '\taction order 1:  police 0x2 rate 1Gbit burst 10Mb mtu 2Kb action drop overhead 0b ',
    '\tref 1 bind 1',
  ].join('\n');

  it('reads address, prio and rate of each key node', () => {
    expect(parseTcFilters(newer, 'ingress')).toEqual([
      { direction: 'ingress', ip: '172.18.0.30', prio: 10, rate: '20Mbit', burst: '2Mb', rateBps: 20e6 },
      { direction: 'ingress', ip: '172.18.0.31', prio: 10, rate: '1Gbit', burst: '10Mb', rateBps: 1e9 },
    ]);
  });

  it('reads the raw u32 key when -p was not honoured, and skips a /24 match (not an EIP filter)', () => {
    const raw = [
      'filter parent 1: protocol ip pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid :1',
      '  match ac12001e/ffffffff at 12',
      ' police 0x3 rate 10500Kbit burst 1Mb mtu 2Kb action drop overhead 0b',
      'filter parent 1: protocol ip pref 2 u32 chain 0 fh 801::800 order 2048 key ht 801 bkt 0 flowid :1',
      '  match ac120000/ffffff00 at 12',
      ' police 0x4 rate 1Mbit burst 1Mb mtu 2Kb action drop overhead 0b',
    ].join('\n');
    expect(parseTcFilters(raw, 'egress')).toEqual([
      {
        direction: 'egress',
        ip: '172.18.0.30',
        prio: 1,
        rate: '10500Kbit',
        burst: '1Mb',
        rateBps: 10_500_000,
      },
    ]);
  });

  it('a filter without police has no rate; empty output has no filters', () => {
    const f = parseTcFilters(
      'filter parent ffff: protocol ip pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 flowid :1\n  match IP dst 172.18.0.5/32\n',
      'ingress',
    );
    expect(f).toEqual([{ direction: 'ingress', ip: '172.18.0.5', prio: 1 }]);
    expect(parseTcFilters('', 'egress')).toEqual([]);
  });

  it('tc rates in every unit tc prints', () => {
    expect(parseTcRate('10Mbit')).toBe(10_000_000);
    expect(parseTcRate('10500Kbit')).toBe(10_500_000);
    expect(parseTcRate('800bit')).toBe(800);
    expect(parseTcRate('12Mibit')).toBe(12 * 1024 * 1024);
    expect(parseTcRate('125Kbps')).toBe(1_000_000);
    expect(parseTcRate('fast')).toBeUndefined();
  });
});

describe('parsers on arbitrary and generated input (fast-check)', () => {
  it('never throw, and never report an address that is not a canonical IP', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 400 }), (text) => {
        for (const a of parseNet1Addresses(text)) expect(parseAddress(a.address)).toBeDefined();
        for (const f of [...parseTcFilters(text, 'ingress'), ...parseTcFilters(text, 'egress')])
          expect(parseAddress(f.ip)?.family).toBe(4);
      }),
      { numRuns: 300 },
    );
  });

  it('read back exactly the addresses and filters written in iproute2 format', () => {
    const ipv4 = fc
      .tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.integer({ min: 1, max: 254 }))
      .map((t) => t.join('.'));
    fc.assert(
      fc.property(
        fc.uniqueArray(
          fc.record({
            ip: ipv4,
            prefix: fc.integer({ min: 8, max: 32 }),
            mbit: fc.integer({ min: 1, max: 10_000 }),
          }),
          {
            selector: (x) => x.ip,
            maxLength: 20,
          },
        ),
        (rows) => {
          const addr = rows
            .map(
              (r) =>
                `3: net1    inet ${r.ip}/${r.prefix} scope global secondary net1\\       valid_lft forever preferred_lft forever`,
            )
            .join('\n');
          expect(parseNet1Addresses(addr).map((a) => `${a.address}/${a.prefix}`)).toEqual(
            rows.map((r) => `${r.ip}/${r.prefix}`),
          );
          const tc = rows
            .map(
              (r, i) =>
                `filter parent ffff: protocol ip pref ${i + 1} u32 chain 0 fh 800::${(0x800 + i).toString(16)} order 2048 key ht 800 bkt 0 flowid :1\n  match IP dst ${r.ip}/32\n police 0x${i + 1} rate ${r.mbit}Mbit burst 1Mb mtu 2Kb action drop overhead 0b`,
            )
            .join('\n');
          expect(parseTcFilters(tc, 'ingress').map((f) => [f.ip, f.prio, f.rateBps])).toEqual(
            rows.map((r, i) => [r.ip, i + 1, r.mbit * 1e6]),
          );
        },
      ),
      { numRuns: 200 },
    );
  });
});
