'use strict'
// What the package loads on first use rather than at its import: a backend's or a
// subsystem's own modules, Node's modules that most programs never need from it (child
// processes, streams, hashes), and the addon (see native.js). Importing the package then
// costs little more than its classes. Here too the errors of a part that cannot be loaded.

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

/**
 * The native addon could not be had: `code` `NATIVE_ADDON_MISSING` (not built, not
 * installed, or no package for this platform: thrown by the import) or
 * `NATIVE_ADDON_LOAD_FAILED` (installed, but it does not load: `cause` says why; thrown by
 * the first use of the addon, and the same error by every later one). Not exported (the
 * package's entry may not have loaded): match on `code`.
 */
class NativeAddonError extends Error {
  constructor(message, code, platformPackage, cause) {
    super(message, { cause })
    this.name = 'NativeAddonError'
    this.code = code
    if (platformPackage !== undefined) this.platformPackage = platformPackage
  }
}

module.exports = { lazy, ModuleLoadError, NativeAddonError }
