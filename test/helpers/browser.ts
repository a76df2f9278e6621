import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's chromium (`.ci/run` installs it); BOSUN_CHROMIUM points elsewhere. */
export const CHROMIUM = process.env.BOSUN_CHROMIUM ?? '/usr/bin/chromium';

/** Headless Chromium with a fresh profile, driven by playwright-core; `close` also removes the profile. */
export async function openBrowser(): Promise<{ browser: BrowserContext; page: Page; close(): Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'bosun-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const page = await browser.newPage();
  page.setDefaultTimeout(30_000);
  return {
    browser,
    page,
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Logs in to the console at `base` with `token`; resolves on the runs page. */
export async function consoleLogin(page: Page, base: string, token: string): Promise<void> {
  await page.goto(`${base}/login`);
  await page.fill('#token', token);
  await page.click('#login');
  await page.waitForSelector('table#runs');
}
