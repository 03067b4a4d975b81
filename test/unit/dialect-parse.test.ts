/**
 * Reading a gateway per dialect, on the real output of the recorded runs (test/fixtures/gateway-runs/: each
 * release's nat-gateway.sh run in a network namespace by local/record-gateway-runs.ts; iproute2, iptables and the
 * kernel are named in each fixture). On the recording machine the 1.12–1.15 filters were created without their
 * police action and the 1.16+ leaves as pfifo instead of fq_codel (the kernel has neither; the fixture's
 * `standIns` say so), so police rates are checked on the hand-written samples of test/unit/audit-parse.test.ts
 * and here only the filters themselves; the 1.16+ rates come from the real HTB classes.
 */
import { describe, expect, it } from 'vitest';
import { INSPECTION_ARGV } from '../../shared/audit/inspect.js';
import {
  DIALECTS,
  ENV_FILE_ARGV,
  externalInterfaceOf,
  type InspectionKey,
  inspectionArgv,
  interpretReads,
  isDialectInspectionArgv,
  NAT_TABLE_ARGV,
  natChains,
  parseAddresses,
  parseEnvFile,
  parseHairpinSnat,
  parseTcFilters,
  pickNatTable,
  type ReleaseLine,
} from '../../shared/domain/dialect/index.js';
import { RECORDED, type Recorded, run, step } from '../support/gateway-runs.js';

const LINE_OF: Record<Recorded, ReleaseLine> = {
  'v1.12.35': '1.12',
  'v1.13.0': '1.13',
  'v1.14.0': '1.13',
  'v1.15.0': '1.15',
  'v1.16.0': '1.16',
  master: 'master',
};

/** The recorded read behind each inspection key. */
function readName(line: ReleaseLine, key: InspectionKey): string {
  const htb = DIALECTS[line].qos === 'htb';
  return {
    addresses: 'addresses on net1',
    ingress: htb ? 'ingress filters on the IFB' : 'ingress filters on net1',
    egress: 'egress filters on net1',
    ingressClasses: 'classes on the IFB',
    egressClasses: 'classes on net1',
  }[key];
}

function reading(release: Recorded, when: string) {
  const d = DIALECTS[LINE_OF[release]];
  const keys = Object.keys(inspectionArgv(d, 'net1')) as InspectionKey[];
  const reads = Object.fromEntries(keys.map((k) => [k, step(release, `${when}: ${readName(d.line, k)}`)]));
  const nat = [step(release, `${when}: nat table (legacy)`)];
  return interpretReads(d, 'net1', reads, nat);
}

const brief = (r: ReturnType<typeof reading>) =>
  r.filters.map((f) => `${f.direction} ${f.ip} prio ${f.prio}${f.rate ? ` ${f.rate}` : ''}`);

