/**
 * Waits `ms` milliseconds, or less when `signal` aborts first. Resolves (never rejects) with
 * `true` when the whole wait passed and `false` when it was cut short, so a loop that sleeps
 * between tries stops at once on a drain or a cancel and checks why itself. An aborted signal
 * ends the wait before it starts. `unref`: the wait does not keep the process alive (default
 * false).
 */
export function sleep(ms: number, signal?: AbortSignal, options: { unref?: boolean } = {}): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(true);
      },
      Math.max(0, ms),
    );
    if (options.unref) timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
