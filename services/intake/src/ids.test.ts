import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IntakeConfigSchema } from '@bosun/config';
import { Incident, parseWith } from '@bosun/contract';
import { AlertmanagerPayload, alertIncidentId, alertmanagerBatch, groupIncidentId } from './alertmanager.js';
import { genericBatch } from './generic.js';

// Incident ids no sender can collide (issue 19, items 5 and 6): different inputs never give one
// id, checked over crafted inputs with fast-check. A failure prints the two inputs and their id.

const START = '2026-11-30T21:58:12.345Z';
const RUNS = { numRuns: 500, seed: 1919 };

/** Characters a hostile sender likes: separators, what an old cleaner removed, and the hashed mark. */
const HOSTILE = ['/', ' ', '.', '_', '-', '\n', '\t', 'é', '\u0000', '%', '=', ',', '"', '\\'];
const SAFE = [...'0123456789abcdefABCXYZ'];
const piece = (units: string[], maxLength: number) => fc.string({ unit: fc.constantFrom(...units), maxLength });

/** Fingerprints: Alertmanager's own (16 hex), hostile strings, long ones about the old 64-character cut. */
const fingerprint = fc.oneof(
  fc.stringMatching(/^[0-9a-f]{16}$/),
  piece([...SAFE, ...HOSTILE], 24),
  piece(['a', 'b', '/'], 70),
  fc.string({ maxLength: 140 }),
);

/** A fingerprint and crafted neighbours of it: one character more, a space, the old cleaner's output, a cut. */
const crafted = fingerprint.chain((fp) =>
  fc.constantFrom(fp, `${fp}/`, `${fp} `, ` ${fp}`, fp.replace(/[^A-Za-z0-9]/g, ''), fp.slice(0, 64), `_${fp}`, fp.toUpperCase()),
);

const alertOf = (fp: string, startsAt = START) => ({ fingerprint: fp, labels: { alertname: 'X' }, startsAt });

/** The fingerprint piece of an `am-<piece>-<ms>` id. */
const pieceOf = (id: string) => id.slice('am-'.length, id.lastIndexOf('-'));

function expectInjective<T>(inputs: readonly T[], id: (x: T) => string, show: (x: T) => string = (x) => JSON.stringify(x)): void {
  const seen = new Map<string, T>();
  for (const x of inputs) {
    const got = id(x);
    const before = seen.get(got);
    if (before !== undefined && show(before) !== show(x)) expect.fail(`${show(before)} and ${show(x)} both give ${got}`);
    seen.set(got, x);
  }
}

describe('Alertmanager incident ids', () => {
  it('different fingerprints never give one id (crafted neighbours, the old cleaner, the old cut)', () => {
    fc.assert(
      fc.property(fc.uniqueArray(crafted, { minLength: 2, maxLength: 12 }), (fps) => {
        expectInjective(fps, (fp) => alertIncidentId(alertOf(fp)));
      }),
      RUNS,
    );
  });

  it('the attack of the issue: "<fp>/" and "<fp> " are not the victim', () => {
    const victim = alertIncidentId(alertOf('4c3a1e0f9b2d7a65'));
    expect(victim).toBe(`am-4c3a1e0f9b2d7a65-${Date.parse(START)}`);
    for (const fp of ['4c3a1e0f9b2d7a65/', '4c3a1e0f9b2d7a65 ', '../4c3a1e0f9b2d7a65', '4c3a1e0f9b2d7a65\n'])
      expect(alertIncidentId(alertOf(fp))).not.toBe(victim);
  });

  it('a hashed id cannot be spelled: the hashed piece sent as a fingerprint gives another id', () => {
    fc.assert(
      fc.property(fingerprint, (fp) => {
        const id = alertIncidentId(alertOf(fp));
        const p = pieceOf(id);
        if (p !== fp) expect(alertIncidentId(alertOf(p))).not.toBe(id);
        // Nor can a label set's hash (a sender without fingerprints) be sent as a fingerprint.
        const byLabels = alertIncidentId({ labels: { alertname: fp }, startsAt: START });
        expect(alertIncidentId(alertOf(pieceOf(byLabels)))).not.toBe(byLabels);
        expect(byLabels).not.toBe(id);
      }),
      RUNS,
    );
  });

  it('different starts (to the millisecond) and different label sets never give one id', () => {
    const start = fc.integer({ min: -8.64e15, max: 8.64e15 }).map((ms) => new Date(ms).toISOString());
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(crafted, start), { minLength: 2, maxLength: 10, selector: ([f, s]) => `${f}\n${Date.parse(s)}` }),
        (pairs) => {
          expectInjective(
            pairs,
            ([f, s]) => alertIncidentId(alertOf(f, s)),
            ([f, s]) => JSON.stringify([f, Date.parse(s)]),
          );
        },
      ),
      RUNS,
    );
    // Labels whose `k=v` text would read alike (`a=1,b=2` as one value, or as two labels).
    expect(alertIncidentId({ labels: { a: '1,b=2' }, startsAt: START })).not.toBe(
      alertIncidentId({ labels: { a: '1', b: '2' }, startsAt: START }),
    );
    const labels = fc.dictionary(piece(['a', 'b', '=', ','], 4), piece(['1', '2', '=', ','], 4), { maxKeys: 3 });
    fc.assert(
      fc.property(
        fc.uniqueArray(labels, { minLength: 2, maxLength: 8, selector: (l) => JSON.stringify(Object.entries(l).sort()) }),
        (sets) => {
          expectInjective(
            sets,
            (l) => alertIncidentId({ labels: l, startsAt: START }),
            (l) => JSON.stringify(Object.entries(l).sort()),
          );
        },
      ),
      RUNS,
    );
  });

  it('every id is a valid incident id, and a group id is never an alert id', () => {
    fc.assert(
      fc.property(fingerprint, fc.string({ maxLength: 300 }), (fp, groupKey) => {
        const id = alertIncidentId(alertOf(fp));
        expect(() => parseWith(Incident, { id, source: 'am', reason: 'x', summary: '' }, 'incident')).not.toThrow();
        const payload = AlertmanagerPayload.parse({
          version: '4',
          groupKey,
          status: 'firing',
          receiver: 'r',
          alerts: [{ status: 'firing', labels: {}, startsAt: START, fingerprint: fp }],
        });
        const group = groupIncidentId('am', payload);
        expect(group).toMatch(/^amg-_[0-9a-f]{32}-\d+$/);
        expect(group).not.toBe(id);
      }),
      RUNS,
    );
  });

  it('a resolved alert resolves exactly the incident its firing alert started', () => {
    const source = IntakeConfigSchema.parse({ port: 0, sources: { am: { format: 'alertmanager', auth: { bearer: 't' } } } }).sources
      .am as Parameters<typeof alertmanagerBatch>[1];
    fc.assert(
      fc.property(crafted, (fp) => {
        const body = (status: 'firing' | 'resolved') =>
          AlertmanagerPayload.parse({
            version: '4',
            groupKey: 'g',
            status,
            receiver: 'r',
            alerts: [{ status, labels: { alertname: 'X' }, startsAt: START, fingerprint: fp }],
          });
        const started = alertmanagerBatch('am', source, body('firing')).incidents[0]!.id;
        expect(alertmanagerBatch('am', source, body('resolved')).resolved).toEqual([{ incidentId: started }]);
      }),
      { ...RUNS, numRuns: 300 },
    );
  });
});

