/**
 * The contract every Gateway adapter keeps: the in-memory fake (local/memory/gateway.ts, run by
 * test/unit/gateway-contract.test.ts) and pods/exec against the local Kubernetes API
 * (test/integration/k8s-gateway-contract.test.ts). Both are backed by the same simulated nat-gateway.sh, so the
 * effects (net1, tc) and the argv the gateway received are observable the same way.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { GatewayCommandError, InvalidSpecError } from '../../shared/domain/errors.js';
import type { Gateway, GatewayPod, NatGwOp } from '../../shared/ports.js';

export interface GatewaySubject {
  gateway: Gateway;
  pod: GatewayPod;
  net1(): string[];
  tc(): { direction: string; ip: string; rate: string }[];
  /** The argv of every command the simulated gateway ran, oldest first. */
  history(): string[][];
  /** The next run of `op` answers `exitCode` with `stderr`, without running. */
  failNext(op: NatGwOp, exitCode: number, stderr: string): void;
}

export function describeGatewayContract(name: string, make: () => Promise<GatewaySubject>): void {
  describe(`Gateway contract: ${name}`, () => {
    let s: GatewaySubject;
    beforeAll(async () => {
      s = await make();
    }, 60_000);

    it('eip-add puts the address on net1 and runs `bash /kube-ovn/nat-gateway.sh eip-add <arg>` as argv', async () => {
      const out = await s.gateway.run(s.pod, 'eip-add', ['172.18.0.40/24,172.18.0.1']);
      expect(out).toMatchObject({ stdout: expect.any(String), stderr: expect.any(String) });
      expect(s.net1()).toContain('172.18.0.40/24');
      expect(s.history().at(-1)).toEqual([
        'bash',
        '/kube-ovn/nat-gateway.sh',
        'eip-add',
        '172.18.0.40/24,172.18.0.1',
      ]);
    });

    it('eip-add twice leaves the address once; eip-del takes it off', async () => {
      await s.gateway.run(s.pod, 'eip-add', ['172.18.0.41/24,172.18.0.1']);
      await s.gateway.run(s.pod, 'eip-add', ['172.18.0.41/24,172.18.0.1']);
      expect(s.net1().filter((a) => a === '172.18.0.41/24')).toHaveLength(1);
      await s.gateway.run(s.pod, 'eip-del', ['172.18.0.41/24']);
      expect(s.net1()).not.toContain('172.18.0.41/24');
    });

    it('QoS add and del change the tc filters of the address', async () => {
      await s.gateway.run(s.pod, 'eip-add', ['172.18.0.42/24,172.18.0.1']);
      await s.gateway.run(s.pod, 'eip-ingress-qos-add', ['172.18.0.42,1,10,10']);
      expect(
        s
          .tc()
          .filter((f) => f.ip === '172.18.0.42')
          .map((f) => f.direction),
      ).toEqual(['ingress']);
      await s.gateway.run(s.pod, 'eip-ingress-qos-del', ['172.18.0.42']);
      expect(s.tc().filter((f) => f.ip === '172.18.0.42')).toEqual([]);
    });

    it('a non-zero exit is a GatewayCommandError carrying the exit code and stderr; nothing ran', async () => {
      const before = s.history().length;
      s.failNext('eip-add', 3, 'RTNETLINK answers: File exists\n');
      const err = await s.gateway
        .run(s.pod, 'eip-add', ['172.18.0.43/24,172.18.0.1'])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GatewayCommandError);
      expect(err).toMatchObject({ exitCode: 3 });
      expect((err as GatewayCommandError).stderr).toContain('File exists');
      expect(s.history().length).toBe(before);
      expect(s.net1()).not.toContain('172.18.0.43/24');
    });

    it('stderr with exit status 0 is not a failure', async () => {
      s.failNext('eip-add', 0, 'warning: arping found no answer\n');
      const out = await s.gateway.run(s.pod, 'eip-add', ['172.18.0.44/24,172.18.0.1']);
      expect(out.stderr).toContain('arping');
    });

    it("the script's own refusal of a bad argument is a GatewayCommandError, and the argument reached it verbatim", async () => {
      const err = await s.gateway
        .run(s.pod, 'eip-add', ['999.18.0.45/24,172.18.0.1'])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GatewayCommandError);
      expect(s.history().at(-1)).toEqual([
        'bash',
        '/kube-ovn/nat-gateway.sh',
        'eip-add',
        '999.18.0.45/24,172.18.0.1',
      ]);
      expect(s.net1().some((a) => a.startsWith('999.'))).toBe(false);
    });

    it('an argument with shell metacharacters never reaches the gateway', async () => {
      const before = s.history().length;
      const err = await s.gateway
        .run(s.pod, 'eip-add', ['172.18.0.45/24,172.18.0.1;touch /tmp/pwned'])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidSpecError);
      expect(s.history().length).toBe(before);
    });

    it('an already aborted signal: a GatewayCommandError, and the command does not run', async () => {
      const before = s.history().length;
      const abort = new AbortController();
      abort.abort();
      const err = await s.gateway
        .run(s.pod, 'eip-add', ['172.18.0.46/24,172.18.0.1'], abort.signal)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GatewayCommandError);
      expect(s.history().length).toBe(before);
      expect(s.net1()).not.toContain('172.18.0.46/24');
    });
  });
}
