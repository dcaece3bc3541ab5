'use strict'
// Type checks for options coming from JavaScript callers (and tools' inputs, by their
// schemas), and what their callbacks return. Each failure names the option; value rules
// (ranges, enumerations) are checked by the native side.
const { SandboxOptionError, WorkspaceError } = require('./errors')
const { isTyped, retentionError } = require('./translate')
const { isUtf8 } = require('node:buffer')
const { isUint8Array } = require('node:util/types')

/**
 * Routes the rejection of `value` to `onRejected` if `value` is a promise or any other
 * thenable, so a user's async callback cannot become an unhandled rejection. Reading or
 * calling a hostile `then` may throw: the caller treats that like a throw of the callback.
 */
function catchRejection(value, onRejected) {
  if ((typeof value !== 'object' || value === null) && typeof value !== 'function') return
  const then = value.then
  if (typeof then === 'function') then.call(value, undefined, onRejected)
}

/** `Array.isArray`, false for a revoked Proxy (where it throws). */
function isArray(value) {
  try {
    return Array.isArray(value)
  } catch {
    return false
  }
}

/** Whether `value` is a class: it passes for a function but throws when called without `new`. */
function isClass(value) {
  try {
    return typeof value === 'function' && /^class[\s{]/.test(Function.prototype.toString.call(value))
  } catch {
    return false
  }
}

/** The kind of a value: `null`, `array`, `class`, or its `typeof`. */
function kind(value) {
  return value === null ? 'null' : isArray(value) ? 'array' : isClass(value) ? 'class' : typeof value
}

/**
 * A value for a message, without running any of its code: BigInts, Symbols, Proxies and
 * objects whose `toString`/`toJSON` throw are described, never converted.
 */
function describe(value) {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)
    case 'bigint':
      return `${value}n`
    case 'symbol':
      return 'a symbol'
    case 'function':
      return 'a function'
    case 'object':
      return value === null ? 'null' : isArray(value) ? 'an array' : 'an object'
    default:
      return String(value)
  }
}

function fail(name, expected, value) {
  throw new SandboxOptionError(`${name} must be ${expected}, got ${kind(value)}`)
}

/**
 * Runs `read`, which reads the caller's options: an exception from the caller's own getters
 * or Proxy traps becomes a SandboxOptionError naming `name`, with the original as `cause`.
 */
function readingOptions(name, read) {
  try {
    return read()
  } catch (err) {
    if (isTyped(err)) throw err
    let reason
    try {
      reason = err instanceof Error ? String(err.message) : describe(err)
    } catch {
      reason = describe(err)
    }
    throw new SandboxOptionError(`${name} could not be read: ${reason}`, { cause: err })
  }
}

