/**
 * Static checks of the deployment files: infra/Dockerfile, infra/compose.yaml and infra/k8s/.
 * Nothing here starts a container (there may be no Docker engine) or touches the network: every
 * YAML file is parsed with `yaml`, and the references between the files are checked — env vars
 * to ConfigMap and Secret keys, probes to the health port, grace periods to BOSUN_GRACE_MS,
 * selectors to labels, KEDA triggers to BullMQ wait lists of configured specialists, the
 * embedded cluster config to infra/demo/bosun.yaml, build contexts to the Dockerfile.
 *
 * Each check is a function from the parsed files to a list of problems. The first part asserts
 * that every list is empty; the last part ("every check can fail") breaks a copy of the parsed
 * files in one place per check and asserts that the check reports it.
 *
 * What the files expect of the code is checked against the code itself: the variables against
 * the documented list that `readEnv` reads (`ENV_VARS`, held to it by libs/config's env.test.ts),
 * and the probes by starting each service (a process, against the tests' Redis and NATS) with
 * BOSUN_HEALTH_PORT and BOSUN_GRACE_MS and asking it.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join, posix } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { ENV_VARS } from '@bosun/config';
import { demoConfig, freePort, openContext, startService, writeConfig, type TestContext } from '../helpers/index.js';
import { ROOT } from '../helpers/paths.js';

type Obj = Record<string, any>;

/** A YAML scalar as text (a number or a boolean as YAML wrote it); anything else as JSON. */
const scalarText = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** Variables every Bosun process must get from its deployment. */
const REQUIRED_ENV = [
  'REDIS_URL',
  'NATS_URL',
  'BOSUN_PREFIX',
  'BOSUN_CONFIG',
  'BOSUN_HEALTH_PORT',
  'BOSUN_GRACE_MS',
  'LOG_LEVEL',
  'GEMINI_API_KEY',
];
/** TLS and credentials for Redis and NATS: unset means plain connections without credentials. */
const CONNECTION_ENV = [
  'REDIS_USERNAME',
  'REDIS_PASSWORD',
  'REDIS_PASSWORD_FILE',
  'REDIS_TLS_CA_FILE',
  'REDIS_TLS_CERT_FILE',
  'REDIS_TLS_KEY_FILE',
  'NATS_USER',
  'NATS_PASSWORD',
  'NATS_PASSWORD_FILE',
  'NATS_TOKEN',
  'NATS_TOKEN_FILE',
  'NATS_NKEY_SEED_FILE',
  'NATS_CREDS_FILE',
  'NATS_TLS_CA_FILE',
  'NATS_TLS_CERT_FILE',
  'NATS_TLS_KEY_FILE',
];
/** The connection variables every Kubernetes Deployment is wired with (files from a mounted Secret). */
const K8S_CONNECTION_ENV = [
  'REDIS_USERNAME',
  'REDIS_PASSWORD_FILE',
  'REDIS_TLS_CA_FILE',
  'REDIS_TLS_CERT_FILE',
  'REDIS_TLS_KEY_FILE',
  'NATS_USER',
  'NATS_PASSWORD_FILE',
  'NATS_CREDS_FILE',
  'NATS_TLS_CA_FILE',
  'NATS_TLS_CERT_FILE',
  'NATS_TLS_KEY_FILE',
];
/** Secrets given inline rather than as files: if set, from a Secret (k8s) or passed through (compose). */
const INLINE_SECRET_ENV = ['REDIS_PASSWORD', 'NATS_PASSWORD', 'NATS_TOKEN'];
/** Variables the code reads whose defaults fit these deployments (one Redis, one NATS server). */
// OPENAI_API_KEY: read only by agents whose model.provider is openai (the coordinator and specialists get it from bosun-secrets, empty).
const OPTIONAL_ENV = [
  'REDIS_CLUSTER',
  'REDIS_COALESCE_WRITES',
  'BOSUN_STREAM_REPLICAS',
  'OPENAI_API_KEY',
  'ANTHROPIC_API_KEY',
  ...CONNECTION_ENV,
];
/** The services, by the folder of their entry point `services/<dir>/dist/bundle/main.js`. */
const SERVICES = ['coordinator', 'specialist', 'tool-gateway', 'intake', 'a2a', 'console', 'serve'];
/** The entry points that are not `services/<dir>/dist/bundle/main.js`: the console lives in the CLI's package. */
const OTHER_ENTRIES: Record<string, { entry: string; source: string }> = {
  console: { entry: 'cli/dist/bundle/console.js', source: 'cli/src/console/main.ts' },
};
/** `bosun serve` (the co-located layout): the CLI's entry point with the command `serve`. */
const SERVE_ENTRY = { entry: 'cli/dist/bundle/main.js', source: 'cli/src/serve.ts' };
const GRACE_DEFAULT_MS = 30_000;
const HASH_ANNOTATION = 'bosun.dev/config-hash';

// ------------------------------------------------------------------------------------ loading

interface Doc {
  file: string;
  obj: Obj;
}

interface Model {
  /** File names in infra/k8s. */
  k8sFiles: string[];
  /** Every document of infra/k8s except the kustomization. */
  k8s: Doc[];
  kustomization: Obj;
  configmapText: string;
  compose: Obj;
  dockerfile: string;
  /** infra/demo/bosun.yaml, parsed. */
  demoConfig: unknown;
  /** The workspaces of the root package.json. */
  workspaces: string[];
  /** Every env var name a service reads: the documented list of `readEnv` (`ENV_VARS`), less the CLI's own. */
  codeEnv: string[];
  /** The commented example of TLS and credentials in compose.yaml: its text, and its YAML parsed. */
  composeExample: { text: string; parsed: Obj | undefined };
}

const K8S_DIR = join(ROOT, 'infra/k8s');
const INFRA_DIR = join(ROOT, 'infra');

/** Parse problems of one YAML file (every document). */
function yamlProblems(file: string, text: string): string[] {
  return parseAllDocuments(text).flatMap((d) => [...d.errors, ...d.warnings].map((e) => `${file}: ${e.message}`));
}

function readDocs(file: string): Doc[] {
  return parseAllDocuments(readFileSync(join(K8S_DIR, file), 'utf8'))
    .map((d) => d.toJS({ maxAliasCount: -1 }) as Obj | null)
    .filter((obj): obj is Obj => obj !== null)
    .map((obj) => ({ file, obj }));
}

/** The variables a service reads, from the list `readEnv` reads (libs/config, `ENV_VARS`). */
function serviceEnv(): string[] {
  return Object.entries(ENV_VARS)
    .filter(([, doc]) => !doc.cliOnly)
    .map(([name]) => name)
    .sort();
}

/** The lines between `# example: tls-and-credentials` and `# end of example`, uncommented. */
function composeExample(text: string): { text: string; parsed: Obj | undefined } {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim() === '# example: tls-and-credentials');
  const end = lines.findIndex((l, i) => i > start && l.trim() === '# end of example');
  if (start < 0 || end < 0) return { text: '', parsed: undefined };
  const body = lines
    .slice(start + 1, end)
    .map((l) => l.replace(/^# ?/, ''))
    .join('\n');
  try {
    return { text: body, parsed: parse(body) as Obj };
  } catch {
    return { text: body, parsed: undefined };
  }
}

function load(): Model {
  const k8sFiles = readdirSync(K8S_DIR)
    .filter((f) => !f.startsWith('.'))
    .sort();
  const docs = k8sFiles.filter((f) => /\.ya?ml$/.test(f)).flatMap(readDocs);
  return {
    k8sFiles,
    k8s: docs.filter((d) => d.obj.kind !== 'Kustomization'),
    kustomization: docs.find((d) => d.obj.kind === 'Kustomization')?.obj ?? {},
    configmapText: readFileSync(join(K8S_DIR, 'configmap.yaml'), 'utf8'),
    compose: parse(readFileSync(join(INFRA_DIR, 'compose.yaml'), 'utf8'), { merge: true }) as Obj,
    dockerfile: readFileSync(join(INFRA_DIR, 'Dockerfile'), 'utf8'),
    demoConfig: parse(readFileSync(join(INFRA_DIR, 'demo/bosun.yaml'), 'utf8')),
    workspaces: (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { workspaces: string[] }).workspaces,
    codeEnv: serviceEnv(),
    composeExample: composeExample(readFileSync(join(INFRA_DIR, 'compose.yaml'), 'utf8')),
  };
}

// ------------------------------------------------------------------------------------ helpers

const exists = (repoPath: string) => existsSync(join(ROOT, repoPath));
const ns = (o: Obj) => (o.metadata?.namespace as string | undefined) ?? 'default';
const id = (o: Obj) => `${o.kind}/${o.metadata?.name}`;
const kinds = (m: Model, kind: string) => m.k8s.map((d) => d.obj).filter((o) => o.kind === kind);
const findObj = (m: Model, kind: string, namespace: string, name: string) =>
  kinds(m, kind).find((o) => o.metadata?.name === name && ns(o) === namespace);
const deployments = (m: Model) => kinds(m, 'Deployment');
const podSpec = (d: Obj): Obj => d.spec?.template?.spec ?? {};
const containers = (d: Obj): Obj[] => podSpec(d).containers ?? [];

/** `${NAME:-default}` / `${NAME-default}` → default; `${NAME}` → undefined; anything else as is. */
function interpolate(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  const s = scalarText(v);
  let unknown = false;
  const out = s.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (_all, _n: string, def: string | undefined) => {
    if (def === undefined) unknown = true;
    return def ?? '';
  });
  return unknown ? undefined : out;
}

interface EnvValue {
  value: string | undefined;
  from: 'value' | 'configmap' | 'secret';
}

/** A container's env, with ConfigMap and Secret references resolved; broken references are problems. */
function resolveEnv(m: Model, namespace: string, c: Obj): { env: Map<string, EnvValue>; problems: string[] } {
  const env = new Map<string, EnvValue>();
  const problems: string[] = [];
  const configMapData = (name: string): Obj | undefined => findObj(m, 'ConfigMap', namespace, name)?.data;
  const secretData = (name: string): Obj | undefined => {
    const s = findObj(m, 'Secret', namespace, name);
    if (!s) return undefined;
    const decoded = Object.fromEntries(
      Object.entries((s.data ?? {}) as Obj).map(([k, v]) => [k, Buffer.from(String(v), 'base64').toString('utf8')]),
    );
    return { ...decoded, ...(s.stringData ?? {}) };
  };
  for (const ef of (c.envFrom ?? []) as Obj[]) {
    const ref = ef.configMapRef ?? ef.secretRef;
    const data = ef.configMapRef ? configMapData(ref.name) : secretData(ref.name);
    if (!data) {
      problems.push(`container ${c.name}: envFrom ${ef.configMapRef ? 'ConfigMap' : 'Secret'} ${ref.name} does not exist`);
      continue;
    }
    for (const [k, v] of Object.entries(data))
      env.set(`${ef.prefix ?? ''}${k}`, { value: String(v), from: ef.configMapRef ? 'configmap' : 'secret' });
  }
  for (const e of (c.env ?? []) as Obj[]) {
    if (e.valueFrom?.configMapKeyRef || e.valueFrom?.secretKeyRef) {
      const isCm = Boolean(e.valueFrom.configMapKeyRef);
      const ref = e.valueFrom.configMapKeyRef ?? e.valueFrom.secretKeyRef;
      const data = isCm ? configMapData(ref.name) : secretData(ref.name);
      const what = `${isCm ? 'ConfigMap' : 'Secret'} ${ref.name}`;
      if (!data) problems.push(`container ${c.name}: ${e.name} refers to ${what}, which does not exist`);
      else if (!(ref.key in data))
        problems.push(`container ${c.name}: ${e.name} refers to key ${ref.key} of ${what}, which has no such key`);
      env.set(e.name, { value: data?.[ref.key] === undefined ? undefined : String(data[ref.key]), from: isCm ? 'configmap' : 'secret' });
    } else if (e.valueFrom) {
      problems.push(`container ${c.name}: ${e.name} uses a valueFrom these checks do not know`);
    } else {
      env.set(e.name, { value: e.value === undefined ? '' : String(e.value), from: 'value' });
    }
  }
  return { env, problems };
}

