/**
 * The simulator answers as each kube-ovn release's nat-gateway.sh does. natgw-releases.json is the table: the
 * answers of kube-ovn's own scripts, recorded in a network namespace (its `notes` say how, and which steps the
 * kernel there could not run and so hold the model's answers): per release, each op's argv → exit code, stdout
 * and stderr lines, and the ip / tc / iptables-save / env file text after it. The same steps run here against a
 * NatGatewaySim of that release, set up as the namespace was. The rest of this file pins what the recorded run
 * does not reach. How the model was checked: local/natgw/README.md#how-the-model-was-checked.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MemoryGateway } from '../../local/memory/gateway.js';
import { KUBE_OVN_RELEASES, type KubeOvnRelease } from '../../local/natgw/releases.js';
import { type ExecOutcome, NatGatewaySim } from '../../local/natgw/sim.js';

interface Step {
  model?: boolean;
  argv: string[];
  exit: number;
  stdout: string[];
  stderr: string[];
  after?: Record<string, string[]>;
}

const TABLE = JSON.parse(readFileSync(new URL('./natgw-releases.json', import.meta.url), 'utf8')) as {
  releases: Record<KubeOvnRelease, Step[]>;
};

const SCRIPT = '/kube-ovn/nat-gateway.sh';
const INSPECT: Record<string, string[]> = {
  addr: ['ip', '-o', '-4', 'addr', 'show', 'dev', 'net1'],
  route: ['ip', 'route'],
  iptables: ['iptables-save'],
  qdisc: ['tc', 'qdisc', 'show', 'dev', 'net1'],
  class: ['tc', 'class', 'show', 'dev', 'net1'],
  filter: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', '1:'],
  ingress: ['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', 'ffff:'],
  ifbQdisc: ['tc', 'qdisc', 'show', 'dev', 'ifb-net1'],
  ifbClass: ['tc', 'class', 'show', 'dev', 'ifb-net1'],
  ifbFilter: ['tc', '-p', 'filter', 'show', 'dev', 'ifb-net1', 'parent', '1:'],
  env: ['cat', '/etc/kube-ovn/nat-gateway.env'],
};

const before113 = (r: KubeOvnRelease): boolean => r === '1.12';
const before115 = (r: KubeOvnRelease): boolean => ['1.12', '1.13', '1.14'].includes(r);

/** A gateway of `release` as the recording's namespace was set up (and as the stand-ins build its pod). */
function gateway(release: KubeOvnRelease): NatGatewaySim {
  return new NatGatewaySim({
    release,
    net1: '172.18.0.254/16',
    eth0: '10.0.1.254/24',
    ...(!before113(release) && {
      routes: [
        { dst: '10.96.0.0/12', via: '10.0.1.1', dev: 'eth0' },
        { dst: '0.0.0.0/0', via: '172.18.0.1', dev: 'net1' },
      ],
    }),
    ...(!before115(release) && { env: { GATEWAY_V4: '172.18.0.1', GATEWAY_V6: '' } }),
  });
}

/** Output lines as recorded: no trailing empty line, no iptables-save comments, leaf qdisc handles as <leaf>. */
function lines(text: string): string[] {
  const out = text
    .split('\n')
    .filter((l) => !l.startsWith('# '))
    .map((l) =>
      l.replace(/^(qdisc fq_codel )[0-9a-f]+:/, '$1<leaf>:').replace(/ leaf [0-9a-f]+: /, ' leaf <leaf>: '),
    );
  while (out.at(-1) === '') out.pop();
  return out;
}

function inspect(sim: NatGatewaySim, argv: string[]): string[] {
  const r = sim.exec(argv);
  return r.exitCode === 0 ? lines(r.stdout) : [`(exit ${r.exitCode}) ${lines(r.stderr).join(' ')}`];
}

function script(sim: NatGatewaySim, ...args: string[]): ExecOutcome {
  return sim.exec(['bash', SCRIPT, ...args]);
}

describe.each(KUBE_OVN_RELEASES.map((r) => [r]))('kube-ovn %s nat-gateway.sh, as recorded', (release) => {
  const steps = TABLE.releases[release];
  const sim = gateway(release);
  const expected: Record<string, string[]> = {};

  it('has a recorded run', () => {
    expect(steps.length).toBeGreaterThan(5);
  });

  it.each(steps.map((s, i) => [`${i}: ${s.argv.join(' ')}${s.model ? ' (model)' : ''}`, s]))('%s', (_, s) => {
    const step = s as Step;
    const out = script(sim, ...step.argv);
    expect({ exit: out.exitCode, stdout: lines(out.stdout), stderr: lines(out.stderr) }).toEqual({
      exit: step.exit,
      stdout: step.stdout,
      stderr: step.stderr,
    });
    Object.assign(expected, step.after);
    const seen = Object.fromEntries(Object.keys(expected).map((k) => [k, inspect(sim, INSPECT[k]!)]));
    expect(seen).toEqual(expected);
  });
});

