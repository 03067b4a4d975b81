/**
 * The local API's typed decode (local/kube-api/typed.ts, typed-kinds.ts, ADR 0127): the error texts of the API
 * server's two decoders for values of the wrong type, fmt's %+v of a patch, and the lab's own manifests read as
 * kubectl reads them.
 *
 * How the expected texts were checked against the real thing: each case below was also run, outside the
 * repository, through sigs.k8s.io/json's decoder at the commit apimachinery v0.32.4 requires
 * (UnmarshalCaseSensitivePreserveInts) and through apimachinery v0.32.4's fromUnstructured (runtime/converter.go,
 * with structured-merge-diff's reflect cache reduced to its json.Unmarshaler case), both into Go structs mirroring
 * the table's fields, their package named v1; the texts here are what Go printed, and so are the %+v lines. The
 * table's struct names, field order and type names were read from k8s.io/api, apimachinery's meta/v1 and
 * apiextensions-apiserver at v0.32.4; conformance/typed-decode.test.ts shows the same texts through kubectl and
 * client-node.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import type { JsonObject, JsonValue } from '../../local/kube-api/json.js';
import { convertError, type GoType, goFloat, goPrint, jsonDecodeError } from '../../local/kube-api/typed.js';
import { builtinType } from '../../local/kube-api/typed-kinds.js';

const ROOT = join(import.meta.dirname, '../..');
const GROUP: Record<string, string> = {
  Role: 'rbac.authorization.k8s.io',
  ValidatingAdmissionPolicy: 'admissionregistration.k8s.io',
  SelfSubjectAccessReview: 'authorization.k8s.io',
  CustomResourceDefinition: 'apiextensions.k8s.io',
};

function typeOf(kind: string) {
  const t = builtinType(GROUP[kind] ?? '', kind);
  if (!t) throw new Error(`no Go type for ${kind}`);
  return t;
}

/** [kind, JSON body, sigs.k8s.io/json's error, the unstructured converter's error] */
const CASES: readonly [string, string, string | null, string | null][] = [
  [
    'ValidatingAdmissionPolicy',
    '{"metadata":{"name":"p"},"spec":{"variables":[{"expression":"1","name":false}]}}',
    'json: cannot unmarshal bool into Go struct field Variable.spec.variables.name of type string',
    'unrecognized type: string',
  ],
  [
    'ValidatingAdmissionPolicy',
    '{"spec":{"failurePolicy":true}}',
    'json: cannot unmarshal bool into Go struct field ValidatingAdmissionPolicySpec.spec.failurePolicy of type v1.FailurePolicyType',
    'unrecognized type: string',
  ],
  [
    'ValidatingAdmissionPolicy',
    '{"spec":{"matchConstraints":{"resourceRules":[{"operations":"CREATE"}]}}}',
    'json: cannot unmarshal string into Go struct field NamedRuleWithOperations.spec.matchConstraints.resourceRules.operations of type []v1.OperationType',
    'cannot restore slice from string',
  ],
  [
    'ValidatingAdmissionPolicy',
    '{"spec":{"matchConstraints":{"resourceRules":[{"apiGroups":[1]}]}}}',
    'json: cannot unmarshal number into Go struct field NamedRuleWithOperations.spec.matchConstraints.resourceRules.apiGroups of type string',
    'cannot convert int64 to string',
  ],
  [
    'ValidatingAdmissionPolicy',
    '{"spec":[]}',
    'json: cannot unmarshal array into Go struct field ValidatingAdmissionPolicy.spec of type v1.ValidatingAdmissionPolicySpec',
    'cannot restore struct from: slice',
  ],
  [
    'ConfigMap',
    '{"data":{"a":5}}',
    'json: cannot unmarshal number into Go struct field ConfigMap.data of type string',
    'cannot convert int64 to string',
  ],
  [
    'ConfigMap',
    '{"data":{"a":{}}}',
    'json: cannot unmarshal object into Go struct field ConfigMap.data of type string',
    'unrecognized type: string',
  ],
  // Document order for the decoder, Go field order (data before binaryData) for the converter.
  [
    'ConfigMap',
    '{"binaryData":{"b":2},"data":{"a":1}}',
    'json: cannot unmarshal number into Go struct field ConfigMap.binaryData of type []uint8',
    'cannot convert int64 to string',
  ],
  [
    'ConfigMap',
    '{"data":{"a":1},"binaryData":{"b":2}}',
    'json: cannot unmarshal number into Go struct field ConfigMap.data of type string',
    'cannot convert int64 to string',
  ],
  [
    'ConfigMap',
    '{"data":"x"}',
    'json: cannot unmarshal string into Go struct field ConfigMap.data of type map[string]string',
    'cannot restore map from string',
  ],
  // A timestamp's own UnmarshalJSON stops the decoder: its error wins over the label's saved before it.
  [
    'ConfigMap',
    '{"metadata":{"labels":{"a":1},"creationTimestamp":5}}',
    'json: cannot unmarshal number into Go struct field ObjectMeta.metadata.creationTimestamp of type string',
    'json: cannot unmarshal number into Go value of type string',
  ],
  [
    'ConfigMap',
    '{"metadata":{"creationTimestamp":{}}}',
    'json: cannot unmarshal object into Go struct field ObjectMeta.metadata.creationTimestamp of type string',
    'json: cannot unmarshal object into Go value of type string',
  ],
  ['ConfigMap', '{"metadata":{"labels":{"a":null},"annotations":null,"finalizers":[null]}}', null, null],
  [
    'ConfigMap',
    '{"immutable":"yes"}',
    'json: cannot unmarshal string into Go struct field ConfigMap.immutable of type bool',
    'unrecognized type: bool',
  ],
  [
    'ConfigMap',
    '{"metadata":{"generation":1.5}}',
    'json: cannot unmarshal number 1.5 into Go struct field ObjectMeta.metadata.generation of type int64',
    'cannot convert float64 to int64',
  ],
  ['ConfigMap', '{"metadata":{"generation":9007199254740993}}', null, null],
  [
    'ConfigMap',
    '{"metadata":{"ownerReferences":{"a":1}}}',
    'json: cannot unmarshal object into Go struct field ObjectMeta.metadata.ownerReferences of type []v1.OwnerReference',
    'cannot restore slice from map',
  ],
  [
    'ConfigMap',
    '{"metadata":{"ownerReferences":[{"uid":5}]}}',
    'json: cannot unmarshal number into Go struct field OwnerReference.metadata.ownerReferences.uid of type types.UID',
    'cannot convert int64 to types.UID',
  ],
  [
    'ConfigMap',
    '{"metadata":{"ownerReferences":[{"controller":"true"}]}}',
    'json: cannot unmarshal string into Go struct field OwnerReference.metadata.ownerReferences.controller of type bool',
    'unrecognized type: bool',
  ],
  [
    'Role',
    '{"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":"get"}]}',
    'json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type []string',
    'cannot restore slice from string',
  ],
  [
    'Role',
    '{"rules":{"verbs":["get"]}}',
    'json: cannot unmarshal object into Go struct field Role.rules of type []v1.PolicyRule',
    'cannot restore slice from map',
  ],
  [
    'Role',
    '{"rules":[{"verbs":[1]}]}',
    'json: cannot unmarshal number into Go struct field PolicyRule.rules.verbs of type string',
    'cannot convert int64 to string',
  ],
  [
    'Pod',
    '{"spec":{"containers":[{"name":"a"},{"name":"b","env":[{"name":"PORT","value":8080}]}]}}',
    'json: cannot unmarshal number into Go struct field EnvVar.spec.containers.env.value of type string',
    'cannot convert int64 to string',
  ],
  [
    'Pod',
    '{"spec":{"imagePullSecrets":["x"]}}',
    'json: cannot unmarshal string into Go struct field PodSpec.spec.imagePullSecrets of type v1.LocalObjectReference',
    'cannot restore struct from: string',
  ],
  ['Pod', '{"spec":{"terminationGracePeriodSeconds":0,"priority":2147483647}}', null, null],
  // The converter converts an int64 to an int32 without a range check.
  [
    'Pod',
    '{"spec":{"priority":2147483648}}',
    'json: cannot unmarshal number 2147483648 into Go struct field PodSpec.spec.priority of type int32',
    null,
  ],
  [
    'Pod',
    '{"spec":{"containers":[{"name":"a","command":"sleep"}]}}',
    'json: cannot unmarshal string into Go struct field Container.spec.containers.command of type []string',
    'cannot restore slice from string',
  ],
  [
    'Event',
    '{"count":2147483648}',
    'json: cannot unmarshal number 2147483648 into Go struct field Event.count of type int32',
    null,
  ],
  [
    'Event',
    '{"count":1.5}',
    'json: cannot unmarshal number 1.5 into Go struct field Event.count of type int32',
    'cannot convert float64 to int32',
  ],
  ['Event', '{"count":-2147483648}', null, null],
  [
    'SelfSubjectAccessReview',
    '{"spec":{"resourceAttributes":{"verb":"get","resource":["pods"]}}}',
    'json: cannot unmarshal array into Go struct field ResourceAttributes.spec.resourceAttributes.resource of type string',
    'unrecognized type: string',
  ],
];

