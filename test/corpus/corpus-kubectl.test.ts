/**
 * The hostile-input corpus through kubectl on the local stack (test/fault/lab.ts: the local Kubernetes API with the
 * stand-ins, dynalite, the handlers on the real adapters). All value cases go in one `kubectl apply` of one file — the
 * EIPs, and the Subnets and QoS policies they name — and so do the event cases that carry a hostile object name
 * (as EIPs of that name). Each object is refused by the API with an error naming the field, or accepted and then
 * refused by the add handler with a condition naming the field. No exec reaches the gateway during the whole batch,
 * nothing is allocated, and the sentinel EIP stays as it was.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IptablesEip } from '../../shared/domain/kube-ovn.js';
import { type Lab, NS, POD, startLab } from '../fault/lab.js';
import { eventuallyValue } from '../support/eventually.js';
import { caseObjects, EXTERNAL, eventCases, GATEWAY, type ValueCase, valueCases } from './corpus.js';

const run = promisify(execFile);
const values = valueCases();
const names = eventCases().filter(
  (c) =>
    c.field === 'event.object.name' &&
    typeof (c.event as { object?: { name?: unknown } })?.object?.name === 'string',
);
let lab: Lab;
let applied: { stdout: string; stderr: string; code: number };
let sentinelBefore: unknown;
let execsBefore = 0;
const known: string[] = [];

const hostileName = (c: (typeof names)[number]) => {
  const n = (c.event as { object: { name: string } }).object.name;
  return c.fill ? c.fill.char.repeat(c.fill.length) : n;
};

beforeAll(async () => {
  lab = await startLab('corpus-kubectl');
  // gw1 is attached to every corpus subnet too, so a subnet's own values are what the handler judges.
  const subnets = values.map((c, i) => caseObjects(c, i).subnet?.name).filter((n): n is string => !!n);
  await lab.custom.patchClusterCustomObject({
    group: 'kubeovn.io',
    version: 'v1',
    plural: 'vpc-nat-gateways',
    name: GATEWAY,
    body: [{ op: 'replace', path: '/spec/externalSubnets', value: [EXTERNAL, ...subnets] }],
  });
  await eventuallyValue(() => lab.api.gateways.get(NS, POD)?.initialised);
  await lab.createEip('sentinel', { natGwDp: GATEWAY, qosPolicy: 'qos-demo' });
  expect(await lab.deliver(await lab.event('add', 'sentinel', 'added'))).toMatchObject({ status: 'applied' });
  sentinelBefore = strip(await lab.getEip('sentinel'));
  execsBefore = lab.sim().history().length;

  const docs: unknown[] = [];
  values.forEach((c, i) => {
    const o = caseObjects(c, i);
    if (o.subnet)
      docs.push({
        apiVersion: 'kubeovn.io/v1',
        kind: 'Subnet',
        metadata: { name: o.subnet.name },
        spec: o.subnet.spec,
      });
    if (o.qos)
      docs.push({
        apiVersion: 'kubeovn.io/v1',
        kind: 'QoSPolicy',
        metadata: { name: o.qos.name },
        spec: { shared: false, bindingType: 'EIP', bandwidthLimitRules: [o.qos.rule] },
      });
    docs.push({ apiVersion: 'kubeovn.io/v1', kind: 'IptablesEIP', metadata: { name: o.name }, spec: o.spec });
  });
  for (const c of names)
    docs.push({
      apiVersion: 'kubeovn.io/v1',
      kind: 'IptablesEIP',
      metadata: { name: hostileName(c) },
      spec: { natGwDp: GATEWAY },
    });
  // A stream of JSON documents (what kubectl reads when a file starts with "{"): every character survives exactly.
  const file = join(lab.dir, 'corpus.yaml');
  writeFileSync(file, docs.map((d) => JSON.stringify(d)).join('\n'));
  applied = await run('kubectl', ['--kubeconfig', lab.kubeconfig, 'apply', '-f', file], {
    maxBuffer: 64 * 1024 * 1024,
  })
    .then((r) => ({ ...r, code: 0 }))
    .catch((e: { stdout: string; stderr: string; code: number }) => ({
      stdout: e.stdout,
      stderr: e.stderr,
      code: e.code,
    }));
  console.log(`kubectl apply of ${docs.length} objects in one file: exit ${applied.code}`);
}, 120_000);

afterAll(async () => {
  if (known.length)
    console.log(
      `corpus via kubectl, known failures (${known.length}):\n${known.map((k) => `  ${k}`).join('\n')}`,
    );
  await lab?.close();
});

function strip(e: IptablesEip | undefined) {
  return JSON.parse(
    JSON.stringify({ spec: e?.spec, status: e?.status, labels: e?.metadata.labels }),
    (k, v) => (k === 'lastTransitionTime' || k === 'lastUpdateTime' ? undefined : v),
  );
}

/** The kubectl error line about the object `name` of kind `kind`, if the API refused it. */
function refusal(kind: string, name: string): string | undefined {
  return applied.stderr.split('\n').find((l) => l.includes(`${kind}.kubeovn.io "${name}"`));
}

