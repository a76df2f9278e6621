import { spawn, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { STALL_MARKER } from '@bosun/contract';
import { ENTRY, consoleLogin, openBrowser, openContext, reap, waitUntil, type TestContext } from '../helpers/index.js';

// `npm start` runs `bosun demo`; with --once it exits after the sample incidents.

let ctx: TestContext;
beforeAll(async () => {
  ctx = await openContext('demo');
});
afterAll(async () => {
  await ctx?.close();
});

// A demo a test started and did not see exit (it failed or timed out first) is stopped as a user
// would, with Ctrl-C, so that its cluster stops too: a SIGKILLed demo leaves its services running,
// holding the demo's ports for every later demo on the machine.
const demos = new Set<ChildProcess>();
afterEach(async () => {
  for (const child of demos) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 30_000))]);
    }
    demos.delete(child);
  }
});

function startDemo(args: string[]): ChildProcessByStdio<null, Readable, Readable> {
  const child = reap(
    spawn(process.execPath, [ENTRY.cli, 'demo', ...args], {
      env: { ...process.env, ...ctx.env, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  demos.add(child);
  return child;
}

describe('npm start (bosun demo --once)', () => {
  it('starts the cluster as separate processes, shows events live, prints each result and exits 0', async () => {
    const child = startDemo(['--once']);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const t = setTimeout(() => child.kill('SIGKILL'), 120_000);
      child.on('exit', (c) => {
        clearTimeout(t);
        resolve(c);
      });
    });
    expect(code, out).toBe(0);
    expect(out).toContain('started: tool-gateway, coordinator, specialist-1, specialist-2 (separate processes)');
    expect(out).toContain('A2A server: agent card at http://127.0.0.1:8091/.well-known/agent-card.json');
    // The operator console: its URL and this demo's token.
    expect(out).toMatch(/operator console: http:\/\/127\.0\.0\.1:\d+\/ {2}\(log in with the token demo-[0-9a-f]{24}\)/);
    expect(out.match(/=== result of demo-\S+-crashloop .*: COMPLETED/)).not.toBeNull();
    expect(out.match(/=== result of demo-\S+-latency .*: COMPLETED/)).not.toBeNull();
    expect(out.match(/=== result of demo-\S+-errors .*: PARTIAL, 1 incomplete/)).not.toBeNull();
    // The CodeAct specialist: three tools chained in one script.
    expect(out.match(/=== result of demo-\S+-disk .*: COMPLETED/)).not.toBeNull();
    expect(out).toMatch(/codeact\.script\s+triage/);
    // Its answer lists what each of the three tools returned (the script built it from their results).
    const disk = /=== result of demo-\S+-disk .*: COMPLETED\n([\s\S]*?)\n===/.exec(out)?.[1] ?? '';
    for (const tool of ['get_pods', 'get_metrics', 'get_logs']) expect(disk).toMatch(new RegExp(`- demo__${tool}: \\S`));
    expect(out).toContain(STALL_MARKER);
    // Events were shown as they arrived.
    expect(out).toMatch(/tool\.completed\s+database/);
    expect(out).toMatch(/agent\.stalled\s+database/);
    // Alerts in, answers out: a sample Alertmanager alert through the intake, its answer delivered Slack-style.
    expect(out).toContain('started: intake (Alertmanager webhooks in; answers and approvals delivered to a local Slack stand-in)');
    // The Slack app mode: the rollback's approval as a Block Kit message with its buttons, printed by the stand-in.
    expect(out).toMatch(/=== the Slack stand-in received chat\.postMessage to C0DEMO0001: Approval needed \(demo__rollback_deployment\)/);
    expect(out).toMatch(/\(button "Approve": action_id bosun\.approve, value ap-\S+\)/);
    expect(out).toMatch(/\(button "Deny": action_id bosun\.deny, value ap-\S+\)/);
    expect(out).toMatch(
      /posted a sample Alertmanager alert to the intake \(POST \/alerts\/alertmanager\) → incident am-[0-9a-f]{16}-\d+, run r[0-9a-f]{20}/,
    );
    const slack = /=== Slack message delivered for (am-\S+) \(run (r[0-9a-f]{20})\):\n([\s\S]*?)\n===/.exec(out);
    expect(slack, out).not.toBeNull();
    expect(slack![3]).toContain(`*Bosun* — incident \`${slack![1]}\` (PodCrashLooping, critical): *completed*`);
    expect(slack![3]).toContain('<https://runbooks.example/pod-crashlooping|runbook>');
  }, 150_000);

  it('without --once: a new user watches the incidents in the console and approves the rollback there', async () => {
    const child = startDemo([]);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    const browser = await openBrowser();
    try {
      let m: RegExpExecArray | null = null;
      await waitUntil(
        () => (m = /operator console: (http:\S+?)\/ {2}\(log in with the token (\S+)\)/.exec(out)) !== null,
        90_000,
        () => `the console line in: ${out}`,
      );
      const [, base, token] = m!;
      await consoleLogin(browser.page, base!, token!);
      const { page } = browser;
      // The four sample incidents (and the alert's run) appear in the runs list.
      await waitUntil(async () => (await page.locator('#runs tbody tr').count()) >= 5, 60_000, 'five runs listed');
      await page.click('#nav-approvals');
      const block = page.locator('section.approval', { hasText: 'rollback' });
      await block.waitFor({ timeout: 60_000 });
      await block.locator('button.approve').click();
      await page.waitForSelector('#approvals-msg:has-text("approved")');
      // Approved in the browser, the rollback runs and its run completes.
      await waitUntil(
        () => /=== result of demo-\S+-rollback .*: COMPLETED/.test(out),
        90_000,
        () => `the rollback's result in: ${out}`,
      );
      expect(out).toMatch(/>> or in the console: +http:\S+#\/approvals/);
      expect(out).toMatch(/approval\.resolved.*approved/);
      await page.click('#nav-runs');
      await waitUntil(async () => (await page.locator('#runs tbody tr.state-completed').count()) >= 3, 30_000, 'completed runs listed');
    } finally {
      await browser.close();
      child.kill('SIGINT');
    }
    expect(await exited, out).toBe(0);
  }, 240_000);
});

describe('npm start, stopped with Ctrl-C', () => {
  it('exits at once (code 0) while a sample still waits for an operator', async () => {
    const child = startDemo([]);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    // The rollback sample waits for an approval: the demo is still waiting for its result.
    await waitUntil(
      () => out.includes('approval needed'),
      90_000,
      () => `the rollback waiting for approval:\n${out}`,
    );
    const sent = Date.now();
    child.kill('SIGINT');
    const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 30_000))]);
    expect(code, out).toBe(0);
    expect(Date.now() - sent).toBeLessThan(30_000);
    expect(out).toContain('stopping the demo cluster…');
  }, 150_000);
});