describe('typed decode', () => {
  it.each(CASES)('%s %s: the JSON decoder', (kind, body, decoded) => {
    expect(jsonDecodeError(JSON.parse(body) as JsonValue, typeOf(kind)) ?? null).toBe(decoded);
  });

  it.each(CASES)('%s %s: the unstructured converter', (kind, body, _decoded, converted) => {
    expect(convertError(JSON.parse(body) as JsonValue, typeOf(kind)) ?? null).toBe(converted);
  });

  it('has a Go type for every built-in kind the local API serves, and none for custom resources', async () => {
    const { BUILTIN_RESOURCES } = await import('../../local/kube-api/registry.js');
    expect(BUILTIN_RESOURCES.filter((d) => !builtinType(d.group, d.kind)).map((d) => d.kind)).toEqual([]);
    expect(builtinType('kubeovn.io', 'IptablesEIP')).toBeUndefined();
  });

  it('checks a CRD schema recursively, through properties', () => {
    const crd = {
      spec: {
        versions: [
          {
            name: 'v1',
            schema: { openAPIV3Schema: { properties: { spec: { properties: { a: { type: 5 } } } } } },
          },
        ],
      },
    };
    expect(jsonDecodeError(crd, typeOf('CustomResourceDefinition'))).toBe(
      'json: cannot unmarshal number into Go struct field JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.properties.type of type string',
    );
  });
});

