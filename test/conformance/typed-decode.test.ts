/**
 * The typed decode of built-in kinds (local/kube-api/typed.ts, ADR 0127), through kubectl 1.32 and client-node: a
 * value of the wrong JSON type for a field of the kind's Go struct is refused while decoding, before the namespace,
 * name and admission checks — 400 on create and update, the patch handler's 422 after a patch — and a value the
 * Go type takes (a number for an int64, null for anything) is accepted.
 *
 * How the wording was checked against the real thing: in the Kubernetes sources at the local API's version
 * (apiserver and apimachinery v0.32.4, and sigs.k8s.io/json at the commit their go.mod requires), read with the
 * search tools:
 * - sigs.k8s.io/json internal/golang/encoding/json/decode.go: UnmarshalTypeError.Error is `json: cannot unmarshal
 *   <value> into Go struct field <Struct>.<Field> of type <type>`, where addErrorContext sets Struct to the
 *   innermost struct's Name() (`Variable`, no package) and Field to the JSON field names from the top joined with
 *   dots (`spec.variables.name`: object() pushes a struct field's name only, never a map key or a list index);
 *   `<value>` is `bool`, `string`, `number`, `object`, `array`, or `number <text>` for an integer that does not fit;
 *   `<type>` is reflect's name (`string`, `[]string`, `v1.FailurePolicyType`). saveError keeps the first such
 *   error and decoding goes on, so the first in document order is the one reported; an error a custom UnmarshalJSON
 *   returns (metav1.Time's, from decoding into a string) stops the decoder and is reported instead, with the same
 *   context (the fork's UnmarshalTypeError is an alias of encoding/json's) and the type `string`.
 * - apiserver handlers/rest.go transformDecodeError: `<Kind> in version "<version>" cannot be handled as a
 *   <Kind>: <error>`, 400 BadRequest, for create (create.go) and update (update.go) before anything else.
 * - apiserver handlers/patch.go: a JSON or merge patch's result is decoded with the same decoder, a strategic
 *   merge patch's with runtime.DefaultUnstructuredConverter (converter.go: `unrecognized type: string`, `cannot
 *   convert int64 to string`, `cannot restore slice from string`); either error is `errors.NewInvalid(GroupKind{},
 *   "", patch: Invalid value: <patched JSON, or the patch printed with %+v>: <error>)`, whose message is
 *   ` "" is invalid: …` and which kubectl prints as `The request is invalid: patch: …`.
 * - Answers of real API servers quoted in public bug reports have the same shapes: a numeric ConfigMap value
 *   (`… Go struct field ConfigMap.data of type string`), a Deployment's numeric env value (`EnvVar.spec.template.
 *   spec.containers.env.value`), a Role's rules given as a map (`Role.rules of type []v1.PolicyRule`), a patch
 *   refused as `"" is invalid: patch: Invalid value: "{…}": json: cannot unmarshal …`, and a `kubectl apply` of
 *   a ConfigMap with boolean data as `The request is invalid: patch: Invalid value: "map[data:map[…] …]":
 *   unrecognized type: string`.
 * The decoders' texts were also checked by running them, outside the repository, on Go structs mirroring the
 * table's (test/unit/kube-api-typed.test.ts lists the cases). What kubectl sends is read from the local API's request
 * log here: kubectl 1.32 reads YAML as YAML 1.1 (`name: n`
 * becomes `"name":false`), sends `fieldValidation=Strict` and validates nothing about built-in kinds itself.
 */
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { adminFetch } from '../../local/kube-api/testing.js';
import { apiError, kubectlSuite, useApi } from './harness.js';

const VAP_URL = '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies';

/** A policy on ConfigMap creates whose variable is named by `name`, as written in YAML (unquoted or quoted). */
function policyYaml(policy: string, name: string): string {
  return [
    'apiVersion: admissionregistration.k8s.io/v1',
    'kind: ValidatingAdmissionPolicy',
    'metadata:',
    `  name: ${policy}`,
    'spec:',
    '  matchConstraints:',
    '    resourceRules:',
    '      - apiGroups: [""]',
    '        apiVersions: ["v1"]',
    '        operations: ["CREATE"]',
    '        resources: ["configmaps"]',
    '  variables:',
    `    - name: ${name}`,
    '      expression: "1"',
    '  validations:',
    '    - expression: "true"',
    '',
  ].join('\n');
}

