import { describe, expect, it } from 'vitest';
import { IntakeConfigSchema } from '@bosun/config';
import { Incident, parseWith } from '@bosun/contract';
import { AlertmanagerPayload, alertmanagerBatch } from './alertmanager.js';
import { groupBatch } from './flow.js';
import { MappingError, genericBatch } from './generic.js';

// Hostile input to the mapping (issue 19, items 7 and 9): labels named after Object.prototype,
// bodies nested thousands of levels deep, label values that read like two labels.

const sources = IntakeConfigSchema.parse({
  port: 0,
  sources: {
    am: { format: 'alertmanager', auth: { bearer: 't' } },
    pager: { format: 'generic', auth: { bearer: 't' }, mapping: { id: '$.incident.id', labels: '$.incident.tags' } },
  },
}).sources;
const am = sources.am as Parameters<typeof alertmanagerBatch>[1];
const pager = sources.pager as Parameters<typeof genericBatch>[1];

const own = (o: unknown, key: string) => Object.getOwnPropertyDescriptor(o, key)?.value as unknown;

/** A body nested `depth` levels of arrays deep, with an id where the mapping looks. */
const deep = (depth: number) => JSON.parse(`{"incident":{"id":"PD-9","nest":${'['.repeat(depth)}${']'.repeat(depth)}}}`) as unknown;

describe('labels and annotations named after Object.prototype', () => {
  const body = `{"version":"4","groupKey":"g","status":"firing","receiver":"r","alerts":[{"status":"firing",
    "labels":{"alertname":"X","__proto__":"p","constructor":"c","toString":"t","hasOwnProperty":"h"},
    "annotations":{"__proto__":"ap","summary":"s"},"startsAt":"2026-01-01T00:00:00Z","fingerprint":"f1"}]}`;

  it('are kept as data in labels and payload.alert, through the envelope check and JSON', () => {
    const payload = AlertmanagerPayload.parse(JSON.parse(body));
    const incident = parseWith(Incident, alertmanagerBatch('am', am, payload).incidents[0], 'incident');
    for (const [k, v] of Object.entries({ __proto__: 'p', constructor: 'c', toString: 't', hasOwnProperty: 'h' }))
      expect(own(incident.labels, k), `label ${k}`).toBe(v);
    const alert = (incident.payload as { alert: { labels: object; annotations: object } }).alert;
    expect(own(alert.labels, '__proto__')).toBe('p');
    expect(own(alert.annotations, '__proto__')).toBe('ap');
    // As BullMQ stores it, and as the coordinator reads it back.
    const stored = parseWith(Incident, JSON.parse(JSON.stringify(incident)), 'incident');
    expect(own(stored.labels, '__proto__')).toBe('p');
    expect(Object.getPrototypeOf(stored.labels)).toBe(Object.prototype);
  });

  it('a generic mapping keeps a tag named __proto__ as a label', () => {
    const body = JSON.parse('{"incident":{"id":"PD-1","tags":{"__proto__":"x","team":"shop"}}}') as unknown;
    const incident = genericBatch('pager', pager, body).incidents[0]!;
    expect(Object.keys(incident.labels!)).toEqual(['__proto__', 'team']);
    expect(own(incident.labels, '__proto__')).toBe('x');
  });

  it('the envelope still checks a __proto__ label, naming it', () => {
    const labels = JSON.parse(`{"__proto__":${JSON.stringify('v'.repeat(5000))}}`) as unknown;
    expect(() => parseWith(Incident, { id: 'i-1', source: 's', reason: 'r', summary: '', labels }, 'incident')).toThrow(
      /labels\.__proto__: must be at most 4096 characters/,
    );
  });
});

describe('generic bodies nested deeply', () => {
  it('5,000 levels: a MappingError (a 400 kept as poison), not a stack overflow', () => {
    let err: unknown;
    try {
      genericBatch('pager', pager, deep(5_000));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MappingError);
    expect((err as MappingError).message).toBe('body: nests objects and arrays more than 64 levels deep');
  });

  it('40 levels: the incident runs, without the body copy, and passes the envelope', () => {
    const incident = genericBatch('pager', pager, deep(40)).incidents[0]!;
    expect(incident.payload).toMatchObject({ webhookOmitted: 'the body nests objects and arrays more than 31 levels deep' });
    expect(() => parseWith(Incident, incident, 'incident')).not.toThrow();
  });
});

describe('grouping keys', () => {
  it('a label value holding a newline and "=" does not pass for two labels', () => {
    const incident = (id: string, labels: Record<string, string>) => ({ id, source: 's', reason: 'r', summary: '', labels });
    const groups = groupBatch([incident('i-1', { a: '1\nb=2', b: '' }), incident('i-2', { a: '1', b: '2\nb=' })], ['a', 'b']);
    expect(groups).toHaveLength(2);
  });

  it('a group label named constructor is the label, not Object.prototype.constructor', () => {
    const incident = (id: string, labels: Record<string, string>) => ({ id, source: 's', reason: 'r', summary: '', labels });
    const groups = groupBatch([incident('i-1', {}), incident('i-2', { constructor: '' })], ['constructor']);
    expect(groups).toHaveLength(1);
  });
});
