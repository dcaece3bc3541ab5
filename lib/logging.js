'use strict'
const native = require('../index.js')
const { SandboxOptionError } = require('./errors')
const { translatingSync } = require('./translate')

let current

/** A record from the native side, to the logger's method of that level (or the nearest). */
function deliver(record) {
  const logger = current
  const method = logger?.[record.level] ?? (record.level === 'trace' ? logger?.debug : undefined)
  if (typeof method !== 'function') return
  try {
    method.call(logger, `[native-workspace] ${record.message}`, { target: record.target, ...record.fields })
  } catch {
    // A logger that throws loses the record; it must not take the host down.
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
  translatingSync(() => native.setLogHandler(logger ? deliver : null, level))
  current = logger ?? undefined
}

module.exports = { setLogger }
