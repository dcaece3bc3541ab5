'use strict'
const native = require('../index.js')
const { SandboxOptionError } = require('./errors')
const { translatingSync } = require('./translate')
const { catchRejection } = require('./thenable')

let current

/**
 * A record from the native side, to the logger's method of that level (or the nearest).
 * Whatever the logger does (a throwing getter or Proxy trap, a method that is not a
 * function, a rejected promise, a `setLogger` call of its own) costs at most its records:
 * this runs as a native callback, where an escaping exception would end the process.
 */
function deliver(record) {
  const logger = current
  try {
    let method = logger?.[record.level]
    if (method == null && record.level === 'trace') method = logger?.debug
    if (typeof method !== 'function') return
    const result = method.call(logger, `[native-workspace] ${record.message}`, { target: record.target, ...record.fields })
    catchRejection(result, () => {})
  } catch {
    // The logger loses this record; the host goes on.
  }
}

/**
 * Sends this package's diagnostics (a sandbox killed by its disk budget, a cgroup left
 * busy, …) at `level` and above to `logger`: `console`, a Mastra logger, or any object
 * with `error`/`warn`/`info`/`debug` methods. `null` stops them.
 */
function setLogger(logger, { level = 'warn' } = {}) {
  if (logger !== null && logger !== undefined && typeof logger !== 'object') {
    throw new SandboxOptionError(`logger must be an object with error/warn/info/debug methods or null, got ${typeof logger}`)
  }
  if (typeof level !== 'string') {
    throw new SandboxOptionError(`level must be 'error', 'warn', 'info', 'debug' or 'trace', got ${typeof level}`)
  }
  translatingSync(() => native.setLogHandler(logger ? deliver : null, level))
  current = logger ?? undefined
}

module.exports = { setLogger }
