/**
 * The Go types of the built-in kinds the local API serves, as k8s.io/api (and apimachinery's metav1,
 * apiextensions-apiserver's v1) declare them at v0.32: each struct's JSON field names in declaration order, with the
 * name reflect prints for each type. Only the fields the product, kubectl and the lab write, and their obvious
 * siblings, are here; a field not listed is not type-checked (typed.ts, ADR 0127). A struct's package is `v1` in all
 * of them (core/v1, meta/v1, rbac/v1, admissionregistration/v1, authorization/v1, authentication/v1,
 * apiextensions/v1), so a type prints as `v1.<Name>`.
 */
import { badRequest, patchNotDecodable } from './errors.js';
import type { JsonObject, JsonValue } from './json.js';
import type { ResourceDef } from './registry.js';
import { convertError, type Fields, type GoType, goPrint, jsonDecodeError } from './typed.js';

const str = (go = 'string'): GoType => ({ kind: 'string', go });
const STRING = str();
const BOOL: GoType = { kind: 'bool', go: 'bool' };
const INT32: GoType = { kind: 'int', go: 'int32', bits: 32 };
const INT64: GoType = { kind: 'int', go: 'int64', bits: 64 };
const FLOAT64: GoType = { kind: 'float', go: 'float64' };
const TIME: GoType = { kind: 'time', go: 'v1.Time' };
const MICRO_TIME: GoType = { kind: 'time', go: 'v1.MicroTime' };
const BYTES: GoType = { kind: 'bytes', go: '[]uint8' };
const custom = (go: string): GoType => ({ kind: 'any', go });
const slice = (elem: GoType, go = `[]${elem.go}`): GoType => ({ kind: 'slice', go, elem });
const map = (elem: GoType, go = `map[string]${elem.go}`): GoType => ({ kind: 'map', go, elem });
const STRINGS = slice(STRING);
const STRING_MAP = map(STRING);

/** A struct type `v1.<name>`; `fields` may be a function for a type that contains itself. */
function struct(name: string, fields: Fields | (() => Fields)): GoType {
  let resolved: Fields | undefined;
  return {
    kind: 'struct',
    go: `v1.${name}`,
    fields: () => {
      resolved ??= typeof fields === 'function' ? fields() : fields;
      return resolved;
    },
  };
}

// ------------------------------------------------------------------ meta/v1

const OWNER_REFERENCE = struct('OwnerReference', {
  apiVersion: STRING,
  kind: STRING,
  name: STRING,
  uid: str('types.UID'),
  controller: BOOL,
  blockOwnerDeletion: BOOL,
});

const MANAGED_FIELDS_ENTRY = struct('ManagedFieldsEntry', {
  manager: STRING,
  operation: str('v1.ManagedFieldsOperationType'),
  apiVersion: STRING,
  time: TIME,
  fieldsType: STRING,
  fieldsV1: custom('v1.FieldsV1'),
  subresource: STRING,
});

const OBJECT_META = struct('ObjectMeta', {
  name: STRING,
  generateName: STRING,
  namespace: STRING,
  selfLink: STRING,
  uid: str('types.UID'),
  resourceVersion: STRING,
  generation: INT64,
  creationTimestamp: TIME,
  deletionTimestamp: TIME,
  deletionGracePeriodSeconds: INT64,
  labels: STRING_MAP,
  annotations: STRING_MAP,
  ownerReferences: slice(OWNER_REFERENCE),
  finalizers: STRINGS,
  managedFields: slice(MANAGED_FIELDS_ENTRY),
});

const LABEL_SELECTOR_REQUIREMENT = struct('LabelSelectorRequirement', {
  key: STRING,
  operator: str('v1.LabelSelectorOperator'),
  values: STRINGS,
});

const LABEL_SELECTOR = struct('LabelSelector', {
  matchLabels: STRING_MAP,
  matchExpressions: slice(LABEL_SELECTOR_REQUIREMENT),
});

