import { Job, Queue } from 'bullmq';
import { INCIDENT_JOB, Incident, parseWith, runIdFor, type IncidentInput } from '@bosun/contract';

/** What {@link publishIncident} reports. */
export interface Published {
  incidentId: string;
  runId: string;
  /** True when a job with this incident id already existed: it runs once. */
  duplicate: boolean;
}

/**
 * Validates an incident (throwing an error that names each bad field) and adds it to the
 * `incidents` queue with its id as the job id.
 */
export async function publishIncident(queue: Queue, input: unknown): Promise<Published> {
  const incident: IncidentInput = parseWith(Incident, input, 'incident');
  const added = await queue.add(INCIDENT_JOB, incident, { jobId: incident.id, removeOnComplete: false, removeOnFail: false });
  // When the id already existed, BullMQ kept the old job: read back the stored one.
  const stored = (await Job.fromId(queue, incident.id)) ?? added;
  return { incidentId: incident.id, runId: runIdFor(incident.id, stored.timestamp), duplicate: stored.timestamp !== added.timestamp };
}
