// The operator console in the browser: plain TypeScript compiled by tsc (cli/web → cli/dist/web).
// Everything that comes from incidents, models and tools is put in the page as text (text nodes,
// textContent): never as HTML. Actions are POSTs carrying the session's CSRF token.

type Json = Record<string, unknown>;

interface RunSummary {
  runId: string;
  incidentId: string;
  state: string;
  createdAt: string;
  finishedAt?: string;
  specialists: string[];
}

interface RunEvent {
  seq: number;
  type: string;
  at: string;
  runId: string;
  agent?: string;
  data: Json;
}

interface ProposedCall {
  index: number;
  tool: string;
  args: unknown;
  needsApproval: boolean;
}

/** One decision of an approval (`approvalView` on the server): who, by which path, when. */
interface ApprovalDecision {
  decision: 'approve' | 'deny' | 'timeout';
  name: string;
  verified?: boolean;
  path?: string;
  at: string;
  reason?: string;
}

/** An approval as the API answers it (`approvalView`): the stored approval with its progress and decisions. */
interface Approval {
  id: string;
  status: string;
  runId: string;
  agent: string;
  reason: string;
  createdAt: string;
  timeoutAt: string;
  calls: ProposedCall[];
  incident?: { id: string; title: string; severity: string; service?: string; source: string };
  steps?: { tool: string; args: unknown; result: string; isError?: boolean }[];
  rule?: { required: number; distinctFrom: string };
  requester?: string;
  progress: { approvals: number; required: number; text: string };
  decisions: ApprovalDecision[];
  /** The run's other specialists (derived from the run's checkpoint when read; absent once it is gone). */
  specialists?: { taskId: string; agent: string; status: string; finding?: string }[];
  specialistsProblem?: string;
  /** Who has looked at it: one entry per person, the latest first. */
  viewers?: { name: string; verified: boolean; path: string; at: string }[];
}

interface DeadLetterRow {
  id: string;
  at: string;
  kind: string;
  runId?: string;
  agent?: string;
  reason: string;
  marker?: string;
  /** The whole stored entry. */
  entry: Json;
}

type DeadLetterAction = 'retry' | 'drop' | 'done' | 'skip' | 'resend';

const RUN_STATES = ['waiting', 'active', 'parked', 'completed', 'partial', 'failed', 'cancelled'];
const DEAD_LETTER_KINDS = ['stall', 'timeout', 'failure', 'poison', 'in-doubt', 'budget', 'delivery'];

let csrf = '';

type Child = Node | string | null | undefined;

/** An element; string children become text nodes (never parsed as HTML). */
function h(tag: string, props: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  return e;
}

async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const res = await fetch(path, { credentials: 'same-origin', ...init });
  if (res.status === 401) {
    location.href = '/login';
    throw new Error('not logged in');
  }
  const body = (await res.json()) as T & { error?: string };
  if (!res.ok) throw new Error(body.error ?? `HTTP ${res.status}`);
  return body;
}

function post<T>(path: string, body: unknown = {}): Promise<T> {
  return api<T>(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
    body: JSON.stringify(body),
  });
}

function age(iso: string): string {
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`;
}

/** Calls `fn` at most once per `ms`, after the last call. */
function debounce(fn: () => void, ms: number): { (): void; cancel(): void } {
  let t: number | undefined;
  const d = () => {
    clearTimeout(t);
    t = window.setTimeout(fn, ms);
  };
  d.cancel = () => clearTimeout(t);
  return d;
}

/** Server-Sent Events; the live marker shows whether the stream is open. */
function listen(path: string, onEvent: (e: RunEvent) => void): EventSource {
  const es = new EventSource(path);
  const live = document.getElementById('live');
  es.onopen = () => live?.classList.add('on');
  es.onerror = () => live?.classList.remove('on');
  es.onmessage = (m: MessageEvent<string>) => onEvent(JSON.parse(m.data) as RunEvent);
  return es;
}

function showError(where: HTMLElement, err: unknown): void {
  where.replaceChildren(h('p', { class: 'error', text: err instanceof Error ? err.message : String(err) }));
}

// ---- Runs -------------------------------------------------------------------------------------

function runRow(r: RunSummary): HTMLElement {
  const incomplete = r.state === 'partial';
  return h(
    'tr',
    { class: `state-${r.state}${incomplete ? ' incomplete' : ''}`, 'data-run-id': r.runId },
    h('td', {}, h('a', { href: `#/run/${r.runId}`, text: r.runId })),
    h('td', { text: r.incidentId }),
    h(
      'td',
      {},
      h('span', { class: 'badge', text: r.state }),
      incomplete ? h('span', { class: 'badge INCOMPLETE', text: 'INCOMPLETE' }) : null,
    ),
    h('td', { text: age(r.createdAt) }),
    h('td', { text: r.specialists.join(', ') }),
  );
}