describe("fmt's %+v of a decoded patch", () => {
  it('prints maps with sorted keys, nil, bare strings, int64s and float64s as Go does', () => {
    const patch = JSON.parse(
      '{"spec":{"failurePolicy":true,"n":1,"f":1.5,"h":0.00001,"i":123456.5,"j":1234567.5,"k":null,' +
        '"l":[1,"a",{"z":1,"b":2}],"m":{},"o":[]}}',
    ) as JsonValue;
    expect(goPrint(patch)).toBe(
      'map[spec:map[f:1.5 failurePolicy:true h:1e-05 i:123456.5 j:1.2345675e+06 k:<nil> l:[1 a map[b:2 z:1]] m:map[] n:1 o:[]]]',
    );
    const more = JSON.parse('{"x":1e21,"y":0.0001,"z":-2.5,"v":1e-7,"u":12345678912345678}') as JsonValue;
    expect(goPrint(more)).toBe('map[u:12345678912345678 v:1e-07 x:1e+21 y:0.0001 z:-2.5]');
  });

  it('formats floats as strconv does for the shortest form (%e from an exponent of 6, or below -4)', () => {
    expect([1e6, 999999.5, 0.0001, 0.00001, -0.5, 2.5e-300].map(goFloat)).toEqual([
      '1e+06',
      '999999.5',
      '0.0001',
      '1e-05',
      '-0.5',
      '2.5e-300',
    ]);
  });
});

/** YAML files under `dir` (recursively). */
function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(name) ? [path] : [];
  });
}

/** Every document of `files` whose kind has a Go type, parsed as YAML 1.1 (as kubectl 1.32 reads YAML). */
function builtinObjects(files: readonly string[]): { file: string; obj: JsonObject; t: GoType }[] {
  const docs = files.flatMap((file) =>
    parseAllDocuments(readFileSync(file, 'utf8'), { version: '1.1' }).map((d) => ({
      file,
      obj: d.toJS() as JsonObject | null,
    })),
  );
  return docs.flatMap(({ file, obj }) => {
    const apiVersion = typeof obj?.apiVersion === 'string' ? obj.apiVersion : '';
    const group = apiVersion.includes('/') ? (apiVersion.split('/')[0] ?? '') : '';
    const t = obj && typeof obj.kind === 'string' ? builtinType(group, obj.kind) : undefined;
    return obj && t ? [{ file, obj, t }] : [];
  });
}

describe("the lab's own manifests", () => {
  // kubectl reads YAML as YAML 1.1 (`name: n` is false there); a real API server would refuse a wrong type.
  const files = [...yamlFiles(join(ROOT, 'infra')), ...yamlFiles(join(ROOT, 'local/rbac'))];

  it('decode into their Go types when read as kubectl reads them', () => {
    const objects = builtinObjects(files);
    const problems = objects.flatMap(({ file, obj, t }) => {
      const e = jsonDecodeError(obj, t) ?? convertError(obj, t);
      return e ? [`${file}: ${String(obj.kind)}: ${e}`] : [];
    });
    expect(problems).toEqual([]);
    // The check saw the kinds the lab applies: the CRDs, RBAC, the policies and their bindings, a namespace.
    expect(new Set(objects.map((o) => o.obj.kind))).toEqual(
      new Set([
        'CustomResourceDefinition',
        'Role',
        'ClusterRole',
        'RoleBinding',
        'ClusterRoleBinding',
        'ValidatingAdmissionPolicy',
        'ValidatingAdmissionPolicyBinding',
        'Namespace',
        'ServiceAccount',
      ]),
    );
  });

  it('would be caught: an unquoted `name: n` in a policy', () => {
    const [doc] = parseAllDocuments(
      'kind: ValidatingAdmissionPolicy\nspec:\n  variables:\n    - name: n\n      expression: "1"\n',
      { version: '1.1' },
    );
    expect(jsonDecodeError(doc?.toJS() as JsonObject, typeOf('ValidatingAdmissionPolicy'))).toBe(
      'json: cannot unmarshal bool into Go struct field Variable.spec.variables.name of type string',
    );
  });
});
