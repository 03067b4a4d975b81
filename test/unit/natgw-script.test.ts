/**
 * kube-ovn 1.12's nat-gateway.sh (v1.12.35) in the simulator, op by op: formats, messages, exit codes and effects.
 * What changed in later releases is in natgw-releases.test.ts. How the model was checked against the real
 * script: local/natgw/README.md#how-the-model-was-checked.
 */
import { describe, expect, it } from 'vitest';
import { type ExecOutcome, ExternalSegment, NatGatewaySim } from '../../local/natgw/sim.js';

const SCRIPT = '/kube-ovn/nat-gateway.sh';
const OWN = '172.18.0.254/16';
const GW = '172.18.0.1';

function script(sim: NatGatewaySim, op: string, ...rules: string[]): ExecOutcome {
  return sim.exec(['bash', SCRIPT, op, ...rules]);
}

function initialised(options: ConstructorParameters<typeof NatGatewaySim>[0] = {}): NatGatewaySim {
  const sim = new NatGatewaySim({ release: '1.12', net1: OWN, eth0: '10.0.1.254/24', ...options });
  expect(script(sim, 'init', '10.96.0.0/12,10.0.1.1').exitCode).toBe(0);
  return sim;
}

describe('nat-gateway.sh dispatch', () => {
  it('refuses every op but init and the QoS ops until init has run, with exit 1', () => {
    const sim = new NatGatewaySim({ release: '1.12', net1: OWN });
    const out = script(sim, 'eip-add', `172.18.0.10/16,${GW}`);
    expect(out).toEqual({
      stdout: `eip-add 172.18.0.10/16,${GW}\n`,
      stderr: 'nat gateway not initialized\n',
      exitCode: 1,
    });
    expect(sim.net1Addresses()).toEqual([OWN]);
    for (const op of ['eip-del', 'floating-ip-add', 'dnat-add', 'snat-add', 'ext-subnet-route-add']) {
      expect(script(sim, op, '172.18.0.10').exitCode).toBe(1);
    }
  });

  it('prints the usage line and exits 1 for an unknown or missing op', () => {
    const sim = initialised();
    const usage =
      'Usage: /kube-ovn/nat-gateway.sh [init|subnet-route-add|subnet-route-del|eip-add|eip-del|floating-ip-add|floating-ip-del|dnat-add|dnat-del|snat-add|snat-del] ...\n';
    expect(script(sim, 'eip-move', '1.2.3.4')).toEqual({ stdout: usage, stderr: '', exitCode: 1 });
    expect(sim.exec(['bash', SCRIPT])).toEqual({ stdout: usage, stderr: '', exitCode: 1 });
  });

  it('echoes the op and its joined arguments first, as the script does', () => {
    const sim = initialised();
    const out = script(sim, 'eip-del', '172.18.0.77/16', 'extra');
    expect(out.stdout.split('\n')[0]).toBe('eip-del 172.18.0.77/16 extra');
  });

  it('runs the script when exec-ed directly or through /bin/bash', () => {
    const sim = initialised();
    expect(sim.exec([SCRIPT, 'eip-add', `172.18.0.10/16,${GW}`]).exitCode).toBe(0);
    expect(sim.exec(['/bin/bash', SCRIPT, 'eip-add', `172.18.0.11/16,${GW}`]).exitCode).toBe(0);
    expect(sim.net1Addresses()).toEqual([OWN, '172.18.0.10/16', '172.18.0.11/16']);
  });
});

