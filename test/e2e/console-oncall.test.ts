import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import {
  ROOT,
  demoConfig,
  freePort,
  openBrowser,
  openClient,
  openContext,
  startService,
  waitUntil,
  writeConfig,
  type Client,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';
import { seriousFindings } from '../helpers/axe.js';

// The console as an on-call engineer uses it, in headless Chromium (Debian's chromium, driven by
// playwright-core) with axe-core injected: a wrong token says so on the login page; every page has
// its h1; a run whose tool call returned the tool's own error says "tool error" in both tables,
// as the gateway's metric does; the timeline's events open to their data and are numbered once
// (by seq); a specialist's output reads as fields, not as escaped JSON; the dead letters fit a
// 1280 px window with a 128-character id; no critical or serious axe finding on Bosun's pages.
// One cluster (gateway with its metrics port, coordinator, specialist) and the console, for the file.

// The functions given to page.evaluate / $$eval run in the browser. The tests are type-checked
// against Node's lib, not the DOM's (which would also retype fetch's Response everywhere), so
// this file declares what those functions read of the page's globals; it emits nothing.
declare const window: { innerWidth: number };
declare const document: {
  documentElement: { scrollWidth: number };
  querySelector(selector: string): { getBoundingClientRect(): { right: number } } | null;
  querySelectorAll(selector: string): { length: number };
};
/** An `<li>` of an `<ol>`: its `value` is the number the list shows. */
interface ListItem {
  value: number;
}

const TOKEN = 'oncall-console-token-5e2b71';
const LONG_ID = `oncall-${'x'.repeat(121)}`;

let ctx: TestContext;
let client: Client;
let page: Page;
let closeBrowser: (() => Promise<void>) | undefined;
let base = '';
let gatewayMetricsPort = 0;
let runId = '';
const processes: ServiceProcess[] = [];

async function login(): Promise<void> {
  await page.goto(`${base}/login`);
  await page.fill('#token', TOKEN);
  await page.click('#login');
  await page.waitForSelector('table#runs');
}

beforeAll(async () => {
  ctx = await openContext('console-oncall');
  const env = { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, demoConfig()), LOG_LEVEL: 'info' };
  gatewayMetricsPort = await freePort();
  const gateway = startService('gateway', { ...env, BOSUN_HEALTH_PORT: String(gatewayMetricsPort) });
  processes.push(gateway);
  await gateway.ready();
  const consolePort = await freePort();
  const rest = [
    startService('coordinator', env),
    startService('specialist', env),
    startService('console', { ...env, BOSUN_CONSOLE_TOKEN: TOKEN }, { args: ['--port', String(consolePort)] }),
  ];
  processes.push(...rest);
  await Promise.all(rest.map((p) => p.ready()));
  base = `http://127.0.0.1:${consolePort}`;
  client = await openClient(ctx);
  // A run whose one tool call returns the tool's own error (the demo server knows no pod "nope").
  const published = await client.publish({
    id: 'oncall-tool-error',
    source: 'test',
    reason: 'PodCrashLooping',
    summary: 'checkout pods restart',
    payload: {
      fake: {
        calls: {
          kubernetes: [
            { tool: 'demo__get_pods', args: { service: 'checkout' } },
            { tool: 'demo__get_logs', args: { service: 'checkout', pod: 'nope' } },
          ],
        },
      },
    },
  });
  runId = published.runId;
  await client.result(published.job, 60_000);
  // A poison incident with the longest id there is: its dead letter carries it twice.
  await client.incidents.add('incident', { id: LONG_ID, source: 'test' }, { jobId: LONG_ID });
  await waitUntil(async () => (await client.deadLetters()).some((d) => d.incidentId === LONG_ID), 30_000, 'the poison dead letter');
  const opened = await openBrowser();
  page = opened.page;
  closeBrowser = () => opened.close();
  await page.setViewportSize({ width: 1280, height: 900 });
  await login();
}, 120_000);

afterAll(async () => {
  await closeBrowser?.();
  await client?.close();
  await Promise.all(processes.map((p) => p.stop()));
  await ctx?.close();
});

