// Child-process driver of property.test.mjs: calls the public API of the package with
// generated hostile values and judges every call, in a process of its own so that an
// abort or a blocked event loop is seen by the parent instead of taking the suite down.
//
// Configuration comes as JSON in NW_FUZZ: { mode: 'api' | 'lifecycle', seed, numRuns,
// budgetMs, top, canary, canaryContent, canaryMtimeMs, progress, report, isolation, known,
// replay, docker }. With `docker` ({ socketPath, image, label }) the scenarios' sandbox is a
// DockerSandbox on that engine, its containers labelled `label`. Before each call the
// driver appends a line to `progress` (the parent names the call in progress when the
// process dies or stalls); at the end it writes `{ runs, violations, counterexample }` to
// `report`.
//
// Generated values are plain-data recipes (`{ k: 'num', v: '1e20' }`, `{ k: 'reenter',
// op: 'destroy', wait: true }`), turned into values at call time, so that a violation can
// be printed as the call and the recipes of its arguments.
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import fc from 'fast-check'
import { allPids, cmdline, isKeptWarm, isZygote, procStat } from './proc.mjs'

const require = createRequire(import.meta.url)
const lib = require('../lib/index.js')
const LIB_DIR = path.dirname(require.resolve('../lib/index.js'))

const cfg = JSON.parse(process.env.NW_FUZZ)
/** Every call must settle within this (the slowest command the driver runs takes 3 s). */
const CALL_MS = 10_000
/** A process or descriptor released by destroy() may need a moment to be gone. */
const SETTLE_MS = 3000
const KEEPER = 'native-workspace-keeper'

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------
// Recording

const violations = []
let current = 'startup'

function progress(entry) {
  fs.appendFileSync(cfg.progress, `${JSON.stringify({ t: Date.now(), ...entry })}\n`)
}

function violation(kind, call, detail, scenario) {
  violations.push({ kind, call, detail, ...(scenario && { scenario }) })
}

// A host must survive whatever the package does with user code: an unhandled rejection or
// an uncaught exception is recorded against the call in progress (Node would exit on it).
// It arrives after the fact: the call in progress then is a hint, not the culprit.
process.on('unhandledRejection', (reason) => violation('unhandled-rejection', describeError(reason).message, { during: current }))
process.on('uncaughtException', (err) => violation('uncaught-exception', describeError(err).message, { during: current }))

// ---------------------------------------------------------------------------------------
// Errors: what a rejection may be

/** Errors made by the generated hostile values themselves; passing them on is fine. */
class HostileError extends Error {
  constructor(where) {
    super(`hostile value: ${where}`)
    this.code = 'HOSTILE'
  }
}

/**
 * The TypeError/RangeError messages the package throws on purpose (the Mastra contract for
 * a command that is not a string, a retention that is not a count, …), read from its
 * sources so the list follows the code.
 */
