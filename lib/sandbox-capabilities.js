'use strict'
// What a sandbox can do beyond commands, and the checks of `writeFiles` file modes, with
// the names and meanings of `@mastra/core/workspace`.
const { SandboxError, SandboxOptionError, SandboxUnsupportedFeatureError } = require('./errors')
const { describe, readingOptions } = require('./options')

/** The largest `mode` a file written into a sandbox may ask for: permission bits only (0o777). */
const MAX_SANDBOX_FILE_MODE = 0o777

/**
 * A primitive as Mastra prints it (a symbol too, which a template string refuses); an
 * object by its kind (its own toString may throw).
 */
const shownInMessage = (value) =>
  value !== null && (typeof value === 'object' || typeof value === 'function') ? describe(value) : String(value)

/** Refuses a `mode` that is not an integer from 0o001 to 0o777 (`SandboxError` `INVALID_ARGUMENT`). */
function validateSandboxFileMode(mode, where) {
  if (!Number.isInteger(mode) || mode < 1 || mode > MAX_SANDBOX_FILE_MODE) {
    // `where` (this package's own callers) names the input that carried the mode.
    const of = where === undefined ? '' : ` for ${shownInMessage(where)}`
    throw new SandboxError(`Invalid file mode ${shownInMessage(mode)}${of}: must be an integer between 0o001 (1) and 0o777 (511).`, 'INVALID_ARGUMENT', {
      mode,
    })
  }
}

/**
 * For a provider whose uploads cannot set permissions: refuses files that ask for a `mode`
 * (`SandboxUnsupportedFeatureError`) rather than dropping it silently.
 */
function assertModesUnsupported(files, provider) {
  const asksForMode = readingOptions('files', () => {
    if (!Array.isArray(files)) throw new SandboxOptionError(`files must be an array of { path, content, mode? }, got ${describe(files)}`)
    return files.some((file) => file?.mode !== undefined)
  })
  if (asksForMode) {
    throw new SandboxUnsupportedFeatureError(
      `The ${provider} sandbox does not support per-file permission modes in writeFiles(). Omit 'mode' to use the provider default.`,
      { provider },
    )
  }
}

/** Whether `sandbox.networking` can give URLs of the sandbox's ports. */
function supportsNetworking(sandbox) {
  return readingOptions('sandbox', () => typeof sandbox?.networking?.getPortUrl === 'function')
}

const COMPUTER_METHODS = [
  'screenshot',
  'leftClick',
  'rightClick',
  'doubleClick',
  'moveMouse',
  'drag',
  'scroll',
  'type',
  'press',
  'getScreenSize',
  'getCursorPosition',
]

/** Whether `sandbox.computer` drives a desktop (every method of the computer-use capability). */
function supportsComputer(sandbox) {
  return readingOptions('sandbox', () => {
    const computer = sandbox?.computer
    return COMPUTER_METHODS.every((method) => typeof computer?.[method] === 'function')
  })
}

module.exports = { MAX_SANDBOX_FILE_MODE, validateSandboxFileMode, assertModesUnsupported, supportsNetworking, supportsComputer }
