/**
 * The core on each gateway's dialect (docs/compatibility.md): which refusals end an EIP's retries and what its
 * condition and Event then say, and which dialect a gateway gets — the override annotation, the pod's markers, the
 * gateway's own state, KUBE_OVN_RELEASE — or why none. Refusals are the recorded output of kube-ovn's own scripts
 * (test/fixtures/gateway-runs/), injected at the Gateway port of the in-memory world, whose gateway speaks 1.12.
 */
import { describe, expect, it } from 'vitest';
import { simulatedTemplate } from '../../local/memory/world.js';
import { RELEASE_ANNOTATION } from '../../shared/domain/dialect/index.js';
import { GatewayCommandError } from '../../shared/domain/errors.js';
import type { GatewayPodTemplate } from '../../shared/domain/gateway-pod.js';
import type { NatGwOp } from '../../shared/ports.js';
import { type Recorded, step } from '../support/gateway-runs.js';
import { GW, type World, world } from '../support/world.js';

const condition = (w: World, name: string, type: string) =>
  w.get(name)?.status?.conditions?.find((c) => c.type === type);

/** The next call of `op` fails exactly as the recorded step did. */
function failAsRecorded(w: World, release: Recorded, name: string): void {
  const s = step(release, name);
  w.gateway.failNext(1, {
    op: s.argv[2] as NatGwOp,
    exitCode: s.exitCode,
    stdout: s.stdout,
    stderr: s.stderr,
  });
}

function withTemplate(w: World, template: Partial<GatewayPodTemplate>): void {
  const pod = w.pod();
  pod.template = { env: {}, initRunsScript: false, routes: {}, ...template };
}

function annotate(w: World, release: string): void {
  const gw = w.cluster.gateways.get(GW)!;
  gw.metadata.annotations = { ...gw.metadata.annotations, [RELEASE_ANNOTATION]: release };
}

describe('a refusal the gateway will always give', () => {
  it('the other eip-add form (1.13 refusing the 1.12 one) ends in a condition and an Event naming the command and the message, retried only with a backoff', async () => {
    const w = world();
    w.eip('eip-a');
    failAsRecorded(w, 'v1.13.0', 'eip-add in the other release form');
    const outcome = await w.run('add', 'eip-a');
    expect(outcome).toMatchObject({ status: 'rejected', code: 'GatewayBlocked' });
    expect(outcome.status === 'rejected' && outcome.retryAfterMs).toBeGreaterThan(0);
    const ready = condition(w, 'eip-a', 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'GatewayBlocked' });
    expect(ready?.message).toContain('refused nat-gateway.sh eip-add 172.18.0.2/24,172.18.0.1');
    expect(ready?.message).toContain(
      'Error: any valid prefix is expected rather than "172.19.0.40/24,172.19.0.1".',
    );
    expect(ready?.message).toContain(`check annotation ${RELEASE_ANNOTATION}`);
    expect(w.cluster.events.map((e) => [e.reason, e.message])).toContainEqual([
      'GatewayBlocked',
      ready?.message,
    ]);
  });

  it('a malformed value tc refuses (recorded on 1.13) is GatewayRefused, never retried', async () => {
    const w = world();
    w.qos('q', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '1' }]);
    w.eip('eip-a', { qosPolicy: 'q' });
    failAsRecorded(w, 'v1.13.0', 'ingress QoS with a malformed priority');
    const outcome = await w.run('add', 'eip-a');
    expect(outcome).toMatchObject({ status: 'rejected', code: 'GatewayRefused' });
    expect(outcome).not.toHaveProperty('retryAfterMs');
    const qos = condition(w, 'eip-a', 'QoSApplied');
    expect(qos).toMatchObject({ status: 'False', reason: 'GatewayRefused' });
    expect(qos?.message).toContain('nat-gateway.sh eip-ingress-qos-add 172.18.0.2,1,10,1');
    expect(qos?.message).toContain('Error: argument "first" is wrong: invalid priority value');
    expect(condition(w, 'eip-a', 'Ready')).toMatchObject({ status: 'True' });
  });

  it('another host answering for the address (1.12 duplicate address detection) is GatewayBlocked: it may clear', async () => {
    const w = world();
    w.eip('eip-a');
    failAsRecorded(w, 'v1.12.35', 'eip-add of an address another host holds');
    const outcome = await w.run('add', 'eip-a');
    expect(outcome).toMatchObject({ status: 'rejected', code: 'GatewayBlocked' });
    expect(condition(w, 'eip-a', 'Ready')?.message).toContain('(address-in-use, exit 1)');
    // Once the other host is gone, the retry configures it.
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
  });

  it('a missing net1 (tc prints refusal-like lines after it) and a lost stream stay retryable', async () => {
    const w = world();
    w.qos('q', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '1' }]);
    w.eip('eip-a', { qosPolicy: 'q' });
    failAsRecorded(w, 'v1.13.0', 'eip-add without net1');
    await expect(w.run('add', 'eip-a')).rejects.toBeInstanceOf(GatewayCommandError);
    failAsRecorded(w, 'v1.13.0', 'QoS without net1');
    await expect(w.run('add', 'eip-a')).rejects.toBeInstanceOf(GatewayCommandError);
    w.gateway.failNext(1, {
      op: 'eip-ingress-qos-add',
      exitCode: null,
      stderr: 'Error: argument "x" is wrong',
    });
    await expect(w.run('add', 'eip-a')).rejects.toBeInstanceOf(GatewayCommandError);
    expect(w.cluster.events.filter((e) => e.reason.startsWith('Gateway'))).toEqual([]);
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied' });
    expect(w.tc().map((f) => f.ip)).toEqual(['172.18.0.2']);
  });
});