const CONTRACT_MESSAGES = (() => {
  const patterns = []
  for (const file of fs.readdirSync(LIB_DIR).filter((f) => f.endsWith('.js'))) {
    const source = fs.readFileSync(path.join(LIB_DIR, file), 'utf8')
    for (const m of source.matchAll(/new (?:TypeError|RangeError)\((['`])((?:(?!\1).)*)\1/g)) {
      const parts = m[2].split(/\$\{[^}]*\}/).map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      patterns.push(new RegExp(`^${parts.join('.*')}$`, 's'))
    }
    for (const m of source.matchAll(/const (\w+_MESSAGE) =\s*'([^']*)'/g)) {
      patterns.push(new RegExp(`^${m[2].replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`))
    }
  }
  return patterns
})()

/** napi's own conversion messages: they name a Rust type, not the option or argument. */
const RAW_NAPI = /Failed to convert|into rust type|napi_|Failed to get|InvalidArg|Rust panic|panicked/i

/** Why `err` is not an acceptable rejection, or undefined if it is. */
function badError(err) {
  if (err instanceof HostileError || err?.cause instanceof HostileError) return undefined
  if (!(err instanceof Error)) return `not an Error: ${safeString(err)}`
  if (typeof err.code === 'string') {
    return RAW_NAPI.test(err.message) ? `untranslated native message (code ${err.code})` : undefined
  }
  if ((err instanceof TypeError || err instanceof RangeError) && CONTRACT_MESSAGES.some((re) => re.test(err.message))) {
    return undefined
  }
  return `${err.constructor?.name ?? 'Error'} without a code`
}

function safeString(value) {
  try {
    if (typeof value === 'symbol' || typeof value === 'bigint') return value.toString()
    if (typeof value === 'string') return value.length > 200 ? `${value.slice(0, 200)}…` : value
    return String(value)
  } catch {
    return `<${typeof value}>`
  }
}

function describeError(err) {
  let name
  let code
  let message
  try {
    name = err?.constructor?.name
    code = err?.code
    message = err?.message
  } catch {
    // a hostile error object
  }
  return { name, code: typeof code === 'string' ? code : undefined, message: safeString(message ?? err) }
}

// ---------------------------------------------------------------------------------------
// Reflection over the exports

const isClass = (fn) => typeof fn === 'function' && /^class[\s{]/.test(Function.prototype.toString.call(fn))

/** The parameter names of a function or of a class's constructor (`{…}` for a pattern). */
function parameterNames(fn) {
  let source = Function.prototype.toString.call(fn)
  if (isClass(fn)) {
    const at = source.search(/\bconstructor\s*\(/)
    if (at < 0) return []
    source = source.slice(at)
  }
  const open = source.indexOf('(')
  if (open < 0) return []
  let depth = 0
  let end = open
  for (; end < source.length; end++) {
    const ch = source[end]
    if ('([{'.includes(ch)) depth++
    else if (')]}'.includes(ch) && --depth === 0) break
  }
  const params = []
  let part = ''
  depth = 0
  for (const ch of source.slice(open + 1, end)) {
    if ('([{'.includes(ch)) depth++
    if (')]}'.includes(ch)) depth--
    if (ch === ',' && depth === 0) {
      params.push(part)
      part = ''
    } else part += ch
  }
  if (part.trim()) params.push(part)
  return params.map((p) => {
    const t = p.trim().replace(/^\.\.\./, '')
    return /^[{[]/.test(t) ? '{…}' : (t.match(/^[\w$]+/)?.[0] ?? '{…}')
  })
}

/** Methods (value functions) and getters of a prototype chain, up to Object.prototype. */
function membersOf(proto) {
  const methods = new Map()
  const getters = new Set()
  for (let p = proto; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (name === 'constructor' || methods.has(name) || getters.has(name)) continue
      const d = Object.getOwnPropertyDescriptor(p, name)
      if (typeof d.value === 'function') methods.set(name, parameterNames(d.value))
      else if (d.get) getters.add(name)
    }
  }
  return { methods, getters: [...getters] }
}

const exportedClasses = Object.keys(lib).filter((k) => isClass(lib[k]))
const exportedFunctions = Object.keys(lib).filter((k) => typeof lib[k] === 'function' && !isClass(lib[k]))
const ERROR_CLASSES = exportedClasses.filter((k) => lib[k].prototype instanceof Error)
const statics = exportedClasses.flatMap((k) =>
  Object.getOwnPropertyNames(lib[k])
    .filter((s) => !['length', 'name', 'prototype'].includes(s) && typeof lib[k][s] === 'function')
    .map((s) => `${k}.${s}`),
)
/** The tools a model can call in a workspace with a sandbox and a filesystem. */
const TOOL_NAMES = await (async () => {
  const probe = path.join(cfg.top, 'tools-probe')
  const workspace = new lib.Workspace({ sandbox: new lib.LocalSandbox({ workingDirectory: probe }), filesystem: new lib.LocalFilesystem({ basePath: probe }) })
  return Object.values(await lib.createWorkspaceTools(workspace)).map((tool) => tool.id)
})()

/** Instances the driver keeps per scenario, by the class they are instances of. */
const INSTANCE_TARGETS = {
  sandbox: lib.LocalSandbox,
  processes: lib.LocalProcessManager,
  handle: lib.ProcessHandle,
  filesystem: lib.LocalFilesystem,
  workspace: lib.Workspace,
  mastra: lib.MastraSandbox,
  mounts: lib.MountManager,
}
const TARGETS = {
  ...Object.fromEntries(Object.entries(INSTANCE_TARGETS).map(([t, cls]) => [t, membersOf(cls.prototype)])),
  export: { methods: new Map(exportedFunctions.map((k) => [k, parameterNames(lib[k])])), getters: [] },
  new: { methods: new Map(exportedClasses.map((k) => [k, parameterNames(lib[k])])), getters: [] },
  static: { methods: new Map(statics.map((s) => [s, []])), getters: [] },
  tool: { methods: new Map(TOOL_NAMES.map((t) => [t, ['input', 'context']])), getters: [] },
}

// ---------------------------------------------------------------------------------------
// Recipes of hostile values

/** Commands that end by themselves within 3 s and touch nothing but their own directory. */
const COMMANDS = [
  'echo hi',
  'true',
  'exit 3',
  'printf "%s|" "$@"',
  'cat',
  'sleep 0.2',
  'sleep 3',
  'yes | head -c 3000000',
  'head -c 200000 /dev/urandom',
  "printf '\\377\\376\\0\\342\\202'",
  'kill -9 $$',
  'sleep 2 & echo started',
  'exec 1>&-; echo gone >&2',
  'timeout 3 cat',
  'ls -la',
  'for i in 1 2 3; do echo $i; done >&2',
  '',
  '   ',
  'echo \0nul',
]
/** Patterns whose backtracking is exponential on `redos.txt`. */
const PATTERNS = ['(a+)+$', '(a|aa)+$', '(a*)*b', '(.*a){25}', '([a-z]+)*!x', 'a', '[', '\\', '(?<n>a)\\k<n>', '.*']
const RELATIVE_PATHS = ['a.txt', 'dir', 'dir/b.txt', 'redos.txt', 'many.txt', 'new.txt', 'dir/new', '.', '', './a.txt', 'copy']
/** Paths that leave the workspace; all of them end inside the test's own directory. */
const ESCAPES = ['..', '../..', '../canary/c.txt', '../../canary/c.txt', 'dir/../../canary', 'link-out/c.txt', 'link-out']
const STRINGS = [
  '', ' ', '..', 'a\0b', '\uD800', '\uDFFFx', '~', 'none', 'bwrap', 'seatbelt', 'pipe', 'ignore',
  'debug', 'trace', 'NaN', '-1', '1e20', '%s%n', '$(id)', '`id`', "'", '"', '\\', '\n', 'é', '🙂',
]
const NUMBERS = [
  'NaN', 'Infinity', '-Infinity', '1e20', '1e24', '1e300', '-0', '0', '-1', '0.5', '1', '3',
  '4096', '4294967296', '9007199254740993', '-1e20', '2147483648',
]
const REENTRANT_OPS = [
  'destroy', 'start', 'stop', 'ensureRunning', 'executeCommand', 'spawn', 'kill', 'wsDestroy',
  'wsInit', 'resolve', 'msStart', 'msStop', 'msDestroy', 'readFile',
]

/** Option keys the package reads, from its sources, plus the keys of the tools' schemas. */
const OPTION_KEYS = (() => {
  const keys = new Set([
    'limits', 'memoryBytes', 'processes', 'openFiles', 'fileSizeBytes', 'cpuSeconds',
    'tmpSizeBytes', 'outputBytes', 'diskBytes', 'diskInodes', 'requestContext', 'writer',
    'abortSignal',
  ])
  for (const file of fs.readdirSync(LIB_DIR).filter((f) => f.endsWith('.js'))) {
    const source = fs.readFileSync(path.join(LIB_DIR, file), 'utf8')
    for (const m of source.matchAll(/\b(?:options|config|c|input|own|background|context|limits)\??\.(\w+)/g)) keys.add(m[1])
  }
  return [...keys].filter((k) => !['length', 'call', 'apply', 'bind'].includes(k)).sort()
})()

/** The keys most calls read; drawn more often so that generated options reach deep. */
const HOT_KEYS = [
  'timeout', 'cwd', 'env', 'onStdout', 'onStderr', 'abortSignal', 'maxRetainedBytes', 'stdinMode',
  'recursive', 'overwrite', 'force', 'encoding', 'maxDepth', 'extension', 'isolation',
  'nativeSandbox', 'limits', 'command', 'requestContext', 'level', 'memoryBytes', 'processes',
  'tmpSizeBytes', 'bwrapArgs', 'readOnlyPaths', 'onStart', 'onStop', 'onDestroy',
  'workingDirectory',
]
const optionKey = fc.oneof({ weight: 2, arbitrary: fc.constantFrom(...HOT_KEYS) }, { weight: 1, arbitrary: fc.constantFrom(...OPTION_KEYS) })

const num = fc.oneof(
  fc.constantFrom(...NUMBERS).map((v) => ({ k: 'num', v })),
  fc.double().map((v) => ({ k: 'num', v: Object.is(v, -0) ? '-0' : String(v) })),
  fc.integer({ min: -5, max: 100000 }).map((v) => ({ k: 'num', v: String(v) })),
)
const str = fc.oneof(
  fc.constantFrom(...STRINGS).map((v) => ({ k: 'str', v })),
  // No '/' and no '.': a random string is one path segment and never climbs out.
  fc.string({ unit: 'binary', maxLength: 12 }).map((v) => ({ k: 'str', v: v.replace(/[/.]/g, '_') })),
  fc.constantFrom(100_000, 5000).map((n) => ({ k: 'long', n })),
)
const pathRecipe = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...RELATIVE_PATHS).map((v) => ({ k: 'str', v })) },
  { weight: 2, arbitrary: fc.constantFrom(...ESCAPES).map((v) => ({ k: 'str', v })) },
  { weight: 1, arbitrary: fc.constantFrom({ k: 'canary' }, { k: 'canaryDir' }, { k: 'deepPath' }, { k: 'str', v: 'a\0b' }, { k: 'long', n: 5000 }) },
)
/** Callbacks whose result is used at once (setEnv's update, a cache key): no async ones. */
const syncFnRecipe = fc.oneof(
  fc.constantFrom({ k: 'fnThrows' }, { k: 'fnOk' }),
  fc.record({ k: fc.constant('reenter'), op: fc.constantFrom(...REENTRANT_OPS), wait: fc.constant(false) }),
)
const fnRecipe = fc.oneof(
  fc.constantFrom({ k: 'fnThrows' }, { k: 'fnRejects' }, { k: 'fnOk' }),
  fc.record({ k: fc.constant('reenter'), op: fc.constantFrom(...REENTRANT_OPS), wait: fc.boolean() }),
)
const special = fc.constantFrom(
  { k: 'undefined' },
  { k: 'null' },
  { k: 'true' },
  { k: 'false' },
  { k: 'bigint' },
  { k: 'symbol' },
  { k: 'proxy' },
  { k: 'revoked' },
  { k: 'getters' },
  { k: 'prims' },
  { k: 'thenThrows' },
  { k: 'abort', aborted: true },
  { k: 'abort', aborted: false },
  { k: 'bytes' },
  { k: 'deep' },
  { k: 'class' },
  { k: 'sandbox' },
  { k: 'filesystem' },
  { k: 'workspace' },
  { k: 'pid' },
  { k: 'console' },
)
const leaf = fc.oneof(special, num, str, fnRecipe, pathRecipe, fc.constantFrom(...COMMANDS).map((v) => ({ k: 'str', v })))

/** The plausible recipe for an option key or a parameter name (hostile values mixed in). */
function byName(name, value) {
  const plausible = {
    command: fc.constantFrom(...COMMANDS).map((v) => ({ k: 'str', v })),
    args: fc.array(str, { maxLength: 4 }).map((items) => ({ k: 'arr', items })),
    timeout: num,
    maxRetainedBytes: num,
    tail: num,
    offset: num,
    limit: num,
    maxDepth: num,
    maxOutputTokens: num,
    cwd: pathRecipe,
    path: pathRecipe,
    filePath: pathRecipe,
    dirPath: pathRecipe,
    src: pathRecipe,
    dest: pathRecipe,
    mountPath: fc.constantFrom('/m', 'm', '/', '/..', '/a/../../x', '').map((v) => ({ k: 'str', v })),
    pattern: fc.constantFrom(...PATTERNS).map((v) => ({ k: 'str', v })),
    old_string: fc.constantFrom('a', 'aa', '', '\n', 'x').map((v) => ({ k: 'str', v })),
    new_string: fc.constantFrom('b', 'aaaa', '', '\0').map((v) => ({ k: 'str', v })),
    content: fc.oneof(str, fc.constant({ k: 'bytes' })),
    data: fc.oneof(str, fc.constant({ k: 'bytes' })),
    onStart: fnRecipe,
    onStop: fnRecipe,
    onDestroy: fnRecipe,
    onStdout: fnRecipe,
    onStderr: fnRecipe,
    onExit: fnRecipe,
    update: syncFnRecipe,
    sandbox: fc.oneof(fc.constant({ k: 'sandbox' }), fnRecipe),
    filesystem: fc.oneof(fc.constant({ k: 'filesystem' }), fnRecipe),
    sandboxCacheKey: fc.oneof(fc.constant({ k: 'fnKey' }), syncFnRecipe),
    abortSignal: fc.constantFrom({ k: 'abort', aborted: true }, { k: 'abort', aborted: false }),
    pid: fc.oneof(fc.constant({ k: 'pid' }), fc.constant({ k: 'pidString' }), num),
    logger: fc.constantFrom({ k: 'getters' }, { k: 'proxy' }, { k: 'console' }, { k: 'prims' }, { k: 'null' }),
    workspace: fc.constant({ k: 'workspace' }),
    provider: fc.constantFrom({ k: 'sandbox' }, { k: 'mastra' }, { k: 'proxy' }),
    method: fc.constantFrom('start', 'stop', 'destroy', 'init', 'bogus').map((v) => ({ k: 'str', v })),
    backend: fc.constantFrom('bwrap', 'seatbelt', 'none', '').map((v) => ({ k: 'str', v })),
    isolation: fc.constantFrom({ k: 'str', v: 'none' }, { k: 'str', v: 'BWRAP' }, { k: 'bigint' }, { k: 'num', v: '10' }),
    workingDirectory: fc.constantFrom({ k: 'str', v: 'rel-wd' }, { k: 'str', v: '' }, { k: 'canaryDir' }, { k: 'str', v: 'a\0b' }),
    basePath: fc.constantFrom({ k: 'str', v: 'rel-base' }, { k: 'str', v: '' }, { k: 'str', v: '~' }, { k: 'str', v: 'a\0b' }),
    bwrapArgs: fc
      .array(fc.constantFrom('--cap-add', 'ALL', '--uid', '0', '--ro-bind', '/proc', '/hostproc', '--share-net', '--dev-bind', '/', '/host', '--'), { maxLength: 4 })
      .map((items) => ({ k: 'arr', items: items.map((v) => ({ k: 'str', v })) })),
    encoding: fc.constantFrom('utf8', 'base64', 'hex', 'latin1', 'bogus', '').map((v) => ({ k: 'str', v })),
    level: fc.constantFrom('trace', 'debug', 'warn', 'bogus').map((v) => ({ k: 'str', v })),
    stdinMode: fc.constantFrom('pipe', 'ignore', 'inherit').map((v) => ({ k: 'str', v })),
    recursive: fc.constantFrom({ k: 'true' }, { k: 'false' }),
    overwrite: fc.constantFrom({ k: 'true' }, { k: 'false' }),
    force: fc.constantFrom({ k: 'true' }, { k: 'false' }),
    replace_all: fc.constantFrom({ k: 'true' }, { k: 'false' }),
    nativeSandbox: fc.constant(undefined).chain(() => objectRecipe),
    limits: fc.constant(undefined).chain(() => objectRecipe),
    memoryBytes: num,
    processes: num,
    tmpSizeBytes: num,
  }[name]
  // Where a callback's result is used at once, an async one would reject unobserved by design.
  const hostile = name === 'update' || name === 'sandboxCacheKey' ? fc.oneof(special, num, str) : value
  return plausible ? fc.oneof({ weight: 3, arbitrary: plausible }, { weight: 1, arbitrary: hostile }) : value
}

const { value } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 6, arbitrary: leaf },
    { weight: 1, arbitrary: fc.array(tie('value'), { maxLength: 3 }).map((items) => ({ k: 'arr', items })) },
    { weight: 2, arbitrary: tie('object') },
  ),
  object: fc
    .uniqueArray(optionKey, { maxLength: 4 })
    .chain((keys) => fc.tuple(...keys.map((key) => byName(key, tie('value')))).map((vals) => ({ k: 'obj', entries: keys.map((key, i) => [key, vals[i]]) }))),
}))
const objectRecipe = fc
  .uniqueArray(optionKey, { maxLength: 5 })
  .chain((keys) => fc.tuple(...keys.map((key) => byName(key, value))).map((vals) => ({ k: 'obj', entries: keys.map((key, i) => [key, vals[i]]) })))

/** Arguments for a function, one plausible-or-hostile recipe per parameter (and sometimes one more). */
function argsFor(params) {
  const each = params.map((p) => (p === '{…}' || /options|config|context|input/i.test(p) ? fc.oneof({ weight: 3, arbitrary: objectRecipe }, { weight: 1, arbitrary: value }) : byName(p, value)))
  return fc.tuple(...each, fc.option(value, { nil: undefined, freq: 4 })).map((args) => {
    const [extra] = args.splice(params.length, 1)
    return extra === undefined ? args : [...args, extra]
  })
}

