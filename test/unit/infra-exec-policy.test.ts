/**
 * The ValidatingAdmissionPolicy that limits the handlers' pods/exec to the NAT gateway pods
 * (infra/rbac/exec-policy.yaml). Its CEL expressions are evaluated here, as written in the file, by a small
 * evaluator for exactly the CEL they use (string and boolean literals, field selection, has(), ==, !=, !, &&, ||, +,
 * startsWith() and exists()), against the admission requests a CONNECT on pods/exec produces. An evaluation error
 * counts as a denial, as the policy's failurePolicy Fail makes it.
 *
 * What this does not prove: that a given API server version evaluates them the same way; that is for a real cluster
 * (docs/deploy-eks.md shows how to check it there).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { GATEWAY_CONTAINER } from '../../shared/domain/kube-ovn.js';

const root = join(import.meta.dirname, '../..');
// biome-ignore lint/suspicious/noExplicitAny: YAML documents and CEL values are dynamic
type Any = any;
const docs = (file: string): Any[] =>
  parseAllDocuments(readFileSync(join(root, file), 'utf8')).map((d) => d.toJS());
const [policy, binding] = docs('infra/rbac/exec-policy.yaml');

// ------------------------------------------------------------------------------- a tiny CEL evaluator

type Token = { kind: 'str' | 'id' | 'op'; text: string };

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (/\s/.test(c)) i++;
    else if (c === "'" || c === '"') {
      const end = src.indexOf(c, i + 1);
      if (end < 0) throw new Error('unterminated string');
      out.push({ kind: 'str', text: src.slice(i + 1, end) });
      i = end + 1;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i))![0];
      out.push({ kind: 'id', text: m });
      i += m.length;
    } else {
      const two = src.slice(i, i + 2);
      if (['&&', '||', '==', '!='].includes(two)) {
        out.push({ kind: 'op', text: two });
        i += 2;
      } else if ('!().,+'.includes(c)) {
        out.push({ kind: 'op', text: c });
        i++;
      } else throw new Error(`unsupported character ${c} in CEL expression`);
    }
  }
  return out;
}

type Node = (vars: Record<string, Any>) => Any;

function compile(src: string): Node {
  const t = tokenize(src);
  let p = 0;
  const peek = (text?: string) => (text === undefined ? t[p] : t[p]?.text === text ? t[p] : undefined);
  const eat = (text: string) => {
    if (t[p]?.text !== text) throw new Error(`expected ${text} at token ${p} in ${src}`);
    p++;
  };
  const bool = (v: Any): boolean => {
    if (typeof v !== 'boolean') throw new Error(`no such overload: expected bool, got ${JSON.stringify(v)}`);
    return v;
  };
  const select = (v: Any, field: string): Any => {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, field))
      throw new Error(`no such key: ${field}`);
    return v[field];
  };

  function or(): Node {
    let left = and();
    while (peek('||')) {
      p++;
      const l = left;
      const r = and();
      left = (v) => bool(l(v)) || bool(r(v));
    }
    return left;
  }
  function and(): Node {
    let left = unary();
    while (peek('&&')) {
      p++;
      const l = left;
      const r = unary();
      left = (v) => bool(l(v)) && bool(r(v));
    }
    return left;
  }
  function unary(): Node {
    if (peek('!')) {
      p++;
      const e = unary();
      return (v) => !bool(e(v));
    }
    return cmp();
  }
  function cmp(): Node {
    const l = add();
    const op = peek('==') ?? peek('!=');
    if (!op) return l;
    p++;
    const r = add();
    return (v) => {
      const [a, b] = [l(v), r(v)];
      if (typeof a !== typeof b) throw new Error(`no such overload: ${typeof a} ${op.text} ${typeof b}`);
      return op.text === '==' ? a === b : a !== b;
    };
  }
  function add(): Node {
    let left = postfix();
    while (peek('+')) {
      p++;
      const l = left;
      const r = postfix();
      left = (v) => {
        const [a, b] = [l(v), r(v)];
        if (typeof a !== 'string' || typeof b !== 'string') throw new Error('no such overload: +');
        return a + b;
      };
    }
    return left;
  }
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
  function postfix(): Node {
    let e = primary();
    while (peek('.')) {
      p++;
      const name = t[p++]!;
      if (name.kind !== 'id') throw new Error('expected a field or method name');
      const target = e;
      if (peek('(')) {
        p++;
        if (name.text === 'startsWith') {
          const arg = or();
          eat(')');
          e = (v) => {
            const [s, prefix] = [target(v), arg(v)];
            if (typeof s !== 'string' || typeof prefix !== 'string')
              throw new Error('no such overload: startsWith');
            return s.startsWith(prefix);
          };
        } else if (name.text === 'exists') {
          const variable = t[p++]!.text;
          eat(',');
          const body = or();
          eat(')');
          e = (v) => {
            const list = target(v);
            if (!Array.isArray(list)) throw new Error('no such overload: exists');
            return list.some((x) => bool(body({ ...v, [variable]: x })));
          };
        } else throw new Error(`unsupported method ${name.text}`);
      } else e = (v) => select(target(v), name.text);
    }
    return e;
  }
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: a test's own scenario or helper kept in one piece so that it reads as the case it checks
  function primary(): Node {
    const tok = t[p++];
    if (!tok) throw new Error('unexpected end');
    if (tok.kind === 'str') return () => tok.text;
    if (tok.text === '(') {
      const e = or();
      eat(')');
      return e;
    }
    if (tok.text === 'true' || tok.text === 'false') return () => tok.text === 'true';
    if (tok.text === 'has') {
      // has(a.b.c): a.b is evaluated, the presence of c in it is tested.
      eat('(');
      const path = [t[p++]!.text];
      while (peek('.')) {
        p++;
        path.push(t[p++]!.text);
      }
      eat(')');
      if (path.length < 2) throw new Error('has() needs a field selection');
      const last = path.pop()!;
      return (v) => {
        let o: Any = v[path[0]!];
        for (const f of path.slice(1)) o = select(o, f);
        return o !== null && typeof o === 'object' && Object.hasOwn(o, last);
      };
    }
    if (tok.kind === 'id')
      return (v) => {
        if (!(tok.text in v)) throw new Error(`undeclared reference ${tok.text}`);
        return v[tok.text];
      };
    throw new Error(`unexpected ${tok.text}`);
  }
  const e = or();
  if (p !== t.length) throw new Error(`trailing tokens in ${src}`);
  return e;
}

/** The policy's decision: not matched, allowed, or denied with its message. */
function admit(vars: { request: Any; object: Any }): {
  matched: boolean;
  allowed: boolean;
  message?: string;
} {
  const r = vars.request;
  const rules = policy.spec.matchConstraints.resourceRules as Any[];
  const resource = `${r.resource.resource}/${r.subResource}`;
  const inScope = rules.some(
    (x) =>
      x.operations.includes(r.operation) &&
      x.resources.includes(resource) &&
      x.apiGroups.includes(r.resource.group),
  );
  if (!inScope) return { matched: false, allowed: true };
  for (const c of policy.spec.matchConditions as Any[]) {
    if (!compile(c.expression)(vars)) return { matched: false, allowed: true };
  }
  for (const v of policy.spec.validations as Any[]) {
    let ok: boolean;
    try {
      ok = compile(v.expression)(vars) === true;
    } catch {
      ok = false; // failurePolicy: Fail
    }
    if (!ok) return { matched: true, allowed: false, message: compile(v.messageExpression)(vars) };
  }
  return { matched: true, allowed: true };
}

