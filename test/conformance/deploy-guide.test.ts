/**
 * The exec-policy check of docs/deploy-eks.md (section 5, "Let the functions into the cluster"), run line by line as the guide writes it, as the administrator
 * impersonating someone in the handlers' group, against the local API with infra/rbac applied by
 * `kubectl apply -k infra/rbac`: each `# → denied: …` must be refused with those words (in order), each
 * `# → allowed` must succeed. The gateway pod is the stand-in's (a simulated gateway with net1), the CoreDNS pod a
 * plain one with CoreDNS's label.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import type { KubectlResult } from '../../local/kube-api/testing.js';
import { eventually } from '../support/eventually.js';
import { kubectlSuite, useApi } from './harness.js';

const root = join(import.meta.dirname, '../..');

/** The shell block after "**check**" in section 5: its lines, in order. */
function guideCheck(): string[] {
  const guide = readFileSync(join(root, 'docs/deploy-eks.md'), 'utf8');
  const section = guide.slice(guide.indexOf('## 5. '), guide.indexOf('## 6. '));
  const block = /\*\*check\*\*[^\n]*\n+```sh\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error('docs/deploy-eks.md, section 5, has no **check** shell block');
  return (block[1] as string).split('\n').filter((l) => l.trim() !== '');
}

type Kubectl = (...args: string[]) => Promise<KubectlResult>;

interface CheckState {
  vars: Map<string, string>;
  /** The last kubectl command's result, which the next `# →` line states. */
  last?: KubectlResult;
  /** How many stated outcomes were checked. */
  checked: number;
  /** The gateway's net1 addresses, which an allowed `ip addr` must print. */
  net1: string[];
}

/** One line of the check: `VAR=$(kubectl … | head -1)`, a kubectl command, or the outcome of the one before. */
async function runLine(k: Kubectl, line: string, state: CheckState): Promise<void> {
  const assign = /^(\w+)=\$\((kubectl [^|)]+)\| head -1\)$/.exec(line);
  const expectation = /^# → (denied|allowed)(.*)$/.exec(line);
  if (assign) {
    const r = await k(...words(assign[2] as string, state.vars));
    expect(r.code, r.stderr).toBe(0);
    const value = r.stdout.split('\n')[0]?.trim() ?? '';
    expect(value, line).not.toBe('');
    state.vars.set(assign[1] as string, value);
  } else if (line.startsWith('kubectl ')) {
    state.last = await k(...words(line, state.vars));
  } else if (expectation && state.last) {
    state.checked++;
    if (expectation[1] === 'allowed') expectAllowed(state.last, line, state.net1);
    else expectDenied(state.last, expectation[2] as string);
  } else {
    throw new Error(`a line of the guide's check this test does not understand: ${line}`);
  }
}

function expectAllowed(r: KubectlResult, line: string, net1: string[]): void {
  expect(r.code, r.stderr).toBe(0);
  if (line.includes("net1's addresses")) for (const a of net1) expect(r.stdout).toContain(a.split('/')[0]);
}

/** Refused, with the stated words in order (`…` stands for anything). */
function expectDenied(r: KubectlResult, stated: string): void {
  expect(r.code).not.toBe(0);
  let at = 0;
  for (const fragment of stated.replace(/^:\s*/, '').split('…')) {
    const f = fragment.trim();
    if (f === '') continue;
    const found = r.stderr.indexOf(f, at);
    expect(found, `"${f}" in: ${r.stderr}`).toBeGreaterThanOrEqual(0);
    at = found + f.length;
  }
}

kubectlSuite('docs/deploy-eks.md, letting the functions into the cluster: the exec policy check', () => {
  const env = useApi();
  let standIns: StandIns | undefined;

  it('runs every line of the check with the outcome the guide states', async () => {
    const applied = await env.k('apply', '-k', join(root, 'infra/rbac'));
    expect(applied.code, applied.stderr).toBe(0);
    standIns = await startStandIns({ kubeConfig: env.kc, namespace: 'kube-system' });
    try {
      const objects = KubernetesObjectApi.makeApiClient(env.kc);
      for (const o of demoObjects('kube-system')) await objects.create(o as KubernetesObject);
      await objects.create({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: 'coredns-5d78c9869d-abcde',
          namespace: 'kube-system',
          labels: { 'k8s-app': 'kube-dns' },
        },
        spec: { containers: [{ name: 'coredns', image: 'coredns' }] },
      } as KubernetesObject);
      await eventually(() =>
        expect(env.api.gateways.get('kube-system', 'vpc-nat-gw-gw1-0')?.initialised).toBe(true),
      );
      const net1 = env.api.gateways.get('kube-system', 'vpc-nat-gw-gw1-0')!.net1Addresses();
      const state: CheckState = { vars: new Map(), checked: 0, net1 };
      for (const line of guideCheck()) await runLine(env.k, line, state);
      expect(state.checked).toBeGreaterThanOrEqual(3);
    } finally {
      await standIns?.stop();
    }
  }, 60_000);
});

/** A command line of the guide as argv: `$VAR` replaced, split on spaces (the check quotes nothing). */
function words(line: string, vars: Map<string, string>): string[] {
  return line
    .replace(/\$(\w+)/g, (_, v: string) => vars.get(v) ?? '')
    .trim()
    .split(/\s+/)
    .slice(1);
}