/** Input of a tool: its schema's keys, each plausible or hostile. */
function toolInput(name) {
  const keys = {
    execute_command: ['command', 'timeout', 'cwd', 'tail', 'background'],
    get_process_output: ['pid', 'tail', 'wait'],
    kill_process: ['pid'],
    read_file: ['path', 'offset', 'limit', 'encoding', 'showLineNumbers'],
    write_file: ['path', 'content', 'overwrite'],
    edit_file: ['path', 'old_string', 'new_string', 'replace_all'],
    list_files: ['path', 'maxDepth', 'exclude', 'pattern', 'showHidden', 'dirsOnly', 'respectGitignore'],
    delete: ['path', 'recursive'],
    file_stat: ['path'],
    mkdir: ['path', 'recursive'],
    grep: ['pattern', 'path', 'contextLines', 'maxCount', 'caseSensitive', 'includeHidden'],
  }[name.replace(/^.*_(?=(execute_command|get_process_output|kill_process|read_file|write_file|edit_file|list_files|delete|file_stat|mkdir|grep)$)/, '')] ?? []
  return fc
    .subarray(keys)
    .chain((present) =>
      fc.tuple(...present.map((key) => byName(key, fc.oneof(fc.boolean().map((b) => ({ k: String(b) })), leaf))))
        .map((vals) => ({ k: 'obj', entries: present.map((key, i) => [key, vals[i]]) })),
    )
}

/** How often each target is called: where a model's and an application's calls land. */
const TARGET_WEIGHTS = { sandbox: 5, tool: 5, filesystem: 3, processes: 2, handle: 2, workspace: 2, export: 2, new: 2, mastra: 1, mounts: 1, static: 1 }
const apiStep = fc.oneof(
  ...Object.entries(TARGETS).map(([target, { methods, getters }]) => ({
    weight: TARGET_WEIGHTS[target],
    arbitrary: fc.oneof(
      ...[...methods].map(([member, params]) =>
        (target === 'tool' ? fc.tuple(toolInput(member), fc.oneof(objectRecipe, value)) : argsFor(params)).map((args) => ({ target, member, args })),
      ),
      ...getters.map((member) => fc.constant({ target, member, get: true })),
    ),
  })),
)

/** Arguments that would undo the hardening of an isolated sandbox if bubblewrap applied them. */
const HARDENING_UNDOERS = [['--cap-add', 'ALL'], ['--uid', '0'], ['--ro-bind', '/proc', '/hostproc'], ['--share-net'], ['--dev-bind', '/', '/host']]
// Every part of a scenario but its calls is optional, so that shrinking drops what a
// violation does not need and the counterexample shows only what it does.
const scenarioBase = {
  isolation: cfg.isolation ? fc.oneof({ weight: 6, arbitrary: fc.constant('none') }, { weight: 1, arbitrary: fc.constant('bwrap') }) : fc.constant('none'),
  hooks: fc.record({ onStart: fnRecipe, onStop: fnRecipe, onDestroy: fnRecipe }, { requiredKeys: [] }),
  sandboxOptions: objectRecipe,
  mastraSteps: fc.record({ start: fnRecipe, stop: fnRecipe, destroy: fnRecipe }, { requiredKeys: [] }),
  resolver: fnRecipe,
  /** Left without destroy(): what it holds must go when it is collected. */
  drop: fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  bwrapArgs: fc.subarray(HARDENING_UNDOERS, { minLength: 1 }).map((groups) => groups.flat()),
}
const checkRecipe = fc.oneof(
  fc.array(fc.oneof(str, fc.constant({ k: 'bytes' })), { minLength: 2, maxLength: 8 }).map((parts) => ({ check: 'stdinOrder', parts })),
  fc.constant({ check: 'copyIntoItself' }),
  fc.constant({ check: 'deepTree' }),
)
const apiScenario = fc.record(
  { ...scenarioBase, check: checkRecipe, steps: fc.array(apiStep, { minLength: 1, maxLength: 6 }) },
  { requiredKeys: ['steps'] },
)

const LIFECYCLE_OPS = [
  'start', 'stop', 'destroy', 'executeCommand', 'spawn', 'kill', 'ensureRunning', 'handleKill',
  'wait', 'msStart', 'msStop', 'msDestroy', 'resolve', 'wsDestroy',
]
/** When a stop racing commands is called after they are issued (see `stopRacingCommands`). */
const STOP_WHEN = {
  'at once': async () => {},
  'after a microtask': async () => {
    await null
  },
  'after a macrotask': () => new Promise((resolve) => setImmediate(resolve)),
  // A spawn settles once its command has started, an executeCommand of `sleep` only when stopped.
  'once the first spawn has settled': (calls) => calls[0].catch(() => {}),
}
/** A stop racing commands issued before it, not awaited (see `stopRacingCommands`); a spawn first. */
const stopRaceStep = fc.record({
  op: fc.constant('stopRacingCommands'),
  calls: fc.array(fc.constantFrom('spawn', 'executeCommand'), { maxLength: 7 }).map((rest) => ['spawn', ...rest]),
  stopWhen: fc.constantFrom(...Object.keys(STOP_WHEN)),
})
/**
 * A command that stops its own supervisor, ended by its timeout or from the host (see
 * `freezeSupervisor`); a spawn's handle can also be killed.
 */
const freezeStep = fc.oneof(
  fc.record({ op: fc.constant('freezeSupervisor'), via: fc.constant('executeCommand'), end: fc.constantFrom('timeout', 'stop', 'destroy') }),
  fc.record({ op: fc.constant('freezeSupervisor'), via: fc.constant('spawn'), end: fc.constantFrom('timeout', 'kill', 'stop', 'destroy') }),
)
/** Contents a step writes and reads back (hex: any shell prints it as is). */
const contentRecipe = fc.uint8Array({ minLength: 1, maxLength: 48 }).map((bytes) => Buffer.from(bytes).toString('hex'))
/** Calls a checkpoint or mount round issues alongside its own, not awaited (see `RACING`). */
const racingCalls = fc.array(fc.constantFrom('executeCommand', 'spawn', 'stop', 'start', 'destroy'), { maxLength: 3 })
/**
 * A snapshot racing commands and stops, then a sandbox made from the checkpoint: restored
 * (same `checkpointName`), seeded (`seedCheckpointName`) or a `clone()` (see `checkpointRound`).
 */
const checkpointStep = fc.record({
  op: fc.constant('checkpointRound'),
  content: contentRecipe,
  racing: racingCalls,
  from: fc.constantFrom('restore', 'seed', 'clone'),
})
/** A local filesystem mounted and unmounted while commands run (see `mountRound`). */
const mountStep = fc.record({
  op: fc.constant('mountRound'),
  content: contentRecipe,
  via: fc.constantFrom('sandbox.mount', 'Workspace mounts'),
  racing: racingCalls,
})
/**
 * The host stopping a command's supervisor (SIGSTOP) a while after the command runs, and
 * continuing it (SIGCONT) before the command is ended, after, or never (see `hostStopsSupervisor`).
 */
const hostStopStep = fc
  .record({
    stopAfterMs: fc.integer({ min: 0, max: 200 }),
    cont: fc.constantFrom('before the end', 'after the end', 'never'),
    contAfterMs: fc.integer({ min: 0, max: 300 }),
    command: freezeStep,
  })
  .map(({ command, ...times }) => ({ ...command, op: 'hostStopsSupervisor', ...times }))
/**
 * A host process killed (SIGKILL) while its sandbox runs commands, and (a DockerSandbox)
 * reattached to run a command or only to be destroyed (see `hostRestart`).
 */
const hostRestartStep = fc.record({
  op: fc.constant('hostRestart'),
  killWhen: fc.constantFrom('after launch', 'once running'),
  killAfterMs: fc.integer({ min: 0, max: 600 }),
  ...(cfg.docker && { reattachTo: fc.constantFrom('run a command', 'destroy') }),
})
// Mounts are a LocalSandbox's (a DockerSandbox's need the container made again).
const lifecycleStep = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom(...LIFECYCLE_OPS) },
  { weight: 2, arbitrary: stopRaceStep },
  { weight: 1, arbitrary: freezeStep },
  { weight: 2, arbitrary: checkpointStep },
  ...(cfg.docker ? [] : [{ weight: 2, arbitrary: mountStep }]),
  { weight: 1, arbitrary: hostStopStep },
  { weight: 1, arbitrary: hostRestartStep },
)
const lifecycleScenario = fc.record(
  { ...scenarioBase, batches: fc.array(fc.array(lifecycleStep, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 4 }) },
  { requiredKeys: ['batches'] },
)

// ---------------------------------------------------------------------------------------
// Worlds: the objects a scenario works on, in a directory of its own

let scenarioCount = 0
/** The objects of a world that must be garbage once the scenario is over (and destroyed). */
const COLLECTABLE = ['sb', 'ms', 'ws', 'fs']
const collected = new Set()
const registry = new FinalizationRegistry((token) => collected.add(token))

function hostile(where) {
  return () => {
    throw new HostileError(where)
  }
}

const PROXY_TRAPS = [
  'get', 'set', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'defineProperty', 'deleteProperty',
  'getPrototypeOf', 'setPrototypeOf', 'isExtensible', 'preventExtensions', 'apply', 'construct',
]

function materialize(recipe, world) {
  switch (recipe.k) {
    case 'undefined':
      return undefined
    case 'null':
      return null
    case 'true':
      return true
    case 'false':
      return false
    case 'num':
      return recipe.v === '-0' ? -0 : Number(recipe.v)
    case 'bigint':
      return 10n ** 30n
    case 'symbol':
      return Symbol('hostile')
    case 'str':
      return recipe.v
    case 'long':
      return 'x'.repeat(recipe.n)
    case 'canary':
      return world.canary
    case 'canaryDir':
      return path.dirname(world.canary)
    case 'deepPath':
      return Array.from({ length: 600 }, () => 'deep').join('/')
    case 'arr':
      return recipe.items.map((r) => materialize(r, world))
    case 'obj':
      return Object.fromEntries(recipe.entries.map(([key, r]) => [key, materialize(r, world)]))
    case 'proxy':
      return new Proxy(function () {}, Object.fromEntries(PROXY_TRAPS.map((t) => [t, hostile(`proxy ${t}`)])))
    case 'revoked': {
      const { proxy, revoke } = Proxy.revocable({}, {})
      revoke()
      return proxy
    }
    case 'getters':
      return Object.defineProperties({}, Object.fromEntries(OPTION_KEYS.concat(['error', 'warn', 'info', 'debug', 'trace']).map((key) => [key, { get: hostile(`getter ${key}`), enumerable: true }])))
    case 'prims':
      return { toString: hostile('toString'), valueOf: hostile('valueOf'), [Symbol.toPrimitive]: hostile('toPrimitive'), toJSON: hostile('toJSON') }
    case 'thenThrows':
      return { then: hostile('then') }
    case 'abort': {
      const controller = new AbortController()
      if (recipe.aborted) controller.abort(new HostileError('abort reason'))
      else setTimeout(() => controller.abort(), 50).unref()
      return controller.signal
    }
    case 'bytes':
      return Uint8Array.from([0, 255, 0xc3, 0x28, 0xe2, 0x82, 10])
    case 'deep': {
      let deep = {}
      for (let i = 0; i < 2000; i++) deep = { timeout: 1, env: deep, options: deep }
      return deep
    }
    case 'class':
      return class Hostile {}
    case 'sandbox':
      return world.sb
    case 'mastra':
      return world.ms
    case 'filesystem':
      return world.fs
    case 'workspace':
      return world.ws
    case 'console':
      return { error() {}, warn() {}, info() {}, debug() {}, trace() {} }
    case 'pid':
      return world.handle?.pid ?? '999999'
    case 'pidString':
      return String(world.handle?.pid ?? 1)
    case 'fnThrows':
      return hostile('callback threw')
    case 'fnRejects':
      return async () => {
        throw new HostileError('callback rejected')
      }
    case 'fnOk':
      return () => undefined
    case 'fnKey':
      return () => 'same-key'
    case 'reenter':
      return (...callbackArgs) => reenter(recipe, world, callbackArgs)
    default:
      throw new Error(`unknown recipe ${recipe.k}`)
  }
}