const check = {
  /**
   * What a callback this package calls synchronously returned. A promise (or any
   * thenable) is refused, since nothing waits for it, and its rejection is caught so that
   * it cannot become an unhandled rejection of the host.
   */
  returned(value, name) {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return value
    let then
    try {
      then = value.then
    } catch (err) {
      throw new SandboxOptionError(`${name} could not be read: ${err?.message ?? err}`, { cause: err })
    }
    if (typeof then !== 'function') return value
    try {
      catchRejection(value, () => {})
    } catch {
      // A `then` that throws when called has nothing left to reject.
    }
    throw new SandboxOptionError(`${name} must be returned as it is, not as a promise: this callback is not awaited`)
  },
  object(value, name) {
    if (value !== undefined && (value === null || typeof value !== 'object' || isArray(value))) fail(name, 'an object', value)
    return value ?? {}
  },
  /** An object that must be given. */
  requiredObject(value, name) {
    if (value === null || typeof value !== 'object' || isArray(value)) fail(name, 'an object', value)
    return value
  },
  string(value, name) {
    if (value !== undefined && typeof value !== 'string') fail(name, 'a string', value)
    return value
  },
  /** A string that must be given. */
  requiredString(value, name) {
    if (typeof value !== 'string') fail(name, 'a string', value)
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
    if (value !== undefined && value !== null && (typeof value !== 'function' || isClass(value))) fail(name, 'a function', value)
    return value ?? undefined
  },
  /** A function that must be given. */
  requiredFunction(value, name) {
    if (typeof value !== 'function' || isClass(value)) fail(name, 'a function', value)
    return value
  },
  /**
   * Any value as the string `String()` makes of it (a pid, a key); one that cannot be
   * converted (a revoked Proxy, a throwing `toString`) is a typed error naming it.
   */
  stringified(value, name) {
    return readingOptions(name, () => String(value))
  },
  /** File content: a string, a Buffer or another Uint8Array. */
  content(value, name) {
    if (typeof value !== 'string' && !readingOptions(name, () => value instanceof Uint8Array)) fail(name, 'a string, Buffer or Uint8Array', value)
    return value
  },
  /** An object with the methods `methods`, such as a workspace of this package or of Mastra. */
  withMethods(value, name, expected, methods) {
    const usable = readingOptions(name, () => value !== null && typeof value === 'object' && methods.every((m) => typeof value[m] === 'function'))
    if (!usable) fail(name, expected, value)
    return value
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
    if (!isArray(value)) fail(name, 'an array of strings', value)
    value.forEach((item, i) => typeof item !== 'string' && fail(`${name}[${i}]`, 'a string', item))
    return value
  },
  /**
   * An env map: string values are kept, undefined values dropped. Read whole here, so that
   * one that cannot be read (a revoked Proxy, a throwing getter) is a typed error wherever
   * an env is taken.
   */
  env(value, name) {
    return readingOptions(name, () => {
      const env = check.object(value, name)
      const out = {}
      for (const [key, v] of Object.entries(env)) {
        if (v === undefined) continue
        if (typeof v !== 'string') fail(`${name}.${key}`, 'a string', v)
        out[key] = v
      }
      return out
    })
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
    if (value !== Infinity && !(Number.isInteger(value) && value >= 0)) throw retentionError()
    return value
  },
  oneOf(value, name, choices) {
    if (value !== undefined && !choices.includes(value)) {
      throw new SandboxOptionError(`${name} must be one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${describe(value)}`)
    }
    return value
  },
}

/**
 * A provider's instructions: its default text, unless `custom` replaces it (a string,
 * the empty string included) or computes it (a function given the default as `auto`, and
 * the `requestContext` of the caller's `options`, read only then).
 */
function instructionsText(custom, auto, options) {
  if (custom === undefined) return auto
  if (typeof custom === 'string') return custom
  const requestContext = readingOptions('options', () => options?.requestContext)
  return custom({ auto, defaultInstructions: auto, requestContext })
}

/**
 * The environment `update(current)` returns, checked: the one rule of every sandbox's
 * `setEnv` (a copy goes in; a promise or a map of non-strings is refused, naming it).
 */
function updatedEnv(update, current) {
  check.requiredFunction(update, 'setEnv(update): update')
  return { ...check.env(check.returned(update({ ...current }), 'setEnv result'), 'setEnv result') }
}

