/**
 * Printing text that comes from outside — incident text, model output, tool arguments, reasons —
 * on a terminal, without letting it drive the terminal.
 */

/**
 * C0 controls but tab, DEL, C1 controls, and the bidirectional marks and overrides that can make
 * text read differently from what it is (U+200E, U+200F, U+202A–U+202E, U+2066–U+2069).
 */
// eslint-disable-next-line no-control-regex -- these are the characters to find
const UNSAFE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Shows every control character of `text` as an escape (`\x1b`, `\x00`, `\u202e`) instead of
 * sending it to the terminal. Newlines are escaped too, unless `keepNewlines` (for multi-line
 * text whose lines are meant, such as a table); tabs are kept.
 */
export function escapeControl(text: string, options: { keepNewlines?: boolean } = {}): string {
  return text.replace(UNSAFE, (c) => {
    if (c === '\n' && options.keepNewlines) return c;
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** What JSON.stringify leaves raw that a terminal may act on: DEL, C1 controls, bidi marks, line separators. */
const JSON_UNSAFE = /[\u007f-\u009f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/**
 * JSON text for a terminal or a pipe: `JSON.stringify` (indented by 2), with the characters it
 * leaves raw and a terminal may act on written as `\u` escapes. The value is unchanged: any JSON
 * parser reads the same data back.
 */
export function safeJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(JSON_UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Prints text for the terminal on stdout: lines as they are, every other control character escaped. */
export function printText(text: string): void {
  process.stdout.write(`${escapeControl(text, { keepNewlines: true })}\n`);
}

/** Prints a value on stdout as {@link safeJson}. */
export function printJson(value: unknown): void {
  process.stdout.write(`${safeJson(value)}\n`);
}

/** Names each stored value that did not parse on stderr, and returns the exit code: 1 when there was any, else 0. */
export function reportProblems(problems: string[]): number {
  for (const p of problems) process.stderr.write(`bosun: ${escapeControl(p)}\n`);
  return problems.length > 0 ? 1 : 0;
}

/** Resolves once everything written to `stream` so far has been handed to the OS (at once when it is closed). */
function flushed(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (stream.destroyed || !stream.writable) return resolve();
    // Writes complete in order: this empty one completes after everything before it.
    stream.write('', () => resolve());
  });
}

/** Set when writing the output failed for another reason than its reader going away. */
let outputFailed = false;

/**
 * Watches stdout and stderr for write errors. A reader that goes away (`bosun result … | head`)
 * is not an error of ours: writing stops, and the command exits as planned. Any other write error
 * fails the command (exit 1), said on stderr while that still works.
 */
export function watchOutputErrors(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') return;
    outputFailed = true;
    process.stderr.write(`bosun: cannot write the output: ${err.message}\n`);
  });
  process.stderr.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') outputFailed = true;
  });
}

/**
 * The CLI's one way out: waits until stdout and stderr are flushed, then exits with `code` (1 if
 * writing the output failed). `process.exit` right after a write would cut the output (at 64 KiB,
 * a pipe's buffer) when stdout is a pipe.
 */
export async function exitAfterFlush(code: number): Promise<never> {
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  process.exit(code === 0 && outputFailed ? 1 : code);
}