function runsPage(main: HTMLElement): () => void {
  const filter = h('select', { id: 'status-filter' }, h('option', { value: '', text: 'all' })) as HTMLSelectElement;
  for (const s of RUN_STATES) filter.append(h('option', { value: s, text: s }));
  const body = h('tbody');
  const table = h(
    'table',
    { id: 'runs' },
    h('thead', {}, h('tr', {}, ...['run', 'incident', 'status', 'age', 'specialists'].map((t) => h('th', { text: t })))),
    body,
  );
  const note = h('p');
  main.append(h('h1', { text: 'Runs' }), h('label', {}, 'Status ', filter), table, note);
  const load = async () => {
    try {
      const runs = await api<RunSummary[]>(`/api/runs${filter.value ? `?status=${encodeURIComponent(filter.value)}` : ''}`);
      body.replaceChildren(...runs.map(runRow));
      note.textContent = runs.length === 0 ? 'no runs' : '';
    } catch (err) {
      showError(note, err);
    }
  };
  const reload = debounce(() => void load(), 250);
  filter.addEventListener('change', reload);
  const es = listen('/api/events', () => reload());
  const ages = window.setInterval(reload, 10_000);
  void load();
  return () => {
    es.close();
    reload.cancel();
    clearInterval(ages);
  };
}

// ---- One run ----------------------------------------------------------------------------------

/** One event's line in the timeline; its number is the list item's own (its `seq`), not repeated here. */
function eventLine(e: RunEvent): string {
  const d = e.data ?? {};
  const bits = [e.at.slice(11, 23), e.type, e.agent ?? ''];
  if (typeof d.tool === 'string') bits.push(d.tool);
  if (typeof d.model === 'string') bits.push(`model ${d.model}`);
  if (typeof d.durationMs === 'number') bits.push(`${d.durationMs} ms`);
  if (typeof d.status === 'string') bits.push(d.status);
  if (typeof d.error === 'string') bits.push(d.error);
  return bits.filter((b) => b !== '').join('  ');
}

/** A value as display text: strings as they are, anything else as JSON. */
function asText(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v ?? '');
}

