/**
 * The pure parts of the network-namespace gateway (local/netns/): which commands it runs for real and which it
 * refuses, when a failure is only this kernel's lack of a tc module, how a pod's release and --gateway-scripts are
 * read, the pfifo copy, and what a pod object says about its network and start-up. How a pod's namespaces behave
 * with kube-ovn's real scripts is test/e2e/netns-gateway.test.ts; the CNI and controller facts here (routes
 * annotations, env, postStart, init execs) are kube-ovn's pod template and controller at each tag, as
 * local/netns/README.md lists them — that test checks the real scripts reach the documented states from them.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { judge, kernelLimited } from '../../local/netns/commands.js';
import { macOf, networkOf, podFacts } from '../../local/netns/facts.js';
import { ownerOf } from '../../local/netns/host.js';
import { controllerInitExecs, pfifoCopy, readScriptSet, releaseOfImage } from '../../local/netns/release.js';
import { netnsTestPod } from '../support/netns-pod.js';

const SCRIPT = '/kube-ovn/nat-gateway.sh';
const dirs: string[] = [];
const tmp = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'netns-unit-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('commands the network-namespace gateway runs', () => {
  it.each([
    [['bash', SCRIPT, 'eip-add', '172.18.0.10/16,172.18.0.1']],
    [['/bin/bash', '-c', `bash ${SCRIPT} eip-add 172.18.0.10/16 172.18.0.11/16`]],
    [['/bin/bash', '-c', `bash ${SCRIPT} init `]],
    [[SCRIPT, 'eip-del', '172.18.0.10/16']],
    [['ip', '-o', 'addr', 'show', 'dev', 'net1']],
    [['ip', 'route']],
    [['tc', '-p', 'filter', 'show', 'dev', 'net1', 'parent', 'ffff:']],
    [['iptables-legacy-save', '-t', 'nat']],
    [['sysctl', '-w', 'net.ipv4.ip_forward=1']],
    [['sysctl', '-n', 'net.ipv4.ip_forward']],
    [['cat', '/etc/kube-ovn/nat-gateway.env']],
  ])('runs %j as it is', (argv) => {
    expect(judge(argv)).toEqual({ kind: 'run', argv });
  });

  it('treats kill 1 as a container restart and signals nothing else', () => {
    expect(judge(['kill', '1'])).toEqual({ kind: 'restart' });
    expect(judge(['kill', '-9', '1'])).toEqual({ kind: 'restart' });
    expect(judge(['kill', '1234'])).toMatchObject({ kind: 'refuse', exitCode: 1 });
  });

  it.each([
    [['rm', '-rf', '/'], 127, 'command not found'],
    [['bash', '-c', 'rm -rf /'], 126, '-c is only run for'],
    [['bash', '-c', `bash ${SCRIPT} eip-add $(id)`], 126, 'plain words'],
    [['bash', '-c', `bash ${SCRIPT} eip-add 1.2.3.4/24; id`], 126, 'plain words'],
    [['bash', SCRIPT, 'eip-add', '1.2.3.4/24`id`'], 126, 'characters outside'],
    [['bash', '/tmp/other.sh'], 126, 'only /kube-ovn/nat-gateway.sh'],
    [['ip', 'netns', 'exec', 'x', 'id'], 126, 'object netns'],
    [['ip', '-n', 'other', 'addr'], 126, 'option -n'],
    [['ip', '-batch', '/tmp/x'], 126, 'option -batch'],
    [['ip', 'link', 'set', 'net1', 'netns', '1'], 126, 'netns is not allowed'],
    [['ip', 'vrf', 'exec', 'x', 'id'], 126, 'object vrf'],
    [['tc', 'exec', 'bpf'], 126, 'object exec'],
    [['iptables', '--modprobe=/tmp/x', '-L'], 126, '--modprobe'],
    [['sysctl', '-w', 'kernel.panic=1'], 126, 'only -w'],
    [['cat', '/etc/shadow'], 126, 'only files in /etc/kube-ovn'],
    [['cat', '/etc/kube-ovn/..'], 126, 'only files in /etc/kube-ovn'],
  ])('refuses %j (exit %i)', (argv, exitCode, why) => {
    const v = judge(argv);
    expect(v).toMatchObject({ kind: 'refuse', exitCode });
    expect(v.kind === 'refuse' && v.stderr).toContain(why);
  });
});

describe('an op limited by this kernel', () => {
  const failed = (cmd: string, message: string) => ({
    exitCode: 2,
    stderr: `${message}\nWe have an error talking to the kernel\nfailed to exec command "${cmd}"\n`,
  });

  it('is a tc command with police, fq_codel or matchall failing with the kernel message', () => {
    expect(
      kernelLimited(
        failed(
          'tc filter add dev net1 parent 1:0 protocol ip prio 1 u32 match ip src 1.2.3.4 police rate 1Mbit burst 1Mb drop flowid :1',
          'Error: Failed to load TC action module.',
        ),
      ),
    ).toBe('Error: Failed to load TC action module.');
    expect(
      kernelLimited(
        failed(
          'tc qdisc replace dev net1 parent 1:0x42b3 fq_codel',
          'Error: Specified qdisc kind is unknown.',
        ),
      ),
    ).toBe('Error: Specified qdisc kind is unknown.');
  });

  it('is not a success, another failure, or the message beside a failure of something else', () => {
    expect(kernelLimited({ exitCode: 0, stderr: 'Error: Failed to load TC action module.' })).toBeUndefined();
    expect(kernelLimited({ exitCode: 2, stderr: 'Error: Nexthop has invalid gateway.\n' })).toBeUndefined();
    expect(
      kernelLimited(failed('ip addr replace 1.2.3.4/24 dev net1', 'Error: Specified qdisc kind is unknown.')),
    ).toBeUndefined();
  });
});

describe('releases and scripts', () => {
  it.each([
    ['docker.io/kubeovn/vpc-nat-gateway:v1.12.4', '1.12'],
    ['kubeovn/vpc-nat-gateway:v1.15.0', '1.15'],
    ['registry:5000/kubeovn/vpc-nat-gateway:v1.16.2-x86', '1.16'],
    ['kubeovn/vpc-nat-gateway:master', 'master'],
    ['kubeovn/vpc-nat-gateway:v1.17.0', 'master'],
    ['kubeovn/vpc-nat-gateway:v1.11.9', undefined],
    ['kubeovn/vpc-nat-gateway', undefined],
    ['registry:5000/vpc-nat-gateway', undefined],
  ])('image %s is kube-ovn %s', (image, line) => {
    expect(releaseOfImage(image)).toBe(line);
  });

  it('maps each release line to the newest directory that starts with it', async () => {
    const root = tmp();
    for (const d of ['v1.12.4', 'v1.12.35', 'v1.13.0', '1.15', 'master', 'v1.16.0-empty']) {
      mkdirSync(join(root, d));
      if (!d.endsWith('-empty')) writeFileSync(join(root, d, 'nat-gateway.sh'), '#!/bin/bash\n');
    }
    const set = await readScriptSet(root);
    expect(set.dirs).toEqual({
      '1.12': join(root, 'v1.12.35'),
      '1.13': join(root, 'v1.13.0'),
      '1.15': join(root, '1.15'),
      master: join(root, 'master'),
    });
  });

  it('refuses a missing directory or one without scripts', async () => {
    await expect(readScriptSet(join(tmp(), 'nope'))).rejects.toThrow('ENOENT');
    await expect(readScriptSet(tmp())).rejects.toThrow('no readable <release>/nat-gateway.sh');
  });

  it("swaps only the HTB classes' fq_codel leaf for pfifo in a copy", async () => {
    const from = tmp();
    const text = [
      '# Add fq_codel as leaf qdisc',
      '        exec_cmd "tc qdisc replace dev $ifb_dev parent 1:$classid fq_codel"',
      '        exec_cmd "tc qdisc replace dev $dev parent 1:$classid fq_codel"',
      '',
    ].join('\n');
    writeFileSync(join(from, 'nat-gateway.sh'), text);
    const copy = await pfifoCopy(from, join(tmp(), 'copy'));
    expect(copy.changed).toBe(2);
    expect(readFileSync(join(copy.dir, 'nat-gateway.sh'), 'utf8')).toBe(
      text.replaceAll('$classid fq_codel"', '$classid pfifo"'),
    );
    expect(readFileSync(join(from, 'nat-gateway.sh'), 'utf8')).toBe(text);
  });

  it('sends each release controller init exec', () => {
    const facts = {
      serviceCidr: '10.96.0.0/12',
      lanGateway: '10.0.1.1',
      externalCidr: '172.18.0.0/16',
      externalGateway: '172.18.0.1',
    };
    expect(controllerInitExecs('1.12', facts)).toEqual([
      ['/bin/bash', '-c', `bash ${SCRIPT} init 10.96.0.0/12,10.0.1.1`],
      ['/bin/bash', '-c', `bash ${SCRIPT} ext-subnet-route-add 172.18.0.0/16,172.18.0.1`],
    ]);
    expect(controllerInitExecs('1.14', facts)).toEqual([['/bin/bash', '-c', `bash ${SCRIPT} init `]]);
    expect(controllerInitExecs('master', facts)).toEqual([['bash', SCRIPT, 'init']]);
  });

  it('names namespaces after the owning process', () => {
    expect(ownerOf('eipgw-4242-1-3-ext')).toEqual({ base: 'eipgw-4242-1', pid: 4242 });
    expect(ownerOf('eipgw-4242-1')).toEqual({ base: 'eipgw-4242-1', pid: 4242 });
    expect(ownerOf('eipgw-x-1')).toBeUndefined();
    expect(ownerOf('t16')).toBeUndefined();
  });
});

describe('what a gateway pod says about its network', () => {
  const options = { defaultRelease: '1.12' as const, serviceCidr: '10.96.0.0/12' };

  it('1.12: eth0 keeps the default route, init container and controller init as declared', () => {
    const f = podFacts(netnsTestPod({ name: 'p', line: '1.12', tag: 'v1.12.35' }), options);
    expect(f.release).toBe('1.12');
    expect(f.routes).toEqual({ eth0: [{ dst: '0.0.0.0/0', gw: '10.0.1.1' }], net1: [] });
    expect(f.initContainers).toEqual([['bash', '-c', `bash ${SCRIPT} init 10.96.0.0/12,10.0.1.1`]]);
    expect(f.env).toEqual({});
    expect(f.postStart).toBeUndefined();
    expect(f.net1).toEqual({
      address: '172.18.0.254/16',
      gateway: '172.18.0.1',
      cidr: '172.18.0.0/16',
      mac: '02:00:00:12:00:fe',
    });
  });

  it("1.13+: the routes annotations, and net1's default route replaces eth0's", () => {
    const f = podFacts(netnsTestPod({ name: 'p', line: '1.13', tag: 'v1.13.0' }), options);
    expect(f.routes).toEqual({
      eth0: [{ dst: '10.96.0.0/12', gw: '10.0.1.1' }],
      net1: [{ dst: '0.0.0.0/0', gw: '172.18.0.1' }],
    });
    expect(f.initContainers).toEqual([]);
  });

  it('1.15+: the container env and postStart hook as declared, or as the release declares them', () => {
    const declared = podFacts(netnsTestPod({ name: 'p', line: '1.15', tag: 'v1.15.0' }), options);
    expect(declared.env).toEqual({ GATEWAY_V4: '172.18.0.1', GATEWAY_V6: '' });
    expect(declared.postStart).toEqual(['sysctl', '-w', 'net.ipv4.ip_forward=1']);
    // A 1.12-shaped pod under a 1.16 image tag: what kube-ovn 1.16's controller would have written.
    const shaped = netnsTestPod({ name: 'p', line: '1.12', tag: 'v1.16.0' });
    const f = podFacts(shaped, options);
    expect(f.release).toBe('1.16');
    expect(f.env).toEqual({ GATEWAY_V4: '172.18.0.1', GATEWAY_V6: '' });
    expect(f.postStart).toEqual(['sysctl', '-w', 'net.ipv4.ip_forward=1']);
    expect(f.routes.net1).toEqual([{ dst: '0.0.0.0/0', gw: '172.18.0.1' }]);
  });

  it('uses the default release for an image without a vX.Y tag', () => {
    const pod = netnsTestPod({ name: 'p', line: '1.12', tag: 'latest' });
    expect(podFacts(pod, { ...options, defaultRelease: '1.14' })).toMatchObject({
      release: '1.14',
      releaseFromImage: false,
    });
  });

  it('refuses a pod whose addresses, routes or env are not plain addresses', () => {
    const pod = netnsTestPod({ name: 'p', line: '1.13', tag: 'v1.13.0' });
    pod.metadata.annotations['ovn.kubernetes.io/routes'] = '[{"dst":"10.96.0.0/12;id","gw":"10.0.1.1"}]';
    expect(() => podFacts(pod, options)).toThrow('is not an IPv4 destination');
    const other = netnsTestPod({ name: 'p', line: '1.13', tag: 'v1.13.0' });
    other.metadata.annotations['ovn.kubernetes.io/gateway'] = '10.0.1.1 dev lo';
    expect(() => podFacts(other, options)).toThrow('ovn.kubernetes.io/gateway');
    const env = netnsTestPod({ name: 'p', line: '1.15', tag: 'v1.15.0' });
    env.spec.containers[0]!.env![0]!.value = '172.18.0.1 dev lo';
    expect(() => podFacts(env, options)).toThrow('env GATEWAY_V4 is "172.18.0.1 dev lo", not an address');
  });

  it('takes a MAC from the annotation, else one derived from the pod name, stable and locally administered', () => {
    expect(macOf('02:00:00:12:00:FE', 'x')).toBe('02:00:00:12:00:fe');
    expect(macOf('01:00:5e:00:00:01', 'x')).toBe(macOf(undefined, 'x'));
    expect(macOf(undefined, 'kube-system/p/net1')).toMatch(/^0a(:[0-9a-f]{2}){5}$/);
    expect(macOf(undefined, 'kube-system/p/net1')).toBe(macOf(undefined, 'kube-system/p/net1'));
    expect(networkOf('172.18.0.254/16')).toBe('172.18.0.0/16');
    expect(networkOf('10.0.1.254/0')).toBe('0.0.0.0/0');
  });
});
