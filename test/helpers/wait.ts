/**
 * Polls `check` until it returns true, or throws after `timeoutMs` naming `what` (a function is
 * called then, to describe the last state seen): for state that another process writes after the
 * event a test saw (a job parked, a file appended to, a server answering).
 */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string | (() => string),
  everyMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${typeof what === 'function' ? what() : what}: not so within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