describe('the console for an on-call engineer', () => {
  it('says so on the login page when the token is wrong', async () => {
    await page.goto(`${base}/login`);
    expect(await page.locator('#login-error').count()).toBe(0);
    await page.fill('#token', 'not-the-token');
    await page.click('#login');
    await page.waitForURL(/\/login\?failed=1$/);
    const message = page.locator('#login-error[role=alert]');
    await message.waitFor();
    expect(await message.textContent()).toMatch(/^Wrong token/);
    expect(await page.locator('h1').count()).toBe(1);
    expect(await seriousFindings(page)).toEqual([]);
  });

  it('shows a tool error as a tool error in both tables, as the metric counts it', async () => {
    await page.goto(`${base}/#/run/${runId}`);
    // Both tables filled (the view is read after the events): two tool calls, and the model's calls.
    await page.waitForSelector('#calls tbody tr:has-text("demo__get_logs")');
    await page.waitForFunction(() => document.querySelectorAll('#tool-calls tbody tr').length === 2);
    const rows = (table: string) =>
      page.$$eval(`${table} tbody tr`, (trs) =>
        trs
          .map((tr) => [...tr.children].map((td) => ({ text: td.textContent ?? '', outcome: td.getAttribute('data-outcome') })))
          .filter((cells) => cells.some((c) => /^demo__/.test(c.text)))
          .map((cells) => {
            const last = cells[cells.length - 1]!;
            return { tool: cells.find((c) => /^demo__/.test(c.text))!.text, text: last.text, outcome: last.outcome };
          }),
      );
    const toolCalls = await rows('#tool-calls');
    const calls = await rows('#calls');
    // What each table says, then the metric's word behind it.
    expect(toolCalls.map(({ tool, text }) => ({ tool, text }))).toEqual([
      { tool: 'demo__get_pods', text: 'ok' },
      { tool: 'demo__get_logs', text: 'tool error' },
    ]);
    expect(calls).toEqual(toolCalls);
    expect(toolCalls.map((c) => c.outcome)).toEqual(['ok', 'tool_error']);
    const metrics = await (await fetch(`http://127.0.0.1:${gatewayMetricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^bosun_tool_calls_total\{server="demo",tool="demo__get_logs",outcome="tool_error",decision="allow"\} 1$/m);
  });

  it('numbers the timeline once, by seq, and opens each event to its data', async () => {
    await page.goto(`${base}/#/run/${runId}`);
    await page.waitForSelector('#timeline li:has-text("run.completed")');
    const items = await page.$$eval('#timeline > li', (lis) =>
      lis.map((li) => ({
        seq: Number(li.getAttribute('data-seq')),
        value: (li as ListItem).value,
        summary: li.querySelector('summary')?.textContent ?? '',
      })),
    );
    expect(items.length).toBeGreaterThan(4);
    for (const item of items) {
      expect(item.value).toBe(item.seq);
      expect(item.summary).not.toMatch(/#\d/);
    }
    const event = page.locator('#timeline > li', { hasText: 'tool.completed kubernetes demo__get_logs' });
    expect(await event.locator('pre.event-data').isVisible()).toBe(false);
    await event.locator('summary').click();
    const data = JSON.parse((await event.locator('pre.event-data').textContent())!) as Record<string, unknown>;
    expect(data).toMatchObject({ tool: 'demo__get_logs', isError: true });
  });

  it("shows a specialist's output as fields, not as escaped JSON", async () => {
    await page.goto(`${base}/#/run/${runId}`);
    const output = page.locator('section.specialist[data-specialist="kubernetes"] .output');
    await output.waitFor();
    const text = (await output.textContent())!;
    expect(await output.locator('dl.fields > dt').allTextContents()).toEqual(expect.arrayContaining(['summary', 'findings']));
    // The get_pods answer quoted in a finding (JSON, cut short by the model): indented JSON, no escaped quotes.
    expect(text).not.toContain('\\"');
    const quoted = (await output.locator('pre.json').first().textContent())!;
    expect(quoted).toMatch(/^\{\n {2}"service": "checkout",\n {2}"pods": \[/);
  });

  it('fits the dead letters in a 1280 px window, with a 128-character id', async () => {
    await page.goto(`${base}/#/dead-letters`);
    await page.waitForSelector(`#dead-letters tr:has-text("${LONG_ID.slice(0, 30)}")`);
    // Its whole stored entry open, too.
    await page.locator('#dead-letters tbody tr').first().locator('summary').click();
    const widths = await page.evaluate(() => ({
      page: document.documentElement.scrollWidth,
      window: window.innerWidth,
      table: document.querySelector('#dead-letters')!.getBoundingClientRect().right,
    }));
    expect(widths.window).toBe(1280);
    expect(widths.page).toBeLessThanOrEqual(1280);
    expect(widths.table).toBeLessThanOrEqual(1280);
  });

  it("has one h1 on every page and no critical or serious axe finding on Bosun's pages", async () => {
    const pages: [string, string][] = [
      ['#/runs', 'table#runs tbody tr'],
      [`#/run/${runId}`, '#timeline li'],
      ['#/approvals', '#approvals p'],
      ['#/dead-letters', '#dead-letters tbody tr'],
      ['#/stats', '#durations'],
    ];
    const found: Record<string, unknown> = {};
    for (const [hash, ready] of pages) {
      await page.goto(`${base}/${hash}`);
      await page.waitForSelector(ready);
      expect(await page.locator('h1').count(), hash).toBe(1);
      const findings = await seriousFindings(page);
      if (findings.length > 0) found[hash] = findings;
    }
    expect(found).toEqual({});
  });

  it('bull-board at /queues: what its options fix is fixed; what is left is in the upstream report', async () => {
    const report = readFileSync(join(ROOT, 'docs/bull-board-accessibility.md'), 'utf8');
    const version = (JSON.parse(readFileSync(join(ROOT, 'node_modules/@bull-board/ui/package.json'), 'utf8')) as { version: string })
      .version;
    expect(report).toContain(`@bull-board/ui ${version}`);
    const left = new Map<string, string[]>();
    for (const [path, ready] of [
      ['/queues', 'text=incidents'],
      ['/queues/queue/incidents?status=completed', 'text=oncall-tool-error'],
    ] as const) {
      await page.goto(`${base}${path}`);
      await page.waitForSelector(ready);
      for (const f of await seriousFindings(page)) left.set(f.id, [...(left.get(f.id) ?? []), ...f.targets.map((t) => `${path} ${t}`)]);
    }
    // Fixed by its options (Bosun's uiConfig, cli/src/console/queues.ts): contrast, and the Redis icon button.
    expect(left.get('color-contrast')).toBeUndefined();
    expect(left.get('svg-img-alt')).toBeUndefined();
    // The rest is named, rule by rule, in the report to bull-board's maintainers.
    expect([...left.keys()].filter((id) => !report.includes(`\`${id}\``))).toEqual([]);
  });
});