const CONDITION = struct('Condition', {
  type: STRING,
  status: str('v1.ConditionStatus'),
  observedGeneration: INT64,
  lastTransitionTime: TIME,
  reason: STRING,
  message: STRING,
});

/** A top-level kind: TypeMeta inline (read before the decode, not checked here), metadata, then its own fields. */
function kind(name: string, fields: Fields): GoType {
  return struct(name, { metadata: OBJECT_META, ...fields });
}

// ------------------------------------------------------------------ core/v1

const OBJECT_REFERENCE = struct('ObjectReference', {
  kind: STRING,
  namespace: STRING,
  name: STRING,
  uid: str('types.UID'),
  apiVersion: STRING,
  resourceVersion: STRING,
  fieldPath: STRING,
});

const LOCAL_OBJECT_REFERENCE_FIELDS: Fields = { name: STRING };
const LOCAL_OBJECT_REFERENCE = struct('LocalObjectReference', LOCAL_OBJECT_REFERENCE_FIELDS);

const NAMESPACE = kind('Namespace', {
  spec: struct('NamespaceSpec', { finalizers: slice(str('v1.FinalizerName')) }),
  status: struct('NamespaceStatus', {
    phase: str('v1.NamespacePhase'),
    conditions: slice(
      struct('NamespaceCondition', {
        type: str('v1.NamespaceConditionType'),
        status: str('v1.ConditionStatus'),
        lastTransitionTime: TIME,
        reason: STRING,
        message: STRING,
      }),
    ),
  }),
});

const CONFIG_MAP = kind('ConfigMap', {
  immutable: BOOL,
  data: STRING_MAP,
  binaryData: map(BYTES),
});

const SERVICE_ACCOUNT = kind('ServiceAccount', {
  secrets: slice(OBJECT_REFERENCE),
  imagePullSecrets: slice(LOCAL_OBJECT_REFERENCE),
  automountServiceAccountToken: BOOL,
});

const EVENT = kind('Event', {
  involvedObject: OBJECT_REFERENCE,
  reason: STRING,
  message: STRING,
  source: struct('EventSource', { component: STRING, host: STRING }),
  firstTimestamp: TIME,
  lastTimestamp: TIME,
  count: INT32,
  type: STRING,
  eventTime: MICRO_TIME,
  series: struct('EventSeries', { count: INT32, lastObservedTime: MICRO_TIME }),
  action: STRING,
  related: OBJECT_REFERENCE,
  reportingComponent: STRING,
  reportingInstance: STRING,
});

// Pods: the fields of the gateway pods kube-ovn's templates make (local/controllers/gateway-pod.ts), of the pods the
// tests create, and what the local kubelet writes in status. Probes, resources' quantities and node affinity are not
// checked.
const RESOURCE_LIST = map(custom('resource.Quantity'), 'v1.ResourceList');

const RESOURCE_REQUIREMENTS = struct('ResourceRequirements', {
  limits: RESOURCE_LIST,
  requests: RESOURCE_LIST,
});

const EXEC_ACTION = struct('ExecAction', { command: STRINGS });
const LIFECYCLE_HANDLER = struct('LifecycleHandler', { exec: EXEC_ACTION });

