/**
 * ValidatingAdmissionPolicy in the local API, through kubectl and client-node: the product's exec policy
 * (infra/rbac, applied with `kubectl apply -k`) as the handlers see it — kubectl exec and client-node Exec allowed
 * and refused — and the rest of the policy machinery on ordinary writes: CREATE, UPDATE with oldObject, DELETE,
 * variables, matchConditions, messageExpression, namespaceSelector and objectSelector, failurePolicy, the Deny, Warn
 * and Audit actions, and the refusal of a policy whose CEL does not compile.
 *
 * How the model was checked against the real thing: the dispatch order and the messages are those of
 * kube-apiserver's validating policy plugin (dispatcher.go, validator.go, cel/filter.go): `ValidatingAdmissionPolicy
 * '<policy>' with binding '<binding>' denied request: <message>` inside admission.NewForbidden's Status, the
 * validation's reason as the Status reason and code (Invalid → 422 by default), `expression '<e>' resulted in error:`
 * for runtime errors, the Warn action's `Validation failed for …` warning; CEL itself is @bufbuild/cel.
 */

import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import {
  CustomObjectsApi,
  Exec,
  type KubernetesObject,
  KubernetesObjectApi,
  type V1Status,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandIns, startStandIns } from '../../local/controllers/index.js';
import { demoObjects } from '../../local/demo.js';
import { IDENTITIES } from '../../local/identities.js';
import { kubeConfigFor } from '../../local/kube-api/testing.js';
import { DEFAULT_RELEASE } from '../../local/natgw/releases.js';
import { DIALECTS, eipAdd, parseRelease } from '../../shared/domain/dialect/index.js';
import { natGatewayArgv } from '../../shared/domain/nat-gateway.js';
import { eventually } from '../support/eventually.js';
import { apiError, EIP, eip, kubectlSuite, manifest, useApi } from './harness.js';

const root = join(import.meta.dirname, '../..');
const HANDLERS = 'handlers-token';
const GW = 'vpc-nat-gw-gw1-0';
const POLICY = 'eip-lambdas-exec-gateway-pods-only';
const DENIED_BY = `ValidatingAdmissionPolicy '${POLICY}' with binding '${POLICY}' denied request: `;