describe('which dialect a gateway gets', () => {
  it('an override naming a release the product does not speak is refused before anything is held, naming it', async () => {
    const w = world();
    annotate(w, '1.9');
    w.eip('eip-a');
    const outcome = await w.run('add', 'eip-a');
    expect(outcome).toMatchObject({ status: 'rejected', code: 'UnsupportedGatewayRelease' });
    expect(outcome.status === 'rejected' && outcome.retryAfterMs).toBeGreaterThan(0);
    const ready = condition(w, 'eip-a', 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'UnsupportedGatewayRelease' });
    expect(ready?.message).toContain(`annotation ${RELEASE_ANNOTATION} on VpcNatGateway ${GW}`);
    expect(ready?.message).toContain('kube-ovn 1.9 is not supported');
    expect(w.ipam.allocations.size).toBe(0);
    expect(w.gateway.calls).toEqual([]);
    // Corrected, the retry configures it.
    annotate(w, 'v1.12.35');
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
  });

  it('a custom image tag with markers that contradict each other is refused, naming the image and the markers', async () => {
    const w = world();
    withTemplate(w, {
      image: 'registry.example/natgw:prod',
      initRunsScript: true,
      env: { GATEWAY_V4: '172.18.0.1' },
    });
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a')).toMatchObject({
      status: 'rejected',
      code: 'UnsupportedGatewayRelease',
    });
    const message = condition(w, 'eip-a', 'Ready')?.message ?? '';
    expect(message).toContain('its markers contradict each other');
    expect(message).toContain('image registry.example/natgw:prod');
    expect(message).toContain('an init container runs nat-gateway.sh init (1.12)');
    expect(message).toContain('the container env has GATEWAY_V4 (1.15–master)');
    expect(w.gateway.calls).toEqual([]);
  });

  it('KUBE_OVN_RELEASE that the pod contradicts is refused, not obeyed', async () => {
    const w = world();
    w.deps.kubeOvnRelease = '1.12';
    withTemplate(w, { image: 'registry.example/natgw:prod', env: { GATEWAY_V4: '172.18.0.1' } });
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a')).toMatchObject({
      status: 'rejected',
      code: 'UnsupportedGatewayRelease',
    });
    expect(condition(w, 'eip-a', 'Ready')?.message).toContain(
      'KUBE_OVN_RELEASE says 1.12, but the pod shows 1.15, 1.16, master',
    );
  });

  it('a custom tag is settled by one read of the gateway (1.15 and 1.16 send a QoS change differently), kept per pod', async () => {
    for (const release of ['1.15', '1.16'] as const) {
      const w = world({ release });
      withTemplate(w, { ...simulatedTemplate(release), image: 'registry.example/natgw:prod' });
      w.qos('q', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '10', burstMax: '1' }]);
      w.eip('eip-a', { qosPolicy: 'q' });
      expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
      const reads = () =>
        w.gateway
          .sim(w.pod())
          .history()
          .filter((h) => h.argv[0] !== 'bash')
          .map((h) => h.argv.join(' '));
      // The script's nat table is the nft one here (no legacy tables), then the env file init wrote.
      expect(reads()).toEqual([
        'iptables-legacy-save -t nat',
        'iptables-save -t nat',
        'cat /etc/kube-ovn/nat-gateway.env',
      ]);
      // A policy edit: delete-then-add on 1.15, a re-add on 1.16 (the add replaces the class in place).
      w.qos('q', [{ name: 'in', direction: 'ingress', priority: 1, rateMax: '20', burstMax: '1' }]);
      const from = w.gateway.calls.length;
      expect(await w.run('update', 'eip-a', 'qos-policy-changed')).toMatchObject({ status: 'applied' });
      expect(w.gateway.calls.slice(from).map((c) => `${c.op} ${c.args.join(' ')}`)).toEqual(
        release === '1.15'
          ? [
              'eip-ingress-qos-del 172.18.0.2',
              'eip-egress-qos-del 172.18.0.2',
              'eip-ingress-qos-add 172.18.0.2,1,20,1',
            ]
          : ['eip-egress-qos-del 172.18.0.2', 'eip-ingress-qos-add 172.18.0.2,1,20,1'],
      );
      expect(w.tc().map((f) => `${f.direction} ${f.ip} ${f.rate}`)).toEqual(['ingress 172.18.0.2 20Mbit']);
      // What was read is kept for the pod: the update read nothing again.
      expect(reads()).toHaveLength(3);
    }
  });

  it("a custom tag's 1.15+ markers contradicted by the gateway's own state (no env file after init) are refused, naming both", async () => {
    const w = world(); // the gateway really speaks 1.12
    withTemplate(w, {
      image: 'registry.example/natgw:prod',
      env: { GATEWAY_V4: '172.18.0.1' },
      routes: { 'ovn.kubernetes.io/routes': ['10.96.0.0/12'] },
    });
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a')).toMatchObject({
      status: 'rejected',
      code: 'UnsupportedGatewayRelease',
    });
    const message = condition(w, 'eip-a', 'Ready')?.message ?? '';
    expect(message).toContain('its markers contradict each other');
    expect(message).toContain('the container env has GATEWAY_V4 (1.15–master)');
    expect(message).toContain('no /etc/kube-ovn/nat-gateway.env after init (1.12–1.13)');
    expect(w.gateway.calls).toEqual([]);
  });

  it("a replicated gateway (pods owned by a ReplicaSet, kube-ovn master) is served: its pod speaks its image's dialect", async () => {
    const w = world();
    withTemplate(w, { ...w.pod().template, ownerKind: 'ReplicaSet' });
    w.eip('eip-a');
    expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied' });
    expect(condition(w, 'eip-a', 'Ready')?.status).toBe('True');
    expect(w.gateway.calls.map((c) => c.op)).toEqual(['eip-add']);
  });
});