const CONTAINER = struct('Container', {
  name: STRING,
  image: STRING,
  command: STRINGS,
  args: STRINGS,
  workingDir: STRING,
  ports: slice(
    struct('ContainerPort', {
      name: STRING,
      hostPort: INT32,
      containerPort: INT32,
      protocol: str('v1.Protocol'),
      hostIP: STRING,
    }),
  ),
  env: slice(
    struct('EnvVar', {
      name: STRING,
      value: STRING,
      valueFrom: struct('EnvVarSource', {
        fieldRef: struct('ObjectFieldSelector', { apiVersion: STRING, fieldPath: STRING }),
        configMapKeyRef: struct('ConfigMapKeySelector', {
          ...LOCAL_OBJECT_REFERENCE_FIELDS,
          key: STRING,
          optional: BOOL,
        }),
        secretKeyRef: struct('SecretKeySelector', {
          ...LOCAL_OBJECT_REFERENCE_FIELDS,
          key: STRING,
          optional: BOOL,
        }),
      }),
    }),
  ),
  resources: RESOURCE_REQUIREMENTS,
  volumeMounts: slice(
    struct('VolumeMount', {
      name: STRING,
      readOnly: BOOL,
      mountPath: STRING,
      subPath: STRING,
      subPathExpr: STRING,
    }),
  ),
  lifecycle: struct('Lifecycle', { postStart: LIFECYCLE_HANDLER, preStop: LIFECYCLE_HANDLER }),
  terminationMessagePath: STRING,
  terminationMessagePolicy: str('v1.TerminationMessagePolicy'),
  imagePullPolicy: str('v1.PullPolicy'),
  securityContext: struct('SecurityContext', {
    capabilities: struct('Capabilities', {
      add: slice(str('v1.Capability')),
      drop: slice(str('v1.Capability')),
    }),
    privileged: BOOL,
    runAsUser: INT64,
    runAsGroup: INT64,
    runAsNonRoot: BOOL,
    readOnlyRootFilesystem: BOOL,
    allowPrivilegeEscalation: BOOL,
  }),
  stdin: BOOL,
  stdinOnce: BOOL,
  tty: BOOL,
});

const POD_AFFINITY_TERM = struct('PodAffinityTerm', {
  labelSelector: LABEL_SELECTOR,
  namespaces: STRINGS,
  topologyKey: STRING,
  namespaceSelector: LABEL_SELECTOR,
  matchLabelKeys: STRINGS,
  mismatchLabelKeys: STRINGS,
});

const podAffinity = (name: string): GoType =>
  struct(name, {
    requiredDuringSchedulingIgnoredDuringExecution: slice(POD_AFFINITY_TERM),
    preferredDuringSchedulingIgnoredDuringExecution: slice(
      struct('WeightedPodAffinityTerm', { weight: INT32, podAffinityTerm: POD_AFFINITY_TERM }),
    ),
  });

const POD_SPEC = struct('PodSpec', {
  volumes: slice(
    struct('Volume', {
      name: STRING,
      // VolumeSource, inline.
      hostPath: struct('HostPathVolumeSource', { path: STRING, type: str('v1.HostPathType') }),
      emptyDir: struct('EmptyDirVolumeSource', {
        medium: str('v1.StorageMedium'),
        sizeLimit: custom('resource.Quantity'),
      }),
      configMap: struct('ConfigMapVolumeSource', {
        ...LOCAL_OBJECT_REFERENCE_FIELDS,
        items: slice(struct('KeyToPath', { key: STRING, path: STRING, mode: INT32 })),
        defaultMode: INT32,
        optional: BOOL,
      }),
    }),
  ),
  initContainers: slice(CONTAINER),
  containers: slice(CONTAINER),
  restartPolicy: str('v1.RestartPolicy'),
  terminationGracePeriodSeconds: INT64,
  activeDeadlineSeconds: INT64,
  dnsPolicy: str('v1.DNSPolicy'),
  nodeSelector: STRING_MAP,
  serviceAccountName: STRING,
  serviceAccount: STRING,
  automountServiceAccountToken: BOOL,
  nodeName: STRING,
  hostNetwork: BOOL,
  hostPID: BOOL,
  hostIPC: BOOL,
  shareProcessNamespace: BOOL,
  imagePullSecrets: slice(LOCAL_OBJECT_REFERENCE),
  hostname: STRING,
  subdomain: STRING,
  affinity: struct('Affinity', {
    nodeAffinity: custom('v1.NodeAffinity'),
    podAffinity: podAffinity('PodAffinity'),
    podAntiAffinity: podAffinity('PodAntiAffinity'),
  }),
  schedulerName: STRING,
  tolerations: slice(
    struct('Toleration', {
      key: STRING,
      operator: str('v1.TolerationOperator'),
      value: STRING,
      effect: str('v1.TaintEffect'),
      tolerationSeconds: INT64,
    }),
  ),
  priorityClassName: STRING,
  priority: INT32,
  enableServiceLinks: BOOL,
});

