/**
 * Push notifications (`a2a.pushNotifications`): a client registers a URL for its task; when the
 * run starts, waits for an approval or ends, the task is POSTed there, serialized by the SDK's
 * serializer. Only URLs that start with one of `allowedUrls` are accepted, at registration and
 * again at sending, and redirects are never followed (no SSRF). A registration's token goes in
 * `X-A2A-Notification-Token`, its `authentication` in `Authorization` (`<scheme> <credentials>`);
 * a value that could not be sent as a header (CR, LF, other control characters) is refused at
 * registration, never dropped later. Every replica sees the run's events; a `SET NX` per event
 * makes one of them send it.
 */
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import { V1PushNotificationSerializer } from '@a2a-js/sdk/server';
import type { Task, TaskPushNotificationConfig } from '@a2a-js/sdk';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { A2aConfig, Logger } from '@bosun/config';
import { A2A_TTL_SECONDS, RunEvent, type A2aTaskRecord } from '@bosun/contract';
import type { RedisClient } from '@bosun/transport';

type PushSettings = NonNullable<A2aConfig['pushNotifications']>;

/** An HTTP auth scheme name (RFC 9110 §11.1: a token). */
const AUTH_SCHEME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What a header value may hold: visible characters, spaces and tabs (RFC 9110 §5.5), nothing that ends a header. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Why a registration's header values cannot be sent, or undefined when they can. */
export function headerProblem(config: Pick<TaskPushNotificationConfig, 'token' | 'authentication'>): string | undefined {
  if (config.token && !HEADER_VALUE.test(config.token)) return 'token: must not contain CR, LF or other control characters';
  const auth = config.authentication;
  if (!auth || (!auth.scheme && !auth.credentials)) return undefined;
  if (!AUTH_SCHEME.test(auth.scheme ?? '')) return 'authentication.scheme: must be an HTTP auth scheme name such as Bearer or Basic';
  if (!HEADER_VALUE.test(auth.credentials ?? '')) return 'authentication.credentials: must not contain CR, LF or other control characters';
  return undefined;
}

/** The header that carries a registration's token. */
export const PUSH_TOKEN_HEADER = 'X-A2A-Notification-Token';
/** The run events that change what a task shows, and so are pushed. */
const PUSHED = new Set(['run.started', 'approval.requested', 'approval.resolved', 'run.completed', 'run.failed']);

const pushKey = (prefix: string, tenant: string, taskId: string) => `${prefix}:a2a:${tenant}:push:${taskId}`;
const runTenantKey = (prefix: string, runId: string) => `${prefix}:a2a:run-tenant:${runId}`;
const sentKey = (prefix: string, runId: string, seq: number) => `${prefix}:a2a:pushed:${runId}:${seq}`;

/** Whether a URL is on the allowlist: http(s), and starting with one of the allowed URLs. */
export function allowedPushUrl(settings: PushSettings, url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return false;
  return settings.allowedUrls.some((allowed) => parsed.href.startsWith(new URL(allowed).href));
}