/** A user callback that calls back into the scenario's own objects. */
function reenter({ op, wait }, world, callbackArgs) {
  const { sb, ws, ms } = world
  const run = {
    destroy: () => sb.destroy(),
    start: () => sb.start(),
    stop: () => sb.stop(),
    ensureRunning: () => sb.ensureRunning(),
    executeCommand: () => sb.executeCommand('echo reentered'),
    spawn: () => sb.processes.spawn('sleep 0.3'),
    kill: () => sb.processes.kill(world.handle?.pid ?? '1'),
    wsDestroy: () => ws.destroy(),
    wsInit: () => ws.init(),
    resolve: () => ws.resolveSandbox({ requestContext: world.requestContext }),
    msStart: () => ms.start(),
    msStop: () => ms.stop(),
    msDestroy: () => ms.destroy(),
    readFile: () => world.fs.readFile('a.txt'),
  }[op]
  const call = `re-entrant ${op} from a callback`
  const promise = Promise.resolve().then(run)
  // Not awaited here or awaited: either way it must settle, and is judged at the end.
  world.pending.push({ call, promise })
  promise.catch(() => {})
  if (wait) return promise.then(() => (op === 'resolve' ? world.sb : undefined))
  return op === 'resolve' || callbackArgs.length === 0 ? world.sb : undefined
}

/** The scenario of each DockerSandbox, to name the one a container left at the end came from. */
const scenarioOfSandbox = new Map()

/** The options of a scenario's DockerSandbox: the engine, the image, the run's label. */
function dockerOptions() {
  const { socketPath, image, label } = cfg.docker
  return { image, dockerOptions: { socketPath }, labels: { [label.name]: label.value } }
}

/** How this driver's DockerSandboxes name their checkpoints (images `native-workspace-checkpoint:<name>`). */
const DOCKER_CHECKPOINTS = `fuzz-${process.pid}`

/**
 * Removes the checkpoint images of scenario `n`'s DockerSandboxes, or of all this driver's
 * without `n`: a checkpoint outlives its sandbox by design.
 */
async function removeCheckpoints(n) {
  const { engineJson, engineRequest } = await import('../scripts/docker-engine.mjs')
  const endpoint = { socketPath: cfg.docker.socketPath }
  // Not kept alive: a connection left open would count as a descriptor the scenario leaked.
  const options = { headers: { Connection: 'close' } }
  const name = `native-workspace-checkpoint:${DOCKER_CHECKPOINTS}`
  const reference = n === undefined ? [`${name}-*`] : [`${name}-${n}`, `${name}-${n}-*`]
  const found = await engineJson(endpoint, 'GET', `/images/json?filters=${encodeURIComponent(JSON.stringify({ reference }))}`, options)
  await Promise.all(found.map((image) => engineRequest(endpoint, 'DELETE', `/images/${image.Id}?force=1`, options)))
}

/**
 * The containers of `sb` left on the engine (by its id label). A dropped sandbox leaves its
 * container by design (a later process finds it again, or sweeps it): it is removed here.
 */
async function containersOf(sb, { remove = false } = {}) {
  return containersLabelled(`mastra.sandbox.id=${sb.id}`, { remove })
}

/** The containers carrying `label` (`name=value`), removed when asked: `[{ id, sandbox, state }]`. */
async function containersLabelled(label, { remove = false } = {}) {
  const { engineJson, engineRequest } = await import('../scripts/docker-engine.mjs')
  const endpoint = { socketPath: cfg.docker.socketPath }
  const filters = encodeURIComponent(JSON.stringify({ label: [label] }))
  // Not kept alive: a connection left open would count as a descriptor the scenario leaked.
  const options = { headers: { Connection: 'close' } }
  const found = await engineJson(endpoint, 'GET', `/containers/json?all=1&filters=${filters}`, options)
  // While another caller removes a container the engine answers "already in progress" at
  // once: wait it out, so that what was removed here is gone when this returns (one still
  // there past CALL_MS shows in the next listing).
  const removeUntilGone = async (id) => {
    for (const until = Date.now() + CALL_MS; Date.now() < until; await sleep(50)) {
      const res = await engineRequest(endpoint, 'DELETE', `/containers/${id}?force=1&v=1`, options)
      if (res.status !== 409 || !res.body.toString('utf8').includes('in progress')) return
    }
  }
  if (remove) await Promise.all(found.map((c) => removeUntilGone(c.Id)))
  return found.map((c) => ({ id: c.Id.slice(0, 12), sandbox: c.Labels['mastra.sandbox.id'], state: c.State }))
}

function makeDir(dir, mode = 0o755) {
  fs.mkdirSync(dir, { recursive: true })
  fs.chmodSync(dir, mode)
}

/** A fresh directory with a few files, a symlink out, and a sandbox, filesystem, workspace over it. */
async function makeWorld(scn) {
  const n = scenarioCount++
  const root = path.join(cfg.top, `s${n}`)
  const wd = path.join(root, 'ws')
  makeDir(wd)
  fs.writeFileSync(path.join(wd, 'a.txt'), 'alpha\nbeta\n')
  makeDir(path.join(wd, 'dir'))
  fs.writeFileSync(path.join(wd, 'dir', 'b.txt'), 'b')
  fs.writeFileSync(path.join(wd, 'redos.txt'), `${'a'.repeat(30)}!\n`)
  fs.writeFileSync(path.join(wd, 'many.txt'), 'a'.repeat(40000))
  fs.symlinkSync(path.dirname(cfg.canary), path.join(wd, 'link-out'))
  const world = { root, wd, canary: cfg.canary, pending: [], extra: [], requestContext: { scenario: n }, handle: undefined }
  world.wdStat = fs.statSync(wd)

  const hooks = Object.fromEntries(Object.entries(scn.hooks ?? {}).map(([k, r]) => [k, materialize(r, world)]))
  const generated = scn.sandboxOptions ? materialize(scn.sandboxOptions, world) : {}
  // A scenario with checkpoint rounds snapshots its sandbox as a checkpoint of its own: in
  // its own directory, or (a container's, an image on the engine) by a name of its own.
  world.checkpoints = path.join(root, 'checkpoints')
  world.checkpointName = cfg.docker ? `${DOCKER_CHECKPOINTS}-${n}` : 'fuzz'
  const checkpointed = scn.batches?.some((batch) => batch.some((step) => step.op === 'checkpointRound'))
  world.checkpointed = checkpointed
  const base = {
    workingDirectory: wd,
    isolation: scn.isolation ?? 'none',
    ...(checkpointed && { checkpointName: world.checkpointName, checkpointsDirectory: world.checkpoints }),
  }
  const bwrapArgs = scn.isolation === 'bwrap' && scn.bwrapArgs ? { nativeSandbox: { bwrapArgs: scn.bwrapArgs } } : {}
  if (cfg.docker) {
    // Generated options are LocalSandbox's: a container's would reach the engine's host.
    world.sb = new lib.DockerSandbox({ ...dockerOptions(), ...hooks, ...(checkpointed && { checkpointName: world.checkpointName }) })
    scenarioOfSandbox.set(world.sb.id, scn)
  } else {
    world.sb = await attempt('new LocalSandbox(generated options)', [scn.sandboxOptions, bwrapArgs], () => new lib.LocalSandbox({ ...generated, ...base, ...bwrapArgs, ...hooks }))
    world.sb ??= new lib.LocalSandbox({ ...base, ...hooks })
  }
  world.fs = new lib.LocalFilesystem({ basePath: wd })
  const steps = Object.fromEntries(Object.entries(scn.mastraSteps ?? {}).map(([k, r]) => [k, materialize(r, world)]))
  class FuzzSandbox extends lib.MastraSandbox {
    constructor() {
      super({ ...hooks })
      this.id = `fuzz-${n}`
      this.provider = 'fuzz'
    }
    async start() {
      return steps.start?.()
    }
    async stop() {
      return steps.stop?.()
    }
    async destroy() {
      return steps.destroy?.()
    }
    async executeCommand(command) {
      return { success: true, exitCode: 0, stdout: String(command), stderr: '', executionTimeMs: 0 }
    }
  }
  world.ms = new FuzzSandbox()
  const resolver = scn.resolver && materialize(scn.resolver, world)
  world.ws = resolver
    ? new lib.Workspace({ sandbox: async (ctx) => (await resolver(ctx)) ?? world.sb, filesystem: world.fs, sandboxCacheKey: () => 'k' })
    : new lib.Workspace({ sandbox: world.sb, filesystem: world.fs })
  world.tools = (await attempt('createWorkspaceTools(world)', [], () => lib.createWorkspaceTools(world.ws))) ?? {}
  world.n = n
  for (const name of COLLECTABLE) registry.register(world[name], `${n}:${name}`)
  return world
}

// ---------------------------------------------------------------------------------------
// Calls

const TIMED_OUT = Symbol('timed out')
/** Set when a call of the scenario hung: its remaining steps are skipped (teardown still runs). */
let wedged = false

function deadline(promise, ms) {
  let timer
  return Promise.race([promise, new Promise((resolve) => (timer = setTimeout(() => resolve(TIMED_OUT), ms)))]).finally(() => clearTimeout(timer))
}

/**
 * Runs one call and judges it: it must settle within CALL_MS, and a rejection must be a
 * typed error. Returns the value, or undefined when it threw or hung.
 */