/** The volume a container sees at the absolute `path`, and the file's name in it (mount or subPath). */
function volumeAt(d: Obj, c: Obj, path: string): { name: string; volume: Obj | undefined; key: string } | undefined {
  for (const vm of (c.volumeMounts ?? []) as Obj[]) {
    const mountPath = String(vm.mountPath).replace(/\/+$/, '');
    let key: string | undefined;
    if (vm.subPath !== undefined && mountPath === path) key = vm.subPath;
    else if (vm.subPath === undefined && posix.dirname(path) === mountPath) key = posix.basename(path);
    if (key !== undefined) return { name: vm.name, volume: ((podSpec(d).volumes ?? []) as Obj[]).find((v) => v.name === vm.name), key };
  }
  return undefined;
}

/** The text of the cluster config a Deployment's container reads at BOSUN_CONFIG. */
function mountedConfig(m: Model, d: Obj, c: Obj, env: Map<string, EnvValue>): { text?: string; problem?: string } {
  const path = env.get('BOSUN_CONFIG')?.value;
  if (!path) return { problem: 'BOSUN_CONFIG is not set' };
  if (!path.startsWith('/')) return { problem: `BOSUN_CONFIG ${path} is not an absolute path` };
  const at = volumeAt(d, c, path);
  if (!at) return { problem: `no volume is mounted at BOSUN_CONFIG ${path}` };
  const { name, volume: vol, key } = at;
  if (!vol?.configMap) return { problem: `volume ${name} mounted for BOSUN_CONFIG is not a ConfigMap volume` };
  const item = ((vol.configMap.items ?? []) as Obj[]).find((i) => i.path === key);
  if (vol.configMap.items && !item) return { problem: `ConfigMap volume ${name} has no item at ${key}` };
  const cmKey = item?.key ?? key;
  const cm = findObj(m, 'ConfigMap', ns(d), vol.configMap.name);
  if (!cm) return { problem: `ConfigMap ${vol.configMap.name} (volume ${name}) does not exist` };
  const text = cm.data?.[cmKey];
  if (typeof text !== 'string') return { problem: `ConfigMap ${vol.configMap.name} has no key ${cmKey} for BOSUN_CONFIG ${path}` };
  return { text };
}

/** The command line of a container (command + args) and of a compose service (entrypoint + command). */
const k8sArgv = (c: Obj): string[] => [...(c.command ?? []), ...(c.args ?? [])].map(String);
function composeArgv(s: Obj): string[] {
  const part = (v: unknown) =>
    v === undefined || v === null ? [] : Array.isArray(v) ? v.map(String) : scalarText(v).split(/\s+/).filter(Boolean);
  return [...part(s.entrypoint), ...part(s.command)];
}

/** The service an argv runs (`services/<dir>/dist/bundle/main.js`), or undefined. */
/** The source file of a service's entry point. */
function sourceOf(svc: string): string {
  return svc === 'serve' ? SERVE_ENTRY.source : (OTHER_ENTRIES[svc]?.source ?? `services/${svc}/src/main.ts`);
}

function serviceOf(argv: string[]): string | undefined {
  for (const [i, a] of argv.entries()) {
    if (a.replace(/^\/app\//, '') === SERVE_ENTRY.entry && argv[i + 1] === 'serve') return 'serve';
    const match = /^(?:\/app\/)?services\/([a-z0-9-]+)\/dist\/bundle\/main\.js$/.exec(a);
    if (match) return match[1];
    const other = Object.entries(OTHER_ENTRIES).find(([, e]) => a.replace(/^\/app\//, '') === e.entry);
    if (other) return other[0];
  }
  return undefined;
}

/** The specialist names given with `--only` (undefined when absent). */
function onlyOf(argv: string[]): string[] | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const v = a === '--only' ? argv[i + 1] : a.startsWith('--only=') ? a.slice('--only='.length) : undefined;
    if (v !== undefined)
      return v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
  }
  return undefined;
}

function graceMs(value: string | undefined): number {
  return value === undefined || value === '' ? GRACE_DEFAULT_MS : Number(value);
}

/** Compose durations: `45s`, `1m30s`, `1500ms`, `2h`. */
function durationSeconds(v: unknown): number {
  if (typeof v === 'number') return v / 1e6; // a bare number is microseconds
  const s = String(v).trim();
  const re = /(\d+(?:\.\d+)?)(ms|us|h|m|s)/g;
  let total = 0;
  let consumed = '';
  for (const m of s.matchAll(re)) {
    const n = Number(m[1]);
    total += m[2] === 'h' ? n * 3600 : m[2] === 'm' ? n * 60 : m[2] === 's' ? n : m[2] === 'ms' ? n / 1000 : n / 1e6;
    consumed += m[0];
  }
  return consumed === s && s !== '' ? total : NaN;
}

/** `${VAR}` placeholders without a default in the config's mcpServers (only the gateway resolves them; checked everywhere, to be safe). */
function requiredPlaceholders(config: Obj): string[] {
  const out = new Set<string>();
  for (const server of Object.values((config.mcpServers ?? {}) as Obj)) {
    const values = [
      ...((server.args ?? []) as unknown[]),
      ...Object.values((server.env ?? {}) as Obj),
      ...Object.values((server.headers ?? {}) as Obj),
    ];
    for (const v of values)
      for (const match of String(v).matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}/g)) if (match[2] === undefined) out.add(match[1]!);
  }
  return [...out];
}

/** The WORKDIR of the Dockerfile's last stage: where the repository layout sits in the image. */
function appRoot(dockerfile: string): string | undefined {
  const lines = instructions(dockerfile);
  const last = lines.map((l) => l.op).lastIndexOf('FROM');
  return lines
    .slice(last)
    .filter((l) => l.op === 'WORKDIR')
    .at(-1)?.rest;
}

/**
 * Relative stdio MCP server paths in the config resolve, from the config file's folder in the
 * image, to a file the image builds: `<app>/<pkg>/dist/x.js` (or the bundle `dist/bundle/x.js`, scripts/bundle.mjs) must come from `<pkg>/src/x.ts`.
 */
