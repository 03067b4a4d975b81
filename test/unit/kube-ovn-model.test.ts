/**
 * The pure parts of the lab's model of kube-ovn-controller (ADR 0097), against what kube-ovn's sources say:
 * client-go's ItemExponentialFailureRateLimiter and BucketRateLimiter as kube-ovn combines them in custCrdRateLimiter
 * (pkg/controller/controller.go, every release: 1 s → 20 s per key, 10/s with a burst of 100), client-go's work queue
 * folding, kube-ovn's IPAM (pkg/ipam/subnet.go: lowest free, excludeIps reserved but a static address there
 * recorded, conflicts, the released list), and the per-release facts (command form, eip-add rule, finalizer).
 */
import { describe, expect, it } from 'vitest';
import { KubeOvnSubnetIpam } from '../../local/controllers/kube-ovn-ipam.js';
import { releaseFacts } from '../../local/controllers/kube-ovn-release.js';
import {
  BucketLimiter,
  custCrdRateLimiter,
  ItemExponentialLimiter,
  RateLimitedQueue,
} from '../../local/controllers/kube-ovn-workqueue.js';

describe("kube-ovn's rate limiter", () => {
  it('doubles per key from 1 s to 20 s, and forgets on success', () => {
    const l = new ItemExponentialLimiter(1000, 20_000);
    expect([1, 2, 3, 4, 5, 6, 7].map(() => l.when('a'))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 20_000, 20_000,
    ]);
    expect(l.when('b')).toBe(1000);
    l.forget('a');
    expect(l.when('a')).toBe(1000);
  });

  it('lets 100 through at once, then 10 per second, and takes the larger of both', () => {
    let now = 0;
    const b = new BucketLimiter(10, 100, () => now);
    const first = Array.from({ length: 100 }, () => b.when());
    expect(first.every((d) => d === 0)).toBe(true);
    expect(b.when()).toBeCloseTo(100);
    expect(b.when()).toBeCloseTo(200);
    now = 10_000; // ten seconds: the bucket refills to its burst
    expect(b.when()).toBe(0);
    const c = custCrdRateLimiter();
    expect(c.when('x')).toBe(1000);
    expect(c.retries('x')).toBe(1);
  });
});

describe("client-go's work queue", () => {
  it('folds a key added while it waits, and handles a key added while in hand once more afterwards', async () => {
    const seen: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const q = new RateLimitedQueue(
      'test',
      custCrdRateLimiter(),
      async (k) => {
        seen.push(k);
        if (seen.length === 1) await gate;
      },
      () => {},
    );
    q.add('a');
    await new Promise((r) => setTimeout(r, 10));
    q.add('a'); // in hand: dirty, handled again after
    q.add('a'); // folded
    q.add('b');
    release();
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual(['a', 'b', 'a']);
    await q.stop();
  });
});

describe("kube-ovn's IPAM", () => {
  const ipam = () =>
    new KubeOvnSubnetIpam('ext', '172.18.0.0/24', '172.18.0.1', [
      '172.18.0.2..172.18.0.10',
      '172.18.0.200..172.18.0.250',
    ]);

  it('hands out the lowest free address outside excludeIps, the same one again for the same NIC', () => {
    const i = ipam();
    expect(i.random('e1', 'e1.nic')).toBe('172.18.0.11');
    expect(i.random('e1', 'e1.nic')).toBe('172.18.0.11');
    expect(i.random('e2', 'e2.nic')).toBe('172.18.0.12');
  });

  it('records a static address inside excludeIps instead of refusing it; refuses one another owner holds or outside the CIDR', () => {
    const i = ipam();
    expect(i.static('e1', 'e1', '172.18.0.201')).toBe('172.18.0.201');
    expect(i.held()).toEqual([{ address: '172.18.0.201', owner: 'e1', reserved: true }]);
    expect(() => i.static('e2', 'e2', '172.18.0.201')).toThrow(/AddressConflict/);
    expect(() => i.static('e2', 'e2', '10.0.0.1')).toThrow(/AddressOutOfRange/);
    expect(() => i.static('e3', 'e3', '')).toThrow(/failed to parse ip/);
  });

  it('puts a released address on the released list, handed out only once the free pool is empty', () => {
    const i = new KubeOvnSubnetIpam('ext', '172.18.0.0/29', '172.18.0.1', []);
    expect(i.random('a', 'a')).toBe('172.18.0.2');
    i.release('a');
    expect(['b', 'c', 'd', 'e'].map((n) => i.random(n, n))).toEqual([
      '172.18.0.3',
      '172.18.0.4',
      '172.18.0.5',
      '172.18.0.6',
    ]);
    expect(i.random('f', 'f')).toBe('172.18.0.2');
    expect(() => i.random('g', 'g')).toThrow(/NoAvailableAddress/);
  });
});