const CONTAINER_STATE = struct('ContainerState', {
  waiting: struct('ContainerStateWaiting', { reason: STRING, message: STRING }),
  running: struct('ContainerStateRunning', { startedAt: TIME }),
  terminated: struct('ContainerStateTerminated', {
    exitCode: INT32,
    signal: INT32,
    reason: STRING,
    message: STRING,
    startedAt: TIME,
    finishedAt: TIME,
    containerID: STRING,
  }),
});

const CONTAINER_STATUS = struct('ContainerStatus', {
  name: STRING,
  state: CONTAINER_STATE,
  lastState: CONTAINER_STATE,
  ready: BOOL,
  restartCount: INT32,
  image: STRING,
  imageID: STRING,
  containerID: STRING,
  started: BOOL,
});

const POD_STATUS = struct('PodStatus', {
  phase: str('v1.PodPhase'),
  conditions: slice(
    struct('PodCondition', {
      type: str('v1.PodConditionType'),
      status: str('v1.ConditionStatus'),
      lastProbeTime: TIME,
      lastTransitionTime: TIME,
      reason: STRING,
      message: STRING,
    }),
  ),
  message: STRING,
  reason: STRING,
  nominatedNodeName: STRING,
  hostIP: STRING,
  hostIPs: slice(struct('HostIP', { ip: STRING })),
  podIP: STRING,
  podIPs: slice(struct('PodIP', { ip: STRING })),
  startTime: TIME,
  initContainerStatuses: slice(CONTAINER_STATUS),
  containerStatuses: slice(CONTAINER_STATUS),
  qosClass: str('v1.PodQOSClass'),
});

const POD = kind('Pod', { spec: POD_SPEC, status: POD_STATUS });

// ------------------------------------------------------------------ rbac/v1

const POLICY_RULES = slice(
  struct('PolicyRule', {
    verbs: STRINGS,
    apiGroups: STRINGS,
    resources: STRINGS,
    resourceNames: STRINGS,
    nonResourceURLs: STRINGS,
  }),
);

const SUBJECTS = slice(
  struct('Subject', { kind: STRING, apiGroup: STRING, name: STRING, namespace: STRING }),
);
const ROLE_REF = struct('RoleRef', { apiGroup: STRING, kind: STRING, name: STRING });

const ROLE = kind('Role', { rules: POLICY_RULES });
const CLUSTER_ROLE = kind('ClusterRole', {
  rules: POLICY_RULES,
  aggregationRule: struct('AggregationRule', { clusterRoleSelectors: slice(LABEL_SELECTOR) }),
});
const ROLE_BINDING = kind('RoleBinding', { subjects: SUBJECTS, roleRef: ROLE_REF });
const CLUSTER_ROLE_BINDING = kind('ClusterRoleBinding', { subjects: SUBJECTS, roleRef: ROLE_REF });

// ------------------------------------------------------------------ admissionregistration/v1

const NAMED_RULE_WITH_OPERATIONS = struct('NamedRuleWithOperations', {
  resourceNames: STRINGS,
  // RuleWithOperations, inline, and its Rule, inline.
  operations: slice(str('v1.OperationType')),
  apiGroups: STRINGS,
  apiVersions: STRINGS,
  resources: STRINGS,
  scope: str('v1.ScopeType'),
});

const MATCH_RESOURCES = struct('MatchResources', {
  namespaceSelector: LABEL_SELECTOR,
  objectSelector: LABEL_SELECTOR,
  resourceRules: slice(NAMED_RULE_WITH_OPERATIONS),
  excludeResourceRules: slice(NAMED_RULE_WITH_OPERATIONS),
  matchPolicy: str('v1.MatchPolicyType'),
});