function mcpPathProblems(config: Obj, configPath: string, app: string | undefined): string[] {
  const problems: string[] = [];
  if (!app) return ['the Dockerfile has no WORKDIR in its last stage'];
  for (const [name, server] of Object.entries((config.mcpServers ?? {}) as Obj)) {
    if (server.transport !== 'stdio') continue;
    const base = server.cwd ? posix.resolve(posix.dirname(configPath), server.cwd) : posix.dirname(configPath);
    for (const arg of (server.args ?? []) as unknown[]) {
      const a = String(arg);
      if (!/^\.\.?\//.test(a)) continue;
      const abs = posix.resolve(base, a);
      if (!abs.startsWith(`${app}/`)) {
        problems.push(`mcpServers.${name}: ${a} from ${base} is ${abs}, outside the app folder ${app}`);
        continue;
      }
      const rel = abs.slice(app.length + 1);
      const source = rel.replace(/\/dist\/(?:bundle\/)?(.*)\.js$/, '/src/$1.ts');
      if (!exists(source)) problems.push(`mcpServers.${name}: ${a} from ${base} is ${abs}, but ${source} does not exist in the repository`);
    }
  }
  return problems;
}

// ------------------------------------------------------------------------------------ k8s checks

function checkK8sObjects(m: Model): string[] {
  const problems: string[] = [];
  const namespaces = new Set(kinds(m, 'Namespace').map((n) => n.metadata?.name));
  for (const { file, obj } of m.k8s) {
    if (!obj.apiVersion || !obj.kind || !obj.metadata?.name) problems.push(`${file}: a document lacks apiVersion, kind or metadata.name`);
    if (obj.kind !== 'Namespace' && !namespaces.has(obj.metadata?.namespace))
      problems.push(`${file}: ${id(obj)} is in namespace ${obj.metadata?.namespace}, which namespace.yaml does not create`);
  }
  return problems;
}

function checkKustomization(m: Model): string[] {
  const problems: string[] = [];
  const resources = (m.kustomization.resources ?? []) as string[];
  if (m.kustomization.kind !== 'Kustomization') problems.push('kustomization.yaml is missing or not a Kustomization');
  for (const f of m.k8sFiles)
    if (f !== 'kustomization.yaml' && !resources.includes(f)) problems.push(`kustomization.yaml does not list ${f}`);
  for (const r of resources) if (!m.k8sFiles.includes(r)) problems.push(`kustomization.yaml lists ${r}, which is not in infra/k8s`);
  if (new Set(resources).size !== resources.length) problems.push('kustomization.yaml lists a file twice');
  const images = new Set(deployments(m).flatMap((d) => containers(d).map((c) => String(c.image).split(':')[0])));
  for (const img of (m.kustomization.images ?? []) as Obj[])
    if (!images.has(img.name)) problems.push(`kustomization.yaml sets image ${img.name}, which no container uses`);
  return problems;
}

function checkConfigMapConfig(m: Model): string[] {
  const problems: string[] = [];
  if (deployments(m).length === 0) problems.push('no Deployments');
  for (const d of deployments(m)) {
    for (const c of containers(d)) {
      const { env } = resolveEnv(m, ns(d), c);
      const cfg = mountedConfig(m, d, c, env);
      if (cfg.problem) {
        problems.push(`${id(d)}: ${cfg.problem}`);
        continue;
      }
      let parsed: unknown;
      try {
        parsed = parse(cfg.text!);
      } catch (err) {
        problems.push(`${id(d)}: the mounted bosun.yaml does not parse: ${(err as Error).message}`);
        continue;
      }
      if (!isDeepStrictEqual(parsed, m.demoConfig)) problems.push(`${id(d)}: the mounted bosun.yaml differs from infra/demo/bosun.yaml`);
    }
  }
  return problems;
}

function expectedConfigHash(m: Model): string {
  return createHash('sha256').update(m.configmapText).digest('hex').slice(0, 16);
}

function checkConfigHash(m: Model): string[] {
  const want = expectedConfigHash(m);
  return deployments(m)
    .filter((d) => d.spec?.template?.metadata?.annotations?.[HASH_ANNOTATION] !== want)
    .map(
      (d) =>
        `${id(d)}: annotation ${HASH_ANNOTATION} is ${d.spec?.template?.metadata?.annotations?.[HASH_ANNOTATION]}, want ${want} (sha256 of infra/k8s/configmap.yaml)`,
    );
}

function checkK8sEnv(m: Model): string[] {
  const problems: string[] = [];
  for (const d of deployments(m)) {
    for (const c of containers(d)) {
      const { env, problems: refs } = resolveEnv(m, ns(d), c);
      problems.push(...refs.map((p) => `${id(d)}: ${p}`));
      for (const name of REQUIRED_ENV) {
        const v = env.get(name);
        if (!v) problems.push(`${id(d)}: ${name} is not set`);
        else if (v.value === undefined || (v.value === '' && name !== 'GEMINI_API_KEY')) problems.push(`${id(d)}: ${name} has no value`);
      }
      if (env.get('GEMINI_API_KEY') && env.get('GEMINI_API_KEY')!.from !== 'secret')
        problems.push(`${id(d)}: GEMINI_API_KEY must come from a Secret`);
      for (const name of m.codeEnv)
        if (!env.has(name) && !OPTIONAL_ENV.includes(name))
          problems.push(`${id(d)}: the code reads ${name}, which is neither set nor known to have a fitting default`);
      const grace = Number(env.get('BOSUN_GRACE_MS')?.value ?? GRACE_DEFAULT_MS);
      if (!(Number.isInteger(grace) && grace > 0)) problems.push(`${id(d)}: BOSUN_GRACE_MS is not a positive integer`);
      const cfg = mountedConfig(m, d, c, env);
      if (cfg.text)
        for (const v of requiredPlaceholders(parse(cfg.text) as Obj))
          if (!env.has(v)) problems.push(`${id(d)}: the config needs \${${v}}, which is not set`);
    }
  }
  return problems;
}

function checkProbes(m: Model): string[] {
  const problems: string[] = [];
  for (const d of deployments(m)) {
    for (const c of containers(d)) {
      const { env } = resolveEnv(m, ns(d), c);
      const port = Number(env.get('BOSUN_HEALTH_PORT')?.value);
      const portOf = (p: unknown) => (typeof p === 'number' ? p : ((c.ports ?? []) as Obj[]).find((x) => x.name === p)?.containerPort);
      for (const [probe, path] of [
        ['readinessProbe', '/readyz'],
        ['livenessProbe', '/healthz'],
      ] as const) {
        const get = c[probe]?.httpGet;
        if (!get) {
          problems.push(`${id(d)}: ${c.name} has no ${probe} with httpGet`);
          continue;
        }
        if (get.path !== path) problems.push(`${id(d)}: ${probe} path is ${get.path}, want ${path}`);
        if (portOf(get.port) !== port) problems.push(`${id(d)}: ${probe} port ${get.port} is not BOSUN_HEALTH_PORT ${port}`);
      }
    }
  }
  return problems;
}

function checkTerminationGrace(m: Model): string[] {
  const problems: string[] = [];
  for (const d of deployments(m)) {
    const termination = Number(podSpec(d).terminationGracePeriodSeconds ?? 30);
    for (const c of containers(d)) {
      const grace = graceMs(resolveEnv(m, ns(d), c).env.get('BOSUN_GRACE_MS')?.value);
      if (!(termination > grace / 1000))
        problems.push(`${id(d)}: terminationGracePeriodSeconds ${termination} does not exceed BOSUN_GRACE_MS ${grace} ms`);
    }
  }
  return problems;
}

function checkSelectors(m: Model): string[] {
  const problems: string[] = [];
  const selects = (sel: Obj, labels: Obj) => Object.entries(sel).every(([k, v]) => labels[k] === v);
  for (const d of deployments(m)) {
    const sel = (d.spec?.selector?.matchLabels ?? {}) as Obj;
    const labels = (d.spec?.template?.metadata?.labels ?? {}) as Obj;
    if (Object.keys(sel).length === 0) problems.push(`${id(d)}: no selector.matchLabels`);
    if (d.spec?.selector?.matchExpressions) problems.push(`${id(d)}: matchExpressions are not checked here; use matchLabels`);
    if (!selects(sel, labels))
      problems.push(`${id(d)}: selector ${JSON.stringify(sel)} does not match its pod labels ${JSON.stringify(labels)}`);
    for (const other of deployments(m)) {
      if (other === d || ns(other) !== ns(d)) continue;
      if (Object.keys(sel).length > 0 && selects(sel, other.spec?.template?.metadata?.labels ?? {}))
        problems.push(`${id(d)}: selector also matches the pods of ${id(other)}`);
    }
  }
  return problems;
}

function checkResources(m: Model): string[] {
  const problems: string[] = [];
  for (const d of deployments(m)) {
    for (const c of containers(d)) {
      for (const kind of ['requests', 'limits'])
        for (const r of ['cpu', 'memory'])
          if (c.resources?.[kind]?.[r] === undefined) problems.push(`${id(d)}: ${c.name} has no resources.${kind}.${r}`);
    }
  }
  return problems;
}

function checkK8sCommands(m: Model): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const d of deployments(m)) {
    for (const c of containers(d)) {
      const svc = serviceOf(k8sArgv(c));
      if (!svc) problems.push(`${id(d)}: ${c.name} runs no services/<name>/dist/bundle/main.js`);
      else if (!exists(sourceOf(svc))) problems.push(`${id(d)}: runs services/${svc}, which does not exist`);
      else seen.add(svc);
    }
  }
  for (const s of SERVICES) if (!seen.has(s)) problems.push(`no Deployment runs ${s}`);
  return problems;
}

/** The intake: its Service, its Deployment's http port and the config's default port agree; compose publishes that port. */
function checkIntakeService(m: Model): string[] {
  const problems: string[] = [];
  const port = Number(/^\$\{[A-Z_]+:-(\d+)\}$/.exec(String((m.demoConfig as Obj).intake?.port))?.[1] ?? (m.demoConfig as Obj).intake?.port);
  const service = kinds(m, 'Service').find((x) => x.metadata.name === 'intake');
  const d = deployments(m).find((x) => containers(x).some((c) => serviceOf(k8sArgv(c)) === 'intake'));
  if (!service || !d) return ['no Service or no Deployment for the intake'];
  const labels = (d.spec?.template?.metadata?.labels ?? {}) as Obj;
  if (!Object.entries(service.spec.selector as Obj).every(([k, v]) => labels[k] === v))
    problems.push('the intake Service does not select its pods');
  const http = ((containers(d)[0]!.ports ?? []) as Obj[]).find((p) => p.name === service.spec.ports[0].targetPort);
  if (http?.containerPort !== port) problems.push(`the intake Service targets port ${http?.containerPort}, the config listens on ${port}`);
  const published = ((m.compose.services.intake?.ports ?? []) as string[]).map((p) => Number(p.split(':').pop()));
  if (!published.includes(port)) problems.push(`compose does not publish the intake's port ${port}`);
  return problems;
}

/** Specialist Deployments and the specialists of the config each one reads. */
function specialistDeployments(m: Model): { d: Obj; c: Obj; only: string[] | undefined; known: string[] }[] {
  const out = [];
  for (const d of deployments(m)) {
    for (const c of containers(d)) {
      if (serviceOf(k8sArgv(c)) !== 'specialist') continue;
      const { env } = resolveEnv(m, ns(d), c);
      const text = mountedConfig(m, d, c, env).text;
      const known = text ? Object.keys(((parse(text) as Obj).specialists ?? {}) as Obj) : [];
      out.push({ d, c, only: onlyOf(k8sArgv(c)), known });
    }
  }
  return out;
}

function checkSpecialistDeployments(m: Model): string[] {
  const problems: string[] = [];
  const specs = specialistDeployments(m);
  const covered = new Map<string, string[]>();
  for (const { d, only, known } of specs) {
    if (!only || only.length !== 1)
      problems.push(
        `${id(d)}: a specialist Deployment must run exactly one specialist (--only <name>), got ${only ? only.join(',') : 'all'}`,
      );
    for (const n of only ?? []) {
      if (!known.includes(n)) problems.push(`${id(d)}: --only ${n} is not a specialist of its config (known: ${known.join(', ')})`);
      covered.set(n, [...(covered.get(n) ?? []), id(d)]);
    }
  }
  const known = specs[0]?.known ?? Object.keys(((m.demoConfig as Obj).specialists ?? {}) as Obj);
  for (const n of known) {
    const by = covered.get(n) ?? [];
    if (by.length !== 1) problems.push(`specialist ${n} is run by ${by.length} Deployments (${by.join(', ')}), want exactly 1`);
  }
  return problems;
}

