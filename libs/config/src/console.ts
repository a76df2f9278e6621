import { z } from 'zod';
import { BosunError } from '@bosun/contract';
import { substituteSecret } from './intake.js';

/** Whether a URL's host is this machine: `localhost`, `[::1]` or 127.0.0.0/8. */
function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/** Whether `url` is `https:`, or `http:` on a loopback host (tests, a provider on the same machine). */
function secureOrLoopback(url: URL): boolean {
  return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopback(url.hostname));
}

/** An absolute URL that is `https:` (or `http:` on loopback), without a fragment. */
const WebUrl = z.string().superRefine((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be an absolute URL (https://…)' });
    return;
  }
  if (!secureOrLoopback(url))
    ctx.addIssue({ code: 'custom', message: 'must be an https:// URL (http:// only on loopback: localhost, 127.x.x.x or [::1])' });
  if (url.hash !== '') ctx.addIssue({ code: 'custom', message: 'must not have a #fragment' });
});

const Names = z.array(z.string().min(1)).min(1);

/**
 * Console login through OpenID Connect (authorization code with PKCE). A person gets in when the
 * ID token (or the userinfo answer) says they are in one of `allowedGroups`, or when their
 * verified email is one of `allowedEmails`; those in `operatorGroups` may decide, the rest only see.
 */
const OidcConfig = z
  .object({
    /** The provider's issuer identifier; its discovery document is `<issuer>/.well-known/openid-configuration`. */
    issuer: WebUrl,
    /** The client id registered at the provider. */
    clientId: z.string().min(1),
    /** The client secret: a secret, use `${ENV}`; only the console resolves it, never logged. */
    clientSecret: z.string().min(1),
    /** The scopes asked for; must hold `openid`. Default `openid email profile`. */
    scopes: z
      .array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, 'a scope is printable ASCII without spaces, quotes or backslashes'))
      .min(1)
      .default(['openid', 'email', 'profile'])
      .refine((s) => s.includes('openid'), 'must include "openid"'),
    /** The claim that lists a person's groups (ID token first, else userinfo). Default `groups`. */
    groupsClaim: z.string().min(1).default('groups'),
    /** Groups whose members may log in. */
    allowedGroups: Names.optional(),
    /** Emails that may log in (compared without case; only an email the provider marks `email_verified`). */
    allowedEmails: z
      .array(z.email())
      .min(1)
      .transform((list) => list.map((e) => e.toLowerCase()))
      .optional(),
    /** Groups whose members may decide approvals, retry or drop dead letters and ack calls; everyone else is read-only. Default none. */
    operatorGroups: z.array(z.string().min(1)).default([]),
    /**
     * The URL the provider sends the browser back to: the console's `/auth/callback` as the
     * browser reaches it. Default `http://127.0.0.1:<port>/auth/callback` (a console on loopback only).
     */
    redirectUrl: WebUrl.refine(
      (u) => URL.canParse(u) && new URL(u).pathname.endsWith('/auth/callback'),
      'must end in /auth/callback',
    ).optional(),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.allowedGroups === undefined && o.allowedEmails === undefined)
      ctx.addIssue({ code: 'custom', message: 'set allowedGroups or allowedEmails (or both): who may log in', path: [] });
  });

/** The console (`cli/dist/bundle/console.js`): how people log in (docs/approvals.md#openid-connect-login). */
export const ConsoleConfigSchema = z
  .object({
    oidc: OidcConfig.optional(),
    /**
     * With `oidc`: also accept the shared operator token (BOSUN_CONSOLE_TOKEN) at the login form.
     * Off by default: when OpenID Connect is configured, everyone logs in as themselves.
     */
    allowTokenLogin: z.boolean().default(false),
  })
  .strict();

/** The console's section. */
export type ConsoleConfig = z.output<typeof ConsoleConfigSchema>;
/** The console's OpenID Connect settings. */
export type OidcSettings = z.output<typeof OidcConfig>;

/**
 * The OIDC settings with `clientSecret` substituted (only the console does this, so no other
 * service holds the secret). Returns a copy.
 *
 * @throws BosunError `invalid_config` naming `console.oidc.clientSecret` when its variable is unset or it is empty (never its value).
 */
export function resolveOidcSecret(oidc: OidcSettings, env: NodeJS.ProcessEnv = process.env): OidcSettings {
  const clientSecret = substituteSecret(oidc.clientSecret, env, 'console.oidc.clientSecret');
  if (clientSecret.trim() === '') throw new BosunError('invalid_config', 'console.oidc.clientSecret: empty after substitution');
  return { ...oidc, clientSecret };
}
