/**
 * The fence of infra/kube-ovn-fence (docs/adr/0095-kube-ovn-fenced-by-admission-policies.md), applied with
 * `kubectl apply -k` to the local API (which evaluates ValidatingAdmissionPolicies with @bufbuild/cel), and the
 * requests of docs/deploy-eks.md step 2a sent as kube-ovn-controller's ServiceAccount with `kubectl --as`: what an
 * unmodified kube-ovn sends, refused or admitted. Each request below is one kube-ovn sends (its handler named), with
 * its body as kube-ovn builds it.
 *
 * The guide's own check (step 2a, "**check**") is run as written, with bash, line by line: each command must end as
 * the `# → denied: …` or `# → allowed` comment under it says.
 *
 * What this does not prove: that a given kube-apiserver version evaluates the CEL the same way; docs/deploy-eks.md's
 * dry runs check that on a real cluster.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import {
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import { EIP, eip, kubectlSuite, useApi } from './harness.js';

const root = join(import.meta.dirname, '../..');
const KO = 'system:serviceaccount:kube-system:ovn';
const GW = 'vpc-nat-gw-gw1-0';
const WRITES = 'eip-lambdas-fence-kube-ovn-eip-writes';
const OPS = 'eip-lambdas-fence-kube-ovn-gateway-ops';
const denied = (policy: string) =>
  `ValidatingAdmissionPolicy '${policy}' with binding '${policy}' denied request: `;
const STATUS = {
  ready: true,
  ip: '172.18.0.200',
  redo: '2026-12-01T10:00:00',
  nat: '',
  qosPolicy: '',
  conditions: [{ type: 'Ready', status: 'True', reason: 'Configured' }],
};

/** The local API evaluates ValidatingAdmissionPolicies (local/kube-api/admission.ts) and knows who is who. */
const ENFORCED =
  existsSync(join(root, 'local/kube-api/admission.ts')) && existsSync(join(root, 'local/rbac/kube-ovn.yaml'));
if (!ENFORCED)
  console.log(
    'kube-ovn fence: skipped: this local API evaluates no admission policies (local/kube-api/admission.ts or local/rbac/kube-ovn.yaml missing)',
  );
const suite = ENFORCED ? kubectlSuite : (name: string, fn: () => void) => describe.skip(name, fn);

/** A command of the guide's check and what the comment under it says it ends with. */
interface GuideStep {
  command: string;
  outcome: 'denied' | 'allowed';
  /** Fragments the output holds in this order (`…` separates them). */
  fragments: string[];
}

/**
 * docs/deploy-eks.md step 2a's check: its first paragraph sets the variables; every other one is a comment, one
 * command, and the `# → denied: …` or `# → allowed` comment (continued on `#   ` lines) saying how it ends.
 */
function guideFenceCheck(): { assignments: string[]; steps: GuideStep[] } {
  const guide = readFileSync(join(root, 'docs/deploy-eks.md'), 'utf8');
  const section = guide.slice(guide.indexOf('## 2. '), guide.indexOf('**2b.'));
  const block = /\*\*check\*\* that the API server enforces them[\s\S]*?```sh\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error('docs/deploy-eks.md, step 2a, has no **check** shell block');
  const [first = '', ...rest] = (block[1] as string)
    .replace(/\\\n\s*/g, '')
    .trim()
    .split(/\n\s*\n/);
  const assignments = first.split('\n');
  expect(
    assignments.every((l) => /^\w+=/.test(l)),
    first,
  ).toBe(true);
  return { assignments, steps: rest.map(stepOf) };
}

function stepOf(paragraph: string): GuideStep {
  const lines = paragraph.split('\n');
  const commands = lines.filter((l) => !l.startsWith('#'));
  const said = lines.findIndex((l) => l.startsWith('# → '));
  expect(commands.length, paragraph).toBe(1);
  expect(said, paragraph).toBeGreaterThan(lines.indexOf(commands[0] as string));
  const text = lines
    .slice(said)
    .map((l) => l.replace(/^# (→ )?/, ''))
    .join(' ')
    .replace(/\s+/g, ' ');
  const m = /^(denied|allowed)(?::\s*(.*))?$/.exec(text.trim());
  if (!m) throw new Error(`the guide's check states no outcome this test knows: ${text}`);
  return {
    command: commands[0] as string,
    outcome: m[1] as GuideStep['outcome'],
    fragments: fragmentsOf(m[2] ?? ''),
  };
}