describe('generic incident ids', () => {
  const sources = new Map<string, Parameters<typeof genericBatch>[1]>();
  const sourceOf = (name: string) => {
    if (!sources.has(name))
      sources.set(
        name,
        IntakeConfigSchema.parse({ port: 0, sources: { [name]: { format: 'generic', auth: { bearer: 't' }, mapping: { id: '$.id' } } } })
          .sources[name] as Parameters<typeof genericBatch>[1],
      );
    return sources.get(name)!;
  };
  const idOf = (name: string, raw: string) => genericBatch(name, sourceOf(name), { id: raw }).incidents[0]!.id;
  const rawId = fc.oneof(
    fc.string({ minLength: 1, maxLength: 20 }).filter((s) => s.trim() !== ''),
    piece([...SAFE, ...HOSTILE], 20).filter((s) => s.trim() !== ''),
    fc.string({ minLength: 100, maxLength: 200 }),
    fc.stringMatching(/^_?h?[0-9a-f]{16,32}$/),
  );

  it('the example of the issue: "a b/c X" and the hashed spelling of it are two incidents', () => {
    const hashed = idOf('pager', 'a b/c X');
    const piece = hashed.slice('pager-'.length);
    expect(idOf('pager', piece)).not.toBe(hashed);
    // The old spelling, `h<16 hex>`, is an ordinary sender id now.
    expect(idOf('pager', 'h4410031cac8c70ab')).toBe('pager-h4410031cac8c70ab');
    expect(idOf('pager', 'h4410031cac8c70ab')).not.toBe(hashed);
  });

  it('different sender ids never give one id, and a hashed piece sent back gives another', () => {
    fc.assert(
      fc.property(fc.uniqueArray(rawId, { minLength: 2, maxLength: 12 }), (raws) => {
        expectInjective(raws, (r) => idOf('pager', r));
        for (const r of raws) {
          const id = idOf('pager', r);
          const back = id.slice('pager-'.length);
          if (back !== r) expect(idOf('pager', back)).not.toBe(id);
          expect(() => parseWith(Incident, { id, source: 'pager', reason: 'x', summary: '' }, 'incident')).not.toThrow();
        }
      }),
      RUNS,
    );
  });

  it('sources the config accepts never share an id; sources that could are refused at start-up', () => {
    const names = ['pager', 'ops', 'pagers', 'p', 'opsgenie', 'am2', 'a'];
    expect(
      IntakeConfigSchema.safeParse({
        port: 0,
        sources: Object.fromEntries(names.map((n) => [n, { format: 'generic', auth: { bearer: 't' }, mapping: { id: '$.id' } }])),
      }).success,
    ).toBe(true);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(fc.constantFrom(...names), rawId), { minLength: 2, maxLength: 12, selector: (t) => JSON.stringify(t) }),
        (pairs) => {
          expectInjective(pairs, ([n, r]) => idOf(n, r));
          for (const [n, r] of pairs) {
            const id = idOf(n, r);
            // Never an id of the Alertmanager sources, the A2A face or the demo.
            expect(id).not.toMatch(/^(am|amg|a2a|demo)-/);
          }
        },
      ),
      RUNS,
    );
    const refused = (sources: string[]) =>
      IntakeConfigSchema.safeParse({
        port: 0,
        sources: Object.fromEntries(sources.map((n) => [n, { format: 'generic', auth: { bearer: 't' }, mapping: { id: '$.id' } }])),
      });
    for (const clash of [['pager', 'pager-eu'], ['am'], ['amg-x'], ['a2a'], ['demo-alerts']]) {
      const r = refused(clash);
      expect(r.success, clash.join(', ')).toBe(false);
      expect(r.error!.issues[0]!.message).toMatch(/could (give the same incident id|be those Bosun gives)/);
    }
  });
});