describe('init', () => {
  it('creates the nat chains, turns ARP off on net1 and routes the service CIDR via eth0', () => {
    const sim = new NatGatewaySim({ release: '1.12', net1: OWN, eth0: '10.0.1.254/24' });
    expect(sim.initialised).toBe(false);
    const out = script(sim, 'init', '10.96.0.0/12,10.0.1.1');
    expect(out).toEqual({ stdout: 'init 10.96.0.0/12,10.0.1.1\n', stderr: '', exitCode: 0 });
    expect(sim.initialised).toBe(true);
    expect(sim.arp).toBe(false);
    expect(sim.natChains().sort()).toEqual([
      'DNAT_FILTER',
      'EXCLUSIVE_DNAT',
      'EXCLUSIVE_SNAT',
      'SHARED_DNAT',
      'SHARED_SNAT',
      'SNAT_FILTER',
    ]);
    expect(sim.natRules()).toEqual([
      '-A PREROUTING -j DNAT_FILTER',
      '-A POSTROUTING -j SNAT_FILTER',
      '-A DNAT_FILTER -j EXCLUSIVE_DNAT',
      '-A DNAT_FILTER -j SHARED_DNAT',
      '-A SNAT_FILTER -j EXCLUSIVE_SNAT',
      '-A SNAT_FILTER -j SHARED_SNAT',
    ]);
    expect(sim.routes()).toContain('10.96.0.0/12 via 10.0.1.1 dev eth0');
  });

  it('runs once only: a second init prints the existing DNAT_FILTER lines and changes nothing', () => {
    const sim = initialised();
    const rules = sim.natRules();
    const out = script(sim, 'init', '10.100.0.0/16,10.0.1.1');
    expect(out.exitCode).toBe(0);
    expect(out.stdout).toBe(
      'init 10.100.0.0/16,10.0.1.1\n:DNAT_FILTER - [0:0]\n-A PREROUTING -j DNAT_FILTER\n-A DNAT_FILTER -j EXCLUSIVE_DNAT\n-A DNAT_FILTER -j SHARED_DNAT\n',
    );
    expect(sim.natRules()).toEqual(rules);
    expect(sim.routes().some((r) => r.startsWith('10.100.0.0/16'))).toBe(false);
  });

  it('fails like ip does on a service CIDR with host bits set, after creating the chains', () => {
    const sim = new NatGatewaySim({ release: '1.12', net1: OWN });
    const out = script(sim, 'init', '10.96.0.1/12,10.0.1.1');
    expect(out.exitCode).toBe(2);
    expect(out.stderr).toBe(
      'Error: Invalid prefix for given prefix length.\nfailed to exec command "ip route replace 10.96.0.1/12 via 10.0.1.1 dev eth0"\n',
    );
    expect(sim.initialised).toBe(true);
  });
});

describe('eip-add', () => {
  it('puts the address on net1, turns ARP on, points the default route at the gateway, runs DAD, then announces it', () => {
    const sim = initialised();
    const out = script(sim, 'eip-add', `172.18.0.10/16,${GW}`);
    expect(out).toEqual({
      stdout: [
        `eip-add 172.18.0.10/16,${GW}`,
        '-A SNAT_FILTER -j SHARED_SNAT',
        `default via ${GW} dev net1 `,
        'ARPING 172.18.0.10 from 0.0.0.0 net1',
        'Sent 3 probes (3 broadcast(s))',
        'Received 0 response(s)',
        'ARPING 172.18.0.10 from 172.18.0.10 net1',
        'Sent 3 probes (3 broadcast(s))',
        'Received 0 response(s)',
        '',
      ].join('\n'),
      stderr: '',
      exitCode: 0,
    });
    expect(sim.net1Addresses()).toEqual([OWN, '172.18.0.10/16']);
    expect(sim.arp).toBe(true);
    expect(sim.defaultRoute()).toEqual({ via: GW, dev: 'net1' });
  });

  it('is idempotent: adding the same address twice leaves one copy', () => {
    const sim = initialised();
    expect(script(sim, 'eip-add', `172.18.0.10/16,${GW}`).exitCode).toBe(0);
    expect(script(sim, 'eip-add', `172.18.0.10/16,${GW}`).exitCode).toBe(0);
    expect(sim.net1Addresses()).toEqual([OWN, '172.18.0.10/16']);
  });

  it('word-splits its joined arguments, so one call may carry several rules', () => {
    const sim = initialised();
    expect(
      script(sim, 'eip-add', `172.18.0.10/16,${GW} 172.18.0.11/16,${GW}`, `172.18.0.12/16,${GW}`).exitCode,
    ).toBe(0);
    expect(sim.net1Addresses()).toEqual([OWN, '172.18.0.10/16', '172.18.0.11/16', '172.18.0.12/16']);
  });

  it("fails with ip's message and exit 1 on an invalid address, leaving net1 alone", () => {
    const sim = initialised();
    const out = script(sim, 'eip-add', `172.18.0.300/16,${GW}`);
    expect(out.exitCode).toBe(1);
    expect(out.stderr).toBe(
      [
        // busybox ipcalc complains first (the script computes two values it never uses)
        'ipcalc: bad IP address: 172.18.0.300',
        'ipcalc: bad IP address: 172.18.0.300',
        'Error: any valid prefix is expected rather than "172.18.0.300/16".',
        'failed to exec command "ip addr replace 172.18.0.300/16 dev net1"',
        '',
      ].join('\n'),
    );
    expect(sim.net1Addresses()).toEqual([OWN]);
  });

  it('fails with exit 1 when the gateway is missing, after the address was added', () => {
    const sim = initialised();
    const out = script(sim, 'eip-add', '172.18.0.10/16');
    expect(out.exitCode).toBe(1);
    expect(out.stderr).toBe(
      'Error: any valid address is expected rather than "dev".\nfailed to exec command "ip route replace default via  dev net1"\n',
    );
    expect(sim.net1Addresses()).toContain('172.18.0.10/16');
  });

  it('fails with exit 2 when the gateway is not on any net1 network', () => {
    const sim = initialised();
    const out = script(sim, 'eip-add', '172.18.0.10/16,10.9.9.1');
    expect(out.exitCode).toBe(2);
    expect(out.stderr).toBe(
      'Error: Nexthop has invalid gateway.\nfailed to exec command "ip route replace default via 10.9.9.1 dev net1"\n',
    );
  });

  it('fails DAD with exit 1 when another gateway on the segment holds the address, keeping it on net1', () => {
    const segment = new ExternalSegment();
    const other = initialised({ net1: '172.18.0.253/16', segment });
    expect(script(other, 'eip-add', `172.18.0.10/16,${GW}`).exitCode).toBe(0);
    const sim = initialised({ segment });
    const out = script(sim, 'eip-add', `172.18.0.10/16,${GW}`);
    expect(out.exitCode).toBe(1);
    expect(out.stdout).toContain(`Unicast reply from 172.18.0.10 [${other.net1Mac.toUpperCase()}]`);
    expect(out.stderr).toBe('failed to exec command "arping -I net1 -c 3 -D 172.18.0.10"\n');
    expect(sim.net1Addresses()).toContain('172.18.0.10/16');
  });

  it('fails DAD when a host outside the simulation, such as the subnet router, answers for the address', () => {
    const segment = new ExternalSegment();
    segment.addHost(GW);
    const sim = initialised({ segment });
    expect(script(sim, 'eip-add', `${GW}/16,${GW}`).exitCode).toBe(1);
  });
});

