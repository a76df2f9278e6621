/**
 * The CLI's own error codes. They never leave the `bosun` process: its exit code and message say
 * what happened (the console answers with an HTTP status instead), so they are not part of the
 * wire contract's `ErrorCode`.
 */
import { CodedError, type CodedErrorOptions } from '@bosun/contract';

/**
 * - `usage`: bad usage of a command (`UsageError`, exit 2);
 * - `operator`: a refusal or failure reported as is (`OperatorError`, its own exit code);
 * - `publish_conflict`: an incident's job kept changing while `bosun publish` replaced it;
 * - `demo_server`: a server the demo needs does not answer.
 */
export type CliErrorCode = 'usage' | 'operator' | 'publish_conflict' | 'demo_server';

/** An error of the CLI alone, with a code from {@link CliErrorCode}. */
export class CliError extends CodedError<CliErrorCode> {
  constructor(code: CliErrorCode, message: string, options?: CodedErrorOptions) {
    super(code, message, options);
    this.name = 'CliError';
  }
}
