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

      const vars = new Map<string, string>();
      let last: KubectlResult | undefined;
      let checked = 0;
      for (const line of guideCheck()) {
        const assign = /^(\w+)=\$\((kubectl [^|)]+)\| head -1\)$/.exec(line);
        const expectation = /^# → (denied|allowed)(.*)$/.exec(line);
        if (assign) {
          const r = await env.k(...words(assign[2] as string, vars));
          expect(r.code, r.stderr).toBe(0);
          vars.set(assign[1] as string, r.stdout.split('\n')[0]?.trim() ?? '');
          expect(vars.get(assign[1] as string), line).not.toBe('');
        } else if (line.startsWith('kubectl ')) {
          last = await env.k(...words(line, vars));
        } else if (expectation && last) {
          checked++;
          if (expectation[1] === 'allowed') {
            expect(last.code, last.stderr).toBe(0);
            if (line.includes("net1's addresses"))
              for (const a of net1) expect(last.stdout).toContain(a.split('/')[0]);
          } else {
            expect(last.code).not.toBe(0);
            let at = 0;
            for (const fragment of (expectation[2] as string).replace(/^:\s*/, '').split('…')) {
              const f = fragment.trim();
              if (f === '') continue;
              const found = last.stderr.indexOf(f, at);
              expect(found, `"${f}" in: ${last.stderr}`).toBeGreaterThanOrEqual(0);
              at = found + f.length;
            }
          }
        } else {
          throw new Error(`a line of the guide's check this test does not understand: ${line}`);
        }
      }
      expect(checked).toBeGreaterThanOrEqual(3);
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