/** The push registrations in Redis, under the caller's tenant. */
export class PushConfigs {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    readonly settings: PushSettings,
  ) {}

  /** @throws RequestMalformedError when the URL is not on the allowlist, or a header value could not be sent. */
  check(config: Pick<TaskPushNotificationConfig, 'url' | 'token' | 'authentication'>): void {
    if (!allowedPushUrl(this.settings, config.url))
      throw new RequestMalformedError('url: not on the allowlist (a2a.pushNotifications.allowedUrls)');
    const problem = headerProblem(config);
    if (problem) throw new RequestMalformedError(problem);
  }

  /** Registers a URL for a task (refused as {@link check} says). */
  async save(record: A2aTaskRecord, config: TaskPushNotificationConfig, id: string): Promise<TaskPushNotificationConfig> {
    this.check(config);
    const saved = { ...config, id, taskId: record.taskId, tenant: '' };
    await this.redis
      .multi()
      .hset(pushKey(this.prefix, record.tenant, record.taskId), id, JSON.stringify(saved))
      .expire(pushKey(this.prefix, record.tenant, record.taskId), A2A_TTL_SECONDS)
      .set(runTenantKey(this.prefix, record.runId), record.tenant, 'EX', A2A_TTL_SECONDS)
      .exec();
    return saved;
  }

  async list(record: A2aTaskRecord): Promise<TaskPushNotificationConfig[]> {
    const all = await this.redis.hvals(pushKey(this.prefix, record.tenant, record.taskId));
    return all.map((v) => JSON.parse(v) as TaskPushNotificationConfig);
  }

  async delete(record: A2aTaskRecord, id: string): Promise<void> {
    await this.redis.hdel(pushKey(this.prefix, record.tenant, record.taskId), id);
  }

  /** The tenant of a run with registrations, if any. */
  tenantOf(runId: string): Promise<string | null> {
    return this.redis.get(runTenantKey(this.prefix, runId));
  }

  /** Whether this replica is the one to push this event (the first to claim it). */
  async claim(runId: string, seq: number): Promise<boolean> {
    return (await this.redis.set(sentKey(this.prefix, runId, seq), '1', 'EX', 86_400, 'NX')) !== null;
  }
}

/** What the dispatcher needs to build the task it pushes. */
export interface PushSources {
  configs: PushConfigs;
  /** The task record of a tenant. */
  record(tenant: string, taskId: string): Promise<A2aTaskRecord | undefined>;
  /** The task as it is once the run's state has caught up with the event. */
  task(record: A2aTaskRecord, event: RunEvent): Promise<Task>;
  log: Logger;
}

/** Listens to every run's events and pushes the tasks that have registrations. */
export class PushDispatcher {
  private sub?: Subscription;
  private readonly serializer = new V1PushNotificationSerializer();

  constructor(private readonly sources: PushSources) {}

  /** Subscribes (core NATS) to the events of every run under the prefix. */
  attach(nc: NatsConnection, prefix: string): void {
    this.sub = nc.subscribe(`${prefix}.runs.>`);
    void (async () => {
      for await (const m of this.sub!) {
        const parsed = RunEvent.safeParse(
          (() => {
            try {
              return m.json();
            } catch {
              return undefined;
            }
          })(),
        );
        if (parsed.success && PUSHED.has(parsed.data.type))
          await this.onEvent(parsed.data).catch((err: unknown) => this.sources.log.warn({ err }, 'push notification failed'));
      }
    })();
  }

  private async onEvent(event: RunEvent): Promise<void> {
    const { configs } = this.sources;
    const tenant = await configs.tenantOf(event.runId);
    if (!tenant) return;
    const record = await this.sources.record(tenant, event.runId);
    if (!record) return;
    const targets = await configs.list(record);
    if (targets.length === 0 || !(await configs.claim(event.runId, event.seq))) return;
    const task = await this.sources.task(record, event);
    const { body, contentType } = this.serializer.serialize({ payload: { $case: 'task', value: task } });
    await Promise.all(targets.map((t) => this.post(t, body, contentType, record)));
  }

  private async post(target: TaskPushNotificationConfig, body: string, contentType: string, record: A2aTaskRecord): Promise<void> {
    const { settings } = this.sources.configs;
    // Checked again: the allowlist may have changed since the registration.
    if (!allowedPushUrl(settings, target.url)) return;
    const headers: Record<string, string> = { 'content-type': contentType };
    if (target.token) headers[PUSH_TOKEN_HEADER] = target.token;
    // Spec: with authentication, the agent MUST authenticate to the receiver with it.
    const auth = target.authentication;
    if (auth?.scheme) headers.authorization = auth.credentials ? `${auth.scheme} ${auth.credentials}` : auth.scheme;
    try {
      const res = await fetch(target.url, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(settings.timeoutMs),
      });
      if (!res.ok) this.sources.log.warn({ taskId: record.taskId, status: res.status }, 'push notification refused by its receiver');
    } catch (err) {
      this.sources.log.warn({ err, taskId: record.taskId }, 'push notification not delivered');
    }
  }

  close(): void {
    this.sub?.unsubscribe();
  }
}
