/**
 * Prometheus Alertmanager's webhook payload (version 4), as documented in Alertmanager's
 * configuration reference (`webhook_config`), and the incidents it becomes.
 */
import { z } from 'zod';
import type { AlertmanagerSourceConfig } from '@bosun/config';
import type { IncidentInput } from '@bosun/contract';
import { boundLabels, boundReason, boundSummary, incidentIdFrom, severityOf, shortHash, type IntakeBatch } from './mapping.js';

const Labels = z.record(z.string(), z.string());
const Time = z.string().refine((s) => !Number.isNaN(Date.parse(s)), 'must be an RFC 3339 time');

const AmAlert = z.object({
  status: z.enum(['firing', 'resolved']),
  labels: Labels,
  annotations: Labels.default({}),
  startsAt: Time,
  endsAt: z.string().optional(),
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

/** The alert's fingerprint as sent, or (older senders) a hash of its labels. */
function fingerprintOf(alert: AmAlert): string {
  const fp = alert.fingerprint?.replace(/[^A-Za-z0-9]/g, '') ?? '';
  if (fp !== '') return fp.slice(0, 64);
  const sorted = Object.keys(alert.labels)
    .sort()
    .map((k) => `${k}=${alert.labels[k]}`)
    .join(',');
  return shortHash(sorted);
}

/**
 * The incident id of one alert: `am-<fingerprint>-<startsAt in ms>`. Alertmanager sends the same
 * alert again (repeat interval, retries, a group that changed) with the same fingerprint and
 * start, so it is the same incident — the same job id — and runs once.
 */
export function alertIncidentId(alert: { fingerprint?: string; labels: Record<string, string>; startsAt: string }): string {
  return incidentIdFrom('am', `${fingerprintOf(alert as AmAlert)}-${Date.parse(alert.startsAt)}`);
}

/** The incident id of a whole group: its key's hash and the earliest start of its firing alerts. */
export function groupIncidentId(source: string, payload: AlertmanagerPayload): string {
  const starts = payload.alerts.filter((a) => a.status === 'firing').map((a) => Date.parse(a.startsAt));
  return incidentIdFrom('amg', `${shortHash(`${source}\n${payload.groupKey}`)}-${Math.min(...starts)}`);
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
  const starts = payload.alerts.map((a) => Date.parse(a.startsAt));
  return [{ incidentId: incidentIdFrom('amg', `${shortHash(`${name}\n${payload.groupKey}`)}-${Math.min(...starts)}`) }];
}
