/**
 * Gateway work batched and serialised per pod (ADR 0110): calls that wait together go out as one exec, each rule
 * gets what its own call would have given (checked against the simulated nat-gateway.sh of the release, whose
 * per-rule loop and exit-on-first-failure follow kube-ovn's scripts: test/unit/natgw-releases.test.ts), and two
 * containers never exec into one pod at once.
 */
import { describe, expect, it } from 'vitest';
import { ExternalSegment, NatGatewaySim } from '../../local/natgw/sim.js';
import { GatewayBatcher } from '../../shared/core/batch.js';
import { settleRules } from '../../shared/core/batch-settle.js';
import type { Invocation } from '../../shared/core/invocation.js';
import { operations } from '../../shared/core/operations.js';
import { DIALECTS } from '../../shared/domain/dialect/index.js';
import { ClusterUnavailableError, GatewayCommandError, LeaseHeldError } from '../../shared/domain/errors.js';
import { chunkArgs, ruleNamedBy } from '../../shared/domain/nat-gateway-batch.js';
import type { Deps, ExecResult, Gateway } from '../../shared/ports.js';
import { type World, world } from '../support/world.js';

const SCRIPT = '/kube-ovn/nat-gateway.sh';

/** One simulated 1.12 gateway, initialised as its init container does, exec'd the way the Gateway port reports. */
function gateway112(segment?: ExternalSegment) {
  const sim = new NatGatewaySim({ release: '1.12', ...(segment && { segment }) });
  const init = sim.exec(['bash', SCRIPT, 'init', '10.96.0.0/12,10.0.1.1']);
  if (init.exitCode !== 0) throw new Error(init.stderr);
  const execs: string[][] = [];
  const exec =
    (op: string) =>
    async (args: readonly string[]): Promise<ExecResult> => {
      execs.push([...args]);
      const out = sim.exec(['bash', SCRIPT, op, ...args]);
      if (out.exitCode !== 0)
        throw new GatewayCommandError(`exit ${out.exitCode}`, out.exitCode, out.stdout, out.stderr);
      return { stdout: out.stdout, stderr: out.stderr };
    };
  return { sim, exec, execs };
}

const adds = (n: number, from = 10) =>
  Array.from({ length: n }, (_, i) => `172.18.0.${from + i}/24,172.18.0.1`);

