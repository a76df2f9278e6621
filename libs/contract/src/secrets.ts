/**
 * The one comparison of secrets: tokens, HMAC signatures, CSRF tokens and the digests of tokens.
 * Every package that checks a credential calls {@link sameSecret}, so the constant-time rule is
 * written once, at the lowest layer every package may import.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** The SHA-256 digest of `value` (a string is taken as UTF-8): how a token is kept, never in clear. */
export function sha256(value: string | Uint8Array): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * Whether `a` and `b` are the same secret, compared in constant time. Both sides are hashed with
 * SHA-256 first, so `timingSafeEqual` always compares 32 bytes with 32 bytes: neither the length
 * of a secret nor where two values first differ shows in the time taken. Either side may be a
 * string (UTF-8) or bytes (a stored digest, say); the two are equal only when their bytes are.
 */
export function sameSecret(a: string | Uint8Array, b: string | Uint8Array): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}
