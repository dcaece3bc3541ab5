'use strict'
// Public entry of native-workspace (CommonJS); `index.mjs` exports the same names for ESM.
// Every export of a spread module is public. What a backend or subsystem needs beyond its
// classes is loaded on its first use (see lazy.js).
const native = require('./native')
const { LocalSandbox, PROTECTED_PATHS, nativeSandboxConfig } = require('./local-sandbox')
const { LocalProcessManager } = require('./process-manager')
const { DockerSandbox } = require('./docker-sandbox')
const { ProcessHandle } = require('./process-handle')
const { Workspace, callLifecycle } = require('./workspace')
const { MastraSandbox } = require('./mastra-sandbox')
const { LocalFilesystem } = require('./local-filesystem')
const { CompositeFilesystem } = require('./composite-filesystem')
const { MastraFilesystem } = require('./mastra-filesystem')
const { SandboxProcessManager } = require('./sandbox-process-manager')
const { MountManager } = require('./mounts')
const { createTool } = require('./create-tool')
const { translatingSync } = require('./translate')
const { check, readingOptions } = require('./options')
const { setLogger } = require('./logging')
const { WORKSPACE_TOOLS, WORKSPACE_TOOLS_PREFIX } = require('./constants')

/** Output kept per stream by spawned processes unless `maxRetainedBytes` says otherwise. */
const DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES = 1048576

const detectIsolation = () => native.detectIsolation()
const isIsolationAvailable = (backend) => native.isIsolationAvailable(check.requiredString(backend, 'backend'))
/** The macOS seatbelt profile (SBPL) for a workspace and its `nativeSandbox` options. */
const generateSeatbeltProfile = (workspacePath, config = {}) =>
  translatingSync(() =>
    native.generateSeatbeltProfile(
      check.requiredString(workspacePath, 'workspacePath'),
      readingOptions('config', () => nativeSandboxConfig(config)),
    ),
  )
const getRecommendedIsolation = () => {
  const detected = native.detectIsolation()
  return detected.available ? detected.backend : 'none'
}

module.exports = {
  ...require('./errors'),
  ...require('./glob'),
  ...require('./sandbox-capabilities'),
  ...require('./tools'),
  ...require('./skills'),
  Workspace,
  createTool,
  callLifecycle,
  WORKSPACE_TOOLS,
  WORKSPACE_TOOLS_PREFIX,
  LocalSandbox,
  DockerSandbox,
  LocalFilesystem,
  CompositeFilesystem,
  MastraFilesystem,
  MastraSandbox,
  SandboxProcessManager,
  MountManager,
  LocalProcessManager,
  ProcessHandle,
  DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES,
  PROTECTED_PATHS,
  setLogger,
  detectIsolation,
  generateSeatbeltProfile,
  isIsolationAvailable,
  getRecommendedIsolation,
}
