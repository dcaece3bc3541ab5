'use strict'
// Type checks for options coming from JavaScript callers. Each failure names the option;
// value rules (ranges, enumerations) are checked by the native side.
const { SandboxOptionError } = require('./errors')
const { RETENTION_MESSAGE } = require('./translate')

function fail(name, expected, value) {
  const got = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value
  throw new SandboxOptionError(`${name} must be ${expected}, got ${got}`)
}

const check = {
  object(value, name) {
    if (value !== undefined && (value === null || typeof value !== 'object' || Array.isArray(value))) fail(name, 'an object', value)
    return value ?? {}
  },
  string(value, name) {
    if (value !== undefined && typeof value !== 'string') fail(name, 'a string', value)
    return value
  },
  number(value, name) {
    if (value !== undefined && (typeof value !== 'number' || Number.isNaN(value))) fail(name, 'a number', value)
    return value
  },
  boolean(value, name) {
    if (value !== undefined && typeof value !== 'boolean') fail(name, 'a boolean', value)
    return value
  },
  function(value, name) {
    if (value !== undefined && value !== null && typeof value !== 'function') fail(name, 'a function', value)
    return value ?? undefined
  },
  /** Milliseconds: a non-negative number (Infinity allowed, meaning no limit). */
  duration(value, name) {
    if (value === undefined || value === null) return undefined
    if (typeof value !== 'number' || Number.isNaN(value)) fail(name, 'a number of milliseconds', value)
    if (value < 0) throw new SandboxOptionError(`${name} must be a non-negative number of milliseconds, got ${value}`)
    return value
  },
  stringArray(value, name) {
    if (value === undefined) return []
    if (!Array.isArray(value)) fail(name, 'an array of strings', value)
    value.forEach((item, i) => typeof item !== 'string' && fail(`${name}[${i}]`, 'a string', item))
    return value
  },
  /** An env map: string values are kept, undefined values dropped. */
  env(value, name) {
    const env = check.object(value, name)
    const out = {}
    for (const [key, v] of Object.entries(env)) {
      if (v === undefined) continue
      if (typeof v !== 'string') fail(`${name}.${key}`, 'a string', v)
      out[key] = v
    }
    return out
  },
  abortSignal(value, name) {
    if (value === undefined || value === null || value === false) return undefined
    if (typeof value !== 'object' || typeof value.addEventListener !== 'function' || !('aborted' in value)) {
      fail(name, 'an AbortSignal', value)
    }
    return value
  },
  retention(value) {
    if (value === undefined) return undefined
    if (value !== Infinity && !(Number.isInteger(value) && value >= 0)) throw new RangeError(RETENTION_MESSAGE)
    return value
  },
  oneOf(value, name, choices) {
    if (value !== undefined && !choices.includes(value)) {
      throw new SandboxOptionError(`${name} must be one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${JSON.stringify(value)}`)
    }
    return value
  },
}

/**
 * A provider's instructions: its default text, unless `custom` replaces it (a string,
 * the empty string included) or computes it (a function given the default as `auto`).
 */
function instructionsText(custom, auto, requestContext) {
  if (custom === undefined) return auto
  if (typeof custom === 'string') return custom
  return custom({ auto, defaultInstructions: auto, requestContext })
}

module.exports = { check, instructionsText }