describe('a batch: every rule gets what its own call would have given', () => {
  it('a clean batch is one exec, and the rules are all configured', async () => {
    const g = gateway112();
    const out = await settleRules(g.exec('eip-add'), adds(20), DIALECTS['1.12']);
    expect([...out.values()].every((o) => o.ok)).toBe(true);
    expect(g.execs).toHaveLength(1);
    expect(g.sim.net1Addresses()).toHaveLength(20);
  });

  it('a refused rule in the middle (duplicate address detection answered on 1.12) spoils nothing else', async () => {
    const segment = new ExternalSegment();
    segment.addHost('172.18.0.17');
    const g = gateway112(segment);
    const out = await settleRules(g.exec('eip-add'), adds(20), DIALECTS['1.12']);
    const failed = [...out].filter(([, o]) => !o.ok).map(([a]) => a);
    expect(failed).toEqual(['172.18.0.17/24,172.18.0.1']);
    const e = (out.get(failed[0]!) as { error: GatewayCommandError }).error;
    expect(e.stderr).toMatch(/failed to exec command "arping -I net1 -c 3 -D 172.18.0.17 ?"/);
    // Its own call's output: only its own rule's lines.
    expect(e.stdout).not.toContain('172.18.0.16');
    // The batch, the refused rule alone, the rest of the batch.
    expect(g.execs.map((x) => x.length)).toEqual([20, 1, 12]);
    // 1.12 leaves a refused address configured (a half-failed eip-add), as its own call does.
    expect(g.sim.net1Addresses()).toHaveLength(20);
  });

  it('a failure that names no rule is split in halves down to the rule, the rest is untouched', async () => {
    const args = adds(16);
    const bad = args[11]!;
    const execs: number[] = [];
    const exec = async (a: readonly string[]): Promise<ExecResult> => {
      execs.push(a.length);
      if (a.includes(bad))
        throw new GatewayCommandError('exit 2', 2, '', 'RTNETLINK answers: something odd\n');
      return { stdout: '', stderr: '' };
    };
    const out = await settleRules(exec, args, DIALECTS['1.12']);
    expect([...out].filter(([, o]) => !o.ok).map(([a]) => a)).toEqual([bad]);
    expect(out.size).toBe(16);
    // 16 → 8 (clean) + 8 → 4 + 4 (clean) → 2 + 2 (clean) → 1 + 1 (clean): a bounded number of execs.
    expect(execs.length).toBeLessThanOrEqual(2 * Math.ceil(Math.log2(16)) + 1);
  });

  it('a failure of the whole call (the gateway not initialised yet) fails every rule at once, retryable', async () => {
    const execs: number[] = [];
    const exec = async (a: readonly string[]): Promise<ExecResult> => {
      execs.push(a.length);
      throw new GatewayCommandError('exit 1', 1, '', 'nat gateway not initialized\n');
    };
    const out = await settleRules(exec, adds(50), DIALECTS['1.12']);
    expect(execs).toEqual([50]);
    expect([...out.values()].every((o) => !o.ok && o.error instanceof GatewayCommandError)).toBe(true);
  });

  it('a request too large for something on the way (431) is split until it passes', async () => {
    const sizes: number[] = [];
    const exec = async (a: readonly string[]): Promise<ExecResult> => {
      sizes.push(a.length);
      if (a.length > 10) throw new ClusterUnavailableError('exec: Unexpected server response: 431', 431);
      return { stdout: '', stderr: '' };
    };
    const out = await settleRules(exec, adds(40), DIALECTS['1.12']);
    expect([...out.values()].every((o) => o.ok)).toBe(true);
    expect(sizes).toEqual([40, 20, 10, 10, 20, 10, 10]);
  });

  it('no exit status (a lost stream): every rule fails with it, nothing is repeated', async () => {
    let execs = 0;
    const exec = async (): Promise<ExecResult> => {
      execs++;
      throw new GatewayCommandError('stream lost', undefined, '', '');
    };
    const out = await settleRules(exec, adds(8), DIALECTS['1.12']);
    expect(execs).toBe(1);
    expect([...out.values()].every((o) => !o.ok)).toBe(true);
  });

  it('exit 0 with a failed command in a subshell the script went on after: each rule ends with its own answer', async () => {
    const args = ['172.18.0.10', '172.18.0.11', '172.18.0.12', '172.18.0.13'];
    // The 1.12–1.15 QoS delete runs tc filter del in a pipeline's subshell: its failure does not stop the script.
    const exec = async (a: readonly string[]): Promise<ExecResult> => {
      if (a.length === 1 && a[0] === '172.18.0.12')
        throw new GatewayCommandError(
          'exit 2',
          2,
          '',
          'failed to exec command "tc filter del dev net1 parent ffff: protocol ip prio 1 handle 800::800 u32"\n',
        );
      const masked = a.includes('172.18.0.12')
        ? 'failed to exec command "tc filter del dev net1 parent ffff: protocol ip prio 1 handle 800::800 u32"\n'
        : '';
      return { stdout: '', stderr: masked };
    };
    const out = await settleRules(exec, args, DIALECTS['1.12']);
    expect([...out].filter(([, o]) => !o.ok).map(([a]) => a)).toEqual(['172.18.0.12']);
  });
});

describe('the pieces', () => {
  it('a failed command names a rule by its whole address only', () => {
    const args = ['172.18.0.5/24', '172.18.0.50/24'];
    expect(ruleNamedBy('arping -I net1 -c 3 -D 172.18.0.50', args)).toBe(1);
    expect(ruleNamedBy('ip addr replace 172.18.0.5/24 dev net1', args)).toBe(0);
    expect(ruleNamedBy('ip route replace default via 172.18.0.1 dev net1', args)).toBe(-1);
  });

  it('chunks keep every argument once, in order, within the bytes and count given', () => {
    const args = adds(100);
    const chunks = chunkArgs(args, 300, 7);
    expect(chunks.flat()).toEqual(args);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(7);
    expect(chunkArgs(args, 300, 1000).every((c) => c.join('&command=').length < 300)).toBe(true);
  });
});