describe('eip-del', () => {
  it('removes exactly the named address and leaves the others', () => {
    const sim = initialised();
    script(sim, 'eip-add', `172.18.0.10/16,${GW}`, `172.18.0.100/16,${GW}`);
    const out = script(sim, 'eip-del', '172.18.0.10/16');
    expect(out).toEqual({
      stdout: 'eip-del 172.18.0.10/16\n-A SNAT_FILTER -j SHARED_SNAT\n',
      stderr: '',
      exitCode: 0,
    });
    expect(sim.net1Addresses()).toEqual([OWN, '172.18.0.100/16']);
  });

  it('succeeds without change when the address is not on net1', () => {
    const sim = initialised();
    expect(script(sim, 'eip-del', '172.18.0.44/16').exitCode).toBe(0);
    expect(sim.net1Addresses()).toEqual([OWN]);
  });

  it('never treats a bare prefix as a pattern, so the pod\'s own net1 address survives "/16"', () => {
    const sim = initialised();
    expect(script(sim, 'eip-del', '/16').exitCode).toBe(0);
    expect(sim.net1Addresses()).toEqual([OWN]);
  });

  it('does not delete an address whose prefix length differs from the one given', () => {
    const sim = initialised();
    script(sim, 'eip-add', `172.18.0.10/16,${GW}`);
    expect(script(sim, 'eip-del', '172.18.0.10/24').exitCode).toBe(0);
    expect(sim.net1Addresses()).toContain('172.18.0.10/16');
    expect(script(sim, 'eip-del', '172.18.0.10').exitCode).toBe(0);
    expect(sim.net1Addresses()).toEqual([OWN]);
  });
});