// ------------------------------------------------------------------------------- sample requests

const HANDLERS = {
  username: 'arn:aws:sts::123456789012:assumed-role/eip-lambdas-prod-add-eu-west-1/fn',
  groups: ['eip-lambdas:handlers', 'system:authenticated'],
};

function connect(
  pod: string,
  opts: { sub?: string; container?: string | null; stdin?: boolean; tty?: boolean; user?: Any } = {},
) {
  const sub = opts.sub ?? 'exec';
  const object: Any = {
    kind: sub === 'exec' ? 'PodExecOptions' : sub === 'attach' ? 'PodAttachOptions' : 'PodPortForwardOptions',
    apiVersion: 'v1',
  };
  if (sub !== 'portforward') {
    if (opts.container !== null) object.container = opts.container ?? GATEWAY_CONTAINER;
    object.stdout = true;
    object.stderr = true;
    if (opts.stdin !== undefined) object.stdin = opts.stdin;
    if (opts.tty !== undefined) object.tty = opts.tty;
    if (sub === 'exec')
      object.command = ['bash', '/kube-ovn/nat-gateway.sh', 'eip-add', '172.18.0.11/24,172.18.0.1'];
  }
  return {
    request: {
      operation: 'CONNECT',
      resource: { group: '', version: 'v1', resource: 'pods' },
      subResource: sub,
      namespace: 'kube-system',
      name: pod,
      userInfo: opts.user ?? HANDLERS,
    },
    object,
  };
}