/** Adds `names` at once, as a bridge with that many deliveries in flight would. */
async function addAll(w: World, names: string[], spec: Record<string, string> = {}, deps: Deps = w.deps) {
  for (const n of names) w.eip(n, spec);
  return Promise.all(
    names.map((n) => {
      const inv: Invocation = {
        event: w.event('add', n, 'added'),
        signal: new AbortController().signal,
        deadline: w.clock.now() + 60_000,
        log: w.log,
      };
      return operations.add(inv, deps);
    }),
  );
}

describe('a burst on one gateway is coalesced', () => {
  it('20 adds at once: every one Ready, in far fewer execs than calls', async () => {
    const w = world();
    w.qos(
      'q',
      [
        { name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '10' },
        { name: 'out', direction: 'egress', priority: 2, rateMax: '20', burstMax: '20' },
      ],
      { shared: true },
    );
    const names = Array.from({ length: 20 }, (_, i) => `e${i}`);
    const out = await addAll(w, names, { qosPolicy: 'q' });
    expect(out.every((o) => o.status === 'applied')).toBe(true);
    expect(w.net1()).toHaveLength(20);
    expect(w.tc()).toHaveLength(40);
    // 60 calls (eip-add and two QoS adds each) in a handful of execs, every rule sent once.
    expect(w.gateway.calls.length).toBeLessThan(10);
    expect(w.gateway.calls.flatMap((c) => c.args)).toHaveLength(60);
    // No gateway lease left behind once the invocations are done.
    expect([...w.leases.held.keys()].filter((k) => k.startsWith('pod#'))).toEqual([]);
  });
});

/** A Gateway adapter of its own (another container's) in front of the shared simulated pod, counting overlaps. */
interface Track {
  running: number;
  max: number;
  /** Execs in the pod per container right now, and the most containers seen in it at once. */
  by: Map<string, number>;
  maxContainers: number;
}
const newTrack = (): Track => ({ running: 0, max: 0, by: new Map(), maxContainers: 0 });

function containerGateway(shared: Gateway, track: Track, name = 'a', delayMs = 2): Gateway {
  return {
    async run(pod, op, args, signal, options) {
      track.running++;
      track.max = Math.max(track.max, track.running);
      track.by.set(name, (track.by.get(name) ?? 0) + 1);
      track.maxContainers = Math.max(track.maxContainers, track.by.size);
      try {
        await new Promise((r) => setTimeout(r, delayMs));
        return await shared.run(pod, op, args, signal, options);
      } finally {
        track.running--;
        const left = track.by.get(name)! - 1;
        if (left === 0) track.by.delete(name);
        else track.by.set(name, left);
      }
    },
  };
}

describe('two containers never exec into one pod at once', () => {
  it('adds spread over two containers: at most one container execs in the pod at any time, all Ready', async () => {
    const w = world();
    const track = newTrack();
    let ids = 0;
    const container = (name: string): Deps => ({
      ...w.deps,
      gateway: containerGateway(w.gateway, track, name),
      newId: () => `${name}-${++ids}`,
    });
    const a = container('a');
    const b = container('b');
    const names = Array.from({ length: 24 }, (_, i) => `e${i}`);
    for (const n of names) w.eip(n);
    const run = (n: string, deps: Deps) =>
      operations.add(
        {
          event: w.event('add', n, 'added'),
          signal: new AbortController().signal,
          deadline: w.clock.now() + 60_000,
          log: w.log,
        },
        deps,
      );
    const out = await Promise.all(names.map((n, i) => run(n, i % 2 ? a : b)));
    expect(out.every((o) => o.status === 'applied')).toBe(true);
    expect(track.maxContainers).toBe(1);
    // The holder spreads long work (eip-add waits for arping) over at most its lanes (ADR 0125).
    expect(track.max).toBeLessThanOrEqual(8);
    expect(w.net1()).toHaveLength(24);
    expect([...w.leases.held.keys()].filter((k) => k.startsWith('pod#'))).toEqual([]);
  });

  it('a container waiting for a pod another holds gives up at its deadline with a retryable error', async () => {
    const w = world();
    await w.leases.acquire('pod#kube-system/vpc-nat-gw-gw1-0', 'someone-else', w.clock.now() + 60_000);
    w.eip('e');
    const batcher = new GatewayBatcher(w.deps);
    const inv: Invocation = {
      event: w.event('add', 'e', 'added'),
      signal: new AbortController().signal,
      deadline: w.clock.now() + 50,
      log: w.log,
    };
    // The manual clock does not move by itself: move it while the batcher waits.
    const ticker = setInterval(() => w.clock.advance(20), 5);
    try {
      await expect(
        batcher.exec(inv, w.pod(), { op: 'eip-add', args: ['172.18.0.9/24,172.18.0.1'] }, DIALECTS['1.12']),
      ).rejects.toBeInstanceOf(LeaseHeldError);
    } finally {
      clearInterval(ticker);
    }
    expect(w.gateway.calls).toEqual([]);
  });
});

