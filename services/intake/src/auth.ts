import { createHmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { IntakeAuth } from '@bosun/config';
import { sameSecret } from '@bosun/contract';
import { BearerAuth } from '@bosun/transport';

/** What a request's credentials are worth: `ok`, or why not (shown to the sender, never a secret). */
export type AuthOutcome = { ok: true } | { ok: false; reason: string; challenge?: string };

/** The hex HMAC-SHA256 of `body` (prefixed `<timestamp>.` when signed with a timestamp). */
export function hmacHex(secret: string, body: string, timestamp?: string): string {
  const h = createHmac('sha256', secret);
  if (timestamp !== undefined) h.update(`${timestamp}.`);
  return h.update(body, 'utf8').digest('hex');
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * A source's check of who sent a request: a bearer token (checked before the body is read), or an
 * HMAC-SHA256 signature over the body, `sha256=<hex>` in the configured header (GitHub style),
 * optionally over `<timestamp>.<body>` with the timestamp in its own header and a tolerance.
 * Every comparison is constant-time.
 */
export class SourceAuth {
  private readonly bearer: BearerAuth | undefined;

  constructor(
    private readonly auth: IntakeAuth,
    realm: string,
    private readonly now: () => number = Date.now,
  ) {
    this.bearer = 'bearer' in auth ? new BearerAuth({ token: auth.bearer, realm }) : undefined;
  }

  /** Whether the credentials can be checked before the body is read (bearer). */
  get beforeBody(): boolean {
    return this.bearer !== undefined;
  }

  /** Checks the request's headers (bearer sources). */
  checkHeaders(headers: IncomingHttpHeaders): AuthOutcome {
    if (!this.bearer) return { ok: true };
    const check = this.bearer.check(headers.authorization);
    if (check === 'ok') return { ok: true };
    return {
      ok: false,
      reason: check === 'missing' ? 'missing bearer token' : 'the bearer token is not valid',
      challenge: this.bearer.challenge(check),
    };
  }

  /** Checks the body's signature (HMAC sources). */
  checkBody(headers: IncomingHttpHeaders, body: string): AuthOutcome {
    if (!('hmac' in this.auth)) return { ok: true };
    const { secret, header: name, timestampHeader, toleranceSeconds } = this.auth.hmac;
    const given = header(headers, name);
    if (given === undefined) return { ok: false, reason: `missing signature header ${name}` };
    let timestamp: string | undefined;
    if (timestampHeader !== undefined) {
      timestamp = header(headers, timestampHeader);
      if (timestamp === undefined || !/^\d{1,12}$/.test(timestamp))
        return { ok: false, reason: `missing or bad timestamp header ${timestampHeader}` };
      if (Math.abs(this.now() / 1000 - Number(timestamp)) > toleranceSeconds)
        return { ok: false, reason: `timestamp outside the tolerance of ${toleranceSeconds} s` };
    }
    const expected = `sha256=${hmacHex(secret, body, timestamp)}`;
    return sameSecret(given.trim().toLowerCase(), expected)
      ? { ok: true }
      : { ok: false, reason: `the signature in ${name} does not match the body` };
  }
}