kubectlSuite('typed decode of built-in kinds', () => {
  const env = useApi();
  const stdin = (text: string) => ({ stdin: text });

  describe('create', () => {
    it('refuses, through kubectl apply, a ValidatingAdmissionPolicy whose unquoted `name: n` YAML 1.1 reads as false', async () => {
      env.api.requests.clear();
      const r = await env.kWith(stdin(policyYaml('typed-n', 'n')), 'apply', '-f', '-');
      expect([r.code, r.stderr.trim()]).toEqual([
        1,
        'Error from server (BadRequest): error when creating "STDIN": ValidatingAdmissionPolicy in version "v1" ' +
          'cannot be handled as a ValidatingAdmissionPolicy: json: cannot unmarshal bool into Go struct field ' +
          'Variable.spec.variables.name of type string',
      ]);
      const post = env.api.requests.all().find((q) => q.method === 'POST' && q.path === VAP_URL);
      expect(post?.query).toContain('fieldValidation=Strict');
      expect(post?.body).toContain('"variables":[{"expression":"1","name":false}]');
      expect(post?.status).toBe(400);
      const got = await env.k('get', 'validatingadmissionpolicy', 'typed-n');
      expect(got.stderr).toContain('NotFound');
    });

    it('creates the same policy when the name is quoted', async () => {
      const r = await env.kWith(stdin(policyYaml('typed-quoted', '"n"')), 'apply', '-f', '-');
      expect(r.stdout.trim(), r.stderr).toBe(
        'validatingadmissionpolicy.admissionregistration.k8s.io/typed-quoted created',
      );
      const vars = await env.k(
        'get',
        'validatingadmissionpolicy',
        'typed-quoted',
        '-o',
        'jsonpath={.spec.variables[0].name}',
      );
      expect(vars.stdout).toBe('n');
    });

    it('refuses a ConfigMap with a number in data, from client-node, as a 400 BadRequest Status', async () => {
      const e = await apiError(
        env.core.createNamespacedConfigMap({
          namespace: 'default',
          body: { metadata: { name: 'typed-cm' }, data: { port: 8080 as unknown as string } },
        }),
      );
      expect(e.code).toBe(400);
      expect(e.body).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message:
          'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct ' +
          'field ConfigMap.data of type string',
        reason: 'BadRequest',
        code: 400,
      });
    });

    it('refuses, through kubectl, a Role whose verbs are a string instead of a list', async () => {
      const role = [
        'apiVersion: rbac.authorization.k8s.io/v1',
        'kind: Role',
        'metadata: {name: typed-role, namespace: default}',
        'rules:',
        '  - apiGroups: [""]',
        '    resources: [pods]',
        '    verbs: get',
        '',
      ].join('\n');
      const r = await env.kWith(stdin(role), 'create', '-f', '-');
      expect(r.stderr.trim()).toBe(
        'Error from server (BadRequest): error when creating "STDIN": Role in version "v1" cannot be handled as a ' +
          'Role: json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type []string',
      );
    });

    it('decodes before the namespace is looked up and before admission', async () => {
      // A policy that denies every ConfigMap create: a decode error is answered before it is asked.
      const deny = [
        'apiVersion: admissionregistration.k8s.io/v1',
        'kind: ValidatingAdmissionPolicy',
        'metadata: {name: typed-deny}',
        'spec:',
        '  matchConstraints:',
        '    resourceRules: [{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"]}]',
        '  validations: [{expression: "false", message: no configmaps}]',
        '---',
        'apiVersion: admissionregistration.k8s.io/v1',
        'kind: ValidatingAdmissionPolicyBinding',
        'metadata: {name: typed-deny}',
        'spec: {policyName: typed-deny, validationActions: [Deny]}',
        '',
      ].join('\n');
      const applied = await env.kWith(stdin(deny), 'apply', '-f', '-');
      expect(applied.code, applied.stderr).toBe(0);
      const body = (name: string, on: unknown) => ({ metadata: { name }, data: { on: on as string } });
      const denied = await apiError(
        env.core.createNamespacedConfigMap({ namespace: 'default', body: body('quoted', 'true') }),
      );
      expect([denied.code, denied.body.reason]).toEqual([422, 'Invalid']);
      expect(String(denied.body.message)).toContain('no configmaps');
      const typed = 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal bool';
      const inDefault = await apiError(
        env.core.createNamespacedConfigMap({ namespace: 'default', body: body('bool', true) }),
      );
      const nowhere = await apiError(
        env.core.createNamespacedConfigMap({ namespace: 'nowhere', body: body('bool', true) }),
      );
      expect([inDefault.code, String(inDefault.body.message)]).toEqual([
        400,
        `${typed} into Go struct field ConfigMap.data of type string`,
      ]);
      expect([nowhere.code, String(nowhere.body.message)]).toEqual([
        400,
        `${typed} into Go struct field ConfigMap.data of type string`,
      ]);
      const removed = await env.kWith(stdin(deny), 'delete', '-f', '-');
      expect(removed.code, removed.stderr).toBe(0);
    });

    it('reports the first wrong field in document order (kubectl sends its keys sorted)', async () => {
      const yaml =
        'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typed-order, namespace: default}\n' +
        'data: {a: 1}\nbinaryData: {b: 2}\n';
      const k = await env.kWith(stdin(yaml), 'create', '-f', '-');
      expect(k.stderr).toContain(
        'json: cannot unmarshal number into Go struct field ConfigMap.binaryData of type []uint8',
      );
      const raw = await adminFetch(`${env.api.url}/api/v1/namespaces/default/configmaps`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"metadata":{"name":"typed-order"},"data":{"a":1},"binaryData":{"b":2}}',
      });
      expect(((await raw.json()) as { message: string }).message).toMatch(/ConfigMap\.data of type string$/);
    });

    it('names the innermost struct and the whole path, without list indices or map keys', async () => {
      const e = await apiError(
        env.core.createNamespacedPod({
          namespace: 'default',
          body: {
            metadata: { name: 'typed-pod' },
            spec: {
              containers: [
                { name: 'a', image: 'i' },
                { name: 'b', image: 'i', env: [{ name: 'PORT', value: 8080 as unknown as string }] },
              ],
            },
          },
        }),
      );
      expect(e.body.message).toBe(
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field ' +
          'EnvVar.spec.containers.env.value of type string',
      );
      const labels = await apiError(
        env.core.createNamespacedPod({
          namespace: 'default',
          body: {
            metadata: { name: 'typed-pod', labels: { tier: 1 as unknown as string } },
            spec: { containers: [{ name: 'a', image: 'i' }] },
          },
        }),
      );
      expect(labels.body.message).toBe(
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field ' +
          'ObjectMeta.metadata.labels of type string',
      );
    });

    it('accepts what the Go types take: integers for int32 and int64, null anywhere, unknown fields of any type', async () => {
      const post = (path: string, body: unknown) =>
        adminFetch(`${env.api.url}/api/v1/namespaces/default/${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const pod = await post('pods', {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'typed-ints', labels: null, annotations: null },
        spec: {
          terminationGracePeriodSeconds: 0,
          priority: 2147483647,
          nodeSelector: null,
          containers: [{ name: 'a', image: 'i', ports: [{ containerPort: 80, hostPort: null }], args: null }],
        },
      });
      expect(pod.status, await pod.text()).toBe(201);
      const cm = await post('configmaps?fieldValidation=Ignore', {
        metadata: { name: 'typed-unknown' },
        data: { a: 'b' },
        extra: 5,
      });
      expect(cm.status, await cm.text()).toBe(201);
    });

    it('refuses an integer that does not fit, or a fraction, with the number in the message', async () => {
      const event = (count: number) =>
        env.core.createNamespacedEvent({
          namespace: 'default',
          body: {
            metadata: { name: `typed-ev-${String(count).replace('.', '-')}` },
            involvedObject: { kind: 'ConfigMap', name: 'x', namespace: 'default' },
            reason: 'R',
            message: 'm',
            count,
          },
        });
      const big = await apiError(event(2 ** 31));
      const fraction = await apiError(event(1.5));
      expect([big.body.message, fraction.body.message]).toEqual([
        'Event in version "v1" cannot be handled as a Event: json: cannot unmarshal number 2147483648 into Go ' +
          'struct field Event.count of type int32',
        'Event in version "v1" cannot be handled as a Event: json: cannot unmarshal number 1.5 into Go struct ' +
          'field Event.count of type int32',
      ]);
      await event(2 ** 31 - 1);
    });

    it('stops at a timestamp that is not a string and reports it instead of an earlier wrong label', async () => {
      const e = await apiError(
        env.core.createNamespacedConfigMap({
          namespace: 'default',
          body: {
            metadata: {
              name: 'typed-time',
              labels: { a: 1 as unknown as string },
              creationTimestamp: 5 as unknown as Date,
            },
          },
        }),
      );
      expect(e.body.message).toBe(
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct ' +
          'field ObjectMeta.metadata.creationTimestamp of type string',
      );
    });

    it('decodes review requests too', async () => {
      const r = await adminFetch(`${env.api.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { verb: 'get', resource: ['pods'] } },
        }),
      });
      expect([r.status, ((await r.json()) as { message: string }).message]).toEqual([
        400,
        'SelfSubjectAccessReview in version "v1" cannot be handled as a SelfSubjectAccessReview: json: cannot ' +
          'unmarshal array into Go struct field ResourceAttributes.spec.resourceAttributes.resource of type string',
      ]);
    });
  });

  describe('update', () => {
    it('refuses a client-node replace with a string for a bool, and keeps the stored object', async () => {
      const sa = await env.core.createNamespacedServiceAccount({
        namespace: 'default',
        body: { metadata: { name: 'typed-sa' }, automountServiceAccountToken: false },
      });
      const e = await apiError(
        env.core.replaceNamespacedServiceAccount({
          namespace: 'default',
          name: 'typed-sa',
          body: { ...sa, automountServiceAccountToken: 'yes' as unknown as boolean },
        }),
      );
      expect([e.code, e.body.message]).toEqual([
        400,
        'ServiceAccount in version "v1" cannot be handled as a ServiceAccount: json: cannot unmarshal string into ' +
          'Go struct field ServiceAccount.automountServiceAccountToken of type bool',
      ]);
      const kept = await env.core.readNamespacedServiceAccount({ namespace: 'default', name: 'typed-sa' });
      expect([kept.automountServiceAccountToken, kept.metadata?.resourceVersion]).toEqual([
        false,
        sa.metadata?.resourceVersion,
      ]);
    });
  });

  describe('patch', () => {
    const patchInvalid = (value: RegExp, why: string) => ({
      kind: 'Status',
      status: 'Failure',
      reason: 'Invalid',
      code: 422,
      details: {
        causes: [{ reason: 'FieldValueInvalid', field: 'patch', message: expect.stringMatching(value) }],
      },
      message: expect.stringMatching(
        new RegExp(`^ "" is invalid: patch: Invalid value: .*: ${escapeRegExp(why)}$`, 's'),
      ),
    });

    it('refuses a merge patch whose result has a bool for a string type, as kubectl prints it', async () => {
      const before = await env.k('get', 'validatingadmissionpolicy', 'typed-quoted', '-o', 'json');
      const r = await env.k(
        'patch',
        'validatingadmissionpolicy',
        'typed-quoted',
        '--type=merge',
        '-p',
        '{"spec":{"failurePolicy":true}}',
      );
      expect(r.stderr.trim()).toMatch(
        /^The request is invalid: patch: Invalid value: "\{\\"apiVersion\\":\\"admissionregistration\.k8s\.io\/v1\\",.*\\"failurePolicy\\":true.*\}": json: cannot unmarshal bool into Go struct field ValidatingAdmissionPolicySpec\.spec\.failurePolicy of type v1\.FailurePolicyType$/s,
      );
      const after = await env.k('get', 'validatingadmissionpolicy', 'typed-quoted', '-o', 'json');
      expect(after.stdout).toBe(before.stdout);
    });

    it('refuses a client-node JSON patch the same way, with the patch handler 422 Status', async () => {
      const r = await adminFetch(`${env.api.url}${VAP_URL}/typed-quoted`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json-patch+json' },
        body: JSON.stringify([{ op: 'replace', path: '/spec/variables/0/name', value: false }]),
      });
      expect(r.status).toBe(422);
      const why =
        'json: cannot unmarshal bool into Go struct field Variable.spec.variables.name of type string';
      expect(await r.json()).toMatchObject(patchInvalid(/\\"name\\":false/, why));
    });

    it('refuses a strategic merge patch in the unstructured converter words, the patch printed as Go prints a map', async () => {
      const rbac = env.kc.makeApiClient(RbacAuthorizationV1Api);
      await rbac.createNamespacedRole({
        namespace: 'default',
        body: {
          metadata: { name: 'typed-smp' },
          rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }],
        },
      });
      const r = await env.k(
        'patch',
        'role',
        'typed-smp',
        '-n',
        'default',
        '-p',
        '{"rules":[{"verbs":"list"}]}',
      );
      expect(r.stderr.trim()).toBe(
        'The request is invalid: patch: Invalid value: "map[rules:[map[verbs:list]]]": cannot restore slice from string',
      );
      const stored = await rbac.readNamespacedRole({ namespace: 'default', name: 'typed-smp' });
      expect(stored.rules?.[0]?.verbs).toEqual(['get']);
    });

    it('refuses kubectl apply of `name: n` over an existing policy (a strategic merge patch)', async () => {
      const r = await env.kWith(stdin(policyYaml('typed-quoted', 'n')), 'apply', '-f', '-');
      expect(r.code).toBe(1);
      expect(r.stderr.trim()).toMatch(
        /^The request is invalid: patch: Invalid value: "map\[metadata:map\[annotations:map\[kubectl\.kubernetes\.io\/last-applied-configuration:.*\] spec:map\[.*variables:\[map\[expression:1 name:false\].*\]\]\]": unrecognized type: string$/s,
      );
      const name = await env.k(
        'get',
        'validatingadmissionpolicy',
        'typed-quoted',
        '-o',
        'jsonpath={.spec.variables[0].name}',
      );
      expect(name.stdout).toBe('n');
    });
  });
});

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