async function expectCase(
  c: { id: string; knownFailure?: string },
  check: () => Promise<void>,
): Promise<void> {
  if (!c.knownFailure) return check();
  known.push(`${c.id}: ${c.knownFailure}`);
  await expect(
    check(),
    `${c.id} is marked as a known failure but passes now: remove the mark`,
  ).rejects.toThrow();
}

describe('corpus through kubectl: hostile values', () => {
  it.each(values.map((c, i) => [c.id, c, i] as const))('%s', async (_id, c: ValueCase, i: number) => {
    const o = caseObjects(c, i);
    await expectCase(c, async () => {
      const eip = await lab.getEip(o.name);
      // A Subnet or QoS policy the API refused never carries its hostile value anywhere.
      const dependency =
        (o.subnet && refusal('Subnet', o.subnet.name)) || (o.qos && refusal('QoSPolicy', o.qos.name));
      if (dependency) {
        expect(dependency, `the API's error names ${c.expectField}`).toContain(c.expectField);
        return;
      }
      const refusedBy = refusal('IptablesEIP', o.name);
      if (refusedBy && !eip) {
        expect(refusedBy, `the API's error names ${c.expectField}`).toContain(c.expectField);
        return;
      }
      expect(eip, `${o.name} was neither refused nor created`).toBeDefined();
      const out = await lab.deliver(await lab.event('add', o.name, 'added'));
      expect(out, c.why).toMatchObject({ status: 'rejected' });
      const after = await lab.getEip(o.name);
      const condition = after?.status?.conditions?.find((x) => x.status === 'False');
      expect(condition?.message, `the condition names ${c.expectField}`).toContain(c.expectField);
      expect(await lab.deps.ipam.findByOwner(after!.metadata.uid), 'nothing allocated').toEqual([]);
    });
  });
});

describe('corpus through kubectl: hostile object names', () => {
  it.each(names.map((c) => [c.id, c] as const))('%s', async (_id, c) => {
    const name = hostileName(c);
    const listed = (
      (await lab.custom.listClusterCustomObject({
        group: 'kubeovn.io',
        version: 'v1',
        plural: 'iptables-eips',
      })) as {
        items: IptablesEip[];
      }
    ).items.map((e) => e.metadata.name);
    expect(listed, 'never created').not.toContain(name);
    expect(applied.stderr, 'kubectl reports the refusal').toMatch(/is invalid|invalid|must/);
  });
});

describe('corpus through kubectl: the batch as a whole', () => {
  it('no exec reached the gateway (but for known failures), and the sentinel EIP is as it was', async () => {
    // An exec is excused only when it configures the address of a case marked as a known failure.
    const excused = new Set<string>();
    for (const [i, c] of values.entries()) {
      if (!c.knownFailure) continue;
      const ip = (await lab.getEip(caseObjects(c, i).name))?.status?.ip;
      if (ip) excused.add(ip);
    }
    const execs = lab
      .sim()
      .history()
      .slice(execsBefore)
      .map((e) => e.argv.join(' '))
      .filter((line) => ![...excused].some((ip) => line.includes(`${ip}/`) || line.endsWith(` ${ip}`)));
    expect(execs).toEqual([]);
    expect(strip(await lab.getEip('sentinel'))).toEqual(sentinelBefore);
  });
});