describe.each(RECORDED)('%s', (release) => {
  const d = DIALECTS[LINE_OF[release]];

  it('the inspection commands are the ones the run was read with', () => {
    for (const [key, argv] of Object.entries(inspectionArgv(d, 'net1'))) {
      expect(step(release, `after init: ${readName(d.line, key as InspectionKey)}`).argv).toEqual(argv);
      expect(isDialectInspectionArgv(argv!)).toBe(true);
    }
    expect(step(release, 'after init: nat table (legacy)').argv).toEqual(NAT_TABLE_ARGV[0]);
  });

  it('addresses on net1 after eip-add', () => {
    const v4 = reading(release, 'after eip-add').addresses.filter((a) => a.family === 4);
    expect(v4.map((a) => `${a.address}/${a.prefix}`)).toEqual(
      d.line === '1.12'
        ? // 1.12 left the address of each half-failed eip-add (the other form, the unreachable gateway, the duplicate).
          [
            '172.19.0.254/24',
            '172.19.0.247/24',
            '172.19.0.24/24',
            '172.19.0.40/24',
            '172.19.0.6/24',
            '172.19.0.99/24',
          ]
        : ['172.19.0.254/24', '172.19.0.247/24', '172.19.0.24/24', '172.19.0.99/24'],
    );
    expect(v4[0]).toMatchObject({ scope: 'global', flags: [] });
    expect(v4[1]).toMatchObject({ scope: 'global', flags: ['secondary'] });
  });

  it('QoS of .247 and .24 in both directions', () => {
    const r = reading(release, 'after QoS for .247 and .24');
    if (d.qos === 'htb')
      expect(brief(r)).toEqual([
        'ingress 172.19.0.247 prio 1 10Mbit',
        'ingress 172.19.0.24 prio 2 100Mbit',
        'egress 172.19.0.247 prio 1 10500Kbit',
        'egress 172.19.0.24 prio 2 100Mbit',
      ]);
    else
      expect(brief(r)).toEqual([
        'ingress 172.19.0.247 prio 1',
        'ingress 172.19.0.24 prio 2',
        'egress 172.19.0.247 prio 1',
        'egress 172.19.0.24 prio 2',
      ]);
    if (d.qos === 'htb') {
      expect(r.filters.map((f) => f.classid)).toEqual(['1:1b5d', '1:5062', '1:1b5d', '1:5062']);
      expect(r.filters.find((f) => f.direction === 'egress' && f.ip === '172.19.0.247')?.rateBps).toBe(
        10_500_000,
      );
      // The IFB redirect on net1's ingress is no address's filter.
      expect(parseTcFilters(step(release, 'after init: ingress filters on net1').stdout, 'ingress')).toEqual(
        [],
      );
    }
  });

  it("the dialect's QoS change leaves the changed address with its new limit alone", () => {
    if (d.qosChange === 're-add') {
      // 1.16+: the re-add replaced .24's egress class in place; .247 untouched.
      expect(brief(reading(release, 'after the re-add'))).toContain('egress 172.19.0.24 prio 2 20Mbit');
      expect(brief(reading(release, 'after the re-add'))).toContain('egress 172.19.0.247 prio 1 10500Kbit');
      expect(brief(reading(release, 'after the delete-then-add'))).toContain(
        'ingress 172.19.0.24 prio 2 50Mbit',
      );
      return;
    }
    // 1.12–1.15, kube-ovn's own behaviour: the script finds an address's filter by the first line that merely
    // starts like it, so .24's re-add deleted .247's egress filter and left .24 with its old filter in front of
    // the new one; deleting first leaves .24 with exactly one filter (and took .247's too: a kube-ovn defect).
    expect(brief(reading(release, 'after the re-add')).filter((f) => f.startsWith('egress'))).toEqual([
      'egress 172.19.0.24 prio 2',
      'egress 172.19.0.24 prio 2',
    ]);
    expect(
      brief(reading(release, 'after the delete-then-add')).filter((f) => f.startsWith('ingress')),
    ).toEqual(['ingress 172.19.0.24 prio 2']);
  });

  it('the nat table: the chains init makes, and 1.16+ hairpin SNAT per EIP', () => {
    const chains = natChains(step(release, 'after init: nat table (legacy)').stdout);
    expect(chains).toEqual(expect.arrayContaining(['DNAT_FILTER', 'SNAT_FILTER', 'SHARED_SNAT']));
    expect(chains.includes('HAIRPIN_SNAT')).toBe(d.hairpinSnat);
    const afterAdd = reading(release, 'after eip-add');
    const afterDel = reading(release, 'after eip-del');
    if (!d.hairpinSnat) {
      expect(afterAdd.hairpin).toBeUndefined();
      return;
    }
    expect(afterAdd.hairpin?.map((h) => h.address)).toEqual(['172.19.0.247', '172.19.0.24', '172.19.0.99']);
    expect(afterAdd.hairpin?.[0]).toEqual({
      address: '172.19.0.247',
      toSource: '172.19.0.247',
      outInterface: 'eth0',
    });
    expect(afterDel.hairpin?.map((h) => h.address)).toEqual(['172.19.0.247', '172.19.0.99']);
  });

  it('the external interface: net1 from the env file on 1.15+, fixed before', () => {
    const envRead = run(release).steps.find((s) => s.name === 'after init: env file');
    expect(envRead !== undefined).toBe(d.externalInterface === 'env-file');
    if (envRead) {
      expect(envRead.argv).toEqual(ENV_FILE_ARGV);
      expect(parseEnvFile(envRead.stdout)).toEqual({ VPC_INTERFACE: 'eth0', EXTERNAL_INTERFACE: 'net1' });
    }
    expect(externalInterfaceOf(d, envRead)).toBe('net1');
  });
});

describe('1.16+ kube-ovn behaviour the re-add avoids', () => {
  it.each(['v1.16.0', 'master'] as const)(
    '%s: deleting the QoS of an address whose class id collided also deletes the other address',
    (release) => {
      const egress = (when: string) =>
        interpretReads(DIALECTS['1.16'], 'net1', {
          addresses: step(release, 'after init: addresses on net1'),
          ingress: step(release, 'after init: ingress filters on the IFB'),
          ingressClasses: step(release, 'after init: classes on the IFB'),
          egress: step(release, `${when}: egress filters on net1`),
          egressClasses: step(release, `${when}: classes on net1`),
        }).filters.map((f) => `${f.ip} ${f.classid} ${f.rate}`);
      expect(egress('after QoS for .0.239 and .233.0')).toEqual(
        expect.arrayContaining(['172.19.233.0 1:2208 40Mbit', '172.19.0.239 1:1415 30Mbit']),
      );
      const after = egress('after deleting the egress QoS of .233.0');
      expect(after.some((f) => f.startsWith('172.19.233.0'))).toBe(false);
      expect(after.some((f) => f.startsWith('172.19.0.239'))).toBe(false);
    },
  );

  it('before any ingress QoS there is no IFB device: no ingress filters, not an unreadable gateway', () => {
    expect(step('v1.16.0', 'after init: ingress filters on the IFB').stderr).toContain(
      'Cannot find device "ifb-net1"',
    );
    expect(reading('v1.16.0', 'after init').filters).toEqual([]);
  });
});

