/**
 * One dead-letter entry as the CLI reads and annotates it: parsed with the contract's
 * `DeadLetter`, kept whole when written back.
 */
import type { Job } from 'bullmq';
import { DeadLetter, parseStored } from '@bosun/contract';

/**
 * A dead letter as stored, kept whole: `bosun` writes entries back when it annotates them
 * (`retriedAs`, `resolution`), and keeps every field, including any a newer version added.
 */
export const StoredDeadLetter = DeadLetter.loose();

/** A dead-letter entry: its job id and its data. */
export type DeadLetterEntry = ReturnType<typeof StoredDeadLetter.parse> & { id: string };

/** What a retried dead letter was re-run as. */
export type RetriedAs = NonNullable<DeadLetter['retriedAs']>;

/** The entry of a dead-letter job; a `BadStoredValueError` naming the bad fields when it does not parse. */
export function readEntry(job: Job): DeadLetterEntry {
  const id = String(job.id);
  return { id, ...parseStored(StoredDeadLetter, job.data, `dead-letter entry ${id}`) };
}

/** Writes `fields` into the entry of `job`, keeping every other field it has. */
export async function annotateEntry(job: Job, entry: DeadLetterEntry, fields: Pick<DeadLetter, 'retriedAs' | 'resolution'>): Promise<void> {
  const { id: _id, ...stored } = entry;
  await job.updateData({ ...stored, ...fields });
}
