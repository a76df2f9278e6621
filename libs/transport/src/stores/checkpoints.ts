import { createHash } from 'node:crypto';
import type { RedisClient } from '../base/connections.js';
import { BosunError, LockLostError } from '@bosun/contract';
import { keys } from '../keys.js';
import { runScript } from './scripts.js';

/**
 * The lock a checkpoint's writer must still hold for its write to land: the Redis key of its
 * BullMQ job lock and the token it was given with the job. A worker that lost the job (its lock
 * expired while it was cut off) cannot overwrite the state of the job's next owner.
 */
export interface CheckpointFence {
  key: string;
  token: string;
}

/** Options of {@link CheckpointStore.save}. */
export interface SaveOptions {
  /** Write only while this lock holds this token; else nothing is written and `LockLostError` is thrown. */
  fence?: CheckpointFence | undefined;
}

/**
 * Where agents keep their state between steps. A checkpoint is a JSON document; the caller
 * parses it (and so decides what a corrupt or incompatible one means).
 */
export interface CheckpointStore {
  /** The raw document, or null when there is none. */
  load(id: string): Promise<unknown>;
  /** Writes the document; with a `fence`, only while the writer holds its job's lock (else throws `LockLostError`). */
  save(id: string, value: unknown, options?: SaveOptions): Promise<void>;
  delete(id: string): Promise<void>;
}

/** A checkpoint as read, with the revision to write it back at (see {@link RevisedCheckpointStore}). */
export interface CheckpointRead {
  /** The raw document, or null when there is none. */
  value: unknown;
  /** The stored text's SHA-1, or null when there is no checkpoint. */
  revision: string | null;
}

/**
 * Checkpoints that can also be written only when nobody has written them since they were read
 * (compare-and-set): for writers that may race with the checkpoint's owner, such as the
 * coordinator's timers, which must never overwrite a run that has moved on.
 */
export interface RevisedCheckpointStore extends CheckpointStore {
  /** The checkpoint and its revision; throws like {@link CheckpointStore.load}. */
  loadRevision(id: string): Promise<CheckpointRead>;
  /**
   * Saves only when the stored checkpoint is still at `revision` (null: there is none). Returns the
   * new revision, or undefined, having written nothing, when someone else has written it since.
   */
  saveIfRevision(id: string, value: unknown, revision: string | null): Promise<string | undefined>;
}

/** The revision of a stored checkpoint's text. */
function revisionOf(text: string): string {
  return createHash('sha1').update(text, 'utf8').digest('hex');
}

/** SET the key (with its expiry) only when its value's SHA-1 is ARGV[1] ('' for no value). */
const SAVE_IF_REVISION = `
local cur = redis.call('GET', KEYS[1])
local rev = ''
if cur then rev = redis.sha1hex(cur) end
if rev ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
`;

/** SET KEYS[1] (ARGV[1], expiring in ARGV[2] s) only while KEYS[2] holds ARGV[3]: 1, else 0 (nothing written). */
const SAVE_FENCED = `
if redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
`;

/** The error of a fenced write whose writer no longer holds its lock. */
function fenceLost(id: string, fence: CheckpointFence): LockLostError {
  return new LockLostError(`checkpoint ${id} was not written`, { data: { id, lock: fence.key } });
}

/** A checkpoint that is not JSON. */
export class CorruptCheckpointError extends BosunError {
  constructor(id: string, cause: unknown) {
    super('corrupt_checkpoint', `checkpoint ${id} is not valid JSON`, { cause, data: { id } });
    this.name = 'CorruptCheckpointError';
  }
}

/** A stored checkpoint's text as JSON; text that is not JSON is a {@link CorruptCheckpointError}. */
function parsed(id: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new CorruptCheckpointError(id, err);
  }
}

/** Options of {@link RedisCheckpointStore}. */
export interface RedisCheckpointStoreOptions {
  redis: RedisClient;
  prefix: string;
  /** How long a checkpoint is kept after its last write. Default 7 days. */
  ttlSeconds?: number;
}

