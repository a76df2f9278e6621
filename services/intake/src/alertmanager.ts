/**
 * Prometheus Alertmanager's webhook payload (version 4), as documented in Alertmanager's
 * configuration reference (`webhook_config`), and the incidents it becomes.
 */
import { z } from 'zod';
import type { AlertmanagerSourceConfig } from '@bosun/config';
import type { IncidentInput } from '@bosun/contract';
import { dataRecord } from '@bosun/contract';
import { HASHED_MARK, boundLabels, boundReason, boundSummary, inputHash, severityOf, type IntakeBatch } from './mapping.js';

// Labels and annotations are the sender's data: `__proto__` is kept like any other name.
const Labels = dataRecord(z.string(), z.string());
const Time = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'must be an RFC 3339 time');

const AmAlert = z.object({
  status: z.enum(['firing', 'resolved']),
  labels: Labels,
  annotations: Labels.default({}),
  startsAt: Time,
  endsAt: Time.optional(),
  generatorURL: z.string().optional(),
  fingerprint: z.string().optional(),
});
type AmAlert = z.infer<typeof AmAlert>;

/** An Alertmanager notification (webhook payload version 4). */
export const AlertmanagerPayload = z.object({
  version: z.literal('4'),
  groupKey: z.string(),
  truncatedAlerts: z.number().int().nonnegative().optional(),
  status: z.enum(['firing', 'resolved']),
  receiver: z.string(),
  groupLabels: Labels.default({}),
  commonLabels: Labels.default({}),
  commonAnnotations: Labels.default({}),
  externalURL: z.string().optional(),
  alerts: z.array(AmAlert).min(1),
});
export type AlertmanagerPayload = z.infer<typeof AlertmanagerPayload>;

/** Whether a parsed JSON body looks like an Alertmanager notification at all (it says `version`, `groupKey` and `alerts`). */
export function looksLikeAlertmanager(body: unknown): boolean {
  return typeof body === 'object' && body !== null && 'alerts' in body && 'groupKey' in body;
}

/** A fingerprint used as it is in an incident id: Alertmanager's own are 16 hex digits. */
const LITERAL_FINGERPRINT = /^[A-Za-z0-9]{1,64}$/;

/**
 * The alert's piece of its incident id: its fingerprint as sent when that is a
 * {@link LITERAL_FINGERPRINT}; any other fingerprint hashed whole; for a sender without
 * fingerprints, a hash of its labels. A hashed piece starts with `_`, which no literal one holds,
 * and a fingerprint's hash never equals a label set's (each hash names what it is of).
 */
function fingerprintPiece(alert: { fingerprint?: string | undefined; labels: Record<string, string> }): string {
  const fp = alert.fingerprint;
  if (fp !== undefined) return LITERAL_FINGERPRINT.test(fp) ? fp : `${HASHED_MARK}${inputHash('fingerprint', fp)}`;
  const pairs = Object.keys(alert.labels)
    .sort()
    .flatMap((k) => [k, alert.labels[k]!]);
  return `${HASHED_MARK}${inputHash('labels', ...pairs)}`;
}

/**
 * The incident id of one alert: `am-<fingerprint>-<startsAt in ms>` (see {@link fingerprintPiece}).
 * Alertmanager sends the same alert again (repeat interval, retries, a group that changed) with
 * the same fingerprint and start, so it is the same incident — the same job id — and runs once.
 * Different fingerprints, or starts in different milliseconds, never give one id: the piece has
 * no `-`, so the id splits back into its two parts.
 */
export function alertIncidentId(alert: { fingerprint?: string | undefined; labels: Record<string, string>; startsAt: string }): string {
  return `am-${fingerprintPiece(alert)}-${Date.parse(alert.startsAt)}`;
}

/** The incident id of a group from its source, its key and the earliest of `startsAt`: `amg-_<hash>-<ms>`. */
function groupId(source: string, groupKey: string, startsAt: readonly string[]): string {
  return `amg-${HASHED_MARK}${inputHash('group', source, groupKey)}-${Math.min(...startsAt.map((s) => Date.parse(s)))}`;
}

/** The incident id of a whole group: its source and key hashed, and the earliest start of its firing alerts. */
export function groupIncidentId(source: string, payload: AlertmanagerPayload): string {
  return groupId(
    source,
    payload.groupKey,
    payload.alerts.filter((a) => a.status === 'firing').map((a) => a.startsAt),
  );
}