async function attempt(call, recipes, fn, scenario) {
  current = { call, args: recipes }
  progress({ call, args: recipes })
  let outcome
  const started = Date.now()
  const settled = Promise.resolve()
    .then(fn)
    .then(
      (v) => (outcome = { value: v }),
      (err) => (outcome = { err }),
    )
  if ((await deadline(settled, CALL_MS)) === TIMED_OUT) {
    violation('hang', current, `did not settle within ${CALL_MS} ms`, scenario)
    wedged = true
    return undefined
  }
  // A call that blocks the event loop settles "in time" for the timer that could not run.
  if (Date.now() - started > CALL_MS) violation('hang', current, `blocked the event loop for ${Date.now() - started} ms`, scenario)
  if ('err' in outcome) {
    const why = badError(outcome.err)
    if (why) violation('untyped-error', current, { why, error: describeError(outcome.err) }, scenario)
    return undefined
  }
  return outcome.value
}

function targetObject(world, target) {
  return {
    sandbox: world.sb,
    processes: world.sb.processes,
    mounts: world.sb.mounts,
    handle: world.handle,
    filesystem: world.fs,
    workspace: world.ws,
    mastra: world.ms,
  }[target]
}

async function ensureHandle(world, scn) {
  if (world.handle) return world.handle
  const handle = await attempt('sandbox.processes.spawn("timeout 3 cat")', [], () => world.sb.processes.spawn('timeout 3 cat'), scn)
  if (handle instanceof lib.ProcessHandle) world.handle = handle
  return world.handle
}

async function runStep(step, world, scn) {
  const { target, member } = step
  if (target === 'handle' && !(await ensureHandle(world, scn))) return
  const call = `${target}.${member}${step.get ? '' : '(…)'}`
  const args = () => (step.args ?? []).map((r) => materialize(r, world))
  let fn
  if (step.get) fn = () => targetObject(world, target)[member]
  else if (target === 'export') fn = () => lib[member](...args())
  else if (target === 'new') fn = () => new lib[member](...args())
  else if (target === 'static') {
    const [cls, name] = member.split('.')
    fn = () => lib[cls][name](...args())
  } else if (target === 'tool') {
    fn = () => {
      const tool = Object.values(world.tools).find((t) => t.id === member)
      if (!tool) return undefined
      const [input, context] = args()
      return tool.execute(input, context)
    }
  } else fn = () => targetObject(world, target)[member](...args())

  // Constructing the error classes or the internal wrappers with hostile arguments may throw
  // what JavaScript throws; only the process's survival is asked of them.
  const lenient = target === 'new' && (ERROR_CLASSES.includes(member) || member === 'ProcessHandle' || member === 'LocalProcessManager')
  const result = await attempt(call, step.args ?? [], lenient ? () => Promise.resolve().then(fn).catch(() => undefined) : fn, scn)
  if (result instanceof lib.LocalSandbox || result instanceof lib.MastraSandbox || result instanceof lib.Workspace) world.extra.push(result)
}

const LIFECYCLE = {
  start: (w) => w.sb.start(),
  stop: (w) => w.sb.stop(),
  destroy: (w) => w.sb.destroy(),
  ensureRunning: (w) => w.sb.ensureRunning(),
  executeCommand: (w) => w.sb.executeCommand('echo x; sleep 0.1'),
  spawn: async (w) => {
    const h = await w.sb.processes.spawn('sleep 0.5')
    w.handle ??= h
    return h.pid
  },
  kill: (w) => w.sb.processes.kill(w.handle?.pid ?? '1'),
  handleKill: (w) => w.handle?.kill(),
  wait: (w) => w.handle?.wait(),
  msStart: (w) => w.ms.start(),
  msStop: (w) => w.ms.stop(),
  msDestroy: (w) => w.ms.destroy(),
  resolve: (w) => w.ws.resolveSandbox({ requestContext: w.requestContext }),
  wsDestroy: (w) => w.ws.destroy(),
  stopRacingCommands,
  freezeSupervisor,
  checkpointRound,
  mountRound,
  hostStopsSupervisor,
  hostRestart,
}

/**
 * A stop racing the commands of `step` (`stopRaceStep`), issued before it and not awaited:
 * each of them runs and is stopped, or is refused with a typed error; once stop() resolves
 * the sandbox is not running, and once the commands have settled none of their processes
 * runs, whatever else the scenario does meanwhile: only a call made after a stop may start
 * the sandbox again.
 */
async function stopRacingCommands(w, step, scn) {
  const marker = newMarker()
  const issued = step.calls.map((kind) => (kind === 'spawn' ? w.sb.processes.spawn(`sleep ${marker}`) : w.sb.executeCommand(`sleep ${marker}`)))
  const settled = Promise.allSettled(issued)
  await STOP_WHEN[step.stopWhen](issued)
  const stopped = await w.sb.stop().then(
    () => ({ status: w.sb.status }),
    (error) => ({ error }),
  )
  const call = 'commands issued before stop()'
  if (!stopped.error && !['stopped', 'destroying', 'destroyed'].includes(stopped.status)) {
    violation('stop-race', call, `status '${stopped.status}' once stop() resolved`, scn)
  }
  const outcomes = await deadline(settled, CALL_MS / 2)
  if (outcomes === TIMED_OUT) violation('stop-race', call, `not all settled within ${CALL_MS / 2} ms after stop()`, scn)
  for (const outcome of outcomes === TIMED_OUT ? [] : outcomes) {
    const why = outcome.status === 'rejected' && badError(outcome.reason)
    if (why) violation('untyped-error', call, { why, error: describeError(outcome.reason) }, scn)
  }
  if (!(await waitUntil(() => liveWith(marker).length === 0, SETTLE_MS))) {
    violation('stop-race', call, { running: liveWith(marker).map((pid) => cmdline(pid)), status: w.sb.status }, scn)
  }
  if (stopped.error) throw stopped.error
}

/** A number no other process's command line holds: `sleep <marker>` runs for 1000 s. */
const newMarker = () => `1000.${String(Math.floor(Math.random() * 1e9)).padStart(9, '0')}`

/** The live processes whose command line holds `text` (zombies are ended). */
const liveWith = (text) => allPids().filter((pid) => cmdline(pid)?.includes(text) && !['Z', 'X', undefined].includes(procStat(pid)?.state))

/** How long a frozen command's timeout is: its supervisor stops before it comes. */
const FROZEN_TIMEOUT_MS = 300

/** How a command issued as `issued` is ended (`freezeStep`'s `end`; a timeout ends it by itself). */
const ENDS = {
  timeout: async () => {},
  kill: async (w, issued) => (await issued).kill(),
  stop: (w) => w.sb.stop(),
  destroy: (w) => w.sb.destroy(),
}

/**
 * Runs `sleep <marker>` (in `command`) as `step` says (`freezeStep`), ends it as `step.end`
 * says, calling `whileRunning` once it runs (or was refused) and `whileEnding` once the end
 * is asked for: the call and the end settle within a deadline with typed errors, and then
 * no process of the command runs.
 */
async function endedCommand(w, step, scn, { command, marker, kind, call, whileRunning = async () => {}, whileEnding = async () => {} }) {
  const options = step.end === 'timeout' ? { timeout: FROZEN_TIMEOUT_MS } : {}
  const issued = step.via === 'spawn' ? w.sb.processes.spawn(command, options) : w.sb.executeCommand(command, [], options)
  let over = false
  const settled = (step.via === 'spawn' ? issued.then((handle) => handle.wait()) : issued).then(
    () => ({}),
    (error) => ({ error }),
  )
  settled.then(() => (over = true))
  // Refused (the sandbox not running) or not: once the command runs, it is ended. (A poll
  // left running would keep this scope, and so the world, from being collected.)
  await waitUntil(() => over || liveWith(marker).length > 0, SETTLE_MS)
  await whileRunning()
  const ending = ENDS[step.end](w, issued).then(
    () => ({}),
    (error) => ({ error }),
  )
  await whileEnding()
  const outcomes = await deadline(Promise.all([settled, ending]), CALL_MS)
  if (outcomes === TIMED_OUT) {
    violation(kind, call, `not settled within ${CALL_MS} ms`, scn)
    return
  }
  for (const { error } of outcomes) {
    const why = error && badError(error)
    if (why) violation('untyped-error', call, { why, error: describeError(error) }, scn)
  }
  if (!(await waitUntil(() => liveWith(marker).length === 0, SETTLE_MS))) {
    violation(kind, call, { running: liveWith(marker).map((pid) => cmdline(pid)), status: w.sb.status }, scn)
  }
}

/**
 * A command that stops its supervisor with SIGSTOP (refused under isolation, where it then
 * runs on as itself), ended as `step` says (`freezeStep`): whatever the supervisor's state,
 * the call settles within a deadline, and then no process of the command runs.
 */
async function freezeSupervisor(w, step, scn) {
  const marker = newMarker()
  const call = `a command stopping its supervisor, ended by ${step.end}`
  await endedCommand(w, step, scn, { command: `kill -STOP $PPID; exec sleep ${marker}`, marker, kind: 'frozen-supervisor', call })
}

/** The supervisor of the command running `sleep <marker>`, seen from this host (in a container too), if it runs. */
function supervisorOf(marker) {
  const live = liveWith(marker)
  const outermost = live.find((pid) => !live.includes(procStat(pid)?.ppid))
  const parent = outermost && procStat(procStat(outermost)?.ppid)
  // Only a keeper is signalled (a pid read a moment ago may be gone, or another's).
  return parent && /native-workspa/.test(parent.comm) ? parent.pid : undefined
}

function signal(pid, name) {
  try {
    process.kill(pid, name)
  } catch {
    // gone meanwhile
  }
}

/**
 * The host stopping the supervisor of a running command with SIGSTOP (`hostStopStep`), and
 * continuing it before the command is ended, after, or never: the command's call and its end
 * (a timeout, kill(), stop(), destroy()) settle within a deadline, and then no process of
 * the command runs; whatever is still stopped then is the sandbox's to end at its destroy.
 */
async function hostStopsSupervisor(w, step, scn) {
  const marker = newMarker()
  const call = `the host stopping a command's supervisor (continued: ${step.cont}), ended by ${step.end}`
  let supervisor
  await endedCommand(w, step, scn, {
    command: `sleep ${marker}`,
    marker,
    kind: 'host-stopped-supervisor',
    call,
    whileRunning: async () => {
      await sleep(step.stopAfterMs)
      supervisor = supervisorOf(marker)
      if (supervisor) signal(supervisor, 'SIGSTOP')
      if (supervisor && step.cont === 'before the end') {
        await sleep(step.contAfterMs)
        signal(supervisor, 'SIGCONT')
      }
    },
    whileEnding: async () => {
      if (supervisor && step.cont === 'after the end') {
        await sleep(step.contAfterMs)
        signal(supervisor, 'SIGCONT')
      }
    },
  })
}

