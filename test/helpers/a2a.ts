import { createHash, randomUUID } from 'node:crypto';
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
