import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IntakeConfigSchema, resolveIntakeSecrets } from '@bosun/config';
import { AlertmanagerPayload, alertmanagerBatch, groupIncidentId } from './alertmanager.js';
import { SourceAuth } from './auth.js';
import { atPath, pathSteps } from './generic.js';
import { severityOf } from './mapping.js';

const alert = (fingerprint: string, startsAt: string, status: 'firing' | 'resolved' = 'firing') => ({
  status,
  labels: { alertname: 'HighLatency', service: 'checkout', severity: 'page' },
  annotations: { summary: `latency ${fingerprint}` },
  startsAt,
  fingerprint,
});

const payload = (alerts: unknown[]) =>
  AlertmanagerPayload.parse({ version: '4', groupKey: '{}:{alertname="HighLatency"}', status: 'firing', receiver: 'bosun', alerts });

const source = (per: 'alert' | 'group') =>
  IntakeConfigSchema.parse({ port: 0, sources: { am: { format: 'alertmanager', auth: { bearer: 't' }, per } } }).sources.am as any;

describe('Alertmanager mapping', () => {
  it('each firing alert is an incident; the id is the fingerprint and the start', () => {
    const batch = alertmanagerBatch(
      'am',
      source('alert'),
      payload([alert('a1', '2026-01-01T00:00:00Z'), alert('a2', '2026-01-01T00:00:01Z')]),
    );
    expect(batch.incidents.map((i) => i.id)).toEqual([
      `am-a1-${Date.parse('2026-01-01T00:00:00Z')}`,
      `am-a2-${Date.parse('2026-01-01T00:00:01Z')}`,
    ]);
    expect(batch.incidents[0]).toMatchObject({ reason: 'HighLatency', severity: 'critical', summary: 'latency a1' });
  });

  it('per group: one incident for the notification, the same id when the group grows', () => {
    const two = payload([alert('a1', '2026-01-01T00:00:00Z'), alert('a2', '2026-01-01T00:00:05Z')]);
    const three = payload([alert('a1', '2026-01-01T00:00:00Z'), alert('a2', '2026-01-01T00:00:05Z'), alert('a3', '2026-01-01T00:01:00Z')]);
    const batch = alertmanagerBatch('am', source('group'), two);
    expect(batch.incidents).toHaveLength(1);
    expect(groupIncidentId('am', three)).toBe(batch.incidents[0]!.id);
  });

  it('resolved alerts resolve the incident of the same fingerprint and start', () => {
    const batch = alertmanagerBatch('am', source('alert'), payload([alert('a1', '2026-01-01T00:00:00Z', 'resolved')]));
    expect(batch).toEqual({ incidents: [], resolved: [{ incidentId: `am-a1-${Date.parse('2026-01-01T00:00:00Z')}` }] });
  });

  it('refuses a payload that is not version 4, naming the field', () => {
    const r = AlertmanagerPayload.safeParse({ version: '3', groupKey: 'x', status: 'firing', receiver: 'r', alerts: [] });
    expect(r.success).toBe(false);
  });
});

describe('JSON paths', () => {
  it('reads dotted names, indexes and quoted names; only own properties', () => {
    expect(pathSteps("$.a[2]['b.c'].d")).toEqual(['a', 2, 'b.c', 'd']);
    expect(atPath({ a: [0, 1, { 'b.c': { d: 'x' } }] }, "$.a[2]['b.c'].d")).toBe('x');
    expect(atPath({ a: {} }, '$.a.constructor')).toBeUndefined();
    expect(atPath({ a: 1 }, '$.a.b')).toBeUndefined();
  });

  it('the config refuses a path that is not one', () => {
    const r = IntakeConfigSchema.safeParse({
      port: 0,
      sources: { p: { format: 'generic', auth: { bearer: 't' }, mapping: { id: 'incident.id' } } },
    });
    expect(r.success).toBe(false);
  });
});

describe('severities', () => {
  it('maps common words, the source first, warning otherwise', () => {
    expect(severityOf('P1', {})).toBe('critical');
    expect(severityOf('urgent', { urgent: 'critical' })).toBe('critical');
    expect(severityOf('whatever', {})).toBe('warning');
    expect(severityOf(undefined, {})).toBe('warning');
  });
});

describe('SourceAuth', () => {
  const hmac = (extra: Record<string, unknown> = {}) =>
    new SourceAuth({ hmac: { secret: 's3cret', header: 'x-sig', toleranceSeconds: 300, ...extra } }, 'r', () => 1_000_000_000_000);
  const sig = (body: string, prefix = '') =>
    `sha256=${createHmac('sha256', 's3cret')
      .update(prefix + body)
      .digest('hex')}`;

  it('accepts the right signature, refuses a wrong or missing one', () => {
    expect(hmac().checkBody({ 'x-sig': sig('{}') }, '{}')).toEqual({ ok: true });
    expect(hmac().checkBody({ 'x-sig': sig('{}') }, '{ }')).toMatchObject({ ok: false, reason: expect.stringContaining('does not match') });
    expect(hmac().checkBody({}, '{}')).toMatchObject({ ok: false, reason: 'missing signature header x-sig' });
  });

  it('with a timestamp header: signed over `<t>.<body>`, and refused outside the tolerance', () => {
    const auth = hmac({ timestampHeader: 'x-ts' });
    expect(auth.checkBody({ 'x-sig': sig('{}', '1000000000.'), 'x-ts': '1000000000' }, '{}')).toEqual({ ok: true });
    expect(auth.checkBody({ 'x-sig': sig('{}', '999999000.'), 'x-ts': '999999000' }, '{}')).toMatchObject({ ok: false });
  });

  it('bearer: checked on the headers', () => {
    const auth = new SourceAuth({ bearer: 'tok' }, 'r');
    expect(auth.beforeBody).toBe(true);
    expect(auth.checkHeaders({ authorization: 'Bearer tok' })).toEqual({ ok: true });
    expect(auth.checkHeaders({ authorization: 'Bearer nope' })).toMatchObject({
      ok: false,
      challenge: expect.stringContaining('invalid_token'),
    });
  });
});

describe('resolveIntakeSecrets', () => {
  const config = IntakeConfigSchema.parse({
    port: '${PORT_X:-8090}',
    sources: { am: { format: 'alertmanager', auth: { bearer: '${TOKEN_X}' } } },
  });

  it('substitutes the port and the secrets, naming an unset variable', () => {
    const r = resolveIntakeSecrets(config, { TOKEN_X: 'abc' });
    expect(r.port).toBe(8090);
    expect(r.sources.am!.auth).toEqual({ bearer: 'abc' });
    expect(() => resolveIntakeSecrets(config, {})).toThrow('intake.sources.am.auth.bearer: environment variable TOKEN_X is not set');
    expect(() => resolveIntakeSecrets(config, { TOKEN_X: '' })).toThrow('the secret is empty');
    expect(() => resolveIntakeSecrets(config, { TOKEN_X: 'a', PORT_X: 'http' })).toThrow('intake.port');
  });
});
