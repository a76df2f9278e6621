import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { Queue } from 'bullmq';
import { INCIDENTS_QUEUE, INCIDENT_JOB, runCheckpointId, runIdFor } from '@bosun/contract';
import { ApprovalReader, ApprovalStore, RedisCheckpointStore, type Approval, type ApprovalRequest } from '@bosun/transport';
import {
  demoConfig,
  freePort,
  openBrowser,
  openContext,
  startService,
  wholeOutput,
  writeConfig,
  type ServiceProcess,
  type TestContext,
} from '../helpers/index.js';
import { seriousFindings } from '../helpers/axe.js';
import { startOidcProvider, type OidcProvider } from '../helpers/oidc-provider.js';

// Console login through OpenID Connect, end to end: a real OpenID provider (oidc-provider, on
// 127.0.0.2 — another site than the console on 127.0.0.1, so the SameSite cookies are tested as a
// browser really sends them), the console as its own process, and headless Chromium through the
// provider's login and consent pages. An operator decides and the decision carries her verified
// identity; a read-only person sees the approvals but gets 403 on a decision; a person outside
// allowedGroups is refused; the shared-token login is off; a callback without its attempt is refused;
// the login page (and its refusal) has no serious axe finding.
// The ID token's own checks (signature, issuer, audience, nonce, expiry) are in
// cli/src/console/oidc.test.ts, with tokens signed there.

const CLIENT = { id: 'bosun-console', secret: 'oidc-client-secret-5b1e7d' };
const TOKEN = 'console-token-not-for-oidc-3c9a';
const ACCOUNTS = {
  ada: { name: 'Ada Operator', email: 'ada@example.test', groups: ['sre', 'oncall'] },
  bob: { name: 'Bob Viewer', email: 'bob@example.test', groups: ['sre'] },
  eve: { name: 'Eve Outsider', email: 'eve@example.test', groups: ['marketing'] },
};

let ctx: TestContext;
let store: ApprovalStore;
let incidents: Queue;
let idp: OidcProvider;
let consoleProcess: ServiceProcess | undefined;
let base = '';
let closeBrowser: (() => Promise<void>) | undefined;
let browser: BrowserContext;
let page: Page;
let oidcSection: Record<string, unknown>;

/** A pending approval of one call that needs it; `extra` sets more of the request (its run, its context). */
function seed(id: string, extra: Partial<ApprovalRequest> = {}): Promise<Approval> {
  const runId =
    extra.runId ??
    `r${id
      .replace(/[^0-9a-f]/g, '')
      .padEnd(20, '0')
      .slice(0, 20)}`;
  return store.request({
    id,
    runId,
    incidentId: `inc-${id}`,
    agent: 'kubernetes',
    taskId: `${runId}-kubernetes-1`,
    calls: [{ index: 0, tool: 'demo__restart_pod', args: { pod: 'checkout-1' }, needsApproval: true, key: `${runId}-kubernetes-1-s1-c0` }],
    reason: 'restart the crash-looping pod',
    createdAt: new Date().toISOString(),
    timeoutAt: new Date(Date.now() + 600_000).toISOString(),
    ...extra,
  });
}

/** Logs in through the provider as `login` (any password), from the console's login page. */
async function ssoLogin(login: string): Promise<void> {
  await browser.clearCookies();
  await page.goto(`${base}/login`);
  await page.click('#oidc-login');
  await page.waitForURL((u) => u.hostname === '127.0.0.2');
  await page.fill('input[name=login]', login);
  await page.fill('input[name=password]', 'any');
  await page.click('button[type=submit]');
  // The provider's consent page, then back to the console.
  await page.waitForSelector('button[type=submit]:has-text("Continue")');
  await page.click('button[type=submit]');
}

/** A POST from the page, with its session's CSRF token; the status and body. */
function postFromPage(path: string, body: unknown): Promise<{ status: number; text: string }> {
  return page.evaluate(
    async ({ path, body }) => {
      const session = (await (await fetch('/api/session')).json()) as { csrf: string };
      const r = await fetch(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrf },
        body: JSON.stringify(body),
      });
      return { status: r.status, text: await r.text() };
    },
    { path, body },
  );
}