const VALIDATING_ADMISSION_POLICY = kind('ValidatingAdmissionPolicy', {
  spec: struct('ValidatingAdmissionPolicySpec', {
    paramKind: struct('ParamKind', { apiVersion: STRING, kind: STRING }),
    matchConstraints: MATCH_RESOURCES,
    validations: slice(
      struct('Validation', {
        expression: STRING,
        message: STRING,
        reason: str('v1.StatusReason'),
        messageExpression: STRING,
      }),
    ),
    failurePolicy: str('v1.FailurePolicyType'),
    auditAnnotations: slice(struct('AuditAnnotation', { key: STRING, valueExpression: STRING })),
    matchConditions: slice(struct('MatchCondition', { name: STRING, expression: STRING })),
    variables: slice(struct('Variable', { name: STRING, expression: STRING })),
  }),
  status: struct('ValidatingAdmissionPolicyStatus', {
    observedGeneration: INT64,
    typeChecking: struct('TypeChecking', {
      expressionWarnings: slice(struct('ExpressionWarning', { fieldRef: STRING, warning: STRING })),
    }),
    conditions: slice(CONDITION),
  }),
});

const VALIDATING_ADMISSION_POLICY_BINDING = kind('ValidatingAdmissionPolicyBinding', {
  spec: struct('ValidatingAdmissionPolicyBindingSpec', {
    policyName: STRING,
    paramRef: struct('ParamRef', {
      name: STRING,
      namespace: STRING,
      selector: LABEL_SELECTOR,
      parameterNotFoundAction: str('v1.ParameterNotFoundActionType'),
    }),
    matchResources: MATCH_RESOURCES,
    validationActions: slice(str('v1.ValidationAction')),
  }),
});

// ------------------------------------------------------------------ authorization/v1, authentication/v1

const EXTRA = map(slice(STRING, 'v1.ExtraValue'));

const RESOURCE_ATTRIBUTES = struct('ResourceAttributes', {
  namespace: STRING,
  verb: STRING,
  group: STRING,
  version: STRING,
  resource: STRING,
  subresource: STRING,
  name: STRING,
  fieldSelector: struct('FieldSelectorAttributes', {
    rawSelector: STRING,
    requirements: slice(
      struct('FieldSelectorRequirement', {
        key: STRING,
        operator: str('v1.FieldSelectorOperator'),
        values: STRINGS,
      }),
    ),
  }),
  labelSelector: struct('LabelSelectorAttributes', {
    rawSelector: STRING,
    requirements: slice(LABEL_SELECTOR_REQUIREMENT),
  }),
});

const NON_RESOURCE_ATTRIBUTES = struct('NonResourceAttributes', { path: STRING, verb: STRING });

const SUBJECT_ACCESS_REVIEW_STATUS = struct('SubjectAccessReviewStatus', {
  allowed: BOOL,
  denied: BOOL,
  reason: STRING,
  evaluationError: STRING,
});

const SUBJECT_ACCESS_REVIEW = kind('SubjectAccessReview', {
  spec: struct('SubjectAccessReviewSpec', {
    resourceAttributes: RESOURCE_ATTRIBUTES,
    nonResourceAttributes: NON_RESOURCE_ATTRIBUTES,
    user: STRING,
    groups: STRINGS,
    extra: EXTRA,
    uid: STRING,
  }),
  status: SUBJECT_ACCESS_REVIEW_STATUS,
});

const SELF_SUBJECT_ACCESS_REVIEW = kind('SelfSubjectAccessReview', {
  spec: struct('SelfSubjectAccessReviewSpec', {
    resourceAttributes: RESOURCE_ATTRIBUTES,
    nonResourceAttributes: NON_RESOURCE_ATTRIBUTES,
  }),
  status: SUBJECT_ACCESS_REVIEW_STATUS,
});