/** Checkpoints as RedisClient strings at `<prefix>:ckpt:<id>`, expiring after a week without writes. */
export class RedisCheckpointStore implements RevisedCheckpointStore {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly ttl: number;

  constructor(options: RedisCheckpointStoreOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.ttl = options.ttlSeconds ?? 7 * 24 * 3600;
  }

  async load(id: string): Promise<unknown> {
    // No revision: hashing every checkpoint read (a run's, each task's output) is for compare-and-set writers only.
    const text = await this.redis.get(keys.checkpoint(this.prefix, id));
    return text === null ? null : parsed(id, text);
  }

  async loadRevision(id: string): Promise<CheckpointRead> {
    const text = await this.redis.get(keys.checkpoint(this.prefix, id));
    if (text === null) return { value: null, revision: null };
    return { value: parsed(id, text), revision: revisionOf(text) };
  }

  async save(id: string, value: unknown, options: SaveOptions = {}): Promise<void> {
    const { fence } = options;
    if (!fence) {
      await this.redis.set(keys.checkpoint(this.prefix, id), JSON.stringify(value), 'EX', this.ttl);
      return;
    }
    const saved = await runScript(
      this.redis,
      { name: 'bosunSaveFenced', lua: SAVE_FENCED },
      [keys.checkpoint(this.prefix, id), fence.key],
      [JSON.stringify(value), String(this.ttl), fence.token],
    );
    if (saved !== 1) throw fenceLost(id, fence);
  }

  async saveIfRevision(id: string, value: unknown, revision: string | null): Promise<string | undefined> {
    const text = JSON.stringify(value);
    const saved = await runScript(
      this.redis,
      { name: 'bosunSaveIfRevision', lua: SAVE_IF_REVISION },
      [keys.checkpoint(this.prefix, id)],
      [revision ?? '', text, String(this.ttl)],
    );
    return saved === 1 ? revisionOf(text) : undefined;
  }

  async delete(id: string): Promise<void> {
    await this.redis.del(keys.checkpoint(this.prefix, id));
  }
}

/** The value of `f` as a promise: what it throws becomes a rejection, as with a store that does I/O. */
function settled<T>(f: () => T): Promise<T> {
  try {
    return Promise.resolve(f());
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

/** Checkpoints in a Map (unit tests). Values are copied through JSON, as RedisClient would. */
export class MemoryCheckpointStore implements RevisedCheckpointStore {
  readonly data = new Map<string, string>();
  /** Job locks by key, as a fenced {@link save} checks them (tests set and take them). */
  readonly locks = new Map<string, string>();

  load(id: string): Promise<unknown> {
    return settled(() => {
      const t = this.data.get(id);
      return t === undefined ? null : (JSON.parse(t) as unknown);
    });
  }

  loadRevision(id: string): Promise<CheckpointRead> {
    return settled(() => {
      const t = this.data.get(id);
      return t === undefined ? { value: null, revision: null } : { value: JSON.parse(t) as unknown, revision: revisionOf(t) };
    });
  }

  save(id: string, value: unknown, options: SaveOptions = {}): Promise<void> {
    return settled(() => {
      const { fence } = options;
      if (fence && this.locks.get(fence.key) !== fence.token) throw fenceLost(id, fence);
      this.data.set(id, JSON.stringify(value));
    });
  }

  saveIfRevision(id: string, value: unknown, revision: string | null): Promise<string | undefined> {
    return settled(() => {
      const t = this.data.get(id);
      if ((t === undefined ? null : revisionOf(t)) !== revision) return undefined;
      const text = JSON.stringify(value);
      this.data.set(id, text);
      return revisionOf(text);
    });
  }

  delete(id: string): Promise<void> {
    return settled(() => void this.data.delete(id));
  }
}