describe('exec policy (infra/rbac/exec-policy.yaml)', () => {
  it('is a v1 policy on CONNECT for pod exec, attach and portforward, bound with Deny', () => {
    expect(policy).toMatchObject({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      spec: { failurePolicy: 'Fail' },
    });
    expect(policy.spec.matchConstraints.resourceRules).toEqual([
      {
        apiGroups: [''],
        apiVersions: ['v1'],
        operations: ['CONNECT'],
        resources: ['pods/exec', 'pods/attach', 'pods/portforward'],
      },
    ]);
    expect(binding).toMatchObject({
      kind: 'ValidatingAdmissionPolicyBinding',
      spec: { policyName: policy.metadata.name, validationActions: ['Deny'] },
    });
  });

  it('matches the group handlers.yaml binds (the group the access entries map the roles to)', () => {
    const groups = docs('infra/rbac/handlers.yaml')
      .filter((d) => d.kind.endsWith('Binding'))
      .flatMap((d) => d.subjects.map((s: Any) => s.name));
    expect(new Set(groups)).toEqual(new Set(['eip-lambdas:handlers']));
    expect(policy.spec.matchConditions[0].expression).toContain("'eip-lambdas:handlers'");
  });

  it('allows the handlers an exec into the vpc-nat-gw container of a gateway pod, as the adapter sends it', () => {
    expect(admit(connect('vpc-nat-gw-gw1-0'))).toEqual({ matched: true, allowed: true });
    expect(admit(connect('vpc-nat-gw-gw1-0', { stdin: false, tty: false }))).toEqual({
      matched: true,
      allowed: true,
    });
  });

  it.each([
    ['coredns-5d78c9869d-abcde', {}],
    ['aws-node-x7k2p', {}],
    ['kube-ovn-controller-7f9c5b8d4-q2w3e', {}],
    ['ovs-ovn-abcde', {}],
    ['my-vpc-nat-gw-gw1-0', {}],
    ['vpc-nat-gw-gw1-0', { container: 'debug' }],
    ['vpc-nat-gw-gw1-0', { container: null }],
    ['vpc-nat-gw-gw1-0', { stdin: true }],
    ['vpc-nat-gw-gw1-0', { tty: true }],
    ['vpc-nat-gw-gw1-0', { sub: 'attach' }],
    ['vpc-nat-gw-gw1-0', { sub: 'portforward' }],
  ])('denies the handlers %s %o, saying why', (pod, opts) => {
    const d = admit(connect(pod, opts as Any));
    expect(d.allowed).toBe(false);
    expect(d.message).toMatch(new RegExp(`refused: ${(opts as Any).sub ?? 'exec'} on kube-system/${pod}$`));
  });

  it('leaves everyone else alone', () => {
    const admin = { username: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] };
    expect(admit(connect('coredns-5d78c9869d-abcde', { user: admin }))).toEqual({
      matched: false,
      allowed: true,
    });
    const kubeOvn = { username: 'system:serviceaccount:kube-system:ovn', groups: ['system:serviceaccounts'] };
    expect(admit(connect('vpc-nat-gw-gw1-0', { user: kubeOvn, container: 'debug' })).matched).toBe(false);
  });

  it('the evaluator itself: errors and short-circuits as CEL does for these operators', () => {
    expect(() => compile('object.missing == "x"')({ object: {} })).toThrow(/no such key/);
    expect(compile('has(object.a) && object.a == "x"')({ object: {} })).toBe(false);
    expect(compile('!(has(object.a) && object.a)')({ object: { a: true } })).toBe(false);
    expect(() => compile('object.a == true')({ object: { a: 'true' } })).toThrow(/no such overload/);
    expect(compile("['a'].exists(g, g == 'a')".replace("['a']", 'xs'))({ xs: ['b', 'a'] })).toBe(true);
  });
});