const SELF_SUBJECT_RULES_REVIEW = kind('SelfSubjectRulesReview', {
  spec: struct('SelfSubjectRulesReviewSpec', { namespace: STRING }),
});

const SELF_SUBJECT_REVIEW = kind('SelfSubjectReview', {
  status: struct('SelfSubjectReviewStatus', {
    userInfo: struct('UserInfo', { username: STRING, uid: STRING, groups: STRINGS, extra: EXTRA }),
  }),
});

// ------------------------------------------------------------------ apiextensions/v1

// A CRD's schema: the JSONSchemaProps fields kube-ovn's CRDs and the tests' use, recursively; `default`, `enum`'s
// values, `example`, `items` and `additionalProperties` have their own decoders and are not checked.
const JSON_SCHEMA_PROPS: GoType = struct('JSONSchemaProps', () => ({
  id: STRING,
  $schema: str('v1.JSONSchemaURL'),
  $ref: STRING,
  description: STRING,
  type: STRING,
  format: STRING,
  title: STRING,
  default: custom('v1.JSON'),
  maximum: FLOAT64,
  exclusiveMaximum: BOOL,
  minimum: FLOAT64,
  exclusiveMinimum: BOOL,
  maxLength: INT64,
  minLength: INT64,
  pattern: STRING,
  maxItems: INT64,
  minItems: INT64,
  uniqueItems: BOOL,
  multipleOf: FLOAT64,
  enum: slice(custom('v1.JSON')),
  maxProperties: INT64,
  minProperties: INT64,
  required: STRINGS,
  items: custom('v1.JSONSchemaPropsOrArray'),
  allOf: slice(JSON_SCHEMA_PROPS),
  oneOf: slice(JSON_SCHEMA_PROPS),
  anyOf: slice(JSON_SCHEMA_PROPS),
  not: JSON_SCHEMA_PROPS,
  properties: map(JSON_SCHEMA_PROPS),
  additionalProperties: custom('v1.JSONSchemaPropsOrBool'),
  patternProperties: map(JSON_SCHEMA_PROPS),
  nullable: BOOL,
  'x-kubernetes-preserve-unknown-fields': BOOL,
  'x-kubernetes-embedded-resource': BOOL,
  'x-kubernetes-int-or-string': BOOL,
  'x-kubernetes-list-map-keys': STRINGS,
  'x-kubernetes-list-type': STRING,
  'x-kubernetes-map-type': STRING,
}));

const CRD_NAMES = struct('CustomResourceDefinitionNames', {
  plural: STRING,
  singular: STRING,
  shortNames: STRINGS,
  kind: STRING,
  listKind: STRING,
  categories: STRINGS,
});

const CUSTOM_RESOURCE_DEFINITION = kind('CustomResourceDefinition', {
  spec: struct('CustomResourceDefinitionSpec', {
    group: STRING,
    names: CRD_NAMES,
    scope: str('v1.ResourceScope'),
    versions: slice(
      struct('CustomResourceDefinitionVersion', {
        name: STRING,
        served: BOOL,
        storage: BOOL,
        deprecated: BOOL,
        deprecationWarning: STRING,
        schema: struct('CustomResourceValidation', { openAPIV3Schema: JSON_SCHEMA_PROPS }),
        subresources: struct('CustomResourceSubresources', {
          status: struct('CustomResourceSubresourceStatus', {}),
          scale: struct('CustomResourceSubresourceScale', {
            specReplicasPath: STRING,
            statusReplicasPath: STRING,
            labelSelectorPath: STRING,
          }),
        }),
        additionalPrinterColumns: slice(
          struct('CustomResourceColumnDefinition', {
            name: STRING,
            type: STRING,
            format: STRING,
            description: STRING,
            priority: INT32,
            jsonPath: STRING,
          }),
        ),
        selectableFields: slice(struct('SelectableField', { jsonPath: STRING })),
      }),
    ),
    conversion: struct('CustomResourceConversion', { strategy: str('v1.ConversionStrategyType') }),
    preserveUnknownFields: BOOL,
  }),
  status: struct('CustomResourceDefinitionStatus', {
    conditions: slice(
      struct('CustomResourceDefinitionCondition', {
        type: str('v1.CustomResourceDefinitionConditionType'),
        status: str('v1.ConditionStatus'),
        lastTransitionTime: TIME,
        reason: STRING,
        message: STRING,
      }),
    ),
    acceptedNames: CRD_NAMES,
    storedVersions: STRINGS,
  }),
});