describe('release facts', () => {
  it("1.12's shell form, eip-add rule with the gateway and legacy finalizer; master's argv; 1.13+'s rule and name", () => {
    const r112 = releaseFacts('1.12');
    expect(r112.command('eip-add', ['1.2.3.4/24,1.2.3.1'])).toEqual([
      '/bin/bash',
      '-c',
      'bash /kube-ovn/nat-gateway.sh eip-add 1.2.3.4/24,1.2.3.1',
    ]);
    expect(r112.eipAddRule('1.2.3.4', 24, '1.2.3.1')).toBe('1.2.3.4/24,1.2.3.1');
    expect(r112.finalizer).toBe('kube-ovn-controller');
    expect(r112.migratesFinalizers).toBe(false);
    const r116 = releaseFacts('1.16');
    expect(r116.command('eip-add', ['1.2.3.4/24'])[0]).toBe('/bin/bash');
    expect(r116.eipAddRule('1.2.3.4', 24, '1.2.3.1')).toBe('1.2.3.4/24');
    expect(r116.finalizer).toBe('kubeovn.io/kube-ovn-controller');
    expect(releaseFacts('master').command('eip-add', ['1.2.3.4/24'])).toEqual([
      'bash',
      '/kube-ovn/nat-gateway.sh',
      'eip-add',
      '1.2.3.4/24',
    ]);
  });

  // Read from each tag: processNextWorkItem in pkg/controller/vpc_nat_gw_eip.go (v1.12.35) and
  // pkg/controller/controller.go (v1.13.0 … master), execNatGwRules in pkg/controller/vpc_nat_gateway.go, and the
  // StatusError client-go's SPDY upgrade returns for a refused exec (its message is the Status message).
  it('the error lines kube-ovn logs for a failed sync and a refused or failing gateway command, per release', () => {
    const refused =
      "pods \"vpc-nat-gw-gw1-0\" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'p' denied request: no";
    expect(releaseFacts('1.12').syncError('add iptables eip', 'e1', 'x')).toBe(
      "error syncing 'e1': x, requeuing",
    );
    expect(releaseFacts('1.13').syncError('add iptables eip', 'e1', 'x')).toBe(
      'error syncing add iptables eip "e1": x, requeuing',
    );
    expect(releaseFacts('1.14').execErrorLines(refused, '', false)).toEqual([refused]);
    expect(releaseFacts('1.15').execErrorLines(refused, '', false)).toEqual([
      `NAT gateway command execution error: ${refused}`,
    ]);
    expect(releaseFacts('1.12').execErrorLines('command terminated with exit code 1', 'boom', false)).toEqual(
      ['failed to ExecuteCommandInContainer, errOutput: boom', 'command terminated with exit code 1'],
    );
    expect(
      releaseFacts('master').execErrorLines('command terminated with exit code 1', 'boom', false),
    ).toEqual([
      'NAT gateway command failed - stderr: boom',
      'NAT gateway command execution error: command terminated with exit code 1',
    ]);
    expect(releaseFacts('1.16').execErrorLines('boom', 'boom', true)).toEqual([
      'failed to ExecuteCommandInContainer errOutput: boom',
    ]);
  });
});