function summaryOf(annotations: Record<string, string>, fallback: string): string {
  const summary = annotations.summary ?? annotations.message ?? fallback;
  const description = annotations.description;
  return boundSummary(description && description !== summary ? `${summary}\n\n${description}` : summary);
}

function alertPayload(alert: AmAlert): Record<string, unknown> {
  return {
    status: alert.status,
    labels: alert.labels,
    annotations: alert.annotations,
    startsAt: alert.startsAt,
    ...(alert.endsAt !== undefined ? { endsAt: alert.endsAt } : {}),
    ...(alert.generatorURL !== undefined ? { generatorURL: alert.generatorURL } : {}),
    ...(alert.fingerprint !== undefined ? { fingerprint: alert.fingerprint } : {}),
  };
}

/** The incident of one firing alert. */
function alertIncident(name: string, config: AlertmanagerSourceConfig, payload: AlertmanagerPayload, alert: AmAlert): IncidentInput {
  const alertname = alert.labels.alertname;
  const runbookUrl = alert.annotations.runbook_url;
  return {
    id: alertIncidentId(alert),
    source: name,
    reason: boundReason(alertname, 'alert'),
    summary: summaryOf(alert.annotations, alertname ?? 'alert'),
    severity: severityOf(alert.labels.severity, config.severities),
    labels: boundLabels(alert.labels),
    payload: {
      intake: { source: name, format: 'alertmanager', groupKey: payload.groupKey, externalURL: payload.externalURL },
      alert: alertPayload(alert),
      ...(alert.annotations.description !== undefined ? { description: alert.annotations.description } : {}),
      ...(runbookUrl !== undefined ? { runbookUrl } : {}),
    },
  };
}

/** The incident of a whole group (`per: group`): the common labels, every firing alert in the payload. */
function groupIncident(name: string, config: AlertmanagerSourceConfig, payload: AlertmanagerPayload): IncidentInput {
  const firing = payload.alerts.filter((a) => a.status === 'firing');
  const common = payload.commonLabels;
  const alertname = common.alertname ?? payload.groupLabels.alertname;
  const lines = firing.map(
    (a) =>
      `- ${
        a.annotations.summary ??
        Object.entries(a.labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')
      }`,
  );
  const head = payload.commonAnnotations.summary ?? `${firing.length} alert(s) of group ${payload.groupKey}`;
  const runbookUrl = payload.commonAnnotations.runbook_url;
  return {
    id: groupIncidentId(name, payload),
    source: name,
    reason: boundReason(alertname, 'alert-group'),
    summary: boundSummary(`${head}\n\n${lines.join('\n')}`),
    severity: severityOf(common.severity ?? firing[0]?.labels.severity, config.severities),
    labels: boundLabels(common),
    payload: {
      intake: { source: name, format: 'alertmanager', groupKey: payload.groupKey, externalURL: payload.externalURL },
      alerts: firing.map(alertPayload),
      ...(runbookUrl !== undefined ? { runbookUrl } : {}),
    },
  };
}

/** The incidents a notification starts (per alert or per group) and the alerts it resolves. */
export function alertmanagerBatch(name: string, config: AlertmanagerSourceConfig, payload: AlertmanagerPayload): IntakeBatch {
  const firing = payload.alerts.filter((a) => a.status === 'firing');
  const resolved = payload.alerts
    .filter((a) => a.status === 'resolved')
    .map((a) => ({ incidentId: alertIncidentId(a), ...(a.endsAt !== undefined ? { endsAt: a.endsAt } : {}) }));
  if (config.per === 'group') {
    return {
      incidents: firing.length > 0 ? [groupIncident(name, config, payload)] : [],
      resolved: firing.length > 0 ? [] : groupResolved(name, payload),
    };
  }
  return { incidents: firing.map((a) => alertIncident(name, config, payload, a)), resolved };
}

/** A group whose every alert resolved: its incident, keyed by the earliest start among them. */
function groupResolved(name: string, payload: AlertmanagerPayload): IntakeBatch['resolved'] {
  return [
    {
      incidentId: groupId(
        name,
        payload.groupKey,
        payload.alerts.map((a) => a.startsAt),
      ),
    },
  ];
}