/** The Go type of each built-in kind, by `<group>/<Kind>`. */
const BUILTIN_TYPES: ReadonlyMap<string, GoType> = new Map([
  ['/Namespace', NAMESPACE],
  ['/Pod', POD],
  ['/ConfigMap', CONFIG_MAP],
  ['/Event', EVENT],
  ['/ServiceAccount', SERVICE_ACCOUNT],
  ['rbac.authorization.k8s.io/Role', ROLE],
  ['rbac.authorization.k8s.io/ClusterRole', CLUSTER_ROLE],
  ['rbac.authorization.k8s.io/RoleBinding', ROLE_BINDING],
  ['rbac.authorization.k8s.io/ClusterRoleBinding', CLUSTER_ROLE_BINDING],
  ['admissionregistration.k8s.io/ValidatingAdmissionPolicy', VALIDATING_ADMISSION_POLICY],
  ['admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding', VALIDATING_ADMISSION_POLICY_BINDING],
  ['authorization.k8s.io/SubjectAccessReview', SUBJECT_ACCESS_REVIEW],
  ['authorization.k8s.io/SelfSubjectAccessReview', SELF_SUBJECT_ACCESS_REVIEW],
  ['authorization.k8s.io/SelfSubjectRulesReview', SELF_SUBJECT_RULES_REVIEW],
  ['authentication.k8s.io/SelfSubjectReview', SELF_SUBJECT_REVIEW],
  ['apiextensions.k8s.io/CustomResourceDefinition', CUSTOM_RESOURCE_DEFINITION],
]);

/** The Go type of a built-in kind, or undefined (custom resources are decoded unstructured). */
export function builtinType(group: string, kindName: string): GoType | undefined {
  return BUILTIN_TYPES.get(`${group}/${kindName}`);
}

type Target = Pick<ResourceDef, 'group' | 'version' | 'kind' | 'custom'>;

/**
 * A create's or update's body as the API server decodes it into a built-in kind's Go type: a value of the wrong type
 * is `400 BadRequest`, `<Kind> in version "<v>" cannot be handled as a <Kind>: json: cannot unmarshal …`
 * (transformDecodeError), before any other check.
 */
export function checkBuiltinDecodes(def: Target, body: JsonObject): void {
  const t = def.custom ? undefined : builtinType(def.group, def.kind);
  const e = t && jsonDecodeError(body, t);
  if (e) throw badRequest(`${def.kind} in version "${def.version}" cannot be handled as a ${def.kind}: ${e}`);
}

/**
 * A patched built-in object as the API server decodes it: the JSON decoder for a JSON or merge patch's result, the
 * unstructured converter for a strategic merge patch's; either refusal is the patch handler's 422.
 */
export function checkPatchedBuiltinDecodes(
  def: Target,
  strategic: boolean,
  patched: JsonObject,
  patch: JsonValue,
): void {
  const t = def.custom ? undefined : builtinType(def.group, def.kind);
  if (!t) return;
  if (strategic) {
    const e = convertError(patched, t);
    if (e) throw patchNotDecodable(goPrint(patch), e);
    return;
  }
  const e = jsonDecodeError(patched, t);
  if (e) throw patchNotDecodable(JSON.stringify(patched), e);
}
