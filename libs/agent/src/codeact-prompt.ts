import type { CatalogTool } from '@bosun/contract';
import type { ScriptOutcome } from '@bosun/sandbox';

/** The default system instruction of a CodeAct specialist (the sandbox, the call form, the tagged results). */
export const DEFAULT_CODEACT_INSTRUCTION = [
  'You are a specialist on an unattended incident-response team. Nobody will answer questions:',
  'there is no person in this conversation. Investigate the incident in your domain and do not guess.',
  '',
  'You act by writing ONE JavaScript script per turn, in a single fenced block (```js ... ```).',
  'The script runs in a sandbox with no modules, no network, no file system and no process:',
  'it reaches tools only as `call_tool("server__tool", { name: value, ... })`, which returns the',
  "tool's result directly (no await) or throws a ToolError you may catch. console.log output is",
  'shown to you after the script. Keep scripts short; compose several tools in one script when you can.',
  '',
  'The script is the body of a function and must end by returning exactly one tagged result:',
  '- `return { observation: value }` to see a value and continue with another script;',
  '- `return { error: "message" }` to report a problem and continue;',
  '- `return { final_result: {...} }` with your structured report, once, when you are done or cannot',
  '  get further (it must match the output schema below; say plainly what you could not check);',
  '- `return { transfer_to_agent: { agent: "name", reason: "..." } }` to hand the task to another specialist.',
].join('\n');

type Schema = { type?: unknown; description?: unknown; properties?: Record<string, Schema>; required?: unknown; items?: Schema };

function typeOf(s: Schema | undefined): string {
  if (!s) return 'any';
  if (Array.isArray(s.type)) return s.type.join(' | ');
  if (s.type === 'array') return `${typeOf(s.items)}[]`;
  return typeof s.type === 'string' ? s.type : 'any';
}

/** One tool as the model sees it: a `call_tool` usage line, its parameters and its description. */
export function usageLine(tool: CatalogTool): string {
  const schema = tool.inputSchema as Schema;
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const params = Object.entries(schema.properties ?? {}).map(
    ([name, p]) =>
      `${name}${required.has(name) ? '' : '?'}: ${typeOf(p)}${typeof p.description === 'string' ? ` /* ${p.description} */` : ''}`,
  );
  return `- call_tool(${JSON.stringify(tool.name)}, { ${params.join(', ')} }) — ${tool.description ?? ''}`.trimEnd();
}

/** The system instruction: the specialist's (or the default), the tools it may call, and the output schema. */
export function codeActSystem(
  instruction: string | undefined,
  tools: readonly CatalogTool[],
  outputSchema: Record<string, unknown>,
): string {
  const lines = tools.length > 0 ? tools.map(usageLine) : ['(none: report with final_result)'];
  return [
    instruction ?? DEFAULT_CODEACT_INSTRUCTION,
    '',
    'Tools you may call (any other name is refused):',
    ...lines,
    '',
    `The output schema of final_result: ${JSON.stringify(outputSchema)}`,
  ].join('\n');
}

/**
 * The script of a model turn: the first fenced block (```js, ```javascript or a bare fence);
 * undefined when the turn has none.
 */
export function extractScript(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const m = /```(?:js|javascript|ts|typescript)?[ \t]*\r?\n([\s\S]*?)```/i.exec(text);
  const script = m?.[1]?.trim();
  return script ? script : undefined;
}

/** Cuts a text for the model or an event, with a marker. */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}… [${text.length - max} more characters cut]` : text;
}

function show(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value, null, 1) ?? 'undefined');
}

/** What the model is told after its script ran (not for a final result or a transfer, which end the task). */
export function describeOutcome(outcome: ScriptOutcome): string {
  const printed = outcome.console ? `\n\nConsole output:\n${clip(outcome.console, 16_384)}` : '';
  if (outcome.kind === 'script_error') return `Your script failed: ${outcome.message}${printed}`;
  const { result } = outcome;
  if (result.tag === 'observation') return `Observation:\n${clip(show(result.value), 65_536)}${printed}`;
  if (result.tag === 'error') return `Your script reported an error:\n${clip(show(result.value), 65_536)}${printed}`;
  return `Script result: ${result.tag}${printed}`;
}
