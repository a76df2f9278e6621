import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '../helpers/paths.js';
import { promtool } from '../helpers/promtool.js';

// The shipped alerting rules, checked and unit-tested by Prometheus' own promtool (Debian's
// `prometheus` package): `promtool check rules` on infra/prometheus/bosun-alerts.yaml and
// `promtool test rules` on its tests, infra/prometheus/bosun-alerts.test.yaml (input series and
// the alerts expected at given times). Every alert must have a case where it fires and one where
// it must not.

type Obj = Record<string, any>;

const DIR = join(ROOT, 'infra/prometheus');
const RULES = 'bosun-alerts.yaml';
const TESTS = 'bosun-alerts.test.yaml';

describe('infra/prometheus alerting rules under promtool', () => {
  it('pass promtool check rules', () => {
    const run = promtool(['check', 'rules', RULES], { cwd: DIR });
    expect(run.code, run.output).toBe(0);
    expect(run.output).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('pass their unit tests (promtool test rules)', () => {
    const run = promtool(['test', 'rules', TESTS], { cwd: DIR });
    expect(run.code, run.output).toBe(0);
    expect(run.output).toContain('SUCCESS');
  });

  it('test every alert: at least one case where it fires and one where it does not', () => {
    const alerts = (parse(readFileSync(join(DIR, RULES), 'utf8')) as Obj).groups.flatMap((g: Obj) =>
      (g.rules as Obj[]).map((r) => String(r.alert)),
    ) as string[];
    const tests = parse(readFileSync(join(DIR, TESTS), 'utf8')) as Obj;
    expect(tests.rule_files).toEqual([RULES]);
    const cases = (tests.tests as Obj[]).flatMap((t) => (t.alert_rule_test ?? []) as Obj[]);
    const untested = alerts.flatMap((alert) => {
      const own = cases.filter((c) => c.alertname === alert);
      return [
        ...(own.some((c) => (c.exp_alerts ?? []).length > 0) ? [] : [`${alert}: no case where it fires`]),
        ...(own.some((c) => (c.exp_alerts ?? []).length === 0) ? [] : [`${alert}: no case where it stays quiet`]),
      ];
    });
    expect(untested).toEqual([]);
  });
});
