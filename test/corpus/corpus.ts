/**
 * The hostile-input corpus: cases are data (events.jsonl: malformed handler events; values.jsonl: hostile values
 * in an EIP's spec, in the Subnet it names, or in its QoS policy). This module reads them and builds each case's
 * input; corpus.test.ts runs them as handler events, corpus-kubectl.test.ts through kubectl on the local stack.
 *
 * A case may carry `knownFailure: "<reason>"` when the product does not refuse it correctly yet and the fix is in
 * progress; the runners then expect the check to fail (and say so), so the case turns red once it is fixed.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface EventCase {
  id: string;
  why: string;
  /** The field the refusal must name (as the parser spells its path). */
  field: string;
  event?: unknown;
  /** The input is not an event object: `json` is parsed as is (own __proto__ keys), `value` is used as is. */
  raw?: { json?: string; value?: unknown };
  /** Replace the value at `path` with `char` repeated `length` times (large inputs stay small on disk). */
  fill?: { path: string[]; char: string; length: number };
  /** 'refused' (default) or 'harmless': accepted, and nothing beyond what a valid event does. */
  expect?: 'refused' | 'harmless';
  knownFailure?: string;
}

export interface ValueCase {
  id: string;
  why: string;
  target: 'eip' | 'subnet' | 'qos';
  /** eip: the spec field; subnet: 'spec' (value = spec fields); qos: 'rule' (value = rule fields). */
  field: string;
  value: unknown;
  fill?: { char: string; length: number };
  /** The field the refusal must name. */
  expectField: string;
  knownFailure?: string;
}

const dir = import.meta.dirname;
const jsonl = <T>(file: string): T[] =>
  readFileSync(join(dir, file), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as T);

export const eventCases = (): EventCase[] => jsonl<EventCase>('events.jsonl');
export const valueCases = (): ValueCase[] => jsonl<ValueCase>('values.jsonl');

/** The input a handler receives for an event case. */
export function eventInput(c: EventCase): unknown {
  if (c.raw?.json !== undefined) return JSON.parse(c.raw.json);
  if (c.raw && 'value' in c.raw) return c.raw.value;
  const input = structuredClone(c.event) as Record<string, unknown>;
  if (c.fill) {
    let at = input;
    for (const k of c.fill.path.slice(0, -1)) at = at[k] as Record<string, unknown>;
    at[c.fill.path.at(-1)!] = c.fill.char.repeat(c.fill.length);
  }
  return input;
}

/** The hostile value of a value case. */
export function hostileValue(c: ValueCase): unknown {
  return c.fill ? c.fill.char.repeat(c.fill.length) : c.value;
}

export const EXTERNAL = 'ovn-vpc-external-network';
export const GATEWAY = 'gw1';

/** The objects a value case needs, named after its index: the EIP, and the Subnet or QoSPolicy it names. */
export function caseObjects(c: ValueCase, i: number) {
  const name = `corpus-${i}`;
  const spec: Record<string, unknown> = { natGwDp: GATEWAY };
  let subnet: { name: string; spec: Record<string, unknown> } | undefined;
  let qos: { name: string; rule: Record<string, unknown> } | undefined;
  if (c.target === 'eip') spec[c.field] = hostileValue(c);
  if (c.target === 'subnet') {
    subnet = {
      name: `corpus-subnet-${i}`,
      spec: { protocol: 'IPv4', provider: `corpus-subnet-${i}.kube-system`, ...(c.value as object) },
    };
    spec.externalSubnet = subnet.name;
  }
  if (c.target === 'qos') {
    qos = {
      name: `corpus-qos-${i}`,
      rule: {
        name: 'r',
        direction: 'ingress',
        priority: 1,
        rateMax: '10',
        burstMax: '10',
        ...(c.value as object),
      },
    };
    spec.qosPolicy = qos.name;
  }
  return { name, spec, subnet, qos };
}
