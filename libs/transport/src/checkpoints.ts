import type { RedisClient } from './connections.js';
import { BosunError } from '@bosun/contract';
import { keys } from './keys.js';

/**
 * Where agents keep their state between steps. A checkpoint is a JSON document; the caller
 * parses it (and so decides what a corrupt or incompatible one means).
 */
export interface CheckpointStore {
  /** The raw document, or null when there is none. */
  load(id: string): Promise<unknown>;
  save(id: string, value: unknown): Promise<void>;
  delete(id: string): Promise<void>;
}

/** A checkpoint that is not JSON. */
export class CorruptCheckpointError extends BosunError {
  constructor(id: string, cause: unknown) {
    super('corrupt_checkpoint', `checkpoint ${id} is not valid JSON`, { cause, data: { id } });
    this.name = 'CorruptCheckpointError';
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
export class RedisCheckpointStore implements CheckpointStore {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly ttl: number;

  constructor(options: RedisCheckpointStoreOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.ttl = options.ttlSeconds ?? 7 * 24 * 3600;
  }

  async load(id: string): Promise<unknown> {
    const text = await this.redis.get(keys.checkpoint(this.prefix, id));
    if (text === null) return null;
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      throw new CorruptCheckpointError(id, err);
    }
  }

  async save(id: string, value: unknown): Promise<void> {
    await this.redis.set(keys.checkpoint(this.prefix, id), JSON.stringify(value), 'EX', this.ttl);
  }

  async delete(id: string): Promise<void> {
    await this.redis.del(keys.checkpoint(this.prefix, id));
  }
}

/** Checkpoints in a Map (unit tests). Values are copied through JSON, as RedisClient would. */
export class MemoryCheckpointStore implements CheckpointStore {
  readonly data = new Map<string, string>();

  async load(id: string): Promise<unknown> {
    const t = this.data.get(id);
    return t === undefined ? null : (JSON.parse(t) as unknown);
  }

  async save(id: string, value: unknown): Promise<void> {
    this.data.set(id, JSON.stringify(value));
  }

  async delete(id: string): Promise<void> {
    this.data.delete(id);
  }
}