describe('every release line, in the in-memory world', () => {
  it.each(['1.12', '1.13', '1.14', '1.15', '1.16', 'master'] as const)(
    'kube-ovn %s: its eip-add form, QoS in its form, the address back after a restart, everything gone after deletion',
    async (release) => {
      const w = world({ release });
      w.qos('q', [
        { name: 'in', direction: 'ingress', priority: 1, rateMax: '20', burstMax: '2' },
        { name: 'out', direction: 'egress', priority: 2, rateMax: '10', burstMax: '1' },
      ]);
      w.eip('eip-a', { qosPolicy: 'q' });
      expect(await w.run('add', 'eip-a')).toMatchObject({ status: 'applied', ip: '172.18.0.2' });
      const form = release === '1.12' ? '172.18.0.2/24,172.18.0.1' : '172.18.0.2/24';
      expect(w.gateway.calls[0]).toMatchObject({ op: 'eip-add', args: [form] });
      const htb = release === '1.16' || release === 'master';
      const limits = () => w.tc().map((f) => `${f.direction} ${f.rate}`);
      expect(limits()).toEqual(['ingress 20Mbit', 'egress 10Mbit']);
      const sim = () => w.gateway.sim(w.pod());
      expect(
        sim()
          .tcFilters()
          .map((f) => f.dev),
      ).toEqual(htb ? ['ifb-net1', 'net1'] : ['net1', 'net1']);
      const hairpin = () =>
        sim()
          .natRules()
          .filter((r) => r.startsWith('-A HAIRPIN_SNAT'));
      expect(hairpin()).toHaveLength(htb ? 1 : 0);

      w.restartContainer();
      expect(w.net1()).not.toContain('172.18.0.2/24');
      expect(await w.run('update', 'eip-a', 'gateway-restarted')).toMatchObject({ status: 'applied' });
      expect(w.net1()).toContain('172.18.0.2/24');
      expect(limits()).toEqual(['ingress 20Mbit', 'egress 10Mbit']);
      expect(hairpin()).toHaveLength(htb ? 1 : 0);

      w.cluster.deleteEip('eip-a');
      expect(await w.run('update', 'eip-a')).toMatchObject({ status: 'applied' });
      expect(w.get('eip-a')).toBeUndefined();
      expect(w.net1()).not.toContain('172.18.0.2/24');
      expect(limits()).toEqual([]);
      expect(hairpin()).toEqual([]);
      expect(w.ipam.allocations.size).toBe(0);
    },
  );
});