function redisTarget(url: string): { hostPort: string; host: string; db: number; tls: boolean; password: boolean } | undefined {
  try {
    const u = new URL(url);
    const port = u.port || '6379';
    return {
      hostPort: `${u.hostname}:${port}`,
      host: u.hostname,
      db: Number(u.pathname.replace(/^\//, '') || 0),
      tls: u.protocol === 'rediss:',
      password: u.password !== '',
    };
  } catch {
    return undefined;
  }
}

function checkScaledObjects(m: Model): string[] {
  const problems: string[] = [];
  const targets = new Map<string, string>();
  const scaledSpecialists = new Set<string>();
  for (const so of kinds(m, 'ScaledObject')) {
    const where = id(so);
    const ref = (so.spec?.scaleTargetRef ?? {}) as Obj;
    if ((ref.kind ?? 'Deployment') !== 'Deployment') problems.push(`${where}: scaleTargetRef.kind ${ref.kind} is not Deployment`);
    const d = findObj(m, 'Deployment', ns(so), ref.name);
    if (!d) {
      problems.push(`${where}: scaleTargetRef.name ${ref.name} is not a Deployment in namespace ${ns(so)}`);
      continue;
    }
    const key = `${ns(so)}/${ref.name}`;
    if (targets.has(key)) problems.push(`${where}: ${ref.name} is already scaled by ${targets.get(key)}`);
    targets.set(key, where);
    if (d.spec?.replicas !== undefined) problems.push(`${where}: ${id(d)} sets spec.replicas, which fights the HPA KEDA creates`);
    if (!(Number(so.spec?.minReplicaCount ?? 0) >= 1))
      problems.push(`${where}: minReplicaCount must be at least 1 (tasks in flight are not in the wait list)`);
    if (!(Number(so.spec?.maxReplicaCount ?? 100) >= Number(so.spec?.minReplicaCount ?? 0)))
      problems.push(`${where}: maxReplicaCount is below minReplicaCount`);
    const c = ref.envSourceContainerName ? containers(d).find((x) => x.name === ref.envSourceContainerName) : containers(d)[0];
    if (!c) {
      problems.push(`${where}: envSourceContainerName ${ref.envSourceContainerName} is not a container of ${id(d)}`);
      continue;
    }
    const spec = specialistDeployments(m).find((s) => s.d === d && s.c === c);
    if (!spec) {
      problems.push(`${where}: ${id(d)} does not run a specialist`);
      continue;
    }
    const { env } = resolveEnv(m, ns(d), c);
    const prefix = env.get('BOSUN_PREFIX')?.value ?? 'bosun';
    const redisUrl = env.get('REDIS_URL')?.value ?? '';
    const cluster = redisUrl.includes(',') || /^(1|true|yes)$/i.test(env.get('REDIS_CLUSTER')?.value ?? '');
    const triggers = (so.spec?.triggers ?? []) as Obj[];
    if (triggers.length === 0) problems.push(`${where}: no triggers`);
    for (const t of triggers) {
      const md = (t.metadata ?? {}) as Obj;
      const wantType = cluster ? 'redis-cluster' : 'redis';
      if (t.type !== wantType) problems.push(`${where}: trigger type ${t.type}, want ${wantType} for REDIS_URL ${redisUrl}`);
      const match = /^(.+):specialist-([a-z][a-z0-9-]*):wait$/.exec(String(md.listName));
      if (!match) {
        problems.push(`${where}: listName ${md.listName} is not <prefix>:specialist-<name>:wait`);
      } else {
        const [, p, name] = match as unknown as [string, string, string];
        if (p !== prefix) problems.push(`${where}: listName ${md.listName} has prefix ${p}, but ${id(d)} runs with BOSUN_PREFIX ${prefix}`);
        if (!spec.known.includes(name))
          problems.push(`${where}: listName ${md.listName} names specialist ${name}, which the config does not have`);
        if (!isDeepStrictEqual(spec.only, [name]))
          problems.push(
            `${where}: listName ${md.listName} is queue specialist-${name}, but ${id(d)} runs --only ${spec.only?.join(',') ?? '(all)'}`,
          );
        scaledSpecialists.add(name);
      }
      if (!/^[1-9]\d*$/.test(String(md.listLength))) problems.push(`${where}: listLength ${md.listLength} is not a positive integer`);
      if (!cluster) {
        const target = redisTarget(redisUrl);
        const address = md.addressFromEnv ? env.get(md.addressFromEnv)?.value : md.address;
        if (!address) problems.push(`${where}: no address (addressFromEnv ${md.addressFromEnv} is not set in container ${c.name})`);
        else if (!target) problems.push(`${where}: REDIS_URL ${redisUrl} does not parse`);
        else {
          if (address !== target.hostPort) problems.push(`${where}: trigger address ${address} is not REDIS_URL's ${target.hostPort}`);
          // KEDA's operator resolves the name from its own namespace.
          if (!target.host.includes('.') && target.host !== 'localhost')
            problems.push(`${where}: Redis host ${target.host} is not fully qualified; KEDA runs in another namespace`);
          if (Number(md.databaseIndex ?? 0) !== target.db)
            problems.push(`${where}: databaseIndex ${md.databaseIndex ?? 0} is not REDIS_URL's database ${target.db}`);
          if ((String(md.enableTLS ?? 'false') === 'true') !== target.tls)
            problems.push(`${where}: enableTLS ${md.enableTLS ?? 'false'} does not match REDIS_URL's scheme`);
          if (target.password && !md.passwordFromEnv && !t.authenticationRef)
            problems.push(`${where}: REDIS_URL has a password but the trigger has no passwordFromEnv or authenticationRef`);
        }
      }
    }
  }
  for (const { known } of specialistDeployments(m).slice(0, 1))
    for (const n of known) if (!scaledSpecialists.has(n)) problems.push(`specialist ${n} has no ScaledObject on its wait list`);
  return problems;
}

function checkSecret(m: Model, variable = 'GEMINI_API_KEY'): string[] {
  const secretNames = new Set<string>();
  for (const d of deployments(m))
    for (const c of containers(d))
      for (const e of (c.env ?? []) as Obj[])
        if (e.name === variable && e.valueFrom?.secretKeyRef) secretNames.add(`${ns(d)}/${e.valueFrom.secretKeyRef.name}`);
  const problems: string[] = [];
  if (secretNames.size === 0) problems.push(`no Deployment takes ${variable} from a Secret`);
  for (const key of secretNames) {
    const [namespace, name] = key.split('/') as [string, string];
    const s = findObj(m, 'Secret', namespace, name);
    const value =
      s?.stringData?.[variable] ??
      (s?.data?.[variable] === undefined ? undefined : Buffer.from(String(s.data[variable]), 'base64').toString());
    if (value === undefined) problems.push(`Secret ${key} has no ${variable}`);
    else if (value !== '') problems.push(`Secret ${key} ships with a non-empty ${variable}; the committed placeholder must stay empty`);
  }
  return problems;
}

/** The console's OpenID Connect client secret: only the console gets it, from a Secret (k8s) or passed through from the shell (compose). */
const OIDC_SECRET_ENV = 'BOSUN_OIDC_CLIENT_SECRET';

function checkOidcSecret(m: Model): string[] {
  const problems: string[] = [];
  for (const d of deployments(m))
    for (const c of containers(d)) {
      const e = ((c.env ?? []) as Obj[]).find((x) => x.name === OIDC_SECRET_ENV);
      const isConsole = serviceOf(k8sArgv(c)) === 'console';
      if (isConsole && !e?.valueFrom?.secretKeyRef) problems.push(`${id(d)}: ${OIDC_SECRET_ENV} must come from a Secret (secretKeyRef)`);
      if (!isConsole && e) problems.push(`${id(d)}: ${OIDC_SECRET_ENV} is the console's alone; this Deployment must not get it`);
    }
  for (const [name, svc] of bosunServices(m)) {
    const value = composeEnv(svc).get(OIDC_SECRET_ENV);
    const isConsole = serviceOf(composeArgv(svc)) === 'console';
    if (isConsole && (value === undefined || !new RegExp(`^\\$\\{${OIDC_SECRET_ENV}(:?-)?\\}$`).test(value)))
      problems.push(`compose ${name}: ${OIDC_SECRET_ENV} must be passed through as \${${OIDC_SECRET_ENV}:-}, never written here`);
    if (!isConsole && value !== undefined) problems.push(`compose ${name}: ${OIDC_SECRET_ENV} is the console's alone`);
  }
  return problems;
}

/** The Secret volume and key a `*_FILE` path of a container resolves to, or a problem. */
function mountedSecretFile(m: Model, d: Obj, c: Obj, path: string): { volume?: Obj; problem?: string } {
  if (!path.startsWith('/')) return { problem: `${path} is not an absolute path` };
  const at = volumeAt(d, c, path);
  if (!at) return { problem: `no volume is mounted at ${posix.dirname(path)} for ${path}` };
  const { name, volume, key } = at;
  if (!volume?.secret) return { problem: `${path} is on volume ${name}, which is not a Secret volume (secrets belong in Secrets)` };
  const item = ((volume.secret.items ?? []) as Obj[]).find((i) => i.path === key);
  if (volume.secret.items && !item) return { problem: `Secret volume ${name} has no item at ${key}` };
  const secret = findObj(m, 'Secret', ns(d), volume.secret.secretName);
  if (!secret) return { problem: `${path}: Secret ${volume.secret.secretName} (volume ${name}) does not exist` };
  const secretKey = item?.key ?? key;
  if (!Object.hasOwn({ ...(secret.data ?? {}), ...(secret.stringData ?? {}) }, secretKey))
    return { problem: `${path}: Secret ${volume.secret.secretName} has no key ${secretKey}` };
  return { volume };
}

/**
 * TLS and credentials: every Deployment gets the connection variables; each `*_FILE` names a
 * key of a mounted Secret that the process can read and others cannot; inline secrets come
 * from a Secret.
 */
function checkConnectionFiles(m: Model): string[] {
  const problems: string[] = [];
  for (const d of deployments(m)) {
    for (const c of containers(d)) {
      const { env } = resolveEnv(m, ns(d), c);
      for (const name of K8S_CONNECTION_ENV) if (!env.has(name)) problems.push(`${id(d)}: ${name} is not set`);
      for (const [name, v] of env) {
        if (INLINE_SECRET_ENV.includes(name) && v.from !== 'secret')
          problems.push(`${id(d)}: ${name} is a secret and must come from a Secret (better: ${name}_FILE)`);
        if (!name.endsWith('_FILE') || !m.codeEnv.includes(name) || !v.value) continue;
        const found = mountedSecretFile(m, d, c, v.value);
        if (found.problem) {
          problems.push(`${id(d)}: ${name}: ${found.problem}`);
          continue;
        }
        const mode = Number(found.volume!.secret.defaultMode ?? 0o644);
        if (mode & 0o004)
          problems.push(`${id(d)}: ${name}: volume ${found.volume!.name} makes the files world-readable (defaultMode ${mode.toString(8)})`);
        const fsGroup = podSpec(d).securityContext?.fsGroup;
        if (fsGroup === undefined || !(mode & 0o040))
          problems.push(
            `${id(d)}: ${name}: the process (uid ${podSpec(d).securityContext?.runAsUser}) cannot read volume ${found.volume!.name}: set fsGroup and a group-readable defaultMode`,
          );
      }
    }
  }
  return problems;
}

/** The Secrets mounted for connections ship with every key empty: no key or password is committed. */
function checkConnectionSecret(m: Model): string[] {
  const problems: string[] = [];
  const names = new Set<string>();
  for (const d of deployments(m))
    for (const v of (podSpec(d).volumes ?? []) as Obj[]) if (v.secret) names.add(`${ns(d)}/${v.secret.secretName}`);
  if (names.size === 0) problems.push('no Deployment mounts a Secret for the connection files');
  for (const key of names) {
    const [namespace, name] = key.split('/') as [string, string];
    const s = findObj(m, 'Secret', namespace, name);
    if (!s) continue;
    const data = {
      ...Object.fromEntries(Object.entries((s.data ?? {}) as Obj).map(([k, v]) => [k, Buffer.from(String(v), 'base64').toString()])),
      ...((s.stringData ?? {}) as Obj),
    };
    for (const [k, v] of Object.entries(data))
      if (v !== '') problems.push(`Secret ${key} ships with a non-empty ${k}; the committed placeholder must stay empty`);
  }
  return problems;
}

function checkK8sMcpPaths(m: Model): string[] {
  const problems: string[] = [];
  for (const d of deployments(m)) {
    for (const c of containers(d)) {
      const { env } = resolveEnv(m, ns(d), c);
      const cfg = mountedConfig(m, d, c, env);
      if (cfg.text)
        problems.push(
          ...mcpPathProblems(parse(cfg.text) as Obj, env.get('BOSUN_CONFIG')!.value!, appRoot(m.dockerfile)).map((p) => `${id(d)}: ${p}`),
        );
    }
  }
  return problems;
}

// ------------------------------------------------------------------------------------ compose checks

const composeServices = (m: Model): Obj => (m.compose.services ?? {}) as Obj;
/** The Bosun services of compose: those running a services/<name>/dist/bundle/main.js. */
const bosunServices = (m: Model): [string, Obj][] =>
  Object.entries(composeServices(m)).filter(([, s]) => serviceOf(composeArgv(s)) !== undefined);

/** The Slack app's secrets (docs/approvals.md#slack): only the intake reads them. */
const SLACK_SECRET_ENV = ['BOSUN_SLACK_BOT_TOKEN', 'BOSUN_SLACK_SIGNING_SECRET'];

/** The intake gets the Slack secrets from bosun-secrets (k8s) and passed through as `${NAME:-}` (compose); no other service gets them. */
function checkSlackSecrets(m: Model): string[] {
  const problems: string[] = [];
  for (const d of deployments(m))
    for (const c of containers(d)) {
      const { env } = resolveEnv(m, ns(d), c);
      for (const v of SLACK_SECRET_ENV) {
        const isIntake = d.metadata?.name === 'intake';
        if (isIntake && env.get(v)?.from !== 'secret') problems.push(`${id(d)}: ${v} must come from a Secret`);
        if (!isIntake && env.has(v)) problems.push(`${id(d)}: ${v} is given to a service that does not read it`);
      }
    }
  for (const [name, svc] of bosunServices(m)) {
    const e = composeEnv(svc);
    for (const v of SLACK_SECRET_ENV) {
      if (name === 'intake' && !new RegExp(`^\\$\\{${v}:-\\}$`).test(e.get(v) ?? ''))
        problems.push(`compose ${name}: ${v} must be passed through as \${${v}:-}, never written here`);
      if (name !== 'intake' && e.has(v)) problems.push(`compose ${name}: ${v} is given to a service that does not read it`);
    }
  }
  return problems;
}

function composeEnv(s: Obj): Map<string, string | undefined> {
  const env = new Map<string, string | undefined>();
  const e = s.environment;
  if (Array.isArray(e)) {
    for (const item of e) {
      const [k, ...rest] = String(item).split('=');
      env.set(k!, rest.length ? rest.join('=') : undefined);
    }
  } else for (const [k, v] of Object.entries((e ?? {}) as Obj)) env.set(k, v === null || v === undefined ? undefined : String(v));
  return env;
}

function checkComposeInfra(m: Model): string[] {
  const problems: string[] = [];
  const { redis, nats } = composeServices(m);
  if (!redis) problems.push('no redis service');
  else {
    if (!/^redis:7(\b|[.-])/.test(String(redis.image))) problems.push(`redis image ${redis.image} is not redis:7`);
    const argv = composeArgv(redis);
    if (argv[argv.indexOf('--appendonly') + 1] !== 'yes' || !argv.includes('--appendonly'))
      problems.push('redis runs without --appendonly yes');
  }
  if (!nats) problems.push('no nats service');
  else {
    if (!/^nats:2\.10(\b|[.-])/.test(String(nats.image))) problems.push(`nats image ${nats.image} is not nats:2.10`);
    const argv = composeArgv(nats);
    if (!argv.includes('-js') && !argv.includes('--jetstream')) problems.push('nats runs without -js');
    const storeDir = argv[argv.indexOf('-sd') + 1] ?? argv[argv.indexOf('--store_dir') + 1];
    const targets = ((nats.volumes ?? []) as unknown[]).map((v) => (typeof v === 'string' ? v.split(':')[1] : (v as Obj).target));
    if (!argv.includes('-sd') && !argv.includes('--store_dir')) problems.push('nats has no JetStream store dir (-sd)');
    else if (!targets.includes(storeDir)) problems.push(`nats stores JetStream in ${storeDir}, which is not a volume`);
  }
  return problems;
}

function checkComposeBuild(m: Model): string[] {
  const problems: string[] = [];
  const services = bosunServices(m);
  const seen = new Set(services.map(([, s]) => serviceOf(composeArgv(s))));
  for (const s of SERVICES) if (!seen.has(s)) problems.push(`no compose service runs ${s}`);
  for (const [name, s] of Object.entries(composeServices(m)).filter(([, s]) => s.build !== undefined || serviceOf(composeArgv(s)))) {
    const build = typeof s.build === 'string' ? { context: s.build } : (s.build as Obj | undefined);
    if (!build) {
      problems.push(`${name}: not built from a Dockerfile`);
      continue;
    }
    const context = join(INFRA_DIR, String(build.context ?? '.'));
    const dockerfile = join(context, String(build.dockerfile ?? 'Dockerfile'));
    if (!existsSync(context)) problems.push(`${name}: build context ${build.context} does not exist`);
    if (!existsSync(dockerfile)) problems.push(`${name}: Dockerfile ${dockerfile} does not exist`);
    const svc = serviceOf(composeArgv(s));
    if (svc && !exists(sourceOf(svc))) problems.push(`${name}: runs services/${svc}, which does not exist`);
  }
  return problems;
}

/** The secrets of approvals by named people (issue 23): each variable and the service that reads it. */
const IDENTITY_SECRETS = [
  ['BOSUN_OIDC_CLIENT_SECRET', 'console'],
  ['BOSUN_SLACK_SIGNING_SECRET', 'intake'],
  ['BOSUN_SLACK_BOT_TOKEN', 'intake'],
] as const;

/** Each identity secret reaches its compose service as `${VAR:-}` (from the shell or .env), never a value. */
function checkComposeIdentitySecrets(m: Model): string[] {
  const services = composeServices(m);
  const problems: string[] = [];
  for (const [v, service] of IDENTITY_SECRETS) {
    const s = services[service] as Obj | undefined;
    const value = s ? composeEnv(s).get(v) : undefined;
    if (value === undefined) problems.push(`${service}: ${v} is not passed through`);
    else if (!new RegExp(`^\\$\\{${v}(:?-)?\\}$`).test(value))
      problems.push(`${service}: ${v} must be passed through as \${${v}:-}, never written here`);
  }
  return problems;
}

function checkComposeEnv(m: Model): string[] {
  const problems: string[] = [];
  const serviceNames = new Set(Object.keys(composeServices(m)));
  for (const [name, s] of bosunServices(m)) {
    const env = composeEnv(s);
    for (const v of REQUIRED_ENV) {
      if (!env.has(v)) problems.push(`${name}: ${v} is not set`);
      else if (v !== 'GEMINI_API_KEY' && !interpolate(env.get(v)))
        problems.push(`${name}: ${v} has no value (or an interpolation without default)`);
    }
    const key = env.get('GEMINI_API_KEY');
    if (key !== undefined && !/^\$\{GEMINI_API_KEY(:?-)?\}$/.test(key))
      problems.push(`${name}: GEMINI_API_KEY must be passed through as \${GEMINI_API_KEY:-}, never written here`);
    for (const v of m.codeEnv)
      if (!env.has(v) && !OPTIONAL_ENV.includes(v))
        problems.push(`${name}: the code reads ${v}, which is neither set nor known to have a fitting default`);
    for (const [v, scheme] of [
      ['REDIS_URL', 'redis:'],
      ['NATS_URL', 'nats:'],
    ] as const) {
      const url = interpolate(env.get(v));
      try {
        const u = new URL(url ?? '');
        if (u.protocol !== scheme) problems.push(`${name}: ${v} ${url} is not a ${scheme}// URL`);
        if (!serviceNames.has(u.hostname)) problems.push(`${name}: ${v} points at ${u.hostname}, which is not a compose service`);
      } catch {
        problems.push(`${name}: ${v} ${url} is not a URL`);
      }
    }
    const grace = Number(interpolate(env.get('BOSUN_GRACE_MS')) ?? GRACE_DEFAULT_MS);
    if (!(Number.isInteger(grace) && grace > 0)) problems.push(`${name}: BOSUN_GRACE_MS is not a positive integer`);
  }
  return problems;
}

function checkComposeConfig(m: Model): string[] {
  const problems: string[] = [];
  for (const [name, s] of bosunServices(m)) {
    const path = interpolate(composeEnv(s).get('BOSUN_CONFIG'));
    if (!path) {
      problems.push(`${name}: BOSUN_CONFIG is not set`);
      continue;
    }
    const mount = ((s.volumes ?? []) as unknown[])
      .map((v) =>
        typeof v === 'string'
          ? { source: v.split(':')[0]!, target: v.split(':')[1]! }
          : { source: String((v as Obj).source), target: String((v as Obj).target) },
      )
      .find((v) => v.target === path);
    let text: string | undefined;
    if (mount) {
      const source = join(INFRA_DIR, mount.source);
      if (!existsSync(source)) problems.push(`${name}: the config mounted at ${path} comes from ${mount.source}, which does not exist`);
      else text = readFileSync(source, 'utf8');
    } else {
      // The image's copy: under the Dockerfile's WORKDIR, the repository layout.
      const app = appRoot(m.dockerfile);
      const rel = app && path.startsWith(`${app}/`) ? path.slice(app.length + 1) : undefined;
      if (!rel || !exists(rel)) problems.push(`${name}: BOSUN_CONFIG ${path} is neither mounted nor a file of the image`);
      else text = readFileSync(join(ROOT, rel), 'utf8');
    }
    if (text === undefined) continue;
    const config = parse(text) as Obj;
    problems.push(...mcpPathProblems(config, path, appRoot(m.dockerfile)).map((p) => `${name}: ${p}`));
    const env = composeEnv(s);
    for (const v of requiredPlaceholders(config)) if (!env.has(v)) problems.push(`${name}: the config needs \${${v}}, which is not set`);
  }
  return problems;
}

function checkComposeHealth(m: Model): string[] {
  const problems: string[] = [];
  for (const [name, s] of bosunServices(m)) {
    const port = interpolate(composeEnv(s).get('BOSUN_HEALTH_PORT'));
    const hc = s.healthcheck as Obj | undefined;
    if (!hc || hc.disable) {
      problems.push(`${name}: no healthcheck`);
      continue;
    }
    const test = Array.isArray(hc.test) ? hc.test.join(' ') : String(hc.test);
    const urls = [...test.matchAll(/:(\d+)(\/(?:readyz|healthz))\b/g)];
    if (urls.length === 0) problems.push(`${name}: healthcheck does not call /readyz or /healthz on a port`);
    for (const u of urls) if (u[1] !== port) problems.push(`${name}: healthcheck uses port ${u[1]}, but BOSUN_HEALTH_PORT is ${port}`);
  }
  return problems;
}

function checkComposeStopGrace(m: Model): string[] {
  const problems: string[] = [];
  for (const [name, s] of bosunServices(m)) {
    const stop = s.stop_grace_period === undefined ? 10 : durationSeconds(s.stop_grace_period);
    const grace = graceMs(interpolate(composeEnv(s).get('BOSUN_GRACE_MS')));
    if (!(stop > grace / 1000))
      problems.push(`${name}: stop_grace_period ${s.stop_grace_period ?? '10s (default)'} does not exceed BOSUN_GRACE_MS ${grace} ms`);
  }
  return problems;
}

function checkComposeReplicas(m: Model): string[] {
  const specialists = bosunServices(m).filter(([, s]) => serviceOf(composeArgv(s)) === 'specialist');
  if (specialists.length === 0) return ['no specialist service'];
  const total = specialists.reduce((n, [, s]) => n + Number(s.deploy?.replicas ?? 1), 0);
  return total >= 2 ? [] : [`${total} specialist process(es); want at least 2 to show that they share the queues`];
}

function checkComposeDependsOn(m: Model): string[] {
  const problems: string[] = [];
  const services = composeServices(m);
  for (const [name, s] of Object.entries(services)) {
    const deps: [string, string][] = Array.isArray(s.depends_on)
      ? (s.depends_on as string[]).map((d) => [d, 'service_started'])
      : Object.entries((s.depends_on ?? {}) as Obj).map(([d, v]) => [d, String((v as Obj | null)?.condition ?? 'service_started')]);
    for (const [dep, condition] of deps) {
      const target = services[dep] as Obj | undefined;
      if (!target) problems.push(`${name}: depends on ${dep}, which is not a service`);
      else if (condition === 'service_healthy' && (!target.healthcheck || target.healthcheck.disable))
        problems.push(`${name}: waits for ${dep} to be healthy, but ${dep} has no healthcheck`);
      else if (!['service_started', 'service_healthy', 'service_completed_successfully'].includes(condition))
        problems.push(`${name}: unknown depends_on condition ${condition}`);
    }
    if (serviceOf(composeArgv(s)) && deps.length === 0) problems.push(`${name}: depends on nothing; it needs Redis`);
  }
  return problems;
}

/**
 * TLS and credentials in compose: the commented example parses, names every connection variable,
 * and each `*_FILE` is a `/run/secrets/<name>` of a secret the services get and the file
 * defines; inline secrets are only ever passed through from the shell.
 */
function checkComposeConnections(m: Model): string[] {
  const problems: string[] = [];
  const { text, parsed } = m.composeExample;
  if (!parsed) return ['compose.yaml: the example "tls-and-credentials" is missing or does not parse'];
  for (const v of CONNECTION_ENV)
    if (!new RegExp(`\\b${v}\\b`).test(text)) problems.push(`compose.yaml: the example does not mention ${v}`);
  const svc = (parsed['x-bosun'] ?? {}) as Obj;
  const env = composeEnv(svc);
  const given = new Set(((svc.secrets ?? []) as unknown[]).map((x) => (typeof x === 'string' ? x : String((x as Obj).source))));
  const defined = (parsed.secrets ?? {}) as Obj;
  for (const [name, value] of env) {
    if (!name.endsWith('_FILE')) continue;
    const match = /^\/run\/secrets\/([^/]+)$/.exec(value ?? '');
    if (!match) problems.push(`compose.yaml example: ${name} ${value} is not /run/secrets/<name>`);
    else if (!given.has(match[1]!)) problems.push(`compose.yaml example: ${name} names secret ${match[1]}, which the services do not get`);
    else if (!defined[match[1]!]?.file) problems.push(`compose.yaml example: secret ${match[1]} is not defined with a file`);
  }
  if (!/^rediss:\/\//.test(env.get('REDIS_URL') ?? '')) problems.push('compose.yaml example: REDIS_URL is not rediss://');
  if (!/^tls:\/\//.test(env.get('NATS_URL') ?? '')) problems.push('compose.yaml example: NATS_URL is not tls://');
  for (const [name, s] of bosunServices(m)) {
    const e = composeEnv(s);
    for (const v of INLINE_SECRET_ENV)
      if (e.has(v) && !new RegExp(`^\\$\\{${v}(:?-)?\\}$`).test(e.get(v) ?? ''))
        problems.push(`${name}: ${v} must be passed through as \${${v}:-}, never written here`);
  }
  return problems;
}

// ------------------------------------------------------------------------------------ Dockerfile checks

interface Instruction {
  op: string;
  rest: string;
}

/** Dockerfile instructions, with continuation lines joined and comments dropped. */
function instructions(text: string): Instruction[] {
  const joined = text
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), rest: rest.join(' ') };
    });
}

