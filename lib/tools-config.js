'use strict'
// The check of a workspace's tools config: one rule for every way its tools are built.
const { WORKSPACE_TOOLS } = require('./constants')
const { WorkspaceError } = require('./errors')
const { mediaTypeCheck, maxMediaBytesOf } = require('./mime')
const { describe, readingOptions } = require('./options')

const { EXECUTE_COMMAND } = WORKSPACE_TOOLS.SANDBOX
const { READ_FILE } = WORKSPACE_TOOLS.FILESYSTEM
const KNOWN_TOOLS = new Set(Object.values(WORKSPACE_TOOLS).flatMap(Object.values))
const TOP_LEVEL_KEYS = new Set(['enabled', 'requireApproval', 'hooks', 'writeLockTimeoutMs'])
const TOOL_KEYS = new Set([
  'enabled',
  'requireApproval',
  'name',
  'maxOutputTokens',
  'backgroundProcesses',
  'background',
  'requireReadBeforeWrite',
  'mediaTypes',
  'maxMediaBytes',
])

/** Options of Mastra's tools config that these tools do not implement (refused, never ignored). */
const UNSUPPORTED = {
  screenshotAfterAction: 'the computer tools are not supported',
  screenshotDelayMs: 'the computer tools are not supported',
}

const toolsConfigError = (message) => new WorkspaceError(message, 'INVALID_CONFIG')

/** `enabled`/`requireApproval`: a boolean or a function deciding per call. */
function checkSwitch(value, name) {
  if (value !== undefined && typeof value !== 'boolean' && typeof value !== 'function') {
    throw toolsConfigError(`${name} must be a boolean or a function, got ${describe(value)}`)
  }
}

/** `hooks`: an object of the two hook functions, each optional. */
function checkHooks(hooks) {
  if (hooks === undefined) return
  if (hooks === null || typeof hooks !== 'object' || Array.isArray(hooks)) {
    throw toolsConfigError(`tools.hooks must be an object, got ${describe(hooks)}`)
  }
  for (const hook of ['beforeToolCall', 'afterToolCall']) {
    if (hooks[hook] !== undefined && typeof hooks[hook] !== 'function') {
      throw toolsConfigError(`tools.hooks.${hook} must be a function, got ${describe(hooks[hook])}`)
    }
  }
}

/** The top-level options: the two switches, `hooks` and `writeLockTimeoutMs`. */
function checkTopLevel(key, value) {
  const name = `tools.${key}`
  if (key === 'hooks') checkHooks(value)
  else if (key === 'writeLockTimeoutMs') {
    if (value !== undefined && !(typeof value === 'number' && value > 0)) {
      throw toolsConfigError(`${name} must be a positive number of milliseconds, got ${describe(value)}`)
    }
  } else checkSwitch(value, name)
}

function checkToolEntry(tool, entry) {
  const at = `tools.${tool}`
  if (entry === undefined) return
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
    throw toolsConfigError(`${at} must be an object, got ${describe(entry)}`)
  }
  for (const [option, value] of Object.entries(entry)) {
    const name = `${at}.${option}`
    if (UNSUPPORTED[option]) throw toolsConfigError(`${name} is not supported: ${UNSUPPORTED[option]}`)
    if (!TOOL_KEYS.has(option)) throw toolsConfigError(`${name} is not an option of a workspace tool (one of ${[...TOOL_KEYS].join(', ')})`)
    if (option === 'enabled' || option === 'requireApproval' || option === 'requireReadBeforeWrite') checkSwitch(value, name)
    if ((option === 'mediaTypes' || option === 'maxMediaBytes') && value !== undefined && tool !== READ_FILE) {
      throw toolsConfigError(`${name} is an option of ${READ_FILE} only`)
    }
    if (option === 'mediaTypes') mediaTypeCheck(value, name)
    if (option === 'maxMediaBytes') maxMediaBytesOf(value, name)
    if (option === 'name' && value !== undefined && (typeof value !== 'string' || value === '')) {
      throw toolsConfigError(`${name} must be a non-empty string, got ${describe(value)}`)
    }
    if (option === 'maxOutputTokens' && value !== undefined && !(typeof value === 'number' && value > 0)) {
      throw toolsConfigError(`${name} must be a positive number, got ${describe(value)}`)
    }
    if (option === 'backgroundProcesses') checkBackgroundProcesses(tool, value, name)
  }
}

function checkBackgroundProcesses(tool, value, name) {
  if (value === undefined) return
  if (tool !== EXECUTE_COMMAND) throw toolsConfigError(`${name} is an option of ${EXECUTE_COMMAND} only`)
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw toolsConfigError(`${name} must be an object, got ${describe(value)}`)
  }
  for (const [key, callback] of Object.entries(value)) {
    if (key === 'abortSignal') {
      if (callback !== undefined && callback !== null && callback !== false && typeof callback?.addEventListener !== 'function') {
        throw toolsConfigError(`${name}.abortSignal must be an AbortSignal, null or false, got ${describe(callback)}`)
      }
    } else if (!['onStdout', 'onStderr', 'onExit'].includes(key)) {
      throw toolsConfigError(`${name}.${key} is not an option of backgroundProcesses (onStdout, onStderr, onExit, abortSignal)`)
    } else if (callback !== undefined && typeof callback !== 'function') {
      throw toolsConfigError(`${name}.${key} must be a function, got ${describe(callback)}`)
    }
  }
}

/**
 * Checks a workspace's tools config, the one rule for every way tools are built: this
 * package's `createWorkspaceTools` and a Mastra `Agent` (which builds its own tools from
 * `getToolsConfig()`, so the config is checked where the workspace takes it). A bad entry
 * is a `WorkspaceError` `INVALID_CONFIG` naming its key.
 */
function checkToolsConfig(toolsConfig) {
  if (toolsConfig === undefined || toolsConfig === null) return
  readingOptions('tools', () => {
    if (typeof toolsConfig !== 'object' || Array.isArray(toolsConfig)) {
      throw toolsConfigError(`tools must be an object, got ${describe(toolsConfig)}`)
    }
    for (const [key, value] of Object.entries(toolsConfig)) {
      if (UNSUPPORTED[key]) throw toolsConfigError(`tools.${key} is not supported: ${UNSUPPORTED[key]}`)
      if (TOP_LEVEL_KEYS.has(key)) checkTopLevel(key, value)
      else if (KNOWN_TOOLS.has(key)) checkToolEntry(key, value)
      else throw toolsConfigError(`Unknown workspace tool "${key}" in the tools config (tools.${key})`)
    }
  })
}

module.exports = { checkToolsConfig }
