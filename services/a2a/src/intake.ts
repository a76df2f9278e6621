/**
 * An A2A message → an incident. A DataPart carries the incident envelope (its fields; the id and
 * tenant are Bosun's), a TextPart free text that becomes the summary. Anything else is refused
 * with the protocol's error, before anything is published.
 */
import { createHash } from 'node:crypto';
import { ContentTypeNotSupportedError, RequestMalformedError } from '@a2a-js/sdk/errors';
import type { Message } from '@a2a-js/sdk';
import { Incident, describeIssues, type Incident as IncidentT } from '@bosun/contract';

/** `source` and `reason` of an incident sent as text only (its reason routes it by `defaultRoute`). */
export const TEXT_SOURCE = 'a2a';
export const TEXT_REASON = 'A2AMessage';

/** The incident id of a message: derived from the tenant and the message id, so a repeat names the same incident job. */
export function incidentIdFor(tenant: string, messageId: string): string {
  return `a2a-${createHash('sha256').update(`${tenant}\n${messageId}`).digest('hex').slice(0, 32)}`;
}

function checkSize(message: Message, maxBytes: number): void {
  const bytes = Buffer.byteLength(JSON.stringify(message.parts ?? []), 'utf8');
  if (bytes > maxBytes)
    throw new RequestMalformedError(`message.parts: ${bytes} bytes is over the limit of ${maxBytes} bytes (a2a.maxMessageBytes)`);
}

/** The text and data of a message's parts; other kinds of parts are refused. */
function readParts(message: Message): { texts: string[]; data: Record<string, unknown>[] } {
  const texts: string[] = [];
  const data: Record<string, unknown>[] = [];
  for (const [i, part] of (message.parts ?? []).entries()) {
    const c = part.content;
    if (c?.$case === 'text') texts.push(c.value);
    else if (c?.$case === 'data') {
      if (typeof c.value !== 'object' || c.value === null || Array.isArray(c.value))
        throw new RequestMalformedError(`message.parts.${i}: a DataPart must hold an object (the incident's fields)`);
      data.push(c.value as Record<string, unknown>);
    } else
      throw new ContentTypeNotSupportedError(
        `message.parts.${i}: only text and data parts are accepted (got ${c?.$case ?? 'an empty part'})`,
      );
  }
  return { texts, data };
}

/**
 * The incident a new message starts.
 *
 * @throws RequestMalformedError (no message, no parts, too large, an envelope that does not check), ContentTypeNotSupportedError (files, URLs).
 */
export function incidentFrom(message: Message | undefined, options: { tenant: string; maxBytes: number; requestedBy?: string }): IncidentT {
  if (!message) throw new RequestMalformedError('message: required');
  if (!message.messageId) throw new RequestMalformedError('message.messageId: required');
  if (!message.parts || message.parts.length === 0) throw new RequestMalformedError('message.parts: at least one part is required');
  checkSize(message, options.maxBytes);
  const { texts, data } = readParts(message);
  if (data.length > 1) throw new RequestMalformedError('message.parts: at most one DataPart (the incident) is accepted');
  const text = texts.join('\n').trim();
  const given = data[0] ?? {};
  const fields = typeof given.incident === 'object' && given.incident !== null ? (given.incident as Record<string, unknown>) : given;
  const candidate: Record<string, unknown> = { source: TEXT_SOURCE, reason: TEXT_REASON, summary: '', ...fields };
  if (text !== '')
    candidate.summary = typeof candidate.summary === 'string' && candidate.summary ? `${candidate.summary}\n\n${text}` : text;
  if (data.length === 0 && text === '') throw new RequestMalformedError('message.parts: the text is empty and there is no DataPart');
  candidate.id = incidentIdFor(options.tenant, message.messageId);
  candidate.tenant = options.tenant;
  // Who started the run is the caller, never what the message says.
  delete candidate.requestedBy;
  if (options.requestedBy) candidate.requestedBy = options.requestedBy;
  const parsed = Incident.safeParse(candidate);
  if (!parsed.success) throw new RequestMalformedError(`the incident is not valid: ${describeIssues(parsed.error).issues.join('; ')}`);
  return parsed.data;
}