/** An environment variable's name, as shells and `env` take it. */
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Variables the egress proxy sets for every command: a secret cannot take their names. */
const EGRESS_VARIABLES = Object.freeze([
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'http_proxy',
  'https_proxy',
  'NO_PROXY',
  'no_proxy',
  'GIT_HTTP_PROXY_AUTHMETHOD',
  'SSL_CERT_FILE',
  'NODE_EXTRA_CA_CERTS',
  'REQUESTS_CA_BUNDLE',
  'CURL_CA_BUNDLE',
  'GIT_SSL_CAINFO',
])

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----\s+[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----/

/** NUL, LF and CR: bytes a header value cannot hold. */
const LINE_BREAK_OR_NUL = [0, 10, 13]

/**
 * Why a secret's value cannot be one, or undefined: it is a non-empty string, or
 * `Uint8Array` (a `Buffer`) of UTF-8 text, without NUL, CR or LF. Bytes are looked at as
 * they are: no string is made of them, so a caller who wipes them leaves no copy behind.
 */
function secretValueProblem(value) {
  if (typeof value === 'string') return value === '' || /[\0\r\n]/.test(value) ? 'a string that is empty or holds one of them' : undefined
  if (isUint8Array(value)) {
    if (value.length === 0 || LINE_BREAK_OR_NUL.some((byte) => value.includes(byte))) return 'bytes that are none or hold one of them'
    return isUtf8(value) ? undefined : 'bytes that are not UTF-8 text'
  }
  return kind(value)
}

/**
 * `secrets` (`{ NAME: { value, domains } }`), named `name`: a copy, each name a variable's,
 * each value a non-empty string or Uint8Array without NUL, CR or LF (never shown in a
 * message; bytes kept as the caller's, not copied), each domain a string (what it names, and
 * whether `allowedDomains` allows it, is checked natively).
 */
function secretsOption(value, name) {
  return readingOptions(name, () => {
    const record = check.requiredObject(value, name)
    const out = {}
    for (const [variable, secret] of Object.entries(record)) {
      if (!VARIABLE_NAME.test(variable)) {
        throw new SandboxOptionError(`${name} has the key ${describe(variable)}, which is not an environment variable's name (letters, digits and _, not starting with a digit)`)
      }
      if (EGRESS_VARIABLES.includes(variable)) {
        throw new SandboxOptionError(`${name}.${variable} takes the name of a variable the egress proxy sets for every command (${EGRESS_VARIABLES.join(', ')})`)
      }
      check.requiredObject(secret, `${name}.${variable}`)
      const { value: real, domains } = secret
      const problem = secretValueProblem(real)
      if (problem !== undefined) {
        throw new SandboxOptionError(`${name}.${variable}.value must be a non-empty string or Uint8Array (UTF-8 text) without NUL, CR or LF, got ${problem}`)
      }
      if (!isArray(domains) || domains.length === 0) fail(`${name}.${variable}.domains`, 'a non-empty array of domain names', domains)
      out[variable] = { value: real, domains: [...check.stringArray(domains, `${name}.${variable}.domains`)] }
    }
    return out
  })
}

/** `egressCaCertificates`: PEM certificates (their content is checked natively too). */
function caCertificatesOption(value, name) {
  const certificates = [...check.stringArray(value, name)]
  certificates.forEach((pem, i) => {
    if (!PEM_CERTIFICATE.test(pem)) {
      throw new SandboxOptionError(`${name}[${i}] must be a PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----), got ${describe(pem)}`)
    }
  })
  return certificates
}

/**
 * `allowedDomains`, `egressHosts`, `secrets` and `egressCaCertificates` of `source`
 * (LocalSandbox's `nativeSandbox`, or DockerSandbox's options), each named with `prefix`;
 * their values, and how they go with the other options, are checked natively.
 */
function egressOptions(source, prefix = '') {
  return {
    allowedDomains: source.allowedDomains === undefined ? undefined : [...check.stringArray(source.allowedDomains, `${prefix}allowedDomains`)],
    egressHosts: source.egressHosts === undefined ? undefined : check.env(source.egressHosts, `${prefix}egressHosts`),
    secrets: source.secrets === undefined ? undefined : secretsOption(source.secrets, `${prefix}secrets`),
    egressCaCertificates:
      source.egressCaCertificates === undefined ? undefined : caCertificatesOption(source.egressCaCertificates, `${prefix}egressCaCertificates`),
  }
}

/** The tool's input as its schema reads it, or a `WorkspaceError` `INVALID_INPUT` saying why not. */
function validInput(schema, input, toolName) {
  let problems
  try {
    const parsed = schema.safeParse(input)
    if (parsed.success) return parsed.data
    problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')
  } catch (err) {
    // Input the validator cannot even look at (a revoked Proxy, a throwing getter).
    throw Object.assign(new WorkspaceError(`Invalid input for ${toolName}: the input could not be read`, 'INVALID_INPUT'), { cause: err })
  }
  throw new WorkspaceError(`Invalid input for ${toolName}: ${problems}`, 'INVALID_INPUT')
}

module.exports = { check, describe, egressOptions, secretsOption, isClass, readingOptions, instructionsText, updatedEnv, validInput, catchRejection }
