'use strict'
const native = require('./native')
const { SandboxOptionError } = require('./errors')
const { translatingSync } = require('./translate')
const { catchRejection, check, readingOptions } = require('./options')

let current
/** The least severe level `current` is given. */
let currentLevel = 'warn'
const SEVERITY = ['error', 'warn', 'info', 'debug', 'trace']

/**
 * Calls `logger[level](message, data)` (a `trace` record falls back to `debug`). Whatever
 * the logger does (a throwing getter or Proxy trap, a method that is not a function, a
 * rejected promise, a `setLogger` call of its own) costs at most this record: loggers are
 * called from native callbacks and promise handlers, where an escaping error would end
 * the process.
 */
function logTo(logger, level, message, data) {
  try {
    let method = logger?.[level]
    if (method == null && level === 'trace') method = logger?.debug
    if (typeof method !== 'function') return
    catchRejection(method.call(logger, message, data), () => {})
  } catch {
    // The logger loses this record; the host goes on.
  }
}

/** A record from the native side, to the current logger. */
function deliver(record) {
  logTo(current, record.level, `[native-workspace] ${record.message}`, { target: record.target, ...record.fields })
}

/** The most warnings `warnOnce` remembers (and so keeps for a logger set later). */
const WARNED_LIMIT = 256
/** The keys of the warnings given by `warnOnce`. */
const warned = new Set()
/** Those of them given while no logger took warnings: the first logger that does gets them. */
let undelivered = []

const takesWarnings = () => current !== undefined && SEVERITY.indexOf('warn') <= SEVERITY.indexOf(currentLevel)

/**
 * A warning about how this package is used (not about a sandbox's run), given once per
 * process under `key`: code that makes a sandbox per request repeats the same mistake
 * each time, and once is enough to find it. Given before any logger is set, it waits for
 * the first one; past `WARNED_LIMIT` keys, the rest are dropped.
 */
function warnOnce(key, message, data) {
  if (warned.has(key) || warned.size >= WARNED_LIMIT) return
  warned.add(key)
  if (takesWarnings()) logTo(current, 'warn', message, data)
  else undelivered.push([message, data])
}

/**
 * Sends this package's diagnostics (a sandbox killed by its disk budget, a cgroup left
 * busy, …) at `level` and above to `logger`: `console`, a Mastra logger, or any object
 * with `error`/`warn`/`info`/`debug` methods. `null` stops them.
 */
function setLogger(logger, options) {
  const given = readingOptions('options', () => check.object(options, 'options')?.level)
  const level = given === undefined ? 'warn' : given
  if (logger !== null && logger !== undefined && typeof logger !== 'object') {
    throw new SandboxOptionError(`logger must be an object with error/warn/info/debug methods or null, got ${typeof logger}`)
  }
  if (typeof level !== 'string') {
    throw new SandboxOptionError(`level must be 'error', 'warn', 'info', 'debug' or 'trace', got ${typeof level}`)
  }
  translatingSync(() => native.setLogHandler(logger ? deliver : null, level))
  current = logger ?? undefined
  currentLevel = level
  if (takesWarnings()) {
    const waiting = undelivered
    undelivered = []
    for (const [message, data] of waiting) logTo(current, 'warn', message, data)
  }
}

/**
 * The logger given to `setLogger`, at its level, as one object: for components that hold a
 * logger until Mastra gives them theirs.
 */
const packageLogger = Object.freeze(
  Object.fromEntries(
    SEVERITY.map((level) => [
      level,
      (message, data) => {
        if (SEVERITY.indexOf(level) <= SEVERITY.indexOf(currentLevel)) logTo(current, level, message, data)
      },
    ]),
  ),
)

module.exports = { logTo, setLogger, packageLogger, warnOnce }