function checkDockerfile(m: Model): string[] {
  const problems: string[] = [];
  const ins = instructions(m.dockerfile);
  const froms = ins.map((x, i) => ({ ...x, i })).filter((x) => x.op === 'FROM');
  if (froms.length < 2) problems.push(`${froms.length} stage(s); want a multi-stage build`);
  for (const f of froms)
    if (!/^(--platform=\S+\s+)?node:24(\b|[.-])/.test(f.rest))
      problems.push(`stage "FROM ${f.rest}" is not Node 24 (the LTS the e2e and chaos suites also run on)`);
  const lastFrom = froms.at(-1)?.i ?? 0;
  const build = ins.slice(0, lastFrom);
  const runs = build.filter((x) => x.op === 'RUN').map((x) => x.rest);
  const at = (re: RegExp) => runs.findIndex((r) => re.test(r));
  const ci = at(/\bnpm ci\b/);
  // `npm run build`: tsc -b and the bundles every command runs (scripts/bundle.mjs).
  const tsc = at(/\bnpm run build\b/);
  const prune = at(/\bnpm prune\b.*--omit=dev\b/);
  if (ci < 0) problems.push('the build stage does not run npm ci');
  if (tsc < 0) problems.push('the build stage does not run npm run build (tsc -b, then the bundles)');
  if (prune < 0) problems.push('the build stage does not run npm prune --omit=dev');
  if (ci >= 0 && tsc >= 0 && prune >= 0 && !(ci < tsc && tsc < prune))
    problems.push('want npm ci, then npm run build, then npm prune --omit=dev');
  const copies = build.filter((x) => x.op === 'COPY').map((x) => x.rest.split(/\s+/).filter((t) => !t.startsWith('--')));
  const copied = (src: string, dest?: (d: string) => boolean) =>
    copies.some((c) => c.slice(0, -1).includes(src) && (!dest || dest(c.at(-1)!)));
  for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.base.json', 'scripts'])
    if (!copied(f)) problems.push(`the build stage does not copy ${f}`);
  for (const ws of m.workspaces) {
    if (!copied(`${ws}/package.json`)) problems.push(`the build stage does not copy ${ws}/package.json`);
    if (!copied(`${ws}/tsconfig.json`)) problems.push(`the build stage does not copy ${ws}/tsconfig.json`);
    if (!copied(`${ws}/src`, (d) => d.replace(/\/$/, '') === `${ws}/src`))
      problems.push(`the build stage does not copy ${ws}/src to ${ws}/src`);
  }
  const firstStage = /\bAS\s+(\S+)/i.exec(froms[0]?.rest ?? '')?.[1];
  const final = ins.slice(lastFrom);
  if (!final.some((x) => x.op === 'COPY' && firstStage && new RegExp(`--from=${firstStage}\\b`).test(x.rest)))
    problems.push(`the final stage does not copy from the build stage ${firstStage}`);
  if (!final.some((x) => x.op === 'CMD' || x.op === 'ENTRYPOINT')) problems.push('the final stage has no CMD');
  return problems;
}