/** A string that holds a JSON object or array (a tool's answer quoted in a finding), parsed; else undefined. */
function embeddedJson(text: string): unknown {
  const t = text.trim();
  if (!((t.startsWith('{') && t.endsWith('}')) || (t.startsWith('[') && t.endsWith(']')))) return undefined;
  try {
    return JSON.parse(t) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * A value of a specialist's output as a person reads it: an object as a list of its fields (name,
 * then value), an array as a list, text as paragraphs (JSON quoted in a string is shown as the
 * value it holds), numbers and booleans as they are. Past a few levels, indented JSON.
 */
/**
 * JSON text that does not parse (a tool's answer cut to a length, ending in "…"), indented as far
 * as it goes: a line per member, nested members indented, strings left as they are.
 */
function indentJsonText(text: string): string {
  let out = '';
  let indent = 0;
  let inString = false;
  let escaped = false;
  const line = () => `\n${'  '.repeat(Math.max(0, indent))}`;
  for (const c of text.trim()) {
    if (inString) {
      out += c;
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (c === '{' || c === '[') {
      indent++;
      out += c + line();
    } else if (c === '}' || c === ']') {
      indent--;
      out += line() + c;
    } else if (c === ',') out += c + line();
    else if (c === ':') out += ': ';
    else if (c.trim() !== '') out += c;
  }
  return out;
}

function valueView(v: unknown, depth = 0): HTMLElement {
  if (typeof v === 'string') {
    const inner = embeddedJson(v);
    if (inner !== undefined) return valueView(inner, depth);
    // JSON cut short: indented, as code.
    if (/^\s*[[{]\s*"/.test(v)) return h('pre', { class: 'json', text: indentJsonText(v) });
    return h('p', { class: 'text', text: v });
  }
  if (v === null || typeof v !== 'object') return h('span', { text: String(v) });
  if (depth >= 5) return h('pre', { text: JSON.stringify(v, null, 2) });
  if (Array.isArray(v))
    return v.length === 0 ? h('span', { class: 'none', text: 'none' }) : h('ul', {}, ...v.map((x) => h('li', {}, valueView(x, depth + 1))));
  const fields = Object.entries(v as Json);
  if (fields.length === 0) return h('span', { class: 'none', text: 'none' });
  return h('dl', { class: 'fields' }, ...fields.flatMap(([k, x]) => [h('dt', { text: k }), h('dd', {}, valueView(x, depth + 1))]));
}

function specialistBlock(s: Json): HTMLElement {
  const ok = s.status === 'completed';
  return h(
    'section',
    { class: `specialist${ok ? '' : ' incomplete'}`, 'data-specialist': String(s.name) },
    h(
      'h3',
      {},
      String(s.name),
      ' ',
      h('span', { class: 'badge', text: String(s.status) }),
      ok ? null : h('span', { class: 'badge INCOMPLETE', text: 'INCOMPLETE' }),
    ),
    h('div', { class: 'output' }, valueView(s.output)),
  );
}

/** How an outcome (`bosun_tool_calls_total{outcome}`'s words) reads on the page. */
const OUTCOME_LABEL: Record<string, string> = { ok: 'ok', tool_error: 'tool error', error: 'error', in_doubt: 'in doubt' };

/** A table cell with a call's outcome: its label (and the error's text), its metric word in `data-outcome`; else what the call is doing. */
function outcomeCell(outcome: string | undefined, otherwise: string, error?: string): HTMLElement {
  if (outcome === undefined) return h('td', { text: otherwise });
  const label = OUTCOME_LABEL[outcome] ?? outcome;
  return h('td', { 'data-outcome': outcome, text: error && outcome === 'error' ? `${label}: ${error}` : label });
}

function toolCallsBlock(view: Json): HTMLElement {
  const rows: HTMLElement[] = [];
  for (const d of (view.delegations as Json[] | undefined) ?? [])
    for (const c of (d.toolCalls as Json[] | undefined) ?? [])
      rows.push(
        h(
          'tr',
          {},
          h('td', { text: String(d.agent) }),
          h('td', { text: asText(c.tool ?? '?') }),
          h('td', { class: 'args', text: JSON.stringify(c.args ?? null) }),
          outcomeCell(
            typeof c.outcome === 'string' ? c.outcome : undefined,
            String(c.state),
            typeof c.error === 'string' ? c.error : undefined,
          ),
        ),
      );
  return h(
    'table',
    { id: 'tool-calls' },
    h('thead', {}, h('tr', {}, ...['agent', 'tool', 'args', 'outcome'].map((t) => h('th', { text: t })))),
    h('tbody', {}, ...rows),
  );
}

function renderRun(info: HTMLElement, d: Json): void {
  const summary = d.summary as RunSummary;
  const incident = (d.incident ?? {}) as Json;
  const result = d.result as Json | undefined;
  info.replaceChildren(
    h(
      'p',
      {},
      'Status ',
      h('span', { id: 'run-state', class: 'badge', text: summary.state }),
      '  incident ',
      h('span', { text: summary.incidentId }),
      '  started ',
      age(summary.createdAt),
      ' ago',
    ),
    h('p', {}, 'Summary: ', h('span', { id: 'incident-summary', text: asText(incident.summary ?? '') })),
    h('h2', { text: 'Answer' }),
    h('pre', { id: 'answer', text: result ? String(result.answer) : '(not finished yet)' }),
    h('h2', { text: 'Specialists' }),
    h('div', { id: 'specialists' }, ...((result?.specialists as Json[] | undefined) ?? []).map(specialistBlock)),
    h('h2', { text: 'Tool calls' }),
    toolCallsBlock((d.view ?? {}) as Json),
    h('h2', { text: 'Approvals' }),
    runApprovals((d.approvals as Approval[] | undefined) ?? []),
  );
}

/** The run's approvals: each with its calls, status and every decision's person, path and time. */
function runApprovals(approvals: Approval[]): HTMLElement {
  if (approvals.length === 0) return h('p', { id: 'run-approvals', text: 'none' });
  return h(
    'div',
    { id: 'run-approvals' },
    ...approvals.map((a) =>
      h(
        'section',
        { class: 'run-approval', 'data-approval-id': a.id },
        h(
          'h3',
          {},
          h('span', { text: a.id }),
          ' ',
          h('span', { class: 'badge', text: a.status }),
          `  ${a.calls
            .filter((c) => c.needsApproval)
            .map((c) => c.tool)
            .join(', ')}`,
        ),
        ...decisionsList(a),
        a.decisions.length === 0 ? h('p', { text: 'not decided yet' }) : null,
      ),
    ),
  );
}

const CALL_EVENTS = new Set(['model.called', 'tool.completed', 'tool.failed', 'tool.in_doubt']);

/** A tool event's outcome, in the words of the metric and of the "Tool calls" table (`toolOutcome` on the server). */
function eventOutcome(e: RunEvent): string {
  if (e.type === 'tool.in_doubt') return 'in_doubt';
  if (e.type === 'tool.failed') return 'error';
  return e.data.isError === true ? 'tool_error' : 'ok';
}

/** Each agent's model calls and tool calls, with their durations, in seq order. */
function callsTable(events: RunEvent[]): HTMLElement[] {
  return events
    .filter((e) => CALL_EVENTS.has(e.type))
    .map((e) => {
      const model = e.type === 'model.called';
      const name = model ? asText(e.data.model ?? '') : asText(e.data.tool ?? '');
      const error = typeof e.data.error === 'string' ? e.data.error : undefined;
      return h(
        'tr',
        { 'data-seq': String(e.seq) },
        ...[e.agent ?? '', model ? 'model' : 'tool', name, `${asText(e.data.durationMs ?? '?')} ms`].map((t) => h('td', { text: t })),
        model ? h('td', { text: 'ok' }) : outcomeCell(eventOutcome(e), '', error),
      );
    });
}

/**
 * One event of the timeline: numbered by its `seq` (the list item's value, so gaps show), its line
 * as the summary of a disclosure that opens to the event's data.
 */
function timelineItem(e: RunEvent): HTMLElement {
  const li = h(
    'li',
    { 'data-seq': String(e.seq), class: e.type === 'agent.stalled' || e.type === 'agent.failed' ? 'incomplete' : '' },
    h('details', {}, h('summary', { text: eventLine(e) }), h('pre', { class: 'event-data', text: JSON.stringify(e.data ?? {}, null, 2) })),
  ) as HTMLLIElement;
  li.value = e.seq;
  return li;
}

function runPage(main: HTMLElement, runId: string): () => void {
  const info = h('div', { id: 'run-info' });
  const timeline = h('ol', { id: 'timeline' });
  const calls = h('tbody');
  const callsHead = h(
    'thead',
    {},
    h('tr', {}, ...['agent', 'call', 'model or tool', 'duration', 'outcome'].map((t) => h('th', { text: t }))),
  );
  main.append(
    h('h1', { text: `Run ${runId}` }),
    info,
    h('h2', { text: 'Model and tool calls' }),
    h('table', { id: 'calls' }, callsHead, calls),
    h('h2', { text: 'Timeline' }),
    timeline,
  );
  const events = new Map<number, RunEvent>();
  const load = async () => {
    try {
      renderRun(info, await api<Json>(`/api/runs/${encodeURIComponent(runId)}`));
    } catch (err) {
      showError(info, err);
    }
  };
  const reload = debounce(() => void load(), 300);
  const es = listen(`/api/events?run=${encodeURIComponent(runId)}`, (e) => {
    if (events.has(e.seq)) return;
    events.set(e.seq, e);
    const sorted = [...events.values()].sort((a, b) => a.seq - b.seq);
    calls.replaceChildren(...callsTable(sorted));
    timeline.replaceChildren(...sorted.map(timelineItem));
    reload();
  });
  void load();
  return () => {
    es.close();
    reload.cancel();
  };
}

// ---- Approvals --------------------------------------------------------------------------------

/** The incident an approval belongs to, on one line. */
function incidentLine(a: Approval): HTMLElement | null {
  const i = a.incident;
  if (!i) return null;
  return h(
    'p',
    { class: 'approval-incident' },
    'Incident ',
    h('span', { text: i.id }),
    ' ',
    h('span', { class: 'badge', text: i.severity }),
    ` ${i.title}${i.service ? ` · service ${i.service}` : ''} · source ${i.source}`,
  );
}

/** The run so far: each call the agent made before asking, and what came back. */
function stepsList(a: Approval): HTMLElement | null {
  if (!a.steps || a.steps.length === 0) return null;
  return h(
    'details',
    { class: 'approval-steps' },
    h('summary', { text: `The run so far: ${a.steps.length} ${a.steps.length === 1 ? 'step' : 'steps'}` }),
    h(
      'ol',
      {},
      ...a.steps.map((st) =>
        h(
          'li',
          {},
          h('code', { text: `${st.tool} ${JSON.stringify(st.args)}` }),
          ` → ${st.isError ? 'error: ' : ''}`,
          h('span', { class: 'step-result', text: st.result }),
        ),
      ),
    ),
  );
}

/** The run's other specialists: each one's status and last finding. */
function specialistsList(a: Approval): HTMLElement | null {
  if (a.specialistsProblem)
    return h('p', { class: 'approval-specialists', text: `Other specialists: unreadable (${a.specialistsProblem})` });
  if (!a.specialists || a.specialists.length === 0) return null;
  return h(
    'div',
    { class: 'approval-specialists' },
    h('p', { text: 'Other specialists of the run:' }),
    h(
      'ul',
      {},
      ...a.specialists.map((sp) =>
        h(
          'li',
          { 'data-agent': sp.agent },
          h('strong', { text: sp.agent }),
          ' ',
          h('span', { class: 'badge', text: sp.status }),
          sp.finding ? h('span', { class: 'finding', text: ` ${sp.finding}` }) : '',
        ),
      ),
    ),
  );
}

/** Who else has looked at it: `Seen by alice (console) at 2026-…`. */
function viewersLine(a: Approval): HTMLElement | null {
  if (!a.viewers || a.viewers.length === 0) return null;
  return h('p', { class: 'approval-viewers', text: `Seen by ${a.viewers.map((v) => `${v.name} (${v.path}) at ${v.at}`).join(', ')}` });
}

/** `approve by alice (verified, slack) at 2026-…`: one decision as a line. */
function decisionText(d: ApprovalDecision): string {
  const how = d.path ? ` (${d.verified ? 'verified' : 'unverified'}, ${d.path})` : '';
  const why = d.reason !== undefined && d.decision !== 'timeout' ? `: ${d.reason}` : '';
  return `${d.decision} by ${d.name}${how} at ${d.at}${why}`;
}

/** The votes so far ("1 of 2") under a rule of several people, and each decision with its person, path and time. */
function decisionsList(a: Approval): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (a.rule && a.rule.required > 1) {
    const not = a.rule.distinctFrom === 'requester' ? `; not ${a.requester ?? 'the requester'}` : '';
    out.push(h('p', { class: 'approval-progress', text: `Needs ${a.rule.required} people: ${a.progress.text} approved${not}` }));
  }
  if (a.decisions.length > 0)
    out.push(
      h('ul', { class: 'approval-decisions' }, ...a.decisions.map((d) => h('li', { 'data-decision': d.decision, text: decisionText(d) }))),
    );
  return out;
}

function approvalBlock(a: Approval, done: (msg: string) => void): HTMLElement {
  const boxes: HTMLInputElement[] = [];
  const calls = a.calls.map((c) => {
    const box = h('input', { type: 'checkbox', 'data-index': String(c.index) }) as HTMLInputElement;
    box.checked = c.needsApproval;
    box.disabled = !c.needsApproval;
    if (c.needsApproval) boxes.push(box);
    return h(
      'li',
      {},
      h(
        'label',
        {},
        box,
        ' ',
        h('code', { text: `[${c.index}] ${c.tool} ${JSON.stringify(c.args)}` }),
        c.needsApproval ? ' (needs approval)' : '',
      ),
    );
  });
  const reason = h('input', {
    type: 'text',
    placeholder: 'reason for denying',
    'aria-label': `reason for denying ${a.id}`,
    class: 'deny-reason',
  }) as HTMLInputElement;
  const approve = h('button', { class: 'approve', text: 'Approve selected' });
  const deny = h('button', { class: 'deny', text: 'Deny' });
  const msg = h('p', { class: 'msg' });
  const act = (body: Json) =>
    post<Json>(`/api/approvals/${encodeURIComponent(a.id)}`, body).then(
      (r) => done(`approval ${a.id}: ${String(r.status)}`),
      (err: unknown) => showError(msg, err),
    );
  approve.addEventListener('click', () => {
    const only = boxes.filter((b) => b.checked).map((b) => Number(b.dataset.index));
    void act(only.length === boxes.length ? { decision: 'approve' } : { decision: 'approve', only });
  });
  deny.addEventListener('click', () => void act({ decision: 'deny', reason: reason.value }));
  return h(
    'section',
    { class: 'approval', 'data-approval-id': a.id },
    h(
      'h2',
      {},
      h('a', { href: `#/approval/${encodeURIComponent(a.id)}`, class: 'approval-link', text: a.id }),
      '  run ',
      h('a', { href: `#/run/${a.runId}`, text: a.runId }),
      '  agent ',
      a.agent,
      '  waiting ',
      age(a.createdAt),
    ),
    incidentLine(a),
    specialistsList(a),
    stepsList(a),
    h('p', { class: 'reason', text: a.reason }),
    ...decisionsList(a),
    viewersLine(a),
    h('p', { class: 'timeout', text: `Times out at ${a.timeoutAt} (then denied)` }),
    h('ul', {}, ...calls),
    approve,
    reason,
    deny,
    msg,
  );
}

function approvalsPage(main: HTMLElement): () => void {
  const list = h('div', { id: 'approvals' });
  const note = h('p', { class: 'msg', id: 'approvals-msg' });
  main.append(h('h1', { text: 'Approvals' }), note, list);
  const load = async () => {
    try {
      const pending = await api<Approval[]>('/api/approvals');
      list.replaceChildren(...pending.map((a) => approvalBlock(a, (m) => ((note.textContent = m), void load()))));
      if (pending.length === 0) list.append(h('p', { text: 'nothing is waiting for approval' }));
    } catch (err) {
      showError(list, err);
    }
  };
  const reload = debounce(() => void load(), 250);
  const es = listen('/api/events', (e) => (e.type.startsWith('approval.') ? reload() : undefined));
  void load();
  return () => {
    es.close();
    reload.cancel();
  };
}

/** One approval's page: reading it records the session's person as a viewer (server side). */
function approvalPage(main: HTMLElement, id: string): () => void {
  const body = h('div', { id: 'approval' });
  const note = h('p', { class: 'msg', id: 'approval-msg' });
  main.append(h('h1', { text: `Approval ${id}` }), note, body);
  const load = async () => {
    try {
      const a = await api<Approval>(`/api/approvals/${encodeURIComponent(id)}`);
      body.replaceChildren(approvalBlock(a, (m) => ((note.textContent = m), void load())));
    } catch (err) {
      showError(body, err);
    }
  };
  const reload = debounce(() => void load(), 250);
  const es = listen('/api/events', (e) => (e.type.startsWith('approval.') ? reload() : undefined));
  void load();
  return () => {
    es.close();
    reload.cancel();
  };
}

// ---- Dead letters -----------------------------------------------------------------------------

function button(cls: string, text: string, onClick: () => void): HTMLElement {
  const b = h('button', { class: cls, text });
  b.addEventListener('click', onClick);
  return b;
}

function deadLetterRow(d: DeadLetterRow, act: (d: DeadLetterRow, what: DeadLetterAction) => void): HTMLElement {
  // An in-doubt call is resolved (as `bosun ack`), not re-run: it took effect, treat it as not executed, or send it once more.
  const actions =
    d.kind === 'in-doubt'
      ? [
          button('ack-done', 'Took effect', () => act(d, 'done')),
          button('ack-skip', 'Skip', () => act(d, 'skip')),
          button('ack-retry', 'Send again', () => act(d, 'resend')),
        ]
      : [button('retry', 'Retry', () => act(d, 'retry'))];
  const show = h('details', {}, h('summary', { text: 'show' }), h('pre', { text: JSON.stringify(d.entry, null, 2) }));
  return h(
    'tr',
    { 'data-dead-letter-id': d.id },
    ...[d.id, d.at, d.kind, d.runId ?? '-', d.agent ?? '-', d.marker ?? '', d.reason].map((t) => h('td', { text: t })),
    h(
      'td',
      {},
      ...actions,
      button('drop', 'Drop', () => act(d, 'drop')),
      show,
    ),
  );
}

/** The request of an action on a dead letter. */
function deadLetterRequest(d: DeadLetterRow, what: DeadLetterAction): [string, Json] {
  if (what === 'retry' || what === 'drop') return [`/api/dead-letters/${encodeURIComponent(d.id)}/${what}`, {}];
  const key = asText(((d.entry.input ?? {}) as Json).key ?? '');
  return [`/api/tool-calls/${encodeURIComponent(key)}/ack`, { action: what === 'resend' ? 'retry' : what }];
}

function deadLettersPage(main: HTMLElement): () => void {
  const kind = h('select', { id: 'kind-filter' }, h('option', { value: '', text: 'all' })) as HTMLSelectElement;
  for (const k of DEAD_LETTER_KINDS) kind.append(h('option', { value: k, text: k }));
  const body = h('tbody');
  const heads = ['id', 'at', 'kind', 'run', 'agent', 'mark', 'reason', 'actions'].map((t) => h('th', { text: t }));
  const note = h('p', { class: 'msg', id: 'dead-letters-msg' });
  main.append(
    h('h1', { text: 'Dead letters' }),
    h('label', {}, 'Kind ', kind),
    note,
    h('table', { id: 'dead-letters' }, h('thead', {}, h('tr', {}, ...heads)), body),
  );
  const done = (d: DeadLetterRow, what: DeadLetterAction, r: Json) =>
    what === 'retry'
      ? `retried ${d.id} as run ${String(r.runId)}`
      : what === 'drop'
        ? `dropped ${d.id}`
        : `tool call ${String(r.key)}: ${what}`;
  const act = (d: DeadLetterRow, what: DeadLetterAction) =>
    void post<Json>(...deadLetterRequest(d, what)).then(
      (r) => ((note.textContent = done(d, what, r)), void load()),
      (err: unknown) => showError(note, err),
    );
  const load = async () => {
    try {
      const { entries } = await api<{ entries: DeadLetterRow[] }>(`/api/dead-letters${kind.value ? `?kind=${kind.value}` : ''}`);
      body.replaceChildren(...entries.map((d) => deadLetterRow(d, act)));
    } catch (err) {
      showError(note, err);
    }
  };
  kind.addEventListener('change', () => void load());
  void load();
  return () => undefined;
}

// ---- Stats ------------------------------------------------------------------------------------

interface Stats {
  perMinute: number[];
  finished: number;
  p50Ms: number | null;
  p99Ms: number | null;
  degradedRuns: number;
  byState: Record<string, number>;
  degraded: { agent: string; kind: string; count: number }[];
  dropped: number;
}

/** A bar chart of `values` as divs (their heights), one bar a minute. */
function bars(values: number[]): HTMLElement {
  const max = Math.max(1, ...values);
  return h(
    'div',
    { class: 'bars', id: 'runs-per-minute' },
    ...values.map((v, i) => {
      const bar = h('div', { class: 'bar', title: `${values.length - 1 - i} min ago: ${v}` }, h('span', { text: String(v) }));
      bar.style.height = `${Math.round((v / max) * 100)}%`;
      return bar;
    }),
  );
}

function renderStats(where: HTMLElement, s: Stats): void {
  const ms = (v: number | null) => (v === null ? '-' : `${(v / 1000).toFixed(1)} s`);
  where.replaceChildren(
    h('h2', { text: 'Runs started per minute (last 10 minutes)' }),
    bars(s.perMinute),
    h('p', {
      id: 'durations',
      text: `finished runs: ${s.finished}   p50 ${ms(s.p50Ms)}   p99 ${ms(s.p99Ms)}   degraded runs (partial or failed): ${s.degradedRuns}`,
    }),
    h('p', {
      text: `by status: ${
        Object.entries(s.byState)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none'
      }`,
    }),
    h('h2', { text: 'Degraded results by agent' }),
    h(
      'table',
      {},
      h(
        'tbody',
        {},
        ...s.degraded.map((d) => h('tr', {}, h('td', { text: d.agent }), h('td', { text: d.kind }), h('td', { text: String(d.count) }))),
      ),
    ),
    h('p', { text: `events dropped: ${s.dropped}` }),
  );
}

function statsPage(main: HTMLElement): () => void {
  const body = h('div', { id: 'stats' });
  main.append(h('h1', { text: 'Stats' }), body);
  const load = () =>
    api<Stats>('/api/stats').then(
      (s) => renderStats(body, s),
      (err: unknown) => showError(body, err),
    );
  const timer = window.setInterval(() => void load(), 10_000);
  void load();
  return () => clearInterval(timer);
}

// ---- Routing ----------------------------------------------------------------------------------

let leave: () => void = () => undefined;

function route(): void {
  leave();
  const main = document.getElementById('main')!;
  main.replaceChildren();
  const hash = location.hash || '#/runs';
  const page = hash.split('/')[1] ?? 'runs';
  for (const a of document.querySelectorAll('header nav a'))
    a.classList.toggle('active', a.id === `nav-${page === 'run' ? 'runs' : page === 'approval' ? 'approvals' : page}`);
  if (page === 'run') leave = runPage(main, decodeURIComponent(hash.slice('#/run/'.length)));
  else if (page === 'approvals') leave = approvalsPage(main);
  else if (page === 'approval') leave = approvalPage(main, decodeURIComponent(hash.slice('#/approval/'.length)));
  else if (page === 'dead-letters') leave = deadLettersPage(main);
  else if (page === 'stats') leave = statsPage(main);
  else leave = runsPage(main);
}

async function start(): Promise<void> {
  const session = await api<{ csrf: string; person: { name: string; role: string } }>('/api/session');
  csrf = session.csrf;
  // Who is logged in; a read-only person learns here why a decision would be refused.
  document.getElementById('whoami')!.textContent = `${session.person.name}${session.person.role === 'read-only' ? ' (read-only)' : ''}`;
  window.addEventListener('hashchange', route);
  route();
}

void start();
