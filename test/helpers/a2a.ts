import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import type { Message as Message03 } from 'a2a-sdk-03';
import {
  ClientFactory as ClientFactory03,
  ClientFactoryOptions as ClientFactoryOptions03,
  JsonRpcTransportFactory as JsonRpcTransportFactory03,
  RestTransportFactory as RestTransportFactory03,
  type Client as Client03,
} from 'a2a-sdk-03/client';
import { ROOT } from './paths.js';
import { Role, type Message, type Part, type SendMessageRequest, type StreamResponse } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, type Client } from '@a2a-js/sdk/client';

/** The `a2a.tokens` entry of a token. */
export function tokenEntry(token: string, tenant: string, operator = false): { sha256: string; tenant: string; operator: boolean } {
  return { sha256: createHash('sha256').update(token).digest('hex'), tenant, operator };
}

/** An SDK client of the A2A server at `base`, presenting `token` (none when null), over `transport`. */
export async function a2aClient(base: string, token: string | null, transport: 'JSONRPC' | 'HTTP+JSON' = 'JSONRPC'): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if (token !== null) headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
      preferredTransports: [transport],
    }),
  );
  return factory.createFromUrl(base);
}

export const text = (value: string): Part => ({
  content: { $case: 'text', value },
  metadata: undefined,
  filename: '',
  mediaType: 'text/plain',
});
export const data = (value: unknown): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});

/** A user message (a new message id unless given). */
export function userMessage(parts: Part[], options: { messageId?: string; taskId?: string; contextId?: string } = {}): Message {
  return {
    messageId: options.messageId ?? randomUUID(),
    contextId: options.contextId ?? '',
    taskId: options.taskId ?? '',
    role: Role.ROLE_USER,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** A send request; `returnImmediately` for a non-blocking send. */
export function sendRequest(message: Message, options: { returnImmediately?: boolean; historyLength?: number } = {}): SendMessageRequest {
  return {
    tenant: '',
    message,
    configuration: {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      returnImmediately: options.returnImmediately ?? false,
      ...(options.historyLength === undefined ? {} : { historyLength: options.historyLength }),
    },
    metadata: undefined,
  };
}

/** Every response of a stream, until it ends (or `until` says stop). */
export async function collect(stream: AsyncGenerator<StreamResponse>, until?: (r: StreamResponse) => boolean): Promise<StreamResponse[]> {
  const out: StreamResponse[] = [];
  for await (const r of stream) {
    out.push(r);
    if (until?.(r)) break;
  }
  return out;
}

/** A fetch that presents `token` as a bearer token (none when null). */
export function bearerFetch(token: string | null): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    if (token !== null) headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
}

/**
 * A client of `@a2a-js/sdk` 0.3.14 (the root devDependency `a2a-sdk-03`) from the card at
 * `base`, over `transport`: what most deployed A2A clients speak.
 */
export async function a2aClient03(base: string, token: string | null, transport: 'JSONRPC' | 'HTTP+JSON' = 'JSONRPC'): Promise<Client03> {
  const fetchImpl = bearerFetch(token);
  const factory = new ClientFactory03(
    ClientFactoryOptions03.createFrom(ClientFactoryOptions03.default, {
      transports: [new JsonRpcTransportFactory03({ fetchImpl }), new RestTransportFactory03({ fetchImpl })],
      preferredTransports: [transport],
    }),
  );
  return factory.createFromUrl(base);
}

/** A 0.3 user message (`kind` discriminators, `role: "user"`). */
export function userMessage03(
  parts: Message03['parts'],
  options: { messageId?: string; taskId?: string; contextId?: string } = {},
): Message03 {
  return {
    kind: 'message',
    messageId: options.messageId ?? randomUUID(),
    role: 'user',
    parts,
    ...(options.taskId ? { taskId: options.taskId } : {}),
    ...(options.contextId ? { contextId: options.contextId } : {}),
  };
}

/** Validators of the official A2A 0.3.0 JSON schema's definitions (test/fixtures/a2a/a2a-v0.3.0.schema.json). */
export function schema03(): (definition: string, value: unknown) => string | undefined {
  const schema = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/a2a/a2a-v0.3.0.schema.json'), 'utf8')) as Record<string, unknown>;
  const ajv = new Ajv({ allErrors: true, strict: false });
  ajv.addSchema({ ...schema, $id: 'a2a-0.3' });
  return (definition, value) => {
    const validate = ajv.getSchema(`a2a-0.3#/definitions/${definition}`);
    if (!validate) throw new Error(`no definition ${definition} in the 0.3 schema copy`);
    return validate(value) ? undefined : ajv.errorsText(validate.errors);
  };
}