describe('what the recorded run does not reach', () => {
  it("1.13+ refuses 1.12's eip-add argument with ip's message and exit 1; 1.12 takes it", () => {
    for (const release of KUBE_OVN_RELEASES) {
      const sim = gateway(release);
      script(sim, 'init', ...(before113(release) ? ['10.96.0.0/12,10.0.1.1'] : []));
      const out = script(sim, 'eip-add', '172.18.0.247/24,172.18.0.1');
      if (before113(release)) expect(out.exitCode, release).toBe(0);
      else
        expect([out.exitCode, out.stderr], release).toEqual([
          1,
          'Error: any valid prefix is expected rather than "172.18.0.247/24,172.18.0.1".\nfailed to exec command "ip addr replace 172.18.0.247/24,172.18.0.1 dev net1"\n',
        ]);
    }
  });

  it.each([
    ['1.15', 'eth0,', 'Error: Expected two interfaces separated by a comma (e.g., net1,net2)'],
    ['1.15', 'eth0,nosuch', "Error: External interface 'nosuch' not found"],
    ['1.16', 'nosuch,net1', "Error: VPC interface 'nosuch' not found"],
    ['master', ' ,net1', 'Error: Interface names cannot be empty'],
  ] as const)('%s init %j fails with exit 1: %s', (release, arg, message) => {
    const sim = gateway(release);
    const out = script(sim, 'init', arg);
    expect([out.exitCode, out.stderr]).toEqual([1, `${message}\n`]);
    expect(sim.initialised).toBe(false);
    expect(sim.file('/etc/kube-ovn/nat-gateway.env')).toBeUndefined();
  });

  it('1.15+ init takes "<vpc>, <ext>" as two arguments and keeps them in the env file for every later run', () => {
    const sim = gateway('1.15');
    const out = script(sim, 'init', 'eth0,', 'net1');
    expect(out.stdout.split('\n').slice(0, 3)).toEqual([
      'init eth0, net1',
      'using VPC interface: eth0',
      'using External interface: net1',
    ]);
    expect(sim.file('/etc/kube-ovn/nat-gateway.env')).toBe('VPC_INTERFACE=eth0\nEXTERNAL_INTERFACE=net1\n');
    // A later run reads the file: an SNAT rule goes out on the external interface it names.
    expect(script(sim, 'snat-add', '172.18.0.10,10.0.1.0/24').exitCode).toBe(0);
    expect(sim.natRules()).toContain('-A SHARED_SNAT -s 10.0.1.0/24 -o net1 -j SNAT --to-source 172.18.0.10');
  });

  it('1.15+ eip-add routes by $GATEWAY_V4 (onlink from 1.16), and leaves the route alone without it', () => {
    for (const [release, route] of [
      ['1.15', 'default via 172.18.0.99 dev net1'],
      ['1.16', 'default via 172.18.0.99 dev net1 onlink'],
    ] as const) {
      const sim = new NatGatewaySim({ release, net1: '172.18.0.254/16', env: { GATEWAY_V4: '172.18.0.99' } });
      script(sim, 'init');
      expect(script(sim, 'eip-add', '172.18.0.10/16').exitCode).toBe(0);
      expect(sim.routes()).toContain(route);
      const bare = new NatGatewaySim({ release, net1: '172.18.0.254/16' });
      script(bare, 'init');
      expect(script(bare, 'eip-add', '172.18.0.10/16').exitCode).toBe(0);
      expect(bare.defaultRoute()).toBeUndefined();
    }
  });

  it('1.16 adds a hairpin SNAT rule per EIP once, and eip-del removes it', () => {
    const sim = gateway('1.16');
    script(sim, 'init');
    script(sim, 'eip-add', '172.18.0.10/16');
    script(sim, 'eip-add', '172.18.0.10/16');
    const hairpin = (r: string) => r.startsWith('-A HAIRPIN_SNAT');
    expect(sim.natRules().filter(hairpin)).toEqual([
      '-A HAIRPIN_SNAT -o eth0 -m mark --mark 0x1/0x1 -m conntrack --ctstate DNAT --ctorigdst 172.18.0.10 -j SNAT --to-source 172.18.0.10 --random-fully',
    ]);
    expect(script(sim, 'eip-del', '172.18.0.10/16').exitCode).toBe(0);
    expect(sim.natRules().filter(hairpin)).toEqual([]);
  });

  it('1.16 warns on stderr, as the kernel does, when a class above 16mbit gets a big htb quantum', () => {
    const sim = gateway('1.16');
    const out = script(sim, 'eip-egress-qos-add', '172.18.0.10,1,20,1.5');
    expect([out.exitCode, out.stderr]).toEqual([
      0,
      'Warning: sch_htb: quantum of class 142B3 is big. Consider r2q change.\n',
    ]);
    expect(sim.tcClasses()).toEqual([
      '1:9999 rate 10Gbit ceil 10Gbit burst 0b',
      '1:42b3 rate 20Mbit ceil 20Mbit burst 1536Kb',
    ]);
  });

  it("1.16's class ids: a second address whose id is taken moves on by 3571; deleting its QoS also removes the first's (seen on the real script too)", () => {
    // 172.18.0.250 and 172.18.233.11 hash to the same class id (239·233 = 233·239).
    const sim = gateway('1.16');
    expect(script(sim, 'eip-egress-qos-add', '172.18.0.250,1,10,1').exitCode).toBe(0);
    expect(script(sim, 'eip-egress-qos-add', '172.18.233.11,2,10,1').exitCode).toBe(0);
    expect(sim.tcFilters().map((f) => [f.ip, f.classid])).toEqual([
      ['172.18.0.250', '1:1d27'],
      ['172.18.233.11', '1:2b1a'],
    ]);
    expect(script(sim, 'eip-egress-qos-del', '172.18.233.11').exitCode).toBe(0);
    expect(sim.tcFilters()).toEqual([]);
    expect(sim.tcClasses()).toEqual(['1:9999 rate 10Gbit ceil 10Gbit burst 0b']);
    // Both u32 prios stay listed, empty, as the kernel keeps one emptied beside another.
    expect(sim.exec(['tc', 'filter', 'show', 'dev', 'net1', 'parent', '1:']).stdout).toBe(
      [
        'filter protocol ip pref 1 u32 chain 0 ',
        'filter protocol ip pref 1 u32 chain 0 fh 800: ht divisor 1 ',
        'filter protocol ip pref 2 u32 chain 0 ',
        'filter protocol ip pref 2 u32 chain 0 fh 801: ht divisor 1 ',
        '',
      ].join('\n'),
    );
  });

  it('master inserts SNAT rules longest prefix first; 1.16 appends them', () => {
    const order = (release: KubeOvnRelease) => {
      const sim = gateway(release);
      script(sim, 'init');
      for (const cidr of ['10.0.0.0/16', '10.0.1.0/24', '10.0.0.0/8'])
        script(sim, 'snat-add', `172.18.0.10,${cidr}`);
      return sim
        .natRules()
        .filter((r) => r.startsWith('-A SHARED_SNAT'))
        .map((r) => r.split(' ')[3]);
    };
    expect(order('1.16')).toEqual(['10.0.0.0/16', '10.0.1.0/24', '10.0.0.0/8']);
    expect(order('master')).toEqual(['10.0.1.0/24', '10.0.0.0/16', '10.0.0.0/8']);
  });

  it('1.16+ refuses a floating IP whose EIP is bound elsewhere (exit 1, the rule on stdout); 1.15 says nothing', () => {
    for (const [release, exit] of [
      ['1.15', 0],
      ['1.16', 1],
    ] as const) {
      const sim = gateway(release);
      script(sim, 'init');
      script(sim, 'floating-ip-add', '172.18.0.10,10.0.1.5');
      const out = script(sim, 'floating-ip-add', '172.18.0.10,10.0.1.6');
      expect(out.exitCode, release).toBe(exit);
      if (exit)
        expect(out.stdout).toContain(
          'eip 172.18.0.10 already bindTo rule: -A EXCLUSIVE_DNAT -d 172.18.0.10/32 -j DNAT --to-destination 10.0.1.5, but expected internalIp 10.0.1.6',
        );
    }
  });

  it('only master keeps an argument with a space in it as one rule of a "$@" op', () => {
    for (const [release, left] of [
      ['1.16', []],
      ['master', ['172.18.0.11/16']],
    ] as const) {
      const sim = gateway(release);
      script(sim, 'init');
      script(sim, 'eip-add', '172.18.0.10/16', '172.18.0.11/16');
      // del_eip iterates over "$@": before master the joined words are two rules; on master the argument is one
      // rule, whose first field is the only address deleted.
      expect(script(sim, 'eip-del', '172.18.0.10/16 172.18.0.11/16').exitCode).toBe(0);
      expect(sim.net1Addresses().slice(1), release).toEqual(left);
    }
  });

  it('answers ops it does not simulate honestly instead of pretending', () => {
    const out = script(gateway('master'), 'nft-dnat-map-add', '172.18.0.10,80,tcp,10.0.1.5:80');
    expect([out.exitCode, out.stderr]).toEqual([
      70,
      'nat gateway simulator: nft-dnat-map-add is not simulated\n',
    ]);
  });

  it.each(KUBE_OVN_RELEASES.map((r) => [r]))(
    'MemoryGateway (%s) initialises its gateways as that release does, and takes its eip-add',
    async (release) => {
      const gw = new MemoryGateway({ release, net1: '172.18.0.254/24' });
      const pod = { name: 'vpc-nat-gw-gw1-0', namespace: 'kube-system', uid: 'u1' } as Parameters<
        MemoryGateway['run']
      >[0];
      const arg = before113(release) ? '172.18.0.10/24,172.18.0.1' : '172.18.0.10/24';
      await expect(gw.run(pod, 'eip-add', [arg])).resolves.toMatchObject({ stderr: '' });
      const sim = gw.sim(pod);
      expect(sim.release).toBe(release);
      expect(sim.net1Addresses()).toEqual(['172.18.0.254/24', '172.18.0.10/24']);
      expect(sim.defaultRoute()).toEqual({
        via: '172.18.0.1',
        dev: 'net1',
        ...(['1.16', 'master'].includes(release) && { onlink: true }),
      });
    },
  );
});