/** Calls a checkpoint or mount round issues beside its own (`racingCalls`), not awaited. */
const RACING = {
  executeCommand: (w) => w.sb.executeCommand('echo raced; sleep 0.1'),
  spawn: (w) => w.sb.processes.spawn('sleep 0.3'),
  stop: (w) => w.sb.stop(),
  start: (w) => w.sb.start(),
  destroy: (w) => w.sb.destroy(),
}

/** `promise`, judged later (by `settleAll`): its rejection meanwhile is no unhandled one. */
function judgedLater(promise) {
  promise.catch(() => {})
  return promise
}

const racing = (w, ops) => ops.map((op) => judgedLater(Promise.resolve().then(() => RACING[op](w))))

/**
 * Waits for `promises` to settle (within CALL_MS together) and judges their rejections:
 * their outcomes, or undefined when one did not settle.
 */
async function settleAll(promises, call, scn) {
  const outcomes = await deadline(Promise.allSettled(promises), CALL_MS)
  if (outcomes === TIMED_OUT) {
    violation('hang', call, `not all settled within ${CALL_MS} ms`, scn)
    wedged = true
    return undefined
  }
  for (const outcome of outcomes) {
    const why = outcome.status === 'rejected' && badError(outcome.reason)
    if (why) violation('untyped-error', call, { why, error: describeError(outcome.reason) }, scn)
  }
  return outcomes
}

/**
 * A marker file with the step's content, a snapshot racing the step's calls, the marker
 * changed once it settled, then a sandbox made from the checkpoint (`checkpointStep`): the
 * calls settle within a deadline with typed errors, a local checkpoints directory holds
 * the checkpoint and nothing else (no copy left half made), and the sandbox made from it,
 * once started, has the marker as it was snapshotted (on the host and to its commands), and
 * leaves nothing once destroyed. The rounds of a world take turns: two snapshots of one
 * checkpoint at once leave either tree whole, and a round judges its own.
 */
async function checkpointRound(w, step, scn) {
  const previous = w.checkpointTurn
  let done
  w.checkpointTurn = new Promise((resolve) => (done = resolve))
  await previous
  try {
    await checkpointRoundAlone(w, step, scn)
  } finally {
    done()
  }
}

/**
 * Writes `text` (shell-safe) to `name` in the working directory: on the host, or in the
 * container (by a command: only a running container can be snapshotted). False if refused.
 */
async function writeInWorkspace(w, name, text, scn) {
  if (!cfg.docker) {
    fs.writeFileSync(path.join(w.wd, name), text)
    return true
  }
  const written = await attempt(`write ${name} in the container`, [], () => w.sb.executeCommand(`printf %s ${text} > ${name}`), scn)
  return written?.exitCode === 0
}

async function checkpointRoundAlone(w, step, scn) {
  const k = (w.rounds = (w.rounds ?? 0) + 1)
  const marker = `marker-${k}.txt`
  const call = `snapshot() racing ${step.racing.join(', ') || 'nothing'}, then a ${step.from} from it`
  if (!(await writeInWorkspace(w, marker, step.content, scn))) return
  const raced = racing(w, step.racing)
  const snapshot = await settleAll([w.sb.snapshot()], call, scn)
  if (!snapshot) return
  await writeInWorkspace(w, marker, 'changed-after-the-snapshot', scn)
  if (!(await settleAll(raced, call, scn))) return
  const strays = () => (fs.existsSync(w.checkpoints) ? fs.readdirSync(w.checkpoints).filter((name) => name !== w.checkpointName) : [])
  if (strays().length > 0) violation('checkpoint-left', call, { checkpoints: strays() }, scn)
  if (snapshot[0].status === 'rejected') return

  const dir = path.join(w.root, `from-checkpoint-${k}`)
  const [Sandbox, own] = cfg.docker
    ? [lib.DockerSandbox, dockerOptions()]
    : [lib.LocalSandbox, { workingDirectory: dir, isolation: scn.isolation ?? 'none', checkpointsDirectory: w.checkpoints }]
  const make = {
    restore: () => new Sandbox({ ...own, checkpointName: w.checkpointName }),
    seed: () => new Sandbox({ ...own, checkpointName: `${w.checkpointName}-seeded-${k}`, seedCheckpointName: w.checkpointName }),
    clone: () => w.sb.clone(cfg.docker ? {} : { workingDirectory: dir }),
  }[step.from]
  const made = await attempt(`a ${step.from} from the checkpoint`, [], make, scn)
  if (!made) return
  if (cfg.docker) scenarioOfSandbox.set(made.id, scn)
  // Destroyed by the teardown too, should this round be cut short.
  w.extra.push(made)
  if (await attempt(`start() of a ${step.from} from the checkpoint`, [], () => made.start().then(() => true), scn)) {
    const onHost = cfg.docker ? step.content : fs.existsSync(path.join(dir, marker)) ? fs.readFileSync(path.join(dir, marker), 'utf8') : '<missing>'
    const shown = await attempt(`cat in a ${step.from} from the checkpoint`, [], () => made.executeCommand(`cat ${marker}`), scn)
    // A container's files are seen only through its commands: one that cannot read the marker lost it.
    const lost = shown && (shown.exitCode === 0 ? shown.stdout !== step.content : cfg.docker && /No such file/.test(shown.stderr))
    if (onHost !== step.content || lost) {
      violation('checkpoint-content', call, { snapshotted: step.content, onHost, shown: shown && { exitCode: shown.exitCode, stdout: shown.stdout.slice(0, 200), stderr: shown.stderr.slice(0, 200) } }, scn)
    }
  }
  await attempt(`destroy() of a ${step.from} from the checkpoint`, [], () => made.destroy(), scn)
  if (strays().length > 0) violation('checkpoint-left', `${call}, destroyed`, { checkpoints: strays() }, scn)
  if (cfg.docker) {
    const left = await containersOf(made)
    if (left.length > 0) violation('leak-container', `${call}: after destroy() of the ${step.from}`, left, scn)
  }
}

/**
 * Whether nothing but `step` may stop, destroy or restart the sandbox while it runs: it is
 * alone in its batch, races no stop or destroy, and the scenario has no callback that may
 * re-enter nor generated options.
 */
function alone(step, scn) {
  const none = (o) => Object.keys(o ?? {}).length === 0
  return (
    scn.batches.find((batch) => batch.includes(step))?.length === 1 &&
    !step.racing.some((op) => op === 'stop' || op === 'destroy') &&
    none(scn.hooks) &&
    none(scn.mastraSteps) &&
    !scn.resolver &&
    !scn.sandboxOptions
  )
}

/**
 * A directory with a file mounted into the sandbox while the step's calls run
 * (`mountStep`), through `sandbox.mount()` or a Workspace's `mounts` (made at the sandbox's
 * next start), a command reading the file once that settled, then an unmount while one
 * more reads: everything settles within a deadline with typed errors; a command that reads
 * the file reads what it holds, and, when nothing else may have stopped the sandbox, one
 * that ran while the mount was `mounted` reads it; once unmount() resolved (and the calls
 * settled) the mount is gone from the sandbox and its working directory, and its files are
 * as they were.
 */
async function mountRound(w, step, scn) {
  const k = (w.rounds = (w.rounds ?? 0) + 1)
  const source = path.join(w.root, `mounted-${k}`)
  makeDir(source)
  fs.writeFileSync(path.join(source, 'f.txt'), step.content)
  const mountPath = `/m${k}`
  // Without isolation a mount is a link below the working directory, the commands' cwd.
  const seenAt = scn.isolation === 'bwrap' ? `${mountPath}/f.txt` : `.${mountPath}/f.txt`
  const call = `${step.via} racing ${step.racing.join(', ') || 'nothing'}, then unmount()`
  const filesystem = new lib.LocalFilesystem({ basePath: source })
  const read = () => w.sb.executeCommand(`cat ${seenAt}`)
  const raced = racing(w, step.racing)
  const mounting =
    step.via === 'sandbox.mount'
      ? Promise.resolve().then(() => w.sb.mount(filesystem, mountPath))
      : Promise.resolve().then(() => {
          const ws = new lib.Workspace({ sandbox: w.sb, mounts: { [mountPath]: filesystem } })
          w.extra.push(ws)
          return ws.init()
        })
  const mountedWhenRead = judgedLater(
    mounting.catch(() => {}).then(async () => {
      const state = w.sb.mounts.get(mountPath)?.state
      return { state, result: await read() }
    }),
  )
  const mounted = await settleAll([mounting, mountedWhenRead], call, scn)
  if (!mounted) return
  const firstRead = mounted[1].value
  if (firstRead?.state === 'mounted' && alone(step, scn) && (firstRead.result.exitCode !== 0 || firstRead.result.stdout !== step.content)) {
    violation('mount-missing', `${call}: a command while it was mounted`, { exitCode: firstRead.result.exitCode, stdout: firstRead.result.stdout.slice(0, 200), stderr: firstRead.result.stderr.slice(0, 200) }, scn)
  }
  const unmounting = judgedLater(Promise.resolve().then(() => w.sb.unmount(mountPath)))
  const outcomes = await settleAll([unmounting, judgedLater(read()), ...raced], call, scn)
  if (!outcomes) return
  for (const result of [firstRead?.result, outcomes[1].value]) {
    if (result?.exitCode === 0 && result.stdout !== step.content) violation('mount-content', call, { mounted: step.content, read: result.stdout.slice(0, 200) }, scn)
  }
  if (fs.readFileSync(path.join(source, 'f.txt'), 'utf8') !== step.content || fs.readdirSync(source).length !== 1) {
    violation('host-changed', `${call}: the mounted directory`, fs.readdirSync(source), scn)
  }
  if (outcomes[0].status === 'rejected') return
  const link = fs.lstatSync(path.join(w.wd, mountPath), { throwIfNoEntry: false })
  if (w.sb.mounts.has(mountPath) || (scn.isolation !== 'bwrap' && link)) {
    violation('mount-left', call, { entry: w.sb.mounts.get(mountPath)?.state, inWorkingDirectory: link ? (link.isSymbolicLink() ? 'link' : 'entry') : 'none' }, scn)
  }
}

/** Where this driver's package is, for the host processes it starts. */
const LIB_MAIN = require.resolve('../lib/index.js')

/**
 * The source of a host process that makes a sandbox with `options` and runs `sleep <marker>`
 * three ways (a spawn, a command it does not await, a process a command left running), then
 * prints `running` (or the error as JSON) and stays until it is killed.
 */
function hostSource(className, options, marker) {
  return `
const lib = require(${JSON.stringify(LIB_MAIN)})
const sb = new lib.${className}(${JSON.stringify(options)})
setInterval(() => {}, 60_000)
;(async () => {
  await sb.processes.spawn('sleep ${marker}')
  sb.executeCommand('sleep ${marker}').catch(() => {})
  await sb.executeCommand('(sleep ${marker} &)')
  process.stdout.write('running\\n')
})().catch((e) => process.stdout.write(JSON.stringify({ code: e?.code, message: String(e?.message ?? e) }) + '\\n'))
`
}