// ------------------------------------------------------------------------------------ the tests

const model = load();

describe('infra/k8s', () => {
  it('every YAML file parses, without warnings', () => {
    const problems = model.k8sFiles
      .filter((f) => /\.ya?ml$/.test(f))
      .flatMap((f) => yamlProblems(f, readFileSync(join(K8S_DIR, f), 'utf8')));
    expect(problems).toEqual([]);
    expect(model.k8s.length).toBeGreaterThan(0);
  });
  it('every object is named and lives in the namespace namespace.yaml creates', () => expect(checkK8sObjects(model)).toEqual([]));
  it('kustomization.yaml lists every file of the folder, and only those', () => expect(checkKustomization(model)).toEqual([]));
  it('the config mounted at BOSUN_CONFIG equals infra/demo/bosun.yaml as parsed', () => expect(checkConfigMapConfig(model)).toEqual([]));
  it(`pod templates carry the current ${HASH_ANNOTATION} of configmap.yaml`, () => expect(checkConfigHash(model)).toEqual([]));
  it('every env var is set, and every ConfigMap/Secret reference resolves', () => expect(checkK8sEnv(model)).toEqual([]));
  it('probes: readiness on /readyz, liveness on /healthz, both at BOSUN_HEALTH_PORT', () => expect(checkProbes(model)).toEqual([]));
  it('terminationGracePeriodSeconds exceeds BOSUN_GRACE_MS', () => expect(checkTerminationGrace(model)).toEqual([]));
  it("each Deployment's selector matches its pod labels and no other Deployment's", () => expect(checkSelectors(model)).toEqual([]));
  it('every container has resource requests and limits', () => expect(checkResources(model)).toEqual([]));
  it('the Deployments run the three services, from entry points that exist', () => expect(checkK8sCommands(model)).toEqual([]));
  it('one Deployment per specialist of the config, each with --only <name>', () => expect(checkSpecialistDeployments(model)).toEqual([]));
  it('one ScaledObject per specialist, on its Deployment and its BullMQ wait list', () => expect(checkScaledObjects(model)).toEqual([]));
  it('the Secret ships with an empty GEMINI_API_KEY', () => expect(checkSecret(model)).toEqual([]));
  it('the Secret ships with an empty OPENAI_API_KEY', () => expect(checkSecret(model, 'OPENAI_API_KEY')).toEqual([]));
  it('the Secret ships with an empty ANTHROPIC_API_KEY', () => expect(checkSecret(model, 'ANTHROPIC_API_KEY')).toEqual([]));
  it('the Secret ships with an empty BOSUN_OIDC_CLIENT_SECRET', () => expect(checkSecret(model, OIDC_SECRET_ENV)).toEqual([]));
  it('the OIDC client secret goes to the console alone, from a Secret (compose: from the shell)', () =>
    expect(checkOidcSecret(model)).toEqual([]));
  it('the Secret ships with an empty Slack bot token and signing secret, which the intake takes from it (issue 23)', () => {
    for (const v of SLACK_SECRET_ENV) expect(checkSecret(model, v)).toEqual([]);
    expect(checkSlackSecrets(model)).toEqual([]);
  });
  it.each(IDENTITY_SECRETS.map(([v]) => v))('the Secret ships with an empty %s, which a Deployment takes from it (issue 23)', (v) =>
    expect(checkSecret(model, v)).toEqual([]),
  );
  it('TLS and credentials: every *_FILE names a key of a mounted Secret only the process can read', () =>
    expect(checkConnectionFiles(model)).toEqual([]));
  it('the Secret for the connection files ships with every key empty', () => expect(checkConnectionSecret(model)).toEqual([]));
  it("the config's relative MCP server paths resolve inside the image", () => expect(checkK8sMcpPaths(model)).toEqual([]));
});

describe('the intake (issue 14)', () => {
  it('a Service selects the intake pods and reaches the port the config listens on; compose publishes it', () => {
    expect(checkIntakeService(model)).toEqual([]);
  });
});

describe('infra/compose.yaml', () => {
  it('parses, without warnings', () =>
    expect(yamlProblems('compose.yaml', readFileSync(join(INFRA_DIR, 'compose.yaml'), 'utf8'))).toEqual([]));
  it('redis:7 with appendonly, nats:2.10 with JetStream on a volume', () => expect(checkComposeInfra(model)).toEqual([]));
  it('the Bosun services build from a Dockerfile that exists and run entry points that exist', () =>
    expect(checkComposeBuild(model)).toEqual([]));
  it('env wiring is complete', () => expect(checkComposeEnv(model)).toEqual([]));
  it('the OIDC and Slack secrets are passed through from the shell, never written (issue 23)', () =>
    expect(checkComposeIdentitySecrets(model)).toEqual([]));
  it('the config is mounted at BOSUN_CONFIG and its MCP server paths resolve', () => expect(checkComposeConfig(model)).toEqual([]));
  it('healthchecks call the health endpoints at BOSUN_HEALTH_PORT', () => expect(checkComposeHealth(model)).toEqual([]));
  it('stop_grace_period exceeds BOSUN_GRACE_MS', () => expect(checkComposeStopGrace(model)).toEqual([]));
  it('at least two specialist processes', () => expect(checkComposeReplicas(model)).toEqual([]));
  it('depends_on names existing services, with healthchecks where it waits for health', () =>
    expect(checkComposeDependsOn(model)).toEqual([]));
  it('shows how to pass TLS and credentials: the example names every variable, its paths its secrets', () =>
    expect(checkComposeConnections(model)).toEqual([]));
});

describe('infra/Dockerfile', () => {
  it('multi-stage: npm ci, npm run build, npm prune --omit=dev; every workspace copied', () => expect(checkDockerfile(model)).toEqual([]));
});

/** The paths the manifests probe, by service folder: k8s readiness and liveness probes, compose healthchecks. */
function probedPaths(m: Model): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const add = (svc: string | undefined, path: unknown) => {
    if (svc === undefined || typeof path !== 'string') return;
    if (!out.has(svc)) out.set(svc, new Set());
    out.get(svc)!.add(path);
  };
  for (const d of deployments(m))
    for (const c of containers(d))
      for (const probe of ['readinessProbe', 'livenessProbe']) add(serviceOf(k8sArgv(c)), c[probe]?.httpGet?.path);
  for (const [, svc] of bosunServices(m)) {
    const hc = svc.healthcheck as Obj | undefined;
    const test = Array.isArray(hc?.test) ? hc.test.join(' ') : String(hc?.test ?? '');
    for (const u of test.matchAll(/:\d+(\/[a-z]+)\b/g)) add(serviceOf(composeArgv(svc)), u[1]);
  }
  return out;
}

