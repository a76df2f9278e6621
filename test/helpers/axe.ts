import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

// The functions given to page.evaluate / $$eval run in the browser. The tests are type-checked
// against Node's lib, not the DOM's (which would also retype fetch's Response everywhere), so
// this file declares what those functions read of the page's globals; it emits nothing.
declare const window: { axe?: { run(context: unknown): Promise<{ violations: any[] }> } };
declare const document: unknown;

/** axe-core's browser build, from its npm package (no CDN). */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** One axe-core finding: the rule, its impact, what it asks, and where (CSS selectors of the nodes). */
export interface AxeFinding {
  id: string;
  impact: string;
  help: string;
  targets: string[];
}

/**
 * Runs axe-core (all its rules, WCAG 2 A/AA and best practices) on the page as it is now and
 * returns the findings of impact `critical` or `serious`. axe is evaluated through the DevTools
 * protocol, so a page's Content-Security-Policy (`script-src 'self'`) neither blocks it nor needs
 * loosening for the test.
 */
export async function seriousFindings(page: Page): Promise<AxeFinding[]> {
  const loaded = await page.evaluate(() => typeof window.axe === 'object');
  if (!loaded) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = window.axe;
    if (!axe) throw new Error('axe-core is not loaded in the page');
    const result = await axe.run(document);
    return result.violations.map((v) => ({
      id: String(v.id),
      impact: String(v.impact),
      help: String(v.help),
      targets: (v.nodes as { target: unknown[] }[]).map((n) => n.target.map(String).join(' ')),
    }));
  });
  return violations.filter((v) => v.impact === 'critical' || v.impact === 'serious');
}