describe('EIP QoS ops', () => {
  it('adds an ingress police filter matching dst on ffff: and an egress one matching src on the htb root', () => {
    const sim = initialised();
    expect(script(sim, 'eip-ingress-qos-add', '172.18.0.10,1,10,10')).toEqual({
      stdout: 'eip-ingress-qos-add 172.18.0.10,1,10,10\n',
      stderr: '',
      exitCode: 0,
    });
    expect(script(sim, 'eip-egress-qos-add', '172.18.0.10,2,1.5,3').exitCode).toBe(0);
    expect(sim.qdiscs().sort()).toEqual(['htb 1:', 'ingress']);
    expect(sim.tcFilters()).toEqual([
      {
        direction: 'ingress',
        dev: 'net1',
        parent: 'ffff:',
        match: 'dst',
        ip: '172.18.0.10',
        prefix: 32,
        prio: 1,
        handle: '800::800',
        rate: '10Mbit',
        burst: '10Mb',
      },
      {
        direction: 'egress',
        dev: 'net1',
        parent: '1:',
        match: 'src',
        ip: '172.18.0.10',
        prefix: 32,
        prio: 2,
        handle: '800::800',
        rate: '1500Kbit',
        burst: '3Mb',
      },
    ]);
  });

  it('replaces the existing filter of the same address and direction, so the last rule wins', () => {
    const sim = initialised();
    script(sim, 'eip-ingress-qos-add', '172.18.0.10,1,10,10');
    const out = script(sim, 'eip-ingress-qos-add', '172.18.0.10,2,20,20');
    expect(out.exitCode).toBe(0);
    expect(out.stdout).toBe(
      'eip-ingress-qos-add 172.18.0.10,2,20,20\n  match IP dst 172.18.0.10/32\nmatch IP dst 172.18.0.10/32\n',
    );
    expect(sim.tcFilters().map((f) => [f.ip, f.prio, f.rate])).toEqual([['172.18.0.10', 2, '20Mbit']]);
  });

  it('works before init, as the script never checks for it on the QoS ops', () => {
    const sim = new NatGatewaySim({ release: '1.12', net1: OWN });
    expect(script(sim, 'eip-egress-qos-add', '172.18.0.10,1,10,10').exitCode).toBe(0);
    expect(sim.tcFilters()).toHaveLength(1);
  });

  it('takes several rules per call', () => {
    const sim = initialised();
    expect(script(sim, 'eip-ingress-qos-add', '172.18.0.10,1,10,10 172.18.0.11,1,5,5').exitCode).toBe(0);
    expect(sim.tcFilters().map((f) => f.ip)).toEqual(['172.18.0.10', '172.18.0.11']);
  });

  it("fails with tc's message and exit 1 on a rate that is not a number", () => {
    const sim = initialised();
    const out = script(sim, 'eip-ingress-qos-add', '172.18.0.10,1,fast,10');
    expect(out.exitCode).toBe(1);
    expect(out.stderr).toBe(
      'Illegal "rate"\nIllegal "police"\nfailed to exec command "tc filter add dev net1 parent ffff: protocol ip prio 1 u32 match ip dst 172.18.0.10 police rate fastMbit burst 10Mb drop flowid :1"\n',
    );
    expect(sim.tcFilters()).toEqual([]);
  });

  it('fails with exit 1 on a bad burst and exit 255 on a bad priority', () => {
    const sim = initialised();
    const burst = script(sim, 'eip-egress-qos-add', '172.18.0.10,1,10,big');
    expect([burst.exitCode, burst.stderr.split('\n')[0]]).toEqual([1, 'Illegal "burst"']);
    const prio = script(sim, 'eip-egress-qos-add', '172.18.0.10,high,10,10');
    expect([prio.exitCode, prio.stderr.split('\n')[0]]).toEqual([
      255,
      'Error: argument "high" is wrong: invalid priority value',
    ]);
  });

  it('keeps shell metacharacters inert: a rate carrying "; touch" is just a bad rate split into words', () => {
    const sim = initialised();
    const out = script(sim, 'eip-ingress-qos-add', '172.18.0.10,1,1;touch /tmp/pwned,10');
    expect(out.exitCode).toBe(1);
    expect(out.stderr).toMatch(
      /^Illegal "rate"\nIllegal "police"\nfailed to exec command "tc filter add .* rate 1;touchMbit /,
    );
    expect(sim.history().map((h) => h.argv[0])).toEqual(['bash', 'bash']);
  });

  it('deletes the filter of exactly the given address, never one that merely starts with it', () => {
    const sim = initialised();
    script(sim, 'eip-ingress-qos-add', '172.18.0.50,1,10,10');
    script(sim, 'eip-ingress-qos-add', '172.18.0.5,1,10,10');
    script(sim, 'eip-egress-qos-add', '172.18.0.50,1,10,10');
    script(sim, 'eip-egress-qos-add', '172.18.0.5,1,10,10');
    expect(script(sim, 'eip-ingress-qos-del', '172.18.0.5').exitCode).toBe(0);
    expect(script(sim, 'eip-egress-qos-del', '172.18.0.5').exitCode).toBe(0);
    expect(sim.tcFilters().map((f) => `${f.direction} ${f.ip}`)).toEqual([
      'ingress 172.18.0.50',
      'egress 172.18.0.50',
    ]);
  });

  it('succeeds without change when there is no filter, qdisc or htb root to delete from', () => {
    const sim = initialised();
    expect(script(sim, 'eip-ingress-qos-del', '172.18.0.5')).toEqual({
      stdout: 'eip-ingress-qos-del 172.18.0.5\n',
      stderr: '',
      exitCode: 0,
    });
    expect(script(sim, 'eip-egress-qos-del', '172.18.0.5').exitCode).toBe(0);
    script(sim, 'eip-egress-qos-add', '172.18.0.6,1,10,10');
    expect(script(sim, 'eip-egress-qos-del', '172.18.0.5').exitCode).toBe(0);
    expect(sim.tcFilters()).toHaveLength(1);
  });
});

