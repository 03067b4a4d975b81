/**
 * Label and field selectors with the apiserver's grammar and matching rules:
 * `!=` and `notin` match objects without the label; field selectors only on the labels a resource supports.
 */
import { badRequest } from './errors.js';
import { isObject, type JsonObject, labelsOf } from './json.js';
import { labelKeyProblem, labelValueProblem } from './validation.js';

type LabelOp = 'eq' | 'neq' | 'in' | 'notin' | 'exists' | '!exists' | 'gt' | 'lt';

export interface LabelRequirement {
  key: string;
  op: LabelOp;
  values: string[];
}

export type LabelSelector = readonly LabelRequirement[];

const SPECIAL = new Set(['!', '=', '(', ')', ',', '>', '<']);

type Token = { kind: 'id' | 'op' | 'eof'; text: string };

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
function lex(input: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i] as string;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '=' && input[i + 1] === '=') {
      out.push({ kind: 'op', text: '==' });
      i += 2;
    } else if (c === '!' && input[i + 1] === '=') {
      out.push({ kind: 'op', text: '!=' });
      i += 2;
    } else if (SPECIAL.has(c)) {
      out.push({ kind: 'op', text: c });
      i++;
    } else {
      let j = i;
      while (j < input.length && !SPECIAL.has(input[j] as string) && !/\s/.test(input[j] as string)) j++;
      out.push({ kind: 'id', text: input.slice(i, j) });
      i = j;
    }
  }
  out.push({ kind: 'eof', text: '' });
  return out;
}

function parseError(message: string): never {
  throw badRequest(`unable to parse requirement: ${message}`);
}

function checkKey(key: string): void {
  const p = labelKeyProblem(key);
  if (p) parseError(`<nil>: Invalid value: ${JSON.stringify(key)}: ${p}`);
}

function checkValue(key: string, value: string, index: number): void {
  const p = labelValueProblem(value);
  if (p) parseError(`values[${index}][${key}]: Invalid value: ${JSON.stringify(value)}: ${p}`);
}

/** Parses a labelSelector query value. Throws a 400 ApiError with the apiserver's wording. */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
export function parseLabelSelector(input: string): LabelSelector {
  const toks = lex(input);
  let p = 0;
  const peek = (): Token => toks[p] as Token;
  const next = (): Token => toks[p++] as Token;
  const reqs: LabelRequirement[] = [];
  if (peek().kind === 'eof') return reqs;
  for (;;) {
    let t = next();
    if (t.kind === 'op' && t.text === '!') {
      t = next();
      if (t.kind !== 'id') throw badRequest(`found '${t.text}', expected: identifier after '!'`);
      checkKey(t.text);
      reqs.push({ key: t.text, op: '!exists', values: [] });
    } else if (t.kind === 'id') {
      const key = t.text;
      checkKey(key);
      const o = peek();
      if (o.kind === 'eof' || (o.kind === 'op' && o.text === ',')) {
        reqs.push({ key, op: 'exists', values: [] });
      } else if (o.kind === 'op' && ['=', '==', '!=', '>', '<'].includes(o.text)) {
        next();
        const v = peek();
        let value = '';
        if (v.kind === 'id') {
          value = next().text;
        } else if (!(v.kind === 'eof' || (v.kind === 'op' && v.text === ','))) {
          throw badRequest(`found '${v.text}', expected: identifier`);
        }
        if (o.text === '>' || o.text === '<') {
          if (!/^-?\d+$/.test(value)) {
            parseError(
              `values[0]: Invalid value: ${JSON.stringify(value)}: for 'Gt', 'Lt' operators, the value must be an integer`,
            );
          }
          reqs.push({ key, op: o.text === '>' ? 'gt' : 'lt', values: [value] });
        } else {
          checkValue(key, value, 0);
          reqs.push({ key, op: o.text === '!=' ? 'neq' : 'eq', values: [value] });
        }
      } else if (o.kind === 'id' && (o.text === 'in' || o.text === 'notin')) {
        next();
        const open = next();
        if (open.text !== '(') throw badRequest(`found '${open.text}', expected: '('`);
        const values: string[] = [];
        if (peek().text === ')') {
          next();
        } else {
          for (;;) {
            const v = peek();
            if (v.kind === 'id') {
              values.push(next().text);
            } else if (v.text === ',' || v.text === ')') {
              values.push(''); // `k in (a,)` has an empty value, as in apimachinery
            } else {
              throw badRequest(`found '${v.text}', expected: ',', or identifier`);
            }
            const sep = next();
            if (sep.text === ')') break;
            if (sep.text !== ',') throw badRequest(`found '${sep.text}', expected: ',' or ')'`);
          }
        }
        if (values.length === 0) {
          parseError(
            `values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty`,
          );
        }
        values.forEach((v, i) => {
          checkValue(key, v, i);
        });
        reqs.push({ key, op: o.text === 'in' ? 'in' : 'notin', values });
      } else {
        throw badRequest(`found '${o.text}', expected: in, notin, =, ==, !=, gt, lt`);
      }
    } else {
      throw badRequest(`found '${t.text}', expected: !, identifier, or 'end of string'`);
    }
    const sep = next();
    if (sep.kind === 'eof') break;
    if (sep.text !== ',') throw badRequest(`found '${sep.text}', expected: ',' or 'end of string'`);
  }
  return reqs;
}

// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the local Kubernetes API follows the apiserver's rules branch by branch, pinned against kubectl and client-node by test/conformance; split, one rule would be spread over several helpers
export function matchesLabels(sel: LabelSelector, labels: Record<string, string>): boolean {
  for (const r of sel) {
    const has = Object.hasOwn(labels, r.key);
    const v = labels[r.key];
    switch (r.op) {
      case 'eq':
      case 'in':
        if (!has || !r.values.includes(v as string)) return false;
        break;
      case 'neq':
      case 'notin':
        if (has && r.values.includes(v as string)) return false;
        break;
      case 'exists':
        if (!has) return false;
        break;
      case '!exists':
        if (has) return false;
        break;
      case 'gt':
      case 'lt': {
        if (!has || !/^-?\d+$/.test(v as string)) return false;
        const n = Number.parseInt(v as string, 10);
        const limit = Number.parseInt(r.values[0] as string, 10);
        if (r.op === 'gt' ? !(n > limit) : !(n < limit)) return false;
        break;
      }
    }
  }
  return true;
}

export interface FieldRequirement {
  field: string;
  negate: boolean;
  value: string;
}

export type FieldSelector = readonly FieldRequirement[];

function splitUnescaped(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i] as string;
    if (c === '\\' && i + 1 < s.length) {
      cur += c + (s[i + 1] as string);
      i++;
    } else if (c === sep) {
      out.push(cur);
      cur = '';
    } else {
      cur += c;
    }
  }
  out.push(cur);
  return out;
}

function unescapeFieldValue(s: string): string {
  return s.replace(/\\(.)/g, '$1');
}

/** Parses a fieldSelector and checks every label against `supported` (400 `field label not supported`). */
export function parseFieldSelector(input: string, supported: readonly string[]): FieldSelector {
  const out: FieldRequirement[] = [];
  if (input.trim() === '') return out;
  for (const term of splitUnescaped(input, ',')) {
    const ne = term.match(/^(.*?)!=(.*)$/s);
    const negate = ne !== null;
    const m = ne ?? term.match(/^(.*?)==(.*)$/s) ?? term.match(/^(.*?)=(.*)$/s);
    if (!m) throw badRequest(`invalid selector: '${input}'; can't understand '${term}'`);
    const field = (m[1] as string).trim();
    if (!supported.includes(field)) throw badRequest(`field label not supported: ${field}`);
    out.push({ field, negate, value: unescapeFieldValue(m[2] as string) });
  }
  return out;
}

/** The string a field label has on an object (missing fields are ""; booleans "true"/"false"). */
export function fieldValue(obj: JsonObject, field: string): string {
  let cur: unknown = obj;
  for (const part of field.split('.')) {
    if (!isObject(cur)) return '';
    cur = cur[part];
  }
  if (field === 'status.podIPs' && Array.isArray(cur)) {
    const first = cur[0];
    return isObject(first) && typeof first.ip === 'string' ? first.ip : '';
  }
  if (cur === undefined || cur === null) return field === 'spec.hostNetwork' ? 'false' : '';
  if (typeof cur === 'object') return JSON.stringify(cur);
  return String(cur);
}

export function matchesFields(sel: FieldSelector, obj: JsonObject): boolean {
  return sel.every((r) => (fieldValue(obj, r.field) === r.value) !== r.negate);
}

export interface Filter {
  namespace?: string;
  labels: LabelSelector;
  fields: FieldSelector;
}

export function matches(filter: Filter, obj: JsonObject): boolean {
  if (filter.namespace !== undefined) {
    const ns = isObject(obj.metadata) ? obj.metadata.namespace : undefined;
    if (ns !== filter.namespace) return false;
  }
  return matchesLabels(filter.labels, labelsOf(obj)) && matchesFields(filter.fields, obj);
}