describe('long work spread over a few execs at once (ADR 0125)', () => {
  const adds = async (w: World, deps: Deps, n: number, from = 0) => {
    const names = Array.from({ length: n }, (_, i) => `e${from + i}`);
    for (const name of names) w.eip(name);
    const out = await Promise.allSettled(
      names.map((name) =>
        operations.add(
          {
            event: w.event('add', name, 'added'),
            signal: new AbortController().signal,
            deadline: w.clock.now() + 60_000,
            log: w.log,
          },
          deps,
        ),
      ),
    );
    return out.map((o) => (o.status === 'fulfilled' ? o.value.status : `failed: ${String(o.reason)}`));
  };

  it("a container's 24 eip-adds, each waiting seconds for arping, go out as a few batches at once, at most its lanes", async () => {
    const w = world();
    const track = newTrack();
    const deps: Deps = { ...w.deps, gateway: containerGateway(w.gateway, track), batching: { lanes: 4 } };
    const out = await adds(w, deps, 24);
    expect(out.every((o) => o === 'applied')).toBe(true);
    expect(w.net1()).toHaveLength(24);
    const execs = w.gateway.calls.filter((c) => c.op === 'eip-add');
    expect(execs.length).toBeLessThan(24);
    expect(track.max).toBeGreaterThan(1);
    expect(track.max).toBeLessThanOrEqual(4);
  });

  it('with one lane, one exec at a time', async () => {
    const w = world();
    const track = newTrack();
    const deps: Deps = { ...w.deps, gateway: containerGateway(w.gateway, track), batching: { lanes: 1 } };
    const out = await adds(w, deps, 24);
    expect(out.every((o) => o === 'applied')).toBe(true);
    expect(w.net1()).toHaveLength(24);
    expect(track.max).toBe(1);
  });

  it('a pod whose iptables will not wait for the xtables lock gets one exec at a time from then on', async () => {
    const w = world();
    const track = newTrack();
    let refused = 0;
    // iptables before 1.8.9 without -w: a second run while one holds the lock exits 4 at once.
    const inner = containerGateway(w.gateway, track);
    const lockless: Gateway = {
      async run(pod, op, args, signal, options) {
        if (track.running > 0) {
          refused++;
          const stderr =
            'Another app is currently holding the xtables lock. Perhaps you want to use the -w option?\n';
          throw new GatewayCommandError('exit 4', 4, '', stderr);
        }
        return inner.run(pod, op, args, signal, options);
      },
    };
    const deps: Deps = { ...w.deps, gateway: lockless, batching: { lanes: 4 } };
    const first = await adds(w, deps, 24);
    expect(first.some((o) => o.startsWith('failed: GatewayCommandError'))).toBe(true);
    expect(refused).toBeGreaterThan(0);
    // A refused rule's EIP failed retryably; its next update (the bridge's retry) configures it.
    for (let i = 0; i < 24; i++)
      if (w.get(`e${i}`)?.status?.ready !== true) await w.run('update', `e${i}`, 'resync');
    expect(w.net1()).toHaveLength(24);
    const before = refused;
    const second = await adds(w, deps, 24, 24);
    expect(refused).toBe(before);
    expect(second.every((o) => o === 'applied')).toBe(true);
    expect(w.net1()).toHaveLength(48);
  });
});