describe('the checks read what the code reads', () => {
  it('the required env vars are read by the services', () => {
    const notRead = REQUIRED_ENV.filter((v) => !model.codeEnv.includes(v));
    expect(notRead).toEqual([]);
    // The optional ones too: a variable no service reads would be wired for nothing.
    expect(OPTIONAL_ENV.filter((v) => !model.codeEnv.includes(v))).toEqual([]);
  });
});

describe('the services serve what the manifests probe', () => {
  const KIND = {
    coordinator: 'coordinator',
    specialist: 'specialist',
    'tool-gateway': 'gateway',
    intake: 'intake',
    a2a: 'a2a',
    console: 'console',
    serve: 'serve',
  } as const;
  /** The name a service gives itself (health answers, log lines): `bosun serve` calls itself `bosun-serve`. */
  const named = (svc: string) => (svc === 'serve' ? 'bosun-serve' : svc);
  const GRACE_MS = 12_345;
  let ctx: TestContext;
  let config: string;
  const probed = probedPaths(model);

  beforeAll(async () => {
    ctx = await openContext('manifests');
    config = writeConfig(ctx, demoConfig());
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('the manifests probe /healthz and /readyz of every service', () => {
    for (const svc of SERVICES) expect([...(probed.get(svc) ?? [])].sort(), svc).toEqual(['/healthz', '/readyz']);
  });

  it.each(SERVICES)(
    '%s answers the probed paths at BOSUN_HEALTH_PORT once ready, and stops within BOSUN_GRACE_MS',
    async (svc) => {
      const port = await freePort();
      const p = startService(
        KIND[svc as keyof typeof KIND],
        {
          ...ctx.env,
          BOSUN_CONFIG: config,
          BOSUN_HEALTH_PORT: String(port),
          BOSUN_GRACE_MS: String(GRACE_MS),
          LOG_LEVEL: 'info',
          // The intake's own port (the demo config's default 8090 may be taken on a test machine).
          BOSUN_INTAKE_PORT: '0',
          BOSUN_CONSOLE_TOKEN: 'manifests-console-token',
        },
        svc === 'a2a' || svc === 'console' ? { args: ['--port', '0'] } : {},
      );
      try {
        await p.ready();
        for (const path of probed.get(svc) ?? []) {
          const res = await fetch(`http://127.0.0.1:${port}${path}`);
          expect(res.status, path).toBe(200);
          expect(await res.json()).toEqual({ service: named(svc), state: 'ready' });
        }
        expect((await fetch(`http://127.0.0.1:${port}/nosuch`)).status).toBe(404);
      } finally {
        expect(await p.stop()).toEqual({ code: 0, signal: null });
      }
      // The grace period it was given is the one it applies.
      const stopping = p.lines.map((l) => JSON.parse(l) as Obj).find((l) => l.msg === `${named(svc)} stopping`);
      expect(stopping).toMatchObject({ signal: 'SIGTERM', graceMs: GRACE_MS });
    },
    60_000,
  );
});

// ------------------------------------------------------------------------------------ every check can fail

type Mutation = [name: string, mutate: (m: Model) => void, check: (m: Model) => string[]];

const dep = (m: Model, name: string) => deployments(m).find((d) => d.metadata.name === name)!;
const container = (m: Model, name: string) => containers(dep(m, name))[0]!;
const envEntry = (m: Model, depName: string, v: string) => (container(m, depName).env as Obj[]).find((e) => e.name === v)!;
const cm = (m: Model, name: string) => kinds(m, 'ConfigMap').find((c) => c.metadata.name === name)!;
const scaled = (m: Model) => kinds(m, 'ScaledObject')[0]!;
const trigger = (m: Model) => scaled(m).spec.triggers[0].metadata as Obj;
const svc = (m: Model, name: string) => m.compose.services[name] as Obj;
const specialistDep = (m: Model) => specialistDeployments(m)[0]!.d.metadata.name as string;

const mutations: Mutation[] = [
  ['an object outside the namespace', (m) => void (dep(m, 'coordinator').metadata.namespace = 'elsewhere'), checkK8sObjects],
  ['a file missing from the kustomization', (m) => m.k8sFiles.push('pdb.yaml'), checkKustomization],
  ['a kustomization resource that does not exist', (m) => m.kustomization.resources.push('nope.yaml'), checkKustomization],
  [
    'the embedded config drifts from the demo config',
    (m) => void (cm(m, 'bosun-config').data['bosun.yaml'] += '\nworkers: { maxStalledCount: 5 }\n'),
    checkConfigMapConfig,
  ],
  [
    'BOSUN_CONFIG points where nothing is mounted',
    (m) => void (envEntry(m, 'gateway', 'BOSUN_CONFIG').value = '/etc/bosun/bosun.yaml'),
    checkConfigMapConfig,
  ],
  [
    'the config volume names a missing ConfigMap',
    (m) => void (podSpec(dep(m, 'coordinator')).volumes.find((v: Obj) => v.configMap).configMap.name = 'nope'),
    checkConfigMapConfig,
  ],
  ['configmap.yaml changes without a new hash', (m) => void (m.configmapText += '\n# edited\n'), checkConfigHash],
  [
    'an env var missing',
    (m) => void (container(m, 'coordinator').env = (container(m, 'coordinator').env as Obj[]).filter((e) => e.name !== 'NATS_URL')),
    checkK8sEnv,
  ],
  [
    'BOSUN_HEALTH_PORT missing',
    (m) => void (container(m, 'gateway').env = (container(m, 'gateway').env as Obj[]).filter((e) => e.name !== 'BOSUN_HEALTH_PORT')),
    checkK8sEnv,
  ],
  [
    'an env var pointing at a missing ConfigMap key',
    (m) => void (envEntry(m, 'coordinator', 'REDIS_URL').valueFrom.configMapKeyRef.key = 'REDIS'),
    checkK8sEnv,
  ],
  [
    'an env var pointing at a missing ConfigMap',
    (m) => void (envEntry(m, 'coordinator', 'BOSUN_PREFIX').valueFrom.configMapKeyRef.name = 'nope'),
    checkK8sEnv,
  ],
  [
    'an env var pointing at a missing Secret',
    (m) => void (envEntry(m, 'coordinator', 'GEMINI_API_KEY').valueFrom.secretKeyRef.name = 'nope'),
    checkK8sEnv,
  ],
  [
    'the Gemini key written as a plain value',
    (m) => void Object.assign(envEntry(m, 'coordinator', 'GEMINI_API_KEY'), { value: 'x', valueFrom: undefined }),
    checkK8sEnv,
  ],
  ['the code reads a new variable', (m) => m.codeEnv.push('BOSUN_SOMETHING_NEW'), checkK8sEnv],
  [
    'the config needs an unset ${VAR}',
    (m) =>
      void (cm(m, 'bosun-config').data['bosun.yaml'] = cm(m, 'bosun-config').data['bosun.yaml'].replace(
        '${DEMO_MCP_SLOW_MS:-0}',
        '${DEMO_TOKEN}',
      )),
    checkK8sEnv,
  ],
  ['readiness on /healthz', (m) => void (container(m, 'coordinator').readinessProbe.httpGet.path = '/healthz'), checkProbes],
  [
    'liveness on /readyz (would kill draining pods)',
    (m) => void (container(m, 'gateway').livenessProbe.httpGet.path = '/readyz'),
    checkProbes,
  ],
  ['a probe on another port', (m) => void (container(m, 'coordinator').livenessProbe.httpGet.port = 9090), checkProbes],
  ['BOSUN_HEALTH_PORT not the probed port', (m) => void (envEntry(m, 'gateway', 'BOSUN_HEALTH_PORT').value = '9000'), checkProbes],
  ['no liveness probe', (m) => void delete container(m, 'coordinator').livenessProbe, checkProbes],
  [
    'termination grace equal to the drain time',
    (m) => void (podSpec(dep(m, 'coordinator')).terminationGracePeriodSeconds = 30),
    checkTerminationGrace,
  ],
  [
    'a drain longer than the termination grace',
    (m) => void (envEntry(m, 'gateway', 'BOSUN_GRACE_MS').value = '60000'),
    checkTerminationGrace,
  ],
  [
    'a selector that misses its pods',
    (m) => void (dep(m, 'coordinator').spec.selector.matchLabels['app.kubernetes.io/component'] = 'other'),
    checkSelectors,
  ],
  [
    'a selector that also takes another Deployment’s pods',
    (m) => void delete dep(m, specialistDep(m)).spec.selector.matchLabels['bosun.dev/specialist'],
    checkSelectors,
  ],
  ['no memory limit', (m) => void delete container(m, 'gateway').resources.limits.memory, checkResources],
  ['no cpu request', (m) => void delete container(m, 'coordinator').resources.requests.cpu, checkResources],
  [
    'a service entry point that does not exist',
    (m) => void (container(m, 'coordinator').args = ['node', 'services/coordinater/dist/bundle/main.js']),
    checkK8sCommands,
  ],
  ['no Deployment for the gateway', (m) => void (m.k8s = m.k8s.filter((d) => d.obj !== dep(m, 'gateway'))), checkK8sCommands],
  [
    'a specialist Deployment without --only',
    (m) => void (container(m, specialistDep(m)).args = ['node', 'services/specialist/dist/bundle/main.js']),
    checkSpecialistDeployments,
  ],
  [
    '--only an unknown specialist',
    (m) => void (container(m, specialistDep(m)).args = ['node', 'services/specialist/dist/bundle/main.js', '--only', 'storage']),
    checkSpecialistDeployments,
  ],
  [
    'a specialist of the config with no Deployment',
    (m) => void (m.k8s = m.k8s.filter((d) => d.obj !== dep(m, specialistDep(m)))),
    checkSpecialistDeployments,
  ],
  [
    'a ScaledObject targeting a missing Deployment',
    (m) => void (scaled(m).spec.scaleTargetRef.name = 'specialist-nope'),
    checkScaledObjects,
  ],
  [
    'a ScaledObject on the wrong queue for its Deployment',
    (m) =>
      void (trigger(m).listName = trigger(m).listName.replace(/specialist-[a-z-]+:wait$/, (s: string) =>
        s.includes('database') ? 'specialist-kubernetes:wait' : 'specialist-database:wait',
      )),
    checkScaledObjects,
  ],
  [
    'a list name for a specialist that does not exist',
    (m) => void (trigger(m).listName = 'bosun:specialist-storage:wait'),
    checkScaledObjects,
  ],
  ['a list name with another prefix', (m) => void (cm(m, 'bosun-env').data.BOSUN_PREFIX = 'prod'), checkScaledObjects],
  [
    'a list name that is not the wait list',
    (m) => void (trigger(m).listName = trigger(m).listName.replace(/:wait$/, ':active')),
    checkScaledObjects,
  ],
  ['a listLength that is not a positive integer', (m) => void (trigger(m).listLength = '0'), checkScaledObjects],
  [
    'a KEDA address that is not REDIS_URL’s',
    (m) => void (cm(m, 'bosun-env').data.REDIS_ADDRESS = 'other.bosun.svc.cluster.local:6379'),
    checkScaledObjects,
  ],
  [
    'a Redis host KEDA cannot resolve from its namespace',
    (m) => Object.assign(cm(m, 'bosun-env').data, { REDIS_URL: 'redis://redis:6379', REDIS_ADDRESS: 'redis:6379' }),
    checkScaledObjects,
  ],
  ['a Redis database KEDA does not look at', (m) => void (cm(m, 'bosun-env').data.REDIS_URL += '/2'), checkScaledObjects],
  ['scale to zero', (m) => void (scaled(m).spec.minReplicaCount = 0), checkScaledObjects],
  ['a specialist without a ScaledObject', (m) => void (m.k8s = m.k8s.filter((d) => d.obj !== scaled(m))), checkScaledObjects],
  ['spec.replicas on a scaled Deployment', (m) => void (dep(m, specialistDep(m)).spec.replicas = 2), checkScaledObjects],
  [
    'a Gemini key committed in the Secret',
    (m) => void (kinds(m, 'Secret')[0]!.stringData.GEMINI_API_KEY = 'AIza-not-a-real-key'),
    checkSecret,
  ],
  ['the Secret without the key', (m) => void delete kinds(m, 'Secret')[0]!.stringData.GEMINI_API_KEY, checkSecret],
  [
    'an OIDC client secret committed in the Secret',
    (m) => void (kinds(m, 'Secret')[0]!.stringData.BOSUN_OIDC_CLIENT_SECRET = 'not-a-real-secret'),
    (m) => checkSecret(m, OIDC_SECRET_ENV),
  ],
  [
    'the OIDC client secret written as a value in the console Deployment',
    (m) => void Object.assign(envEntry(m, 'console', OIDC_SECRET_ENV), { value: 'inline', valueFrom: undefined }),
    checkOidcSecret,
  ],
  [
    'the OIDC client secret given to the gateway too',
    (m) => void (container(m, 'gateway').env as Obj[]).push({ ...envEntry(m, 'console', OIDC_SECRET_ENV) }),
    checkOidcSecret,
  ],
  [
    'the OIDC client secret written into compose.yaml',
    (m) => void ((composeServices(m).console as Obj).environment[OIDC_SECRET_ENV] = 'inline'),
    checkOidcSecret,
  ],
  [
    'a Slack secret written into compose.yaml',
    (m) => void ((composeServices(m).intake as Obj).environment.BOSUN_SLACK_BOT_TOKEN = 'xoxb-real'),
    checkComposeIdentitySecrets,
  ],
  [
    'the config mounted one folder too shallow for its MCP paths',
    (m) => {
      envEntry(m, 'gateway', 'BOSUN_CONFIG').value = '/app/cluster/bosun.yaml';
      containers(dep(m, 'gateway'))[0]!.volumeMounts.find((v: Obj) => v.name === 'config').mountPath = '/app/cluster';
    },
    checkK8sMcpPaths,
  ],
  ['compose: nats without JetStream', (m) => void (svc(m, 'nats').command = ['nats-server', '-sd', '/data']), checkComposeInfra],
  ['compose: redis without appendonly', (m) => void (svc(m, 'redis').command = ['redis-server']), checkComposeInfra],
  ['compose: another redis major', (m) => void (svc(m, 'redis').image = 'redis:6'), checkComposeInfra],
  [
    'compose: a Dockerfile that does not exist',
    (m) => void (svc(m, 'gateway').build = { context: '..', dockerfile: 'infra/Dockerfile.nope' }),
    checkComposeBuild,
  ],
  ['compose: a service without a build', (m) => void delete svc(m, 'coordinator').build, checkComposeBuild],
  [
    'compose: a missing env var',
    (m) => void (svc(m, 'specialist').environment = { ...svc(m, 'specialist').environment, BOSUN_HEALTH_PORT: undefined }),
    checkComposeEnv,
  ],
  [
    'compose: REDIS_URL at a host that is not a service',
    (m) => void (svc(m, 'coordinator').environment = { ...svc(m, 'coordinator').environment, REDIS_URL: 'redis://cache:6379' }),
    checkComposeEnv,
  ],
  [
    'compose: a Gemini key written in the file',
    (m) => void (svc(m, 'gateway').environment = { ...svc(m, 'gateway').environment, GEMINI_API_KEY: 'AIza-not-a-real-key' }),
    checkComposeEnv,
  ],
  [
    'compose: the config mounted from a missing file',
    (m) => void (svc(m, 'gateway').volumes = ['./demo/nope.yaml:/app/infra/cluster/bosun.yaml:ro']),
    checkComposeConfig,
  ],
  [
    'compose: BOSUN_CONFIG not where the config is mounted',
    (m) => void (svc(m, 'gateway').environment = { ...svc(m, 'gateway').environment, BOSUN_CONFIG: '/app/elsewhere/bosun.yaml' }),
    checkComposeConfig,
  ],
  [
    'compose: a healthcheck on another port',
    (m) =>
      void (svc(m, 'coordinator').healthcheck = {
        ...svc(m, 'coordinator').healthcheck,
        test: ['CMD', 'node', '-e', "fetch('http://127.0.0.1:9999/readyz')"],
      }),
    checkComposeHealth,
  ],
  ['compose: no healthcheck', (m) => void delete svc(m, 'gateway').healthcheck, checkComposeHealth],
  [
    'compose: stop_grace_period equal to the drain time',
    (m) => void (svc(m, 'specialist').stop_grace_period = '30s'),
    checkComposeStopGrace,
  ],
  ['compose: default stop_grace_period (10 s)', (m) => void delete svc(m, 'gateway').stop_grace_period, checkComposeStopGrace],
  ['compose: one specialist', (m) => void (svc(m, 'specialist').deploy = { replicas: 1 }), checkComposeReplicas],
  [
    'compose: depends_on a service that does not exist',
    (m) => void (svc(m, 'coordinator').depends_on = { ...svc(m, 'coordinator').depends_on, postgres: { condition: 'service_started' } }),
    checkComposeDependsOn,
  ],
  ['compose: waiting for health of a service without a healthcheck', (m) => void delete svc(m, 'redis').healthcheck, checkComposeDependsOn],
  [
    'a connection *_FILE where no Secret is mounted',
    (m) => void (cm(m, 'bosun-connections').data.REDIS_TLS_CA_FILE = '/etc/other/ca.crt'),
    checkConnectionFiles,
  ],
  [
    'a connection *_FILE naming a key the Secret lacks',
    (m) => void delete kinds(m, 'Secret').find((x) => x.metadata.name === 'bosun-connections')!.stringData['nats.creds'],
    checkConnectionFiles,
  ],
  [
    'the connection files mounted from a ConfigMap',
    (m) =>
      Object.assign(
        podSpec(dep(m, 'gateway')).volumes.find((v: Obj) => v.name === 'connections'),
        { secret: undefined, configMap: { name: 'bosun-connections' } },
      ),
    checkConnectionFiles,
  ],
  [
    'world-readable connection files',
    (m) => void (podSpec(dep(m, 'coordinator')).volumes.find((v: Obj) => v.name === 'connections').secret.defaultMode = 0o644),
    checkConnectionFiles,
  ],
  [
    'connection files the process cannot read (no fsGroup)',
    (m) => void delete podSpec(dep(m, 'coordinator')).securityContext.fsGroup,
    checkConnectionFiles,
  ],
  ['a Deployment without the connection variables', (m) => void delete container(m, 'gateway').envFrom, checkConnectionFiles],
  [
    'a NATS password as a plain value',
    (m) => void (container(m, 'coordinator').env as Obj[]).push({ name: 'NATS_PASSWORD', value: 'not-a-secret-place' }),
    checkConnectionFiles,
  ],
  [
    'a password committed in the connections Secret',
    (m) => void (kinds(m, 'Secret').find((x) => x.metadata.name === 'bosun-connections')!.stringData['redis-password'] = 'hunter2'),
    checkConnectionSecret,
  ],
  [
    'compose: the example without a connection variable',
    (m) => void (m.composeExample.text = m.composeExample.text.replace(/NATS_NKEY_SEED_FILE/g, '')),
    checkComposeConnections,
  ],
  [
    'compose: the example points a *_FILE at a secret the services do not get',
    (m) =>
      void (m.composeExample.parsed!['x-bosun'].secrets = m.composeExample.parsed!['x-bosun'].secrets.filter(
        (x: string) => x !== 'nats-password',
      )),
    checkComposeConnections,
  ],
  [
    'compose: the example uses a path outside /run/secrets',
    (m) => void (m.composeExample.parsed!['x-bosun'].environment.REDIS_TLS_CA_FILE = '/etc/ssl/ca.crt'),
    checkComposeConnections,
  ],
  [
    'compose: a NATS token written in the file',
    (m) => void (svc(m, 'gateway').environment = { ...svc(m, 'gateway').environment, NATS_TOKEN: 'tok-literal' }),
    checkComposeConnections,
  ],
  ['Dockerfile: no npm ci', (m) => void (m.dockerfile = m.dockerfile.replace(/RUN npm ci\b/, 'RUN npm install')), checkDockerfile],
  [
    'Dockerfile: tsc -b without the bundles',
    (m) => void (m.dockerfile = m.dockerfile.replace(/RUN npm run build\b/, 'RUN npx tsc -b')),
    checkDockerfile,
  ],
  [
    'Dockerfile: no scripts/ for the bundler',
    (m) => void (m.dockerfile = m.dockerfile.replace(/^COPY scripts scripts$/m, '')),
    checkDockerfile,
  ],
  ['Dockerfile: no prune', (m) => void (m.dockerfile = m.dockerfile.replace(/RUN npm prune --omit=dev/, 'RUN true')), checkDockerfile],
  [
    'Dockerfile: Node 20 (end of life)',
    (m) => void (m.dockerfile = m.dockerfile.replace(/FROM node:24/g, 'FROM node:20')),
    checkDockerfile,
  ],
  ['Dockerfile: a new workspace not copied', (m) => m.workspaces.push('services/janitor'), checkDockerfile],
  ['Dockerfile: single stage', (m) => void (m.dockerfile = m.dockerfile.replace(/\nFROM [^\n]*AS runtime[^\n]*\n/, '\n')), checkDockerfile],
  ['the intake Service on another port', (m) => void (containers(dep(m, 'intake'))[0]!.ports[1].containerPort = 9999), checkIntakeService],
  ['compose does not publish the intake', (m) => void (svc(m, 'intake').ports = []), checkIntakeService],
];

describe('every check can fail', () => {
  it('covers every check', () => {
    const checks = new Set(mutations.map(([, , c]) => c));
    for (const c of [
      checkK8sObjects,
      checkKustomization,
      checkConfigMapConfig,
      checkConfigHash,
      checkK8sEnv,
      checkProbes,
      checkTerminationGrace,
      checkSelectors,
      checkResources,
      checkK8sCommands,
      checkSpecialistDeployments,
      checkScaledObjects,
      checkSecret,
      checkOidcSecret,
      checkConnectionFiles,
      checkConnectionSecret,
      checkK8sMcpPaths,
      checkComposeInfra,
      checkComposeBuild,
      checkComposeEnv,
      checkComposeIdentitySecrets,
      checkComposeConfig,
      checkComposeHealth,
      checkComposeStopGrace,
      checkComposeReplicas,
      checkComposeDependsOn,
      checkComposeConnections,
      checkDockerfile,
    ]) {
      expect(checks.has(c), c.name).toBe(true);
    }
  });
  it('a YAML syntax error is reported', () => expect(yamlProblems('broken.yaml', 'a: [1, 2\nb: c')).not.toEqual([]));
  it.each(mutations)('%s', (_name, mutate, check) => {
    const m = structuredClone(model);
    expect(check(m), 'passes before the mutation').toEqual([]);
    mutate(m);
    expect(check(m)).not.toEqual([]);
  });
});
