'use strict'
// What every Mastra component has besides its own API (Mastra's `MastraBase`): the logger
// component it reports as, and the stored configuration it was made from. Components of
// this package are made from code, so there is none unless Mastra's storage sets one.

const rawConfigs = new WeakMap()

const members = {
  /** The configuration this component was stored as, if any. */
  toRawConfig() {
    return rawConfigs.get(this)
  },
  /** Called by Mastra's storage when it made this component from a stored configuration. */
  __setRawConfig(rawConfig) {
    rawConfigs.set(this, rawConfig)
  },
}

/** Gives `Class` the members of a Mastra component of the workspace. */
function asMastraComponent(Class) {
  Object.defineProperty(Class.prototype, 'component', { get: () => 'WORKSPACE', configurable: true })
  for (const [name, fn] of Object.entries(members)) {
    Object.defineProperty(Class.prototype, name, { value: fn, writable: true, configurable: true })
  }
  return Class
}

module.exports = { asMastraComponent }