beforeAll(async () => {
  ctx = await openContext('console-oidc');
  store = new ApprovalStore({ redis: ctx.redis, prefix: ctx.prefix });
  incidents = new Queue(INCIDENTS_QUEUE, { connection: ctx.redis, prefix: ctx.prefix });
  const port = await freePort();
  const redirectUrl = `http://127.0.0.1:${port}/auth/callback`;
  idp = await startOidcProvider({ host: '127.0.0.2', client: { ...CLIENT, redirectUrl }, accounts: ACCOUNTS });
  const config = demoConfig();
  config.console = {
    oidc: {
      issuer: idp.issuer,
      clientId: CLIENT.id,
      clientSecret: '${BOSUN_OIDC_CLIENT_SECRET}',
      scopes: ['openid', 'email', 'profile', 'groups'],
      allowedGroups: ['sre'],
      operatorGroups: ['oncall'],
      redirectUrl,
    },
  };
  oidcSection = config.console.oidc;
  const env = { ...ctx.env, BOSUN_CONFIG: writeConfig(ctx, config), BOSUN_OIDC_CLIENT_SECRET: CLIENT.secret, BOSUN_CONSOLE_TOKEN: TOKEN };
  consoleProcess = startService('console', env, { args: ['--port', String(port)] });
  await consoleProcess.ready();
  base = `http://127.0.0.1:${port}`;
  const opened = await openBrowser();
  ({ browser, page } = opened);
  closeBrowser = () => opened.close();
}, 120_000);

afterAll(async () => {
  await closeBrowser?.();
  await consoleProcess?.stop();
  await idp?.close();
  await store?.close();
  await incidents?.close();
  await ctx?.close();
});

