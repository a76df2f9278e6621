/**
 * The script that prepares a fresh context before the model's script runs. It takes the raw host
 * functions off the global object (keeping them in its closure, where the model's script cannot
 * reach them) and defines what the script may use: `call_tool`, `console`, and a `Date` and
 * `Math.random` answered by the host. Everything that crosses the boundary is a string. It
 * evaluates to two functions of its own, taken before the script could replace anything: the
 * host writes out the script's result with the first (`JSON.stringify`), and its errors with the
 * second (a message cut at 8,192 characters, so that no error is too large to be read).
 */
export function prelude(tools: readonly string[]): string {
  const identifiers = tools.filter((t) => /^[A-Za-z_$][\w$]*$/.test(t));
  return `(function (g) {
  'use strict';
  const rawCall = g.__bosun_call, rawLog = g.__bosun_log, rawNow = g.__bosun_now, rawRandom = g.__bosun_random;
  delete g.__bosun_call; delete g.__bosun_log; delete g.__bosun_now; delete g.__bosun_random;
  const stringify = JSON.stringify, parse = JSON.parse, isArray = Array.isArray, E = Error, TE = TypeError, S = String;
  const known = Object.create(null);
  for (const t of ${JSON.stringify(tools)}) known[t] = true;
  const FORM = 'call a tool as call_tool("server__tool", { name: value, ... })';
  function describe(v) { return v === null ? 'null' : isArray(v) ? 'an array' : typeof v; }
  function call_tool(name, args) {
    if (arguments.length > 2) throw new TE('call_tool takes two arguments, the tool name and one object of named arguments, not positional arguments: ' + FORM);
    if (typeof name !== 'string') throw new TE('call_tool: the tool name must be a string, not ' + describe(name) + ': ' + FORM);
    if (known[name] !== true) throw new E('call_tool: unknown tool "' + name + '"; the tools you may call are listed in your instructions: ' + FORM);
    if (args === undefined) args = {};
    if (args === null || typeof args !== 'object' || isArray(args)) throw new TE('call_tool: the arguments must be one object of named arguments, not ' + describe(args) + ': ' + FORM);
    const out = parse(rawCall(name, stringify(args)));
    if (out.error !== undefined) { const e = new E(out.error); e.name = 'ToolError'; throw e; }
    return out.ok;
  }
  function notAFunction() { throw new TE('tools are not functions in this sandbox: ' + FORM); }
  for (const t of ${JSON.stringify(identifiers)}) Object.defineProperty(g, t, { value: notAFunction, configurable: true, writable: true });
  function show(v) { if (typeof v === 'string') return v; try { const j = stringify(v); return j === undefined ? S(v) : j; } catch (e) { return S(v); } }
  function log() { const parts = []; for (let i = 0; i < arguments.length; i++) parts.push(show(arguments[i])); rawLog(parts.join(' ')); }
  g.console = { log: log, info: log, warn: log, error: log, debug: log };
  g.call_tool = call_tool;
  const D = Date;
  function HostDate() {
    const now = rawNow();
    if (!new.target) return new D(now).toString();
    if (arguments.length === 0) return new D(now);
    return new D(...arguments);
  }
  HostDate.prototype = D.prototype;
  HostDate.now = function () { return rawNow(); };
  HostDate.UTC = D.UTC;
  HostDate.parse = D.parse;
  Object.defineProperty(D.prototype, 'constructor', { value: HostDate, configurable: true, writable: true });
  g.Date = HostDate;
  Math.random = function () { return rawRandom(); };
  function describeError(e) {
    let s;
    try {
      if (e !== null && typeof e === 'object' && 'message' in e) s = (typeof e.name === 'string' ? e.name : 'Error') + ': ' + S(e.message);
      else s = 'Uncaught ' + (typeof e === 'string' ? e : stringify(e));
    } catch (x) { s = 'Error: the script failed and its error could not be read'; }
    return s.length > 8192 ? s.slice(0, 8192) + '…' : s;
  }
  return [function (v) { return stringify(v); }, describeError];
})(globalThis);`;
}