kubectlSuite('ValidatingAdmissionPolicy', () => {
  const env = useApi({ tokens: [{ ...IDENTITIES.handlers, token: HANDLERS }] });
  let standIns: StandIns | undefined;

  beforeAll(async () => {
    const applied = await env.k('apply', '-k', join(root, 'infra/rbac'));
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(
      `validatingadmissionpolicy.admissionregistration.k8s.io/${POLICY} created`,
    );
    standIns = await startStandIns({ kubeConfig: env.kc, namespace: 'kube-system' });
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
    await eventually(() => expect(env.api.gateways.get('kube-system', GW)?.initialised).toBe(true));
  }, 60_000);

  afterAll(async () => {
    await standIns?.stop();
  });

  describe("the exec policy, as the handlers' identity", () => {
    const k = (...args: string[]) => env.kWith({ token: HANDLERS }, ...args);

    it('lets kubectl exec run an inspection command in the gateway container', async () => {
      const r = await k(
        'exec',
        '-n',
        'kube-system',
        GW,
        '-c',
        'vpc-nat-gw',
        '--',
        'ip',
        '-o',
        'addr',
        'show',
        'dev',
        'net1',
      );
      expect(r.code, r.stderr).toBe(0);
      const [address] = env.api.gateways.get('kube-system', GW)!.net1Addresses();
      expect(r.stdout).toContain(address);
    });

    it.each([
      [['-c', 'vpc-nat-gw', '--', 'sh', '-c', 'id'], GW, `refused: sh -c id on kube-system/${GW}`],
      [
        ['-c', 'vpc-nat-gw', '-i', '--', 'ip', '-o', 'addr', 'show', 'dev', 'net1'],
        GW,
        `refused: exec on kube-system/${GW}`,
      ],
      [['--', 'true'], 'coredns-5d78c9869d-abcde', 'refused: exec on kube-system/coredns-5d78c9869d-abcde'],
    ])('refuses kubectl exec %j into %s, with the policy message', async (args, pod, why) => {
      const r = await env.kWith({ token: HANDLERS, stdin: '' }, 'exec', '-n', 'kube-system', pod, ...args);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`pods "${pod}" is forbidden: ${DENIED_BY}`);
      expect(r.stderr).toContain(why);
    });

    it('lets client-node Exec (the product path) run nat-gateway.sh, and refuses it anything else', async () => {
      const exec = new Exec(kubeConfigFor(env.api, HANDLERS));
      const run = (command: string[]) =>
        new Promise<V1Status>((resolve, reject) => {
          exec
            .exec(
              'kube-system',
              GW,
              'vpc-nat-gw',
              command,
              new PassThrough(),
              new PassThrough(),
              null,
              false,
              (s) => resolve(s),
            )
            .catch(reject);
        });
      // eip-add in the form of the release the lab's gateway plays (the address alone since 1.13).
      const release = parseRelease(DEFAULT_RELEASE);
      if (!release.ok) throw new Error(release.problem);
      const add = eipAdd(DIALECTS[release.line], {
        address: '172.18.0.200',
        prefix: 16,
        gateway: '172.18.0.1',
      });
      const ok = await run(natGatewayArgv(add.op, add.args));
      expect(ok.status).toBe('Success');
      expect(env.api.gateways.get('kube-system', GW)!.net1Addresses()).toContain('172.18.0.200/16');
      const refused = await run(['bash', '-c', 'ip addr']).then(
        () => 'ran',
        // client-node rejects with the WebSocket error event of the refused upgrade.
        (e: unknown) => (e as { message?: string }).message ?? String(e),
      );
      expect(refused).toBe('Unexpected server response: 403');
      const rec = env.api.requests
        .all()
        .filter((r) => r.path === `/api/v1/namespaces/kube-system/pods/${GW}/exec`)
        .pop();
      expect([rec?.status, rec?.user]).toEqual([403, IDENTITIES.handlers.user]);
    });
  });

  describe('policies on writes', () => {
    const apply = async (...objs: unknown[]) => {
      for (const o of objs) {
        const r = await env.kWith({ stdin: manifest(o) }, 'apply', '-f', '-');
        expect(r.code, r.stderr).toBe(0);
      }
    };
    const policy = (name: string, spec: Record<string, unknown>) => ({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name },
      spec,
    });
    const binding = (name: string, actions: string[], extra: Record<string, unknown> = {}) => ({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name },
      spec: { policyName: name, validationActions: actions, ...extra },
    });
    const eipRules = (operations: string[]) => ({
      resourceRules: [
        { apiGroups: ['kubeovn.io'], apiVersions: ['v1'], operations, resources: ['iptables-eips'] },
      ],
    });

    it('denies a CREATE and an UPDATE (oldObject) with the message, as 422 Invalid unless the policy gives a reason', async () => {
      await apply(
        policy('eip-gateway-fixed', {
          failurePolicy: 'Fail',
          matchConstraints: eipRules(['CREATE', 'UPDATE']),
          variables: [{ name: 'gw', expression: "has(object.spec.natGwDp) ? object.spec.natGwDp : ''" }],
          validations: [
            {
              expression: "variables.gw.startsWith('gw')",
              messageExpression: "'natGwDp must name a gateway gw*, not ' + variables.gw",
            },
            {
              expression: "request.operation != 'UPDATE' || variables.gw == oldObject.spec.natGwDp",
              message: 'natGwDp cannot change',
              reason: 'Forbidden',
            },
          ],
        }),
        binding('eip-gateway-fixed', ['Deny']),
      );
      const created = await apiError(
        env.co.createClusterCustomObject({ ...EIP, body: eip('bad', { spec: { natGwDp: 'x1' } }) }),
      );
      const message =
        "ValidatingAdmissionPolicy 'eip-gateway-fixed' with binding 'eip-gateway-fixed' denied request: natGwDp must name a gateway gw*, not x1";
      expect(created).toEqual({
        code: 422,
        body: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `iptables-eips.kubeovn.io "bad" is forbidden: ${message}`,
          reason: 'Invalid',
          details: { name: 'bad', group: 'kubeovn.io', kind: 'iptables-eips', causes: [{ message }] },
          code: 422,
        },
      });
      const k = await env.kWith(
        { stdin: manifest(eip('bad', { spec: { natGwDp: 'x1' } })) },
        'create',
        '-f',
        '-',
      );
      expect(k.stderr).toContain(message);
      await env.co.createClusterCustomObject({ ...EIP, body: eip('fixed') });
      const moved = await env.k(
        'patch',
        'iptables-eip',
        'fixed',
        '--type=merge',
        '-p',
        '{"spec":{"natGwDp":"gw2"}}',
      );
      expect(moved.stderr).toContain(
        `Error from server (Forbidden): iptables-eips.kubeovn.io "fixed" is forbidden: ValidatingAdmissionPolicy 'eip-gateway-fixed' with binding 'eip-gateway-fixed' denied request: natGwDp cannot change`,
      );
      expect(
        (
          await env.k(
            'delete',
            'validatingadmissionpolicy,validatingadmissionpolicybinding',
            'eip-gateway-fixed',
          )
        ).code,
      ).toBe(0);
    });

    it('only warns with Warn, records with Audit, and neither blocks the write', async () => {
      await apply(
        policy('eip-labelled', {
          matchConstraints: eipRules(['CREATE']),
          validations: [
            {
              expression: "has(object.metadata.labels) && 'team' in object.metadata.labels",
              message: 'an EIP should have a team label',
            },
          ],
        }),
        binding('eip-labelled', ['Warn', 'Audit']),
      );
      const r = await env.kWith({ stdin: manifest(eip('unlabelled')) }, 'create', '-f', '-');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(
        "Warning: Validation failed for ValidatingAdmissionPolicy 'eip-labelled' with binding 'eip-labelled': an EIP should have a team label",
      );
      const rec = env.api.requests
        .all()
        .filter((x) => x.method === 'POST' && x.path.endsWith('/iptables-eips'))
        .pop();
      expect(
        JSON.parse(rec?.annotations?.['validation.policy.admission.k8s.io/validation_failure'] ?? '[]'),
      ).toEqual([
        {
          message: 'an EIP should have a team label',
          policy: 'eip-labelled',
          binding: 'eip-labelled',
          expressionIndex: 0,
          validationActions: ['Warn', 'Audit'],
        },
      ]);
      expect(
        (await env.k('delete', 'validatingadmissionpolicy,validatingadmissionpolicybinding', 'eip-labelled'))
          .code,
      ).toBe(0);
    });

    it('applies failurePolicy to an expression that fails at run time, and skips requests matchConditions exclude', async () => {
      const spec = (failurePolicy: string) => ({
        failurePolicy,
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: [''],
              apiVersions: ['v1'],
              operations: ['CREATE', 'DELETE'],
              resources: ['configmaps'],
            },
          ],
          namespaceSelector: { matchLabels: { 'policy.example.com/checked': 'true' } },
          objectSelector: { matchExpressions: [{ key: 'skip', operator: 'DoesNotExist' }] },
        },
        matchConditions: [{ name: 'not-the-admin-deleting', expression: "request.operation != 'DELETE'" }],
        validations: [{ expression: "object.data.mode == 'strict'" }],
      });
      await env.core.createNamespace({
        body: { metadata: { name: 'checked', labels: { 'policy.example.com/checked': 'true' } } },
      });
      await apply(policy('cm-mode', spec('Fail')), binding('cm-mode', ['Deny']));
      const cm = (name: string, data: Record<string, string>, labels: Record<string, string> = {}) => ({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace: 'checked', labels },
        data,
      });
      const refused = await env.kWith({ stdin: manifest(cm('a', { other: 'x' })) }, 'create', '-f', '-');
      // 422 Invalid: kubectl prints the Status cause (the denial), as for any API server.
      expect(refused.stderr).toContain(
        `The configmaps "a" is invalid: : ValidatingAdmissionPolicy 'cm-mode' with binding 'cm-mode' denied request: expression 'object.data.mode == 'strict'' resulted in error: no such key: mode`,
      );
      const failed = await env.kWith({ stdin: manifest(cm('b', { mode: 'lax' })) }, 'create', '-f', '-');
      expect(failed.stderr).toContain("denied request: failed expression: object.data.mode == 'strict'");
      expect(
        (await env.kWith({ stdin: manifest(cm('c', { mode: 'strict' })) }, 'create', '-f', '-')).code,
      ).toBe(0);
      // Outside the selected namespace, or with the label the objectSelector excludes: not matched.
      expect(
        (
          await env.kWith(
            {
              stdin: manifest({ ...cm('d', { other: 'x' }), metadata: { name: 'd', namespace: 'default' } }),
            },
            'create',
            '-f',
            '-',
          )
        ).code,
      ).toBe(0);
      expect(
        (await env.kWith({ stdin: manifest(cm('e', { other: 'x' }, { skip: 'yes' })) }, 'create', '-f', '-'))
          .code,
      ).toBe(0);
      // A DELETE is excluded by the matchCondition.
      expect((await env.k('delete', 'configmap', 'c', '-n', 'checked')).code).toBe(0);
      await apply(policy('cm-mode', spec('Ignore')));
      expect((await env.kWith({ stdin: manifest(cm('f', { other: 'x' })) }, 'create', '-f', '-')).code).toBe(
        0,
      );
    });

    it('refuses a policy whose CEL does not compile, and a binding with both Deny and Warn', async () => {
      const bad = policy('broken', {
        matchConstraints: eipRules(['CREATE']),
        validations: [{ expression: 'object.spec. == 1' }],
      });
      const r = await env.kWith({ stdin: manifest(bad) }, 'create', '-f', '-');
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(
        'The ValidatingAdmissionPolicy "broken" is invalid: spec.validations[0].expression: Invalid value: "object.spec. == 1": compilation failed: ERROR:',
      );
      const both = await env.kWith(
        { stdin: manifest(binding('broken', ['Deny', 'Warn'])) },
        'create',
        '-f',
        '-',
      );
      expect(both.stderr).toContain('spec.validationActions: Invalid value:');
      const list = await env.k('get', 'validatingadmissionpolicies', '-o', 'name');
      expect(list.stdout).toContain(`validatingadmissionpolicy.admissionregistration.k8s.io/${POLICY}\n`);
      expect(list.stdout).not.toContain('/broken');
    });

    it('lets client-node see the denial of a write as an ApiException with the Status', async () => {
      await apply(
        policy('no-delete', {
          matchConstraints: eipRules(['DELETE']),
          validations: [
            { expression: "oldObject.metadata.name != 'keep'", message: 'keep stays', reason: 'Forbidden' },
          ],
        }),
        binding('no-delete', ['Deny']),
      );
      await env.co.createClusterCustomObject({ ...EIP, body: eip('keep') });
      const e = await apiError(
        env.kc.makeApiClient(CustomObjectsApi).deleteClusterCustomObject({ ...EIP, name: 'keep' }),
      );
      expect([e.code, e.body.reason, e.body.message]).toEqual([
        403,
        'Forbidden',
        "iptables-eips.kubeovn.io \"keep\" is forbidden: ValidatingAdmissionPolicy 'no-delete' with binding 'no-delete' denied request: keep stays",
      ]);
    });
  });
});
