import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { InvalidEventError } from '../../shared/domain/errors.js';
import { HANDLERS, MAX_BATCH_EVENTS, parseEipEvent, parseEipEvents, REASONS } from '../../shared/events.js';

const dir = join(import.meta.dirname, '../../events');
const schema = JSON.parse(readFileSync(join(dir, 'schema.json'), 'utf8'));
const validate = new Ajv({ strict: true, allErrors: true }).compile(schema);
const samples = readdirSync(dir)
  .filter((f) => f.endsWith('.json') && f !== 'schema.json')
  .map((f) => [f, JSON.parse(readFileSync(join(dir, f), 'utf8'))] as const);

describe('sample events', () => {
  it.each(samples)('%s is valid by the JSON Schema and by the runtime parser', (_f, event) => {
    expect(validate(event), JSON.stringify(validate.errors)).toBe(true);
    const { members } = parseEipEvents(event);
    for (const m of members) expect('event' in m, JSON.stringify(m)).toBe(true);
  });

  it('cover every handler and every reason the schema lists', () => {
    const parsed = samples.flatMap(([, e]) =>
      parseEipEvents(e).members.flatMap((m) => ('event' in m ? [m.event] : [])),
    );
    expect(new Set(parsed.map((e) => e.handler))).toEqual(new Set(HANDLERS));
    const reasons = new Set(parsed.map((e) => e.reason));
    // 'resync' and 'manual' are sent to update; everything else has its own sample.
    for (const r of REASONS) expect(reasons, `no sample event with reason ${r}`).toContain(r);
    expect(schema.definitions.detail.properties.reason.enum).toEqual([...REASONS]);
    expect(schema.definitions.detail.properties.handler.enum).toEqual([...HANDLERS]);
  });
});

describe('invalid events are rejected by both, naming the bad field', () => {
  const good = { version: 1, id: 'x', handler: 'add', reason: 'added', object: { name: 'eip-1' } };
  const cases: [string, unknown, RegExp][] = [
    ['a non-object', 'add', /event must be a JSON object/],
    ['a missing object', { ...good, object: undefined }, /event\.object is required/],
    ['an unknown handler', { ...good, handler: 'create' }, /event\.handler must be one of/],
    ['an unknown reason', { ...good, reason: 'because' }, /event\.reason must be one of/],
    [
      'an invalid object name',
      { ...good, object: { name: 'Bad_Name' } },
      /event\.object\.name "Bad_Name" is not a valid/,
    ],
    ['an empty name', { ...good, object: { name: '' } }, /event\.object\.name must not be empty/],
    ['a numeric uid', { ...good, object: { name: 'a', uid: 5 } }, /event\.object\.uid must be a string/],
    ['an unknown field', { ...good, extra: 1 }, /event\.extra is not a known field/],
    ['a wrong version', { ...good, version: 2 }, /event\.version must be 1/],
    [
      'an envelope from another source',
      { source: 'x', 'detail-type': 'IptablesEIP add', detail: good },
      /source must be/,
    ],
    [
      'an envelope whose detail-type disagrees with the handler',
      { source: 'eip-lambdas.bridge', 'detail-type': 'IptablesEIP delete', detail: good },
      /detail-type must be "IptablesEIP add"/,
    ],
    [
      'a snapshot with bad finalizers',
      { ...good, old: { metadata: { finalizers: [1] } } },
      /event\.old\.metadata\.finalizers/,
    ],
  ];
  it.each(cases)('%s', (_what, event, message) => {
    expect(() => parseEipEvent(event)).toThrow(InvalidEventError);
    expect(() => parseEipEvent(event)).toThrow(message);
    // The envelope/detail-type pairing is a cross-field rule the schema cannot express; every other case must
    // also fail the schema, so the two stay in step.
    if (!/detail-type disagrees/.test(_what)) expect(validate(event)).toBe(false);
  });
});

describe('batches', () => {
  const member = (name: string, handler = 'add') => ({
    version: 1,
    id: `${name}:1:added`,
    handler,
    reason: 'added',
    object: { name },
  });
  const batch = (events: unknown[], handler = 'add') => ({ version: 1, handler, events });

  it('parse to their members in order; a single event stays one member', () => {
    const { handler, members } = parseEipEvents(batch([member('a'), member('b'), member('a')]));
    expect(handler).toBe('add');
    expect(members.map((m) => ('event' in m ? m.event.object.name : '?'))).toEqual(['a', 'b', 'a']);
    expect(parseEipEvents(member('a')).members).toHaveLength(1);
    expect(() => parseEipEvent(batch([member('a'), member('b')]))).toThrow(/is a batch/);
  });

  it('refuse a bad member on its own, naming its field; the others parse', () => {
    const { members } = parseEipEvents(
      batch([member('a'), { ...member('b'), object: { name: 'Bad_Name' } }, member('c', 'delete')]),
    );
    expect('event' in members[0]!).toBe(true);
    const bad = members[1]!;
    expect('error' in bad && bad.error.message).toMatch(/event\.events\[1\]\.object\.name "Bad_Name"/);
    expect('error' in bad && bad.name).toBe(''); // a hostile name is never echoed
    const other = members[2]!;
    expect('error' in other && other.error.message).toMatch(
      /event\.events\[2\]\.handler must be the batch's handler/,
    );
    expect('error' in other && other.name).toBe('c');
    // The schema refuses the batch as a whole for the bad name; the handler mismatch is a cross-field rule.
    expect(validate(batch([member('a'), { ...member('b'), object: { name: 'Bad_Name' } }]))).toBe(false);
  });

  const frames: [string, unknown, RegExp][] = [
    ['one member', batch([member('a')]), /event\.events must hold 2 to 32 events, got 1/],
    [
      'too many members',
      batch(Array.from({ length: MAX_BATCH_EVENTS + 1 }, (_, i) => member(`e${i}`))),
      /event\.events must hold 2 to 32/,
    ],
    [
      'events not an array',
      { version: 1, handler: 'add', events: { 0: member('a') } },
      /event\.events must be an array/,
    ],
    ['an unknown handler', batch([member('a'), member('b')], 'create'), /event\.handler must be one of/],
    ['a wrong version', { ...batch([member('a'), member('b')]), version: 2 }, /event\.version must be 1/],
    ['an unknown field', { ...batch([member('a'), member('b')]), id: 'x' }, /event\.id is not a known field/],
    [
      'an envelope whose detail-type is another handler’s',
      {
        source: 'eip-lambdas.bridge',
        'detail-type': 'IptablesEIP delete',
        detail: batch([member('a'), member('b')]),
      },
      /detail-type must be "IptablesEIP add"/,
    ],
  ];
  it.each(frames)('refuse a bad frame as a whole: %s', (what, input, message) => {
    expect(() => parseEipEvents(input)).toThrow(InvalidEventError);
    expect(() => parseEipEvents(input)).toThrow(message);
    if (!/detail-type/.test(what)) expect(validate(input)).toBe(false);
  });
});