/**
 * A host process (a Node process of its own) that runs commands in a sandbox, killed with
 * SIGKILL at a point `step` says (`hostRestartStep`). A LocalSandbox goes with its host:
 * no process it ran is left. A DockerSandbox, made with an `id`, outlives it: this process
 * reattaches with `new DockerSandbox({ id })`, whose command answers right, and whose
 * destroy leaves no process of the first host's commands and no container.
 */
async function hostRestart(w, step, scn) {
  const k = (w.rounds = (w.rounds ?? 0) + 1)
  const marker = newMarker()
  const dir = path.join(w.root, `host-${k}`)
  makeDir(dir)
  const id = `fuzz-restart-${process.pid}-${w.n}-${k}`
  const [className, options] = cfg.docker
    ? ['DockerSandbox', { ...dockerOptions(), id }]
    : ['LocalSandbox', { workingDirectory: path.join(dir, 'ws'), isolation: scn.isolation ?? 'none' }]
  if (cfg.docker) scenarioOfSandbox.set(id, scn)
  const script = path.join(dir, 'host.cjs')
  fs.writeFileSync(script, hostSource(className, options, marker))
  const call = `a host process killed ${step.killWhen} (+${step.killAfterMs} ms)`
  progress({ call })
  const host = spawn(process.execPath, [script], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  host.stdout.on('data', (d) => (out += d))
  host.stderr.on('data', (d) => (err = (err + d).slice(-1000)))
  const closed = new Promise((resolve) => host.on('close', resolve))
  if (step.killWhen === 'once running' && !(await waitUntil(() => out.includes('\n'), CALL_MS))) {
    violation('hang', call, { why: `its commands did not start within ${CALL_MS} ms`, stderr: err }, scn)
  }
  await sleep(step.killAfterMs)
  // What it ran is what runs below it now, or names it, its directory or the marker later.
  const below = new Map([[host.pid, 'node']])
  for (let grew = true; grew; ) {
    grew = false
    for (const s of allPids().map(procStat).filter(Boolean)) if (!below.has(s.pid) && below.has(s.ppid)) (below.set(s.pid, s.comm), (grew = true))
  }
  below.delete(host.pid)
  host.kill('SIGKILL')
  if ((await deadline(closed, CALL_MS)) === TIMED_OUT) violation('hang', call, 'the killed host process did not close', scn)
  const said = out.split('\n').find(Boolean)
  if (said && said !== 'running') {
    const { code, message } = JSON.parse(said)
    if (!code) violation('untyped-error', `${call}: its commands`, { why: 'an error without a code', message }, scn)
  }
  const ofHost = (pid) => {
    const cmd = cmdline(pid) ?? ''
    const keeperOfHost = /native-workspa/.test(procStat(pid)?.comm ?? '') && cmd.split(' ')[1] === String(host.pid)
    return below.get(pid) === procStat(pid)?.comm || keeperOfHost || cmd.includes(marker) || cmd.includes(dir)
  }
  const left = () => allPids().filter((pid) => ofHost(pid) && !['Z', 'X', undefined].includes(procStat(pid)?.state))
  if (cfg.docker) await reattach(w, id, step, call, scn)
  progress({ call: `${call}: what it ran, ended` })
  if (!(await waitUntil(() => left().length === 0, SETTLE_MS))) {
    violation('host-restart-left', call, left().map((pid) => ({ pid, state: procStat(pid)?.state, cmd: (cmdline(pid) ?? '').slice(0, 160) })), scn)
  }
}

/**
 * A new host's DockerSandbox with the `id` of the killed host's: a command that answers
 * right (when `step` asks for one), then its destroy, and no container left.
 */
async function reattach(w, id, step, call, scn) {
  const again = await attempt('new DockerSandbox({ id }) after its host was killed', [], () => new lib.DockerSandbox({ ...dockerOptions(), id }), scn)
  if (again) {
    w.extra.push(again)
    const token = newMarker()
    const result = step.reattachTo === 'run a command' && (await attempt('executeCommand in the reattached DockerSandbox', [], () => again.executeCommand(`echo ${token}`), scn))
    if (result && (result.exitCode !== 0 || result.stdout !== `${token}\n`)) {
      violation('host-restart', `${call}: a command after reattaching`, { exitCode: result.exitCode, stdout: result.stdout.slice(0, 200), stderr: result.stderr.slice(0, 200) }, scn)
    }
    await attempt('destroy() of the reattached DockerSandbox', [], () => again.destroy(), scn)
  }
  progress({ call: `${call}: containers left` })
  const left = await containersLabelled(`mastra.sandbox.id=${id}`, { remove: true })
  if (again && left.length > 0) violation('leak-container', `${call}: after the reattached destroy()`, left, scn)
}

// ---------------------------------------------------------------------------------------
// Host state: processes and descriptors

/**
 * Processes this driver is answerable for: its descendants, its keepers, and anything whose
 * command line names the test's directory (they may have been re-parented).
 */
function ourProcesses() {
  const stats = allPids().map(procStat).filter(Boolean)
  const mine = new Set([process.pid])
  for (let grew = true; grew; ) {
    grew = false
    for (const s of stats) if (!mine.has(s.pid) && mine.has(s.ppid)) (mine.add(s.pid), (grew = true))
  }
  return stats
    .filter((s) => {
      if (s.pid === process.pid) return false
      const cmd = cmdline(s.pid) ?? ''
      // A keeper names the Node process it serves (other processes' keepers are not ours).
      const ourKeeper = s.comm.startsWith(KEEPER.slice(0, 15)) && cmd.split(' ').includes(String(process.pid))
      if (!mine.has(s.pid) && !ourKeeper && !cmd.includes(cfg.top)) return false
      // The keeper that forks the driver's unisolated inits lives as long as the driver, and
      // so do the warm inits kept ready for the next sandbox (with their spares).
      return !isZygote(s.pid) && !isKeptWarm(s.pid)
    })
    .map((s) => ({ pid: s.pid, ppid: s.ppid, state: s.state, cmd: (cmdline(s.pid) ?? '').slice(0, 160) || s.comm }))
}

const isHelper = (p) => p.cmd.includes(KEEPER) || /(^|\/)bwrap\b/.test(p.cmd)

const fdTargets = () =>
  fs.readdirSync('/proc/self/fd').map((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`)
    } catch {
      return '?'
    }
  })

async function waitUntil(predicate, ms) {
  const end = Date.now() + ms
  for (;;) {
    const v = predicate()
    if (v || Date.now() >= end) return v
    await sleep(25)
  }
}

async function collectGarbage() {
  for (let i = 0; i < 4; i++) {
    global.gc()
    await sleep(20)
  }
}

/** Destroys everything a scenario made and checks it left nothing behind. */
async function teardown(world, scn) {
  // Concurrently, so that a scenario with several hangs still ends within a few bounds.
  progress({ call: 're-entrant calls settling (teardown)' })
  await Promise.all(
    world.pending.splice(0).map(async ({ call, promise }) => {
      if ((await deadline(promise.catch(() => {}), CALL_MS)) === TIMED_OUT) violation('hang', { call }, `did not settle within ${CALL_MS} ms`, scn)
    }),
  )
  if (scn.drop) return
  const owners = [['workspace', world.ws], ['mastra', world.ms], ...world.extra.map((o) => ['extra', o]), ['sandbox', world.sb]]
  await Promise.all(owners.map(([name, obj]) => attempt(`${name}.destroy() (teardown)`, [], () => obj.destroy(), scn)))
  // A destroy that rejected (a throwing hook) must still leave a sandbox that can be destroyed.
  if (world.sb.status !== 'destroyed') await attempt('sandbox.destroy() again (teardown)', [], () => world.sb.destroy(), scn)
  if (world.sb.status !== 'destroyed') violation('inconsistent-state', 'sandbox.destroy()', `status '${world.sb.status}' after destroy() resolved or was retried`, scn)
}

function checkHost(world, scn) {
  const canary = fs.statSync(cfg.canary)
  if (fs.readFileSync(cfg.canary, 'utf8') !== cfg.canaryContent || canary.mtimeMs !== cfg.canaryMtimeMs) {
    violation('host-changed', 'canary outside the workspace', 'its content or mtime changed', scn)
  }
  const now = fs.statSync(world.wd, { throwIfNoEntry: false })
  if (now && (now.uid !== world.wdStat.uid || now.gid !== world.wdStat.gid || now.mode !== world.wdStat.mode)) {
    violation('host-changed', 'existing working directory', `owner/mode ${world.wdStat.uid}:${world.wdStat.gid} ${world.wdStat.mode.toString(8)} became ${now.uid}:${now.gid} ${now.mode.toString(8)}`, scn)
  }
}

// ---------------------------------------------------------------------------------------
// Scenarios

/** Under isolation, arguments given to bwrap must not undo the hardening. */
async function checkHardening(world, scn) {
  if (scn.isolation !== 'bwrap' || !world.sb || world.sb.status === 'destroyed') return
  const result = await attempt('executeCommand(id -u; CapEff) (hardening)', [], () => world.sb.executeCommand('id -u; grep CapEff /proc/self/status; ls /hostproc /host 2>/dev/null | head -1'), scn)
  if (!result?.stdout) return
  const [uid] = result.stdout.split('\n')
  const capEff = result.stdout.match(/CapEff:\s*([0-9a-f]+)/)?.[1]
  if (uid === '0' || (capEff && /[1-9a-f]/.test(capEff)) || /\S/.test(result.stdout.split('\n').slice(2).join(''))) {
    violation('hardening-undone', 'isolated command', result.stdout.slice(0, 300), scn)
  }
}

/** Promises of the issue that a call alone cannot show, on a fresh world. */
const CHECKS = {
  /** Parts written concurrently reach stdin in the order of the calls. */
  async stdinOrder(world, scn) {
    const parts = scn.check.parts.map((r) => materialize(r, world))
    const handle = await attempt('spawn cat for stdin order', [], () => world.sb.processes.spawn('timeout 5 cat', { stdinMode: 'pipe' }), scn)
    if (!handle) return
    const sent = await attempt('concurrent sendStdin', scn.check.parts, () => Promise.all(parts.map((p) => handle.sendStdin(p))).then(() => true), scn)
    await attempt('closeStdin', [], () => handle.closeStdin(), scn)
    const result = await attempt('wait for cat', [], () => handle.wait(), scn)
    const expected = Buffer.concat(parts.map((p) => Buffer.from(p))).toString('utf8')
    // A hostile hook of the scenario may destroy the sandbox meanwhile: only a cat that
    // ended by itself has echoed every part.
    if (sent && result?.exitCode === 0 && result.stdout !== expected) {
      violation('stdin-order', 'Promise.all(parts.map(sendStdin))', { sent: expected.slice(0, 200), got: result.stdout.slice(0, 200) }, scn)
    }
  },
  /** A recursive copy into its own source is refused and makes nothing. */
  async copyIntoItself(world, scn) {
    const copied = await attempt('copyFile(dir, dir/copy, { recursive: true })', [], () => world.fs.copyFile('dir', 'dir/copy', { recursive: true }).then(() => 'resolved'), scn)
    if (copied === 'resolved' || fs.existsSync(path.join(world.wd, 'dir', 'copy'))) {
      violation('copy-into-itself', 'copyFile(dir, dir/copy, { recursive: true })', copied === 'resolved' ? 'resolved' : 'rejected but left dir/copy', scn)
    }
  },
  /** A directory deeper than PATH_MAX is skipped by list_files and grep, not fatal. */
  async deepTree(world, scn) {
    const deep = path.join(world.wd, 'deep')
    fs.mkdirSync(deep)
    // Relative chdir goes deeper than PATH_MAX, where a shell's own idea of its cwd gives up.
    const script = "const fs = require('fs'); for (let i = 0; i < 400; i++) { fs.mkdirSync('d123456789'); process.chdir('d123456789') } fs.writeFileSync('f', 'alpha')"
    execFileSync(process.execPath, ['-e', script], { cwd: deep })
    for (const [name, input] of [['mastra_workspace_list_files', { path: '.', maxDepth: 500 }], ['mastra_workspace_grep', { pattern: 'alpha' }]]) {
      const tool = Object.values(world.tools).find((t) => t.id === name)
      if (!tool) continue
      const text = await attempt(`${name} over a tree deeper than PATH_MAX`, [input], () => tool.execute(input, {}), scn)
      if (typeof text !== 'string') violation('deep-tree', name, 'did not answer with a text', scn)
      else if (name.endsWith('grep') && !text.includes('a.txt')) violation('deep-tree', name, `lost the other matches: ${text.slice(0, 200)}`, scn)
    }
  },
}

/** The world of the scenario running now (the time limit may cut it off), and its run. */
let inFlight
let inFlightRun

async function runScenario(scn) {
  progress({ scenario: scn })
  const world = await makeWorld(scn)
  inFlight = world
  wedged = false
  if (scn.check) await CHECKS[scn.check.check](world, scn)
  if (cfg.mode === 'lifecycle') {
    for (const batch of scn.batches) {
      if (wedged) break
      await Promise.all(
        batch.map((step) => {
          const op = typeof step === 'string' ? step : step.op
          return attempt(`concurrent ${op}`, [batch], () => LIFECYCLE[op](world, step, scn), scn)
        }),
      )
    }
  } else {
    for (const step of scn.steps) if (!wedged) await runStep(step, world, scn)
  }
  await checkHardening(world, scn)
  await teardown(world, scn)
  if (cfg.mode === 'lifecycle' && !scn.drop && world.sb.status === 'destroyed') {
    // After destroy, a command is refused at once with a typed error.
    const after = await attempt('executeCommand after destroy()', [], () => world.sb.executeCommand('echo late').then(() => 'resolved'), scn)
    if (after === 'resolved') violation('inconsistent-state', 'executeCommand after destroy()', 'resolved instead of rejecting', scn)
  }
  checkHost(world, scn)
  if (cfg.docker) {
    progress({ call: 'containers left (teardown)' })
    const left = await containersOf(world.sb, { remove: scn.drop })
    if (!scn.drop && left.length > 0) violation('leak-container', 'after destroy()', left, scn)
    if (world.checkpointed) await removeCheckpoints(world.n)
  }
  inFlight = undefined
  return world.n
}

const reportedPids = new Set()

async function checkLeaks(scn, n) {
  await collectGarbage()
  // Whatever holds a finished sandbox alive holds its descriptors and helpers too.
  const kept = COLLECTABLE.filter((name) => !collected.has(`${n}:${name}`))
  if (kept.length > 0) violation('not-collected', `${kept.join(', ')} of a finished scenario`, 'still reachable after destroy() and garbage collection', scn)
  progress({ call: 'leak check' })
  // A dropped sandbox answers for its helpers (supervisor, bwrap, keeper) once collected;
  // what its commands started may outlive it, as a child process outlives its handle.
  // (One that was not collected keeps them by right; that is reported above.)
  const judged = () => ourProcesses().filter((p) => !reportedPids.has(p.pid) && (!scn.drop || isHelper(p)))
  const clean = (scn.drop && kept.includes('sb')) || (await waitUntil(() => judged().length === 0, SETTLE_MS))
  if (!clean) {
    const left = judged()
    violation(scn.drop ? 'gc-leak-process' : 'leak-process', scn.drop ? 'after the sandbox was dropped and collected' : 'after destroy()', left, scn)
    // A zombie cannot be killed: it is reported once, not again by every later scenario.
    for (const p of left) reportedPids.add(p.pid)
  }
  // Kill what was left so that one leak does not count again in every later scenario.
  for (const p of ourProcesses()) {
    try {
      process.kill(p.pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  // Descriptors of objects still reachable are open by right; they are reported above.
  if (kept.length > 0) {
    baselineFds = fdTargets()
    return
  }
  const fine = await waitUntil(() => fdTargets().length <= baselineFds.length, SETTLE_MS)
  if (!fine) {
    const now = fdTargets()
    // Counted per target: a second `anon_inode:[pidfd]` is extra as much as a new path.
    const left = [...baselineFds]
    const extra = now.filter((t) => {
      const i = left.indexOf(t)
      if (i === -1) return true
      left.splice(i, 1)
      return false
    })
    violation(scn.drop ? 'gc-leak-fd' : 'leak-fd', 'after destroy()', { baseline: baselineFds.length, now: now.length, extra: extra.slice(0, 10) }, scn)
    baselineFds = now
  }
}

// The baseline is taken after one sandbox has run a command and been destroyed: what the
// package opens once per process (its runtime, the signal pipe) is in it. So is what Node
// opens once, at the first use of its stdio streams: a pipe for stderr, and libuv's reserve
// descriptor (on /dev/null) that the first pipe of its loop brings. On a root host an
// isolated sandbox also opens, once per workspace owner, the user namespace its idmapped
// workspace mount is made with. And libuv opens a pipe at the first child process started
// with pipes (as a `hostRestart` step starts its host).
{
  void process.stdout
  void process.stderr
  await new Promise((resolve) => spawn(process.execPath, ['-e', ''], { stdio: ['ignore', 'pipe', 'pipe'] }).on('close', resolve))
  const warm = new lib.LocalSandbox({ workingDirectory: path.join(cfg.top, 'warm-up') })
  await warm.executeCommand('true')
  await warm.spawn({ command: 'true' }).then((h) => h.wait())
  await warm.destroy()
  if (cfg.docker) {
    const container = new lib.DockerSandbox(dockerOptions())
    await container.executeCommand('true')
    await container.destroy()
  }
  if (lib.isIsolationAvailable('bwrap')) {
    const isolated = new lib.LocalSandbox({ workingDirectory: path.join(cfg.top, 'warm-up-isolated'), isolation: 'bwrap' })
    await isolated.executeCommand('true')
    await isolated.destroy()
  }
  lib.setLogger(null)
  await collectGarbage()
}
let baselineFds = fdTargets()

// `replay` runs one scenario again (from a report's example).
const arbitrary = cfg.replay ? fc.constant(cfg.replay) : cfg.mode === 'lifecycle' ? lifecycleScenario : apiScenario
/** Violations already shown by an earlier driver (the parent passes them): not shrunk again. */
const known = new Set(cfg.known ?? [])
const keyOf = (v) => `${v.kind} | ${typeof v.call === 'string' ? v.call : v.call?.call}`
// The first scenario with a violation not known yet fails the property, and fast-check
// shrinks it: the runs made while shrinking only refine that counterexample.
let shrinking = false
/** Shrinking stops here: the remaining candidates pass unrun, and the smallest failure so far stands. */
let shrinkUntil = Infinity
const SHRINK_MS = 20_000
let counterexample
let runs = 0
const started = Date.now()
const result = await fc.check(
  fc.asyncProperty(arbitrary, async (scn) => {
    if (Date.now() > shrinkUntil) return
    runs++
    const first = violations.length
    inFlightRun = runScenario(scn)
    const n = await inFlightRun
    lib.setLogger(null)
    await checkLeaks(scn, n)
    // rm copes with trees deeper than PATH_MAX.
    execFileSync('rm', ['-rf', path.join(cfg.top, `s${n}`)])
    const own = violations.splice(first)
    if (!shrinking) violations.push(...own)
    const fresh = own.filter((v) => !known.has(keyOf(v)))
    if (fresh.length > 0) {
      if (!shrinking) shrinkUntil = Date.now() + SHRINK_MS
      shrinking = true
      counterexample = { scenario: scn, violations: fresh.map(({ scenario, ...v }) => v) }
      throw new Error(fresh.map(keyOf).join('; '))
    }
  }),
  { seed: cfg.seed, numRuns: cfg.replay ? 1 : cfg.numRuns, plugins: [fc.interruptAfterTimeLimit(cfg.budgetMs)] },
)
if (cfg.docker) {
  try {
    // A container outlives this process: the scenario the time limit cut off (it runs on
    // meanwhile) skips its remaining batches and destroys what it made, the sandboxes its
    // steps made beside its own included; one that has not ended by then has them destroyed here.
    const cutOff = inFlight
    if (cutOff) {
      progress({ call: 'the scenario cut off by the time limit, ending' })
      wedged = true
      await deadline(inFlightRun.catch(() => {}), 4 * CALL_MS)
      for (const sb of [cutOff.sb, ...cutOff.extra].filter((o) => o instanceof lib.DockerSandbox)) {
        await deadline(sb.destroy().catch(() => {}), CALL_MS)
        await containersOf(sb, { remove: true })
      }
    }
    // Whatever a scenario started late (after its own check) shows here.
    const { name, value } = cfg.docker.label
    for (const left of await containersLabelled(`${name}=${value}`, { remove: true })) {
      violation('leak-container', 'at the end of the run', left, scenarioOfSandbox.get(left.sandbox))
    }
    await removeCheckpoints()
  } catch (err) {
    // The report is written all the same: the engine's answer is the violation.
    violation('driver-error', 'the containers left at the end', describeError(err))
  }
}
// (An interruption before the first run ends is reported as a failure without an error.)
if (result.failed && !counterexample && !result.interrupted) {
  violation('driver-error', 'fast-check', { error: String(result.errorInstance?.stack ?? result.errorInstance), counterexample: result.counterexample })
}

current = 'report'
fs.writeFileSync(
  cfg.report,
  JSON.stringify({
    runs,
    ms: Date.now() - started,
    violations,
    counterexample: counterexample && { ...counterexample, shrinks: result.numShrinks },
    targets: Object.fromEntries(Object.entries(TARGETS).map(([t, m]) => [t, [...m.methods.keys(), ...m.getters]])),
  }),
)
process.exit(0)