describe('routes and NAT rules', () => {
  it('ext-subnet-route-add points the default route at the external gateway via net1', () => {
    const sim = initialised();
    const out = script(sim, 'ext-subnet-route-add', `172.18.0.0/16,${GW}`);
    expect(out.exitCode).toBe(0);
    expect(out.stdout).toContain(`default via ${GW} dev net1`);
    expect(sim.defaultRoute()).toEqual({ via: GW, dev: 'net1' });
  });

  it('subnet-route-add and -del manage routes via eth0', () => {
    const sim = initialised();
    expect(script(sim, 'subnet-route-add', '192.168.0.0/24,10.0.1.1').exitCode).toBe(0);
    expect(sim.routes()).toContain('192.168.0.0/24 via 10.0.1.1 dev eth0');
    expect(script(sim, 'subnet-route-del', '192.168.0.0/24').exitCode).toBe(0);
    expect(sim.routes().some((r) => r.startsWith('192.168.0.0/24'))).toBe(false);
  });

  it('floating-ip-add writes the DNAT/SNAT pair once, and floating-ip-del removes it', () => {
    const sim = initialised();
    expect(script(sim, 'floating-ip-add', '172.18.0.11,192.168.0.5').exitCode).toBe(0);
    const again = script(sim, 'floating-ip-add', '172.18.0.11,192.168.0.5');
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain(
      '-A EXCLUSIVE_DNAT -d 172.18.0.11/32 -j DNAT --to-destination 192.168.0.5',
    );
    const nat = sim.natRules().filter((r) => r.includes('EXCLUSIVE_'));
    expect(nat).toEqual([
      '-A DNAT_FILTER -j EXCLUSIVE_DNAT',
      '-A EXCLUSIVE_DNAT -d 172.18.0.11/32 -j DNAT --to-destination 192.168.0.5',
      '-A EXCLUSIVE_SNAT -s 192.168.0.5/32 -j SNAT --to-source 172.18.0.11',
      '-A SNAT_FILTER -j EXCLUSIVE_SNAT',
    ]);
    expect(script(sim, 'floating-ip-del', '172.18.0.11,192.168.0.5').exitCode).toBe(0);
    expect(sim.natRules().filter((r) => r.includes('172.18.0.11'))).toEqual([]);
  });

  it('dnat-add and dnat-del manage a port forward in SHARED_DNAT', () => {
    const sim = initialised();
    expect(script(sim, 'dnat-add', '172.18.0.12,8080,tcp,192.168.0.6,80').exitCode).toBe(0);
    expect(sim.natRules()).toContain(
      '-A SHARED_DNAT -d 172.18.0.12/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 192.168.0.6:80',
    );
    expect(script(sim, 'dnat-add', '172.18.0.12,8080,tcp,192.168.0.6,80').exitCode).toBe(0);
    expect(sim.natRules().filter((r) => r.includes('--dport 8080'))).toHaveLength(1);
    expect(script(sim, 'dnat-del', '172.18.0.12,8080,tcp,192.168.0.6,80').exitCode).toBe(0);
    expect(sim.natRules().filter((r) => r.includes('--dport 8080'))).toEqual([]);
  });

  it('dnat-add fails like iptables on an unknown protocol', () => {
    const sim = initialised();
    const out = script(sim, 'dnat-add', '172.18.0.12,8080,tcpx,192.168.0.6,80');
    expect(out.exitCode).toBe(2);
    expect(out.stderr).toContain('unknown protocol "tcpx" specified');
  });

  it('snat-add writes SHARED_SNAT with --random-fully when asked, and snat-del removes it', () => {
    const sim = initialised();
    expect(script(sim, 'snat-add', '172.18.0.12,192.168.0.0/24,--random-fully').exitCode).toBe(0);
    expect(sim.natRules()).toContain(
      '-A SHARED_SNAT -s 192.168.0.0/24 -o net1 -j SNAT --to-source 172.18.0.12 --random-fully',
    );
    expect(script(sim, 'snat-del', '172.18.0.12,192.168.0.0/24').exitCode).toBe(0);
    expect(sim.natRules().filter((r) => r.startsWith('-A SHARED_SNAT'))).toEqual([]);
  });

  it('get-iptables-version prints the version line', () => {
    const sim = initialised();
    expect(script(sim, 'get-iptables-version').stdout).toBe(
      'get-iptables-version \niptables v1.8.10 (nf_tables)\n',
    );
  });
});
