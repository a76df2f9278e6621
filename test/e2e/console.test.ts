import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import type { DeadLetter } from '@bosun/contract';
import {
  ROOT,
  freePort,
  openBrowser,
  startClusterTest,
  startService,
  waitUntil,
  type ClusterTest,
  type ServiceProcess,
} from '../helpers/index.js';

// The operator web console in headless Chromium (Debian's `chromium`, driven by playwright-core),
// against a cluster of separate processes and the console as its own process (cli/dist/bundle/console.js):
// login, a run appearing live, its timeline, an approval clicked through to the run's end, a
// dead letter retried with its button, an incident summary holding HTML shown as text, and a POST
// without the CSRF token refused.

// The functions given to page.evaluate / $$eval run in the browser. The tests are type-checked
// against Node's lib, not the DOM's (which would also retype fetch's Response everywhere), so
// this file declares what those functions read of the page's globals; it emits nothing.
declare const window: { __xss?: number };

const TOKEN = 'console-test-token-7f3a9c';
const XSS = 'Checkout is down <img src=x onerror="window.__xss=1"> after deploy';

let t: ClusterTest;
let consoleProcess: ServiceProcess | undefined;
let base = '';
let closeBrowser: (() => Promise<void>) | undefined;
let browser: BrowserContext;
let page: Page;

/** Starts the console process on a free port and resolves with its URL once it is ready. */
async function startConsole(env: Record<string, string>): Promise<string> {
  const port = await freePort();
  consoleProcess = startService('console', { ...env, BOSUN_CONSOLE_TOKEN: TOKEN }, { args: ['--port', String(port)] });
  await consoleProcess.ready();
  return `http://127.0.0.1:${port}`;
}

beforeAll(async () => {
  t = await startClusterTest('console', (config) => {
    // restart_pod asks an operator (as in the demo config).
    config.mcpServers.demo.tools = { restart_pod: 'ask', rollback_deployment: 'ask' };
  });
  base = await startConsole(t.env);
  const opened = await openBrowser();
  ({ browser, page } = opened);
  closeBrowser = () => opened.close();
}, 120_000);

afterAll(async () => {
  await closeBrowser?.();
  await consoleProcess?.stop();
  await t?.close();
});