describe('console login through OpenID Connect', () => {
  it('offers single sign-on only, and refuses the shared token (allowTokenLogin is not set)', async () => {
    await page.goto(`${base}/login`);
    expect(await page.locator('#oidc-login').count()).toBe(1);
    expect(await page.locator('#token').count()).toBe(0);
    expect(await seriousFindings(page)).toEqual([]);
    const r = await fetch(`${base}/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: TOKEN }),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      redirect: 'manual',
    });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe('/login?refused=token-off');
    expect(r.headers.get('set-cookie')).toBeNull();
    expect(consoleProcess!.lines.join('\n')).toContain('BOSUN_CONSOLE_TOKEN is set but not used');
  });

  it('logs an operator in through the provider; her decision carries her verified identity', async () => {
    // A run of its own (an incident job no coordinator takes), so its page can show the decision.
    const job = await incidents.add(
      INCIDENT_JOB,
      { id: 'inc-oidc-ada', source: 'am', reason: 'PodCrashLooping', summary: 'checkout pods crash-looping', severity: 'critical' },
      { jobId: 'inc-oidc-ada' },
    );
    const runId = runIdFor(job.id!, job.timestamp);
    const approval = await seed('appr-oidc-ada', {
      runId,
      incidentId: 'inc-oidc-ada',
      incident: { id: 'inc-oidc-ada', title: 'checkout pods crash-looping', severity: 'critical', service: 'checkout', source: 'am' },
      steps: [{ tool: 'demo__get_logs', args: { pod: 'checkout-1' }, result: 'OOMKilled after deploy 41' }],
    });
    // The run so far, as the coordinator keeps it: a database specialist has finished.
    await new RedisCheckpointStore({ redis: ctx.redis, prefix: ctx.prefix }).save(runCheckpointId(runId), {
      v: 1,
      runId,
      incidentId: 'inc-oidc-ada',
      startedAt: new Date().toISOString(),
      deadlineAt: new Date(Date.now() + 600_000).toISOString(),
      jobId: 'inc-oidc-ada',
      mode: 'route',
      phase: 'waiting',
      round: 0,
      messages: [],
      delegations: [
        { taskId: approval.taskId, agent: 'kubernetes', round: 0, task: 'look' },
        {
          taskId: `${runId}-database-1`,
          agent: 'database',
          round: 0,
          task: 'look',
          result: {
            v: 1,
            taskId: `${runId}-database-1`,
            agent: 'database',
            status: 'completed',
            output: 'no database errors',
            attempts: 1,
          },
        },
      ],
    });
    await ssoLogin('ada');
    await page.waitForSelector('table#runs');
    const cookie = (await browser.cookies(base)).find((c) => c.name === 'bosun_console')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    const session = await page.evaluate(async () => (await (await fetch('/api/session')).json()) as { person: unknown });
    expect(session.person).toEqual({ name: 'Ada Operator', email: 'ada@example.test', role: 'operator', via: 'oidc' });
    expect(await page.textContent('#whoami')).toBe('Ada Operator');

    await page.click('#nav-approvals');
    const block = page.locator('section.approval', { hasText: approval.id });
    // The context she decides from: the incident, the run so far, when it times out.
    expect(await block.locator('.approval-incident').textContent()).toBe(
      'Incident inc-oidc-ada critical checkout pods crash-looping · service checkout · source am',
    );
    expect(await block.locator('.approval-specialists li').allTextContents()).toEqual(['database completed no database errors']);
    await block.locator('.approval-steps summary').click();
    expect(await block.locator('.approval-steps li').allTextContents()).toEqual([
      'demo__get_logs {"pod":"checkout-1"} → OOMKilled after deploy 41',
    ]);
    expect(await block.locator('.timeout').textContent()).toContain(approval.timeoutAt);
    await block.locator('button.approve').click();
    await page.waitForSelector('#approvals-msg:has-text("approved")');
    const decided = (await store.get(approval.id))!;
    expect(decided.status).toBe('approved');
    expect(decided.decidedBy).toBe('Ada Operator');
    expect(decided.actor).toMatchObject({ path: 'console', verified: true, name: 'Ada Operator', sub: 'ada', email: 'ada@example.test' });
    // The run's page shows the decision: her name, the path and the time.
    await page.goto(`${base}/#/run/${runId}`);
    const shown = page.locator(`#run-approvals section[data-approval-id="${approval.id}"]`);
    await shown.waitFor();
    expect(await shown.locator('.badge').textContent()).toBe('approved');
    expect(await shown.locator('.approval-decisions li').allTextContents()).toEqual([
      `approve by Ada Operator (verified, console) at ${decided.decidedAt}`,
    ]);
  });

  it('lets a read-only person see the approvals, and answers 403 to a decision', async () => {
    const approval = await seed('appr-oidc-bob');
    await ssoLogin('bob');
    await page.waitForSelector('table#runs');
    await page.waitForSelector('#whoami:text("Bob Viewer (read-only)")');
    const pending = await page.evaluate(async () => (await (await fetch('/api/approvals')).json()) as Approval[]);
    expect(pending.map((a) => a.id)).toContain(approval.id);
    const r = await postFromPage(`/api/approvals/${approval.id}`, { decision: 'approve' });
    expect(r.status).toBe(403);
    expect(r.text).toContain('read-only: Bob Viewer is not in console.oidc.operatorGroups');
    expect((await postFromPage(`/api/dead-letters/nothing/retry`, {})).status).toBe(403);
    expect((await store.get(approval.id))!.status).toBe('pending');
    // The list recorded nobody; the approval's own page records him, and shows who has looked.
    const reader = new ApprovalReader({ redis: ctx.redis, prefix: ctx.prefix });
    expect(await reader.viewers(approval.id)).toEqual([]);
    await page.goto(`${base}/#/approval/${approval.id}`);
    const seen = page.locator('#approval .approval-viewers');
    await seen.waitFor();
    expect(await seen.textContent()).toMatch(/^Seen by Bob Viewer \(console\) at \d{4}-/);
    expect(await reader.viewers(approval.id)).toEqual([{ name: 'Bob Viewer', verified: true, path: 'console', at: expect.any(String) }]);
  });

  it('refuses a person outside allowedGroups, saying so, without a session', async () => {
    await ssoLogin('eve');
    await page.waitForURL(`${base}/login?refused=not-allowed`);
    expect(await page.textContent('#login-error')).toContain('not allowed on this console');
    expect(await seriousFindings(page)).toEqual([]);
    expect((await browser.cookies(base)).find((c) => c.name === 'bosun_console')).toBeUndefined();
    expect((await fetch(`${base}/api/approvals`)).status).toBe(401);
  });

  it('refuses a callback that no login attempt of this browser started', async () => {
    const r = await fetch(`${base}/auth/callback?code=forged&state=forged`, { redirect: 'manual' });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe('/login?refused=sign-in');
    expect(r.headers.get('set-cookie')).not.toContain('bosun_console=');
  });

  it('keeps the token form beside single sign-on with allowTokenLogin: true', async () => {
    const port = await freePort();
    const config = demoConfig();
    config.console = { oidc: { ...oidcSection, redirectUrl: `http://127.0.0.1:${port}/auth/callback` }, allowTokenLogin: true };
    const env = {
      ...ctx.env,
      BOSUN_CONFIG: writeConfig(ctx, config, 'both.json'),
      BOSUN_OIDC_CLIENT_SECRET: CLIENT.secret,
      BOSUN_CONSOLE_TOKEN: TOKEN,
    };
    const both = startService('console', env, { name: 'console-both', args: ['--port', String(port)] });
    try {
      await both.ready();
      const login = await (await fetch(`http://127.0.0.1:${port}/login`)).text();
      expect(login).toContain('href="/auth/login"');
      expect(login).toContain('id="token"');
      const r = await fetch(`http://127.0.0.1:${port}/login`, {
        method: 'POST',
        body: new URLSearchParams({ token: TOKEN }),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        redirect: 'manual',
      });
      expect(r.status).toBe(303);
      expect(r.headers.get('location')).toBe('/');
      expect(r.headers.get('set-cookie')).toMatch(/^bosun_console=/);
    } finally {
      await both.stop();
    }
  });

  it('never logs the client secret or the token', () => {
    const out = wholeOutput(consoleProcess!).join('\n');
    expect(out).toContain('console login (OpenID Connect)');
    expect(out).not.toContain(CLIENT.secret);
    expect(out).not.toContain(TOKEN);
  });
});
