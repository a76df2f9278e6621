/**
 * The login page (cli/web/login.html) in the forms this console offers: the single sign-on
 * button when OpenID Connect is configured, the token form when token login is on, and the
 * message of a refused login. Every message is fixed text: nothing from the request reaches the page.
 */

/** Which ways in a console offers. */
export interface LoginMethods {
  token: boolean;
  oidc: boolean;
}

/** Why the page is shown again: the query value of `/login?refused=…`. */
export const LOGIN_REFUSALS = {
  /** A wrong operator token (also `/login?failed=1`, as before). */
  token: "Wrong token: that is not this console's operator token (BOSUN_CONSOLE_TOKEN). Try again.",
  /** Token login is off: OpenID Connect is configured and `console.allowTokenLogin` is not true. */
  'token-off': 'Token login is off on this console: log in with single sign-on.',
  /** The provider said who you are, and you are not let in. */
  'not-allowed':
    'Your account is not allowed on this console (it is not in console.oidc.allowedGroups or allowedEmails). Ask its operators.',
  /** Any other failed sign-on (cancelled, expired, a token that failed its checks). */
  'sign-in': 'The single sign-on did not complete (cancelled, expired or refused). Try again.',
} as const;

/** A refusal the page knows. */
export type LoginRefusal = keyof typeof LOGIN_REFUSALS;

const MESSAGE_SLOT = '<!-- bosun:login-message -->';
const SECTIONS = ['oidc', 'token'] as const;

/** Removes `<!-- bosun:name --> … <!-- /bosun:name -->` (kept: without the markers). */
function section(html: string, name: string, keep: boolean): string {
  const open = `<!-- bosun:${name} -->`;
  const close = `<!-- /bosun:${name} -->`;
  const start = html.indexOf(open);
  const end = html.indexOf(close);
  if (start < 0 || end < start) throw new Error(`cli/web/login.html has no ${open} … ${close} section`);
  const inner = keep ? html.slice(start + open.length, end) : '';
  return html.slice(0, start) + inner + html.slice(end + close.length);
}

/**
 * The page's variants: `''` (no message) and one per refusal.
 * @throws Error when the template lacks a slot or a section.
 */
export function loginPages(template: string, methods: LoginMethods): Map<LoginRefusal | '', string> {
  if (!template.includes(MESSAGE_SLOT)) throw new Error(`cli/web/login.html has no ${MESSAGE_SLOT}`);
  let page = template;
  for (const name of SECTIONS) page = section(page, name, methods[name]);
  const out = new Map<LoginRefusal | '', string>([['', page]]);
  for (const [key, text] of Object.entries(LOGIN_REFUSALS)) {
    out.set(key as LoginRefusal, page.replace(MESSAGE_SLOT, `<p class="error" id="login-error" role="alert">${text}</p>`));
  }
  return out;
}