const fragmentsOf = (text: string) =>
  text
    .split('…')
    .map((f) => f.trim())
    .filter((f) => f !== '');

suite('the kube-ovn fence', () => {
  const env = useApi();
  let standIns: StandIns | undefined;
  const as = (...args: string[]) => env.k(`--as=${KO}`, ...args);
  const patchStatus = (name: string, status: object) =>
    as(
      'patch',
      'iptables-eip',
      name,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ status }),
    );

  beforeAll(async () => {
    // kube-ovn's own RBAC (the ClusterRole system:ovn bound to its ServiceAccount), then the fence.
    const rbac = await env.k('apply', '-f', join(root, 'local/rbac/kube-ovn.yaml'));
    expect(rbac.code, rbac.stderr).toBe(0);
    const applied = await env.k('apply', '-k', join(root, 'infra/kube-ovn-fence'));
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(
      `validatingadmissionpolicy.admissionregistration.k8s.io/${WRITES} created`,
    );
    standIns = await startStandIns({ kubeConfig: env.kc, namespace: 'kube-system' });
    const objects = KubernetesObjectApi.makeApiClient(env.kc);
    for (const o of demoObjects('kube-system').filter((x) => x.kind !== 'IptablesEIP'))
      await objects.create(o as KubernetesObject);
    await env.co.createClusterCustomObject({
      ...EIP,
      body: eip('e1', {
        metadata: {
          finalizers: ['kubeovn.io/kube-ovn-controller'],
          labels: { 'ovn.kubernetes.io/eip_v4_ip': '172.18.0.200' },
        },
        spec: { v4ip: '172.18.0.200' },
      }),
    });
    await env.co.patchClusterCustomObjectStatus(
      { ...EIP, name: 'e1', body: { status: STATUS } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await env.co.createClusterCustomObject({
      group: 'kubeovn.io',
      version: 'v1',
      plural: 'iptables-fip-rules',
      body: {
        apiVersion: 'kubeovn.io/v1',
        kind: 'IptablesFIPRule',
        metadata: { name: 'f1' },
        spec: { eip: 'e1', internalIp: '10.0.1.5' },
      },
    });
    for (let i = 0; i < 100 && !env.api.gateways.get('kube-system', GW)?.initialised; i++)
      await new Promise((r) => setTimeout(r, 100));
    return async () => standIns?.stop();
  });

  it("docs/deploy-eks.md step 2a's check, run as written: each command ends as the guide says", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fence-guide-'));
    const kubeconfig = join(dir, 'kubeconfig');
    await env.api.writeKubeconfig(kubeconfig);
    const { assignments, steps } = guideFenceCheck();
    const before = await env.co.getClusterCustomObject({ ...EIP, name: 'e1' });
    expect(steps.filter((s) => s.outcome === 'denied').length).toBeGreaterThanOrEqual(3);
    expect(steps.filter((s) => s.outcome === 'allowed').length).toBeGreaterThanOrEqual(2);
    for (const step of steps) {
      // Not spawnSync: the local API answers kubectl from this process.
      const r = await new Promise<{ status: number; stdout: string; stderr: string }>((resolve) =>
        execFile(
          'bash',
          ['-eu', '-c', [...assignments, step.command].join('\n')],
          { env: { PATH: process.env.PATH, HOME: dir, KUBECONFIG: kubeconfig }, timeout: 30_000 },
          (e, stdout, stderr) => resolve({ status: e ? Number(e.code ?? 1) : 0, stdout, stderr }),
        ),
      );
      const output = step.outcome === 'denied' ? r.stderr : r.stdout;
      if (step.outcome === 'denied') expect(r.status, `${step.command}\n${r.stdout}`).not.toBe(0);
      else expect(r.status, `${step.command}\n${r.stderr}`).toBe(0);
      let at = 0;
      for (const f of step.fragments) {
        const found = output.indexOf(f, at);
        expect(
          found,
          `"${f}" after ${at} in the output of ${step.command}: ${output}`,
        ).toBeGreaterThanOrEqual(0);
        at = found + f.length;
      }
    }
    // The dry runs stored nothing.
    const after = await env.co.getClusterCustomObject({ ...EIP, name: 'e1' });
    expect(after.status).toEqual(before.status);
    expect(after.metadata.labels).toEqual(before.metadata.labels);
  });

  describe('EIP writes', () => {
    it("refuses kube-ovn's status writes (add, nat refresh, stale cache) and admits its redo request", async () => {
      // createOrUpdateCrdEip / patchEipStatus after a FIP add: the whole status, with its own values.
      const add = await patchStatus('e1', { ...STATUS, ip: '172.18.0.11', conditions: undefined });
      expect(add.code).toBe(1);
      expect(add.stderr).toContain(denied(WRITES));
      expect(add.stderr).toContain(
        'kube-ovn-controller may not change the status of IptablesEIP e1 except to request a redo',
      );
      const nat = await patchStatus('e1', { ...STATUS, nat: 'fip', conditions: undefined });
      expect(nat.stderr).toContain(denied(WRITES));
      // The redo request (handleUpdateVpcEip, redoFip): ready=false and a new token, the rest as it is.
      const redo = await patchStatus('e1', {
        ...STATUS,
        ready: false,
        redo: '2026-12-01T11:00:00',
        conditions: undefined,
      });
      expect(redo.code, redo.stderr).toBe(0);
      // The same request from a stale cache (no ip yet) is refused.
      const stale = await patchStatus('e1', {
        ...STATUS,
        ready: false,
        redo: '2026-12-01T12:00:00',
        ip: '',
        conditions: undefined,
      });
      expect(stale.stderr).toContain(denied(WRITES));
      // Dry run, as docs/deploy-eks.md checks it on a cluster: same answers, nothing stored.
      const dry = await as(
        'patch',
        'iptables-eip',
        'e1',
        '--subresource=status',
        '--type=merge',
        '-p',
        JSON.stringify({ status: { ready: true, ip: '192.0.2.1' } }),
        '--dry-run=server',
      );
      expect(dry.stderr).toContain(denied(WRITES));
    });

    it('refuses spec, labels and creates; finalizers: the legacy name and its rename only', async () => {
      const labels = await as(
        'label',
        'iptables-eip',
        'e1',
        'ovn.kubernetes.io/qos=qos-demo',
        '--dry-run=server',
      );
      expect(labels.stderr).toContain('may not change the labels or annotations of IptablesEIP e1');
      const spec = await as(
        'patch',
        'iptables-eip',
        'e1',
        '--type=merge',
        '-p',
        '{"spec":{"v4ip":"172.18.0.11"}}',
      );
      expect(spec.stderr).toContain('may not change the spec of IptablesEIP e1');
      const dir = mkdtempSync(join(tmpdir(), 'fence-'));
      writeFileSync(join(dir, 'e.json'), JSON.stringify(eip('e2')));
      const create = await as('create', '-f', join(dir, 'e.json'));
      expect(create.stderr).toContain('may not create IptablesEIPs');
      const fin = (list: string[]) =>
        as(
          'patch',
          'iptables-eip',
          'e1',
          '--type=merge',
          '-p',
          JSON.stringify({ metadata: { finalizers: list } }),
        );
      // 1.12's handleAddIptablesEipFinalizer: its own name added.
      expect((await fin(['kubeovn.io/kube-ovn-controller', 'kube-ovn-controller'])).code).toBe(0);
      // Removing the product's name is refused.
      expect((await fin(['kube-ovn-controller'])).stderr).toContain(
        'may only add or remove the finalizer kube-ovn-controller',
      );
      // 1.13+'s syncFinalizers: the legacy name dropped, the product's kept.
      expect((await fin(['kubeovn.io/kube-ovn-controller'])).code).toBe(0);
    });

    it("admits kube-ovn's FIP status (its NAT work is not fenced)", async () => {
      const fip = await as(
        'patch',
        'iptables-fip-rule',
        'f1',
        '--subresource=status',
        '--type=merge',
        '-p',
        '{"status":{"ready":true,"v4ip":"172.18.0.200","natGwDp":"gw1","internalIp":"10.0.1.5"}}',
      );
      expect(fip.code, fip.stderr).toBe(0);
    });
  });

  describe('gateway operations', () => {
    const exec = (...argv: string[]) =>
      as('exec', '-n', 'kube-system', GW, '-c', 'vpc-nat-gw', '--', ...argv);

    it('refuses eip-add and the EIP QoS ops in both command forms, admits floating-ip-add and the rest', async () => {
      for (const argv of [
        ['/bin/bash', '-c', 'bash /kube-ovn/nat-gateway.sh eip-add 172.18.0.11/24,172.18.0.1'],
        ['bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.11/24'],
        ['bash', '/kube-ovn/nat-gateway.sh', 'eip-del', '172.18.0.200/24'],
        ['/bin/bash', '-c', 'bash /kube-ovn/nat-gateway.sh eip-ingress-qos-add 172.18.0.200,1,10,10'],
        ['bash', '/kube-ovn/nat-gateway.sh', 'eip-egress-qos-del', '172.18.0.200'],
      ]) {
        const r = await exec(...argv);
        expect(r.code, argv.join(' ')).not.toBe(0);
        expect(r.stderr).toContain(denied(OPS));
        expect(r.stderr).toContain('may not run the EIP operations of nat-gateway.sh');
      }
      const fip = await exec('bash', '/kube-ovn/nat-gateway.sh', 'floating-ip-add', '172.18.0.200,10.0.1.5');
      expect(fip.stderr).not.toContain('denied request');
      expect(fip.code, fip.stderr).toBe(0);
      const version = await exec('bash', '/kube-ovn/nat-gateway.sh', 'get-iptables-version');
      expect(version.stderr).not.toContain('denied request');
    });

    it('matches only the ServiceAccount it names: the administrator and an overlay for another one', async () => {
      const admin = await env.k(
        'exec',
        '-n',
        'kube-system',
        GW,
        '-c',
        'vpc-nat-gw',
        '--',
        'bash',
        '/kube-ovn/nat-gateway.sh',
        'eip-del',
        '172.18.0.99/24',
      );
      expect(admin.stderr).not.toContain('denied request');
      const dir = mkdtempSync(join(tmpdir(), 'fence-overlay-'));
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        [
          `resources: [${relative(dir, join(root, 'infra/kube-ovn-fence'))}]`,
          `components: [${relative(dir, join(root, 'infra/kube-ovn-fence/params'))}]`,
          'configMapGenerator:',
          '  - name: eip-lambdas-kube-ovn-fence-params',
          '    literals: [kubeOvnNamespace=ovn-system, kubeOvnServiceAccount=kube-ovn-ctl]',
          '    options:',
          '      disableNameSuffixHash: true',
          '      annotations: { config.kubernetes.io/local-config: "true" }',
          '',
        ].join('\n'),
      );
      const rendered = await env.k('kustomize', '--load-restrictor=LoadRestrictionsNone', dir);
      expect(rendered.code, rendered.stderr).toBe(0);
      expect(rendered.stdout).toContain("'system:serviceaccount:' + 'ovn-system'");
      expect(rendered.stdout).toContain("'kube-ovn-ctl'");
      expect(rendered.stdout).not.toContain("'kube-system'");
      expect(rendered.stdout).not.toContain('kind: ConfigMap');
    });
  });
});