describe('the operator console in Chromium', () => {
  it('does not start without a token, and says why', async () => {
    const p = startService('console', { ...t.env, BOSUN_CONSOLE_TOKEN: ' ' }, { args: ['--port', '0'] });
    expect((await p.exited).code).toBe(1);
    expect(p.lines.join('\n')).toContain('BOSUN_CONSOLE_TOKEN is not set: the console does not start without an operator token');
  });

  it('needs a login: a page without a session goes to /login, a wrong token stays there, the right one gets in', async () => {
    await page.goto(`${base}/`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await page.fill('#token', 'wrong-token');
    await page.click('#login');
    await page.waitForURL(/\/login\?failed=1$/);
    await page.fill('#token', TOKEN);
    await page.click('#login');
    await page.waitForSelector('table#runs');
    const cookie = (await browser.cookies(base)).find((c) => c.name === 'bosun_console')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
  });

  it('shows a published incident live, its timeline, its summary as text; an approval clicked through completes the run', async () => {
    await page.waitForSelector('#live.on');
    const restart = { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason: 'console' } };
    const { job, runId } = await t.client.publish({
      id: 'console-approve',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: XSS,
      payload: { fake: { calls: { kubernetes: [restart] } } },
    });
    // Live: the page was loaded before the incident was published.
    await page.waitForSelector(`tr[data-run-id="${runId}"]`);
    await page.click(`tr[data-run-id="${runId}"] a`);
    await page.waitForSelector('#timeline li');
    expect(await page.textContent('#incident-summary')).toBe(XSS);
    expect(await page.locator('#run-info img').count()).toBe(0);
    expect(await page.evaluate(() => window.__xss)).toBeUndefined();

    await t.client.events.waitFor((e) => e.runId === runId && e.type === 'approval.requested', 30_000, 'approval.requested');
    await page.click('#nav-approvals');
    const block = page.locator('section.approval', { hasText: runId });
    await block.waitFor();
    expect(await block.locator('code').first().textContent()).toContain('demo__restart_pod {"service":"checkout"');
    await block.locator('button.approve').click();
    await page.waitForSelector('#approvals-msg:has-text("approved")');
    expect((await t.client.result(job, 60_000)).status).toBe('completed');

    await page.goto(`${base}/#/run/${runId}`);
    await page.waitForSelector('#run-state:text("completed")');
    await page.waitForSelector('#timeline li:has-text("run.completed")');
    const seqs = await page.$$eval('#timeline li', (lis) => lis.map((li) => Number(li.getAttribute('data-seq'))));
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(seqs.length).toBeGreaterThan(4);
    // Each agent's model and tool calls, with their durations.
    const calls = await page.$$eval('#calls tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
    );
    expect(calls).toContainEqual(['kubernetes', 'tool', 'demo__restart_pod', expect.stringMatching(/^\d+ ms$/), 'ok']);
    expect(calls.some((c) => c[0] === 'coordinator' && c[1] === 'model')).toBe(true);
    // The README's picture: docs/console-run.png when BOSUN_UPDATE_SCREENSHOTS=1 (so that a test
    // run does not change a tracked file), else a copy under .bosun/ to look at.
    const shot = process.env.BOSUN_UPDATE_SCREENSHOTS === '1' ? join(ROOT, 'docs/console-run.png') : join(ROOT, '.bosun/console-run.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).toBeGreaterThan(10_000);
  });

  it('denies an approval with a reason typed in the page; the run goes on without the call', async () => {
    const restart = { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason: 'deny' } };
    const { job, runId } = await t.client.publish({
      id: 'console-deny',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'deny me',
      payload: { fake: { calls: { kubernetes: [restart] } } },
    });
    const requested = await t.client.events.waitFor(
      (e) => e.runId === runId && e.type === 'approval.requested',
      30_000,
      'approval.requested',
    );
    await page.goto(`${base}/#/approvals`);
    const block = page.locator('section.approval', { hasText: runId });
    await block.locator('input.deny-reason').fill('not during the freeze');
    await block.locator('button.deny').click();
    await page.waitForSelector('#approvals-msg:has-text("denied")');
    const resolved = await t.client.events.waitFor((e) => e.runId === runId && e.type === 'approval.resolved', 30_000, 'approval.resolved');
    expect(resolved.data).toMatchObject({ approvalId: requested.data.approvalId, status: 'denied', denyReason: 'not during the freeze' });
    expect(['completed', 'partial']).toContain((await t.client.result(job, 60_000)).status);
    await block.waitFor({ state: 'detached' });
  });

  it('approves only the ticked calls', async () => {
    const restart = { tool: 'demo__restart_pod', args: { service: 'checkout', pod: 'checkout-7c9d6f8b4-9mz4q', reason: 'some' } };
    const rollback = { tool: 'demo__rollback_deployment', args: { service: 'search', toVersion: 'v8' } };
    const { job, runId } = await t.client.publish({
      id: 'console-some',
      source: 'test',
      reason: 'PodCrashLooping',
      summary: 'approve some',
      payload: { fake: { calls: { kubernetes: [restart, rollback] }, parallel: ['kubernetes'] } },
    });
    await t.client.events.waitFor((e) => e.runId === runId && e.type === 'approval.requested', 30_000, 'approval.requested');
    await page.goto(`${base}/#/approvals`);
    const block = page.locator('section.approval', { hasText: runId });
    await block.locator('input[type=checkbox][data-index="1"]').uncheck();
    await block.locator('button.approve').click();
    await page.waitForSelector('#approvals-msg:has-text("approved")');
    const resolved = await t.client.events.waitFor((e) => e.runId === runId && e.type === 'approval.resolved', 30_000, 'approval.resolved');
    expect(resolved.data).toMatchObject({ status: 'approved', approved: [0], decidedBy: 'console-operator' });
    expect((await t.client.result(job, 60_000)).status).toBe('completed');
  });

  it('retries a dead letter with its button', async () => {
    const { runId } = await t.client.publish({
      id: 'console-dlq',
      source: 'test',
      reason: 'ErrorRateHigh',
      summary: 'database stalls',
      payload: { fake: { stall: ['database'] } },
    });
    let entryId = '';
    await waitUntil(
      async () => {
        const jobs = await t.client.deadLetterQueue.getWaiting(0, 100);
        entryId = String(jobs.find((j) => (j.data as DeadLetter).runId === runId)?.id ?? '');
        return entryId !== '';
      },
      60_000,
      'the stalled part dead-lettered',
    );
    await page.click('#nav-dead-letters');
    const row = page.locator(`tr[data-dead-letter-id="${entryId}"]`);
    await row.waitFor();
    await row.locator('button.retry').click();
    await page.waitForSelector('#dead-letters-msg:has-text("retried")');
    const stored = (await t.client.deadLetterQueue.getJob(entryId))!.data as DeadLetter;
    expect(stored.retriedAs).toBeDefined();
    await row.locator('td:nth-child(6):text-is("retried")').waitFor();
  });

  it('shows stats: runs per minute as bars, p50/p99 of finished runs, degraded runs', async () => {
    await page.click('#nav-stats');
    await page.waitForSelector('#durations');
    expect(await page.locator('#runs-per-minute .bar').count()).toBe(10);
    const text = (await page.textContent('#durations'))!;
    const finished = Number(/finished runs: (\d+)/.exec(text)?.[1]);
    expect(finished).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/p50 \d+\.\d s {3}p99 \d+\.\d s/);
  });

  it("mounts bull-board at /queues, read-only, with Bosun's queues", async () => {
    await page.goto(`${base}/queues`);
    await page.waitForSelector('text=incidents');
    await page.goto(`${base}/queues/api/queues`);
    const body = JSON.parse((await page.textContent('body'))!) as { queues: { name: string; readOnlyMode: boolean }[] };
    const names = body.queues.map((q) => q.name);
    expect(names).toContain('incidents');
    expect(names).toContain('dead-letter');
    expect(body.queues.every((q) => q.readOnlyMode)).toBe(true);
    const put = await page.evaluate(async () => (await fetch('/queues/api/queues/incidents/pause', { method: 'PUT' })).status);
    expect(put).toBe(403);
    expect((await fetch(`${base}/queues/api/queues`, { redirect: 'manual' })).status).toBe(303);
    await page.goto(`${base}/#/runs`);
  });

  it('refuses a POST without the CSRF token (403), and one without a session (401)', async () => {
    const status = await page.evaluate(
      async () => (await fetch('/api/approvals/nope', { method: 'POST', body: '{"decision":"approve"}' })).status,
    );
    expect(status).toBe(403);
    const outside = await fetch(`${base}/api/approvals/nope`, { method: 'POST', body: '{"decision":"approve"}' });
    expect(outside.status).toBe(401);
    // With the token, the same request gets through to the store (which knows no such approval).
    const csrf = await page.evaluate(async () => ((await (await fetch('/api/session')).json()) as { csrf: string }).csrf);
    const withToken = await page.evaluate(
      async (token) =>
        (await fetch('/api/approvals/nope', { method: 'POST', headers: { 'x-csrf-token': token }, body: '{"decision":"approve"}' })).status,
      csrf,
    );
    expect(withToken).toBe(404);
    // An event stream is of one run (a run id) or of every run: no NATS subject pattern gets through.
    expect(await page.evaluate(async () => (await fetch('/api/events?run=%3E')).status)).toBe(400);
    // An in-doubt call's ack names the action it needs.
    const badAck = await page.evaluate(
      async (token) =>
        (await fetch('/api/tool-calls/k1/ack', { method: 'POST', headers: { 'x-csrf-token': token }, body: '{"action":"maybe"}' })).json(),
      csrf,
    );
    expect(badAck).toEqual({ error: 'action: must be one of done, retry, skip' });
  });
});
