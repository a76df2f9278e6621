import { Ajv, type ValidateFunction } from 'ajv';
import { BosunError, isStalled, stallText, errorMessage } from '@bosun/contract';

const ajv = new Ajv({ allErrors: true, strict: false });
const compiled = new WeakMap<object, ValidateFunction>();

/**
 * An output schema (or stall payload) a stall could not be reported with honestly: thrown at
 * start-up by the config check, so a specialist whose stall would be invalid never runs.
 */
export class OutputSchemaError extends BosunError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('invalid_output_schema', message, options);
    this.name = 'OutputSchemaError';
  }
}

/** Values an enum may offer that honestly mean "not determined". */
const HONEST_UNKNOWN = ['unknown', 'unchecked', 'incomplete', 'undetermined', 'none'];

type Schema = Record<string, unknown>;

function validatorFor(schema: Schema): ValidateFunction {
  let v = compiled.get(schema);
  if (!v) {
    v = ajv.compile(schema);
    compiled.set(schema, v);
  }
  return v;
}

/**
 * Validates an output against a JSON Schema. Returns `null` when it conforms, else a
 * message naming each failing field (`/findings/0/severity: must be equal to one of …`).
 */
export function validateAgainstSchema(schema: Schema, value: unknown): string | null {
  const validate = validatorFor(schema);
  if (validate(value)) return null;
  return (validate.errors ?? [])
    .map(
      (e) =>
        `${e.instancePath || '(root)'}: ${e.message ?? 'invalid'}${e.params && 'allowedValues' in e.params ? ` ${JSON.stringify(e.params.allowedValues)}` : ''}`,
    )
    .join('; ');
}

/** A property of a schema by a name the schema's author chose (`required` may name `constructor`). */
function ownProp(props: Record<string, Schema>, name: string): Schema | undefined {
  return Object.hasOwn(props, name) ? props[name] : undefined;
}

function types(schema: Schema): string[] {
  const t = schema.type;
  return Array.isArray(t) ? (t as string[]) : typeof t === 'string' ? [t] : [];
}

/** The property that carries the stall text: `summary` if it is a string, else the first unconstrained required string. */
function proseField(schema: Schema): string | undefined {
  const props = (schema.properties ?? {}) as Record<string, Schema>;
  const isFreeString = (p: Schema | undefined) =>
    !!p &&
    types(p).includes('string') &&
    p.enum === undefined &&
    p.pattern === undefined &&
    p.format === undefined &&
    p.const === undefined;
  if (isFreeString(props.summary)) return 'summary';
  const required = (schema.required ?? []) as string[];
  return required.find((r) => isFreeString(ownProp(props, r))) ?? Object.keys(props).find((k) => isFreeString(props[k]));
}

/**
 * Derives the payload a stalled agent reports, from its output schema, inventing nothing:
 * the stall text goes into the prose field; other required fields get their honest empty
 * value (`""`, `[]`, `null`, or an enum's "unknown"-like value). Throws when the schema
 * requires something that cannot be filled honestly (a number, a boolean, an enum without
 * an "unknown" value): such a specialist needs an explicit `stallPayload`.
 */
export function deriveStallPayload(schema: Schema, text: string): Record<string, unknown> {
  if (!types(schema).includes('object') && schema.properties === undefined) {
    throw new OutputSchemaError('outputSchema must be an object schema');
  }
  const field = proseField(schema);
  if (!field) throw new OutputSchemaError('outputSchema has no free-text string property to carry the stall text; set stallPayload');
  const props = (schema.properties ?? {}) as Record<string, Schema>;
  const out: Record<string, unknown> = { [field]: text };
  for (const name of (schema.required ?? []) as string[]) {
    if (name === field) continue;
    const p = ownProp(props, name) ?? {};
    const t = types(p);
    if (Array.isArray(p.enum)) {
      const honest = (p.enum as unknown[]).find((e) => typeof e === 'string' && HONEST_UNKNOWN.includes(e.toLowerCase()));
      if (honest === undefined) {
        throw new OutputSchemaError(
          `required field "${name}" is an enum without an "unknown"-like value, so a stall cannot fill it honestly; set stallPayload`,
        );
      }
      out[name] = honest;
    } else if (t.includes('null')) {
      out[name] = null;
    } else if (t.includes('array') && !(typeof p.minItems === 'number' && p.minItems > 0)) {
      out[name] = [];
    } else if (
      t.includes('string') &&
      !(typeof p.minLength === 'number' && p.minLength > 0) &&
      p.pattern === undefined &&
      p.format === undefined
    ) {
      out[name] = '';
    } else {
      throw new OutputSchemaError(
        `required field "${name}" (${t.join('|') || 'untyped'}) cannot be filled honestly by a stall; set stallPayload`,
      );
    }
  }
  return out;
}

function fillTemplate(value: unknown, text: string): unknown {
  if (typeof value === 'string') return value.split('${stallText}').join(text);
  if (Array.isArray(value)) return value.map((v) => fillTemplate(v, text));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, fillTemplate(v, text)]));
  }
  return value;
}

/** The parts of a specialist's config that describe its output. */
export interface OutputSpec {
  outputSchema: Record<string, unknown>;
  stallPayload?: Record<string, unknown> | undefined;
}

/**
 * The `finish_task` payload written on behalf of a stalled agent: the configured
 * `stallPayload` with `${stallText}` filled in, or one derived from the schema.
 */
export function buildStallPayload(spec: OutputSpec, agent: string, lastWords: string, reason?: string): Record<string, unknown> {
  const text = stallText(agent, lastWords, reason);
  return spec.stallPayload
    ? (fillTemplate(spec.stallPayload, text) as Record<string, unknown>)
    : deriveStallPayload(spec.outputSchema, text);
}

/**
 * Checks at start-up that a specialist's output schema compiles and that a stall payload
 * built for it validates against it, so a stall can never produce an invalid result.
 */
export function checkOutputSchema(agent: string, spec: OutputSpec): void {
  try {
    validatorFor(spec.outputSchema);
  } catch (err) {
    throw new OutputSchemaError(`outputSchema does not compile: ${errorMessage(err)}`, { cause: err });
  }
  let payload: Record<string, unknown>;
  try {
    payload = buildStallPayload(spec, agent, 'sample last words');
  } catch (err) {
    throw new OutputSchemaError(`cannot build a stall payload: ${errorMessage(err)}`, { cause: err });
  }
  const problem = validateAgainstSchema(spec.outputSchema, payload);
  if (problem) throw new OutputSchemaError(`the stall payload does not validate against outputSchema: ${problem}`);
  if (!isStalled(payload)) {
    // isStalled is how readers count degraded results: the marker must open a top-level string.
    throw new OutputSchemaError(
      'stallPayload must start a top-level string field with ${stallText}, so the result is recognised as INCOMPLETE',
    );
  }
}
