import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { BosunMetrics } from '@bosun/transport';
import { ROOT } from '../helpers/paths.js';

// The alerting rules under infra/prometheus parse as Prometheus rules and name only metrics
// Bosun exports; every Deployment of infra/k8s carries the scrape annotations on the health port
// (docs/observability.md).

type Obj = Record<string, any>;

const RULES_FILE = join(ROOT, 'infra/prometheus/bosun-alerts.yaml');
// Every file kustomize applies: a Deployment added later is covered without editing this list.
const DEPLOYMENT_FILES = (
  parseAllDocuments(readFileSync(join(ROOT, 'infra/k8s/kustomization.yaml'), 'utf8'))[0]!.toJSON() as { resources: string[] }
).resources;

/** Every series name Bosun exports (histograms with their _bucket, _count and _sum), the coordinator's cluster gauges included. */
async function exportedNames(): Promise<Set<string>> {
  const names = new Set<string>();
  const coordinator = new BosunMetrics();
  coordinator.setClusterProbe(() => Promise.reject(new Error('not read here')));
  for (const m of await coordinator.registry.getMetricsAsJSON()) {
    names.add(m.name);
    // prom-client declares `type` as a numeric enum; it holds the Prometheus type's name.
    if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_count', '_sum']) names.add(m.name + suffix);
  }
  return names;
}

describe('infra/prometheus/bosun-alerts.yaml', () => {
  const rules = parse(readFileSync(RULES_FILE, 'utf8')) as Obj;
  const all = ((rules.groups ?? []) as Obj[]).flatMap((g) => (g.rules ?? []) as Obj[]);

  it('is a rules file: named groups of alerts, each with expr, for, severity and a summary', () => {
    expect(rules.groups.length).toBeGreaterThan(0);
    for (const g of rules.groups as Obj[]) expect(typeof g.name).toBe('string');
    for (const r of all) {
      expect(r.alert).toMatch(/^Bosun[A-Za-z]+$/);
      expect(typeof r.expr).toBe('string');
      expect(r.for).toMatch(/^\d+[smh]$/);
      expect(['warning', 'critical']).toContain(r.labels?.severity);
      expect(typeof r.annotations?.summary).toBe('string');
    }
  });

  it('covers degraded runs, approvals waiting, in-doubt calls, dead-letter growth and queues without a consumer', () => {
    const exprs = all.map((r) => String(r.expr));
    for (const metric of [
      'bosun_runs_finished_total',
      'bosun_approval_oldest_pending_seconds',
      'bosun_tool_calls_in_doubt',
      'bosun_dead_letters_total',
      'bosun_queue_workers',
    ])
      expect(
        exprs.some((e) => e.includes(metric)),
        metric,
      ).toBe(true);
  });

  it('names only metrics Bosun exports', async () => {
    const exported = await exportedNames();
    const used = all.flatMap((r) => String(r.expr).match(/\bbosun_[a-z_]+/g) ?? []);
    expect(used.length).toBeGreaterThan(0);
    expect(used.filter((n) => !exported.has(n))).toEqual([]);
  });
});

describe('infra/k8s scrape annotations', () => {
  it('every Deployment is scraped on /metrics at its BOSUN_HEALTH_PORT', () => {
    const deployments = DEPLOYMENT_FILES.flatMap((f) =>
      parseAllDocuments(readFileSync(join(ROOT, 'infra/k8s', f), 'utf8'))
        .map((d) => d.toJSON() as Obj)
        .filter((d) => d?.kind === 'Deployment'),
    );
    const names = deployments.map((d) => String((d.metadata as Obj).name));
    for (const name of ['coordinator', 'gateway', 'intake', 'specialist-triage']) expect(names, name).toContain(name);
    for (const d of deployments) {
      const annotations = d.spec.template.metadata.annotations as Obj;
      const env = (d.spec.template.spec.containers[0].env ?? []) as Obj[];
      const port = env.find((e) => e.name === 'BOSUN_HEALTH_PORT')?.value;
      expect(annotations['prometheus.io/scrape'], d.metadata.name).toBe('true');
      expect(annotations['prometheus.io/path'], d.metadata.name).toBe('/metrics');
      expect(annotations['prometheus.io/port'], d.metadata.name).toBe(port);
    }
  });
});