describe('reading details', () => {
  it('the nft view of a legacy gateway only warns: the legacy dump is the one with the chains', () => {
    const nft = step('v1.16.0', 'after init: nat table (nft)');
    expect(nft.argv).toEqual(NAT_TABLE_ARGV[1]);
    expect(nft.stderr).toContain('iptables-legacy tables present');
    const legacy = step('v1.16.0', 'after init: nat table (legacy)');
    expect(pickNatTable([nft, legacy])).toBe(legacy.stdout);
    expect(pickNatTable([{ exitCode: 1, stdout: '', stderr: 'x' }])).toBeUndefined();
  });

  it('an env file naming another interface, a missing file, and a name that is not one', () => {
    const d = DIALECTS['1.15'];
    const ok = (stdout: string) => ({ exitCode: 0, stdout, stderr: '' });
    expect(externalInterfaceOf(d, ok('VPC_INTERFACE=eth0\nEXTERNAL_INTERFACE=net2\n'))).toBe('net2');
    expect(externalInterfaceOf(d, ok("export EXTERNAL_INTERFACE='ext0' # set by hand\n"))).toBe('ext0');
    const missing = {
      exitCode: 1,
      stdout: '',
      stderr: "cat: can't open '/etc/kube-ovn/nat-gateway.env': No such file or directory",
    };
    expect(externalInterfaceOf(d, missing, { EXTERNAL_INTERFACE: 'net3' })).toBe('net3');
    expect(externalInterfaceOf(d, missing)).toBe('net1');
    expect(() => externalInterfaceOf(d, ok('EXTERNAL_INTERFACE=net1;reboot\n'))).toThrow(
      /not an interface name/,
    );
    expect(() => externalInterfaceOf(d, { exitCode: 126, stdout: '', stderr: 'permission denied' })).toThrow(
      /could not be read \(exit 126\)/,
    );
    expect(externalInterfaceOf(DIALECTS['1.12'], ok('EXTERNAL_INTERFACE=net2\n'))).toBe('net1');
  });

  it('inspection commands for another interface, and only those', () => {
    expect(inspectionArgv(DIALECTS['1.12'], 'net1')).toEqual(INSPECTION_ARGV);
    expect(inspectionArgv(DIALECTS['1.16'], 'net2').ingress).toEqual([
      'tc',
      '-p',
      'filter',
      'show',
      'dev',
      'ifb-net2',
      'parent',
      '1:',
    ]);
    expect(() => inspectionArgv(DIALECTS['1.16'], 'net1 ; id')).toThrow();
    expect(() => inspectionArgv(DIALECTS['1.16'], 'averylongname')).toThrow();
    for (const argv of [
      ['ip', 'addr', 'add', '1.2.3.4/24', 'dev', 'net1'],
      ['tc', '-p', 'filter', 'show', 'dev', 'net1;id', 'parent', '1:'],
      ['tc', 'filter', 'del', 'dev', 'net1'],
      ['cat', '/etc/shadow'],
      ['bash', '/kube-ovn/nat-gateway.sh', 'eip-del', '172.19.0.5/24'],
    ])
      expect(isDialectInspectionArgv(argv), argv.join(' ')).toBe(false);
  });

  it('addresses of another interface are not net1 addresses', () => {
    const text =
      '4: net2    inet 10.9.0.5/24 scope global net2\\       valid_lft forever preferred_lft forever\n';
    expect(parseAddresses(text, 'net1')).toEqual([]);
    expect(parseAddresses(text, 'net2')).toEqual([
      { family: 4, address: '10.9.0.5', prefix: 24, scope: 'global', flags: [] },
    ]);
  });

  it('hairpin rules as iptables-nft-save may print them (a /32 on the original destination)', () => {
    expect(
      parseHairpinSnat(
        '-A HAIRPIN_SNAT -o eth0 -m mark --mark 0x1/0x1 -m conntrack --ctstate DNAT --ctorigdst 172.19.0.5/32 -j SNAT --to-source 172.19.0.5 --random-fully\n-A SHARED_SNAT -o net1 -s 10.0.1.0/24 -j SNAT --to-source 172.19.0.5\n',
      ),
    ).toEqual([{ address: '172.19.0.5', toSource: '172.19.0.5', outInterface: 'eth0' }]);
  });
});
