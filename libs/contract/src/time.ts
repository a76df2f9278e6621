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

/**
 * Waits for `work`, or stops waiting when `signal` aborts: then it rejects with an
 * `AbortError`-named error carrying the signal's reason as its cause. The work itself goes on
 * (it is not told); use it where what is waited for is safe to abandon, such as the answer to a
 * tool call the gateway records under its key either way.
 */
export function abortable<T>(work: Promise<T>, signal: AbortSignal | undefined, what: string): Promise<T> {
  if (!signal) return work;
  const aborted = (): Error =>
    Object.assign(new Error(`${what}: stopped waiting (aborted)`, { cause: signal.reason }), { name: 'AbortError' });
  if (signal.aborted) {
    // The work's own outcome is no longer awaited: a rejection of it is not unhandled.
    work.catch(() => undefined);
    return Promise.reject(aborted());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(aborted());
    signal.addEventListener('abort', onAbort, { once: true });
    // Settled by the work or by the abort, whichever comes first; the listener goes either way.
    void work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
