'use strict'
// What the package loads on first use rather than at its import: a backend's or a
// subsystem's own modules, and Node's modules that most programs never need from it
// (child processes, streams, hashes). Importing the package then costs little more than
// its classes.

/**
 * A module loaded on first use did not load (a damaged or partial install): `code`
 * `MODULE_LOAD_FAILED`, `cause` the loader's own error. Not exported (the package's entry
 * loaded without it): match on `code`.
 */
class ModuleLoadError extends Error {
  constructor(cause) {
    super(`native-workspace could not load one of its modules: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
    this.name = 'ModuleLoadError'
    this.code = 'MODULE_LOAD_FAILED'
  }
}

/**
 * A function that returns what `load()` returns, calling it on its first call only. A
 * load that throws is not retried: every call throws the same ModuleLoadError, so no
 * caller sees a module run twice or half run.
 */
function lazy(load) {
  let loaded
  let failure
  return () => {
    if (failure) throw failure
    if (loaded === undefined) {
      try {
        loaded = load()
      } catch (err) {
        failure = new ModuleLoadError(err)
        throw failure
      }
    }
    return loaded
  }
}

module.exports = { lazy, ModuleLoadError }
