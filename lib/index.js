'use strict'
// Public entry of native-workspace (CommonJS). `index.mjs` re-exports it for ESM.
const native = require('../index.js')
const errors = require('./errors')
const { LocalSandbox } = require('./local-sandbox')
const { LocalProcessManager } = require('./process-manager')
const { ProcessHandle } = require('./process-handle')
const { Workspace, callLifecycle } = require('./workspace')
const { MastraSandbox } = require('./mastra-sandbox')
const { createWorkspaceTools } = require('./tools')
const { WORKSPACE_TOOLS, WORKSPACE_TOOLS_PREFIX } = require('./constants')

/** Output kept per stream by spawned processes unless `maxRetainedBytes` says otherwise. */
const DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES = 1048576

const detectIsolation = () => native.detectIsolation()
const isIsolationAvailable = (backend) => native.isIsolationAvailable(backend)
const getRecommendedIsolation = () => {
  const detected = native.detectIsolation()
  return detected.available ? detected.backend : 'none'
}

module.exports = {
  Workspace,
  createWorkspaceTools,
  callLifecycle,
  WORKSPACE_TOOLS,
  WORKSPACE_TOOLS_PREFIX,
  LocalSandbox,
  MastraSandbox,
  LocalProcessManager,
  ProcessHandle,
  DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES,
  detectIsolation,
  isIsolationAvailable,
  getRecommendedIsolation,
  SandboxError: errors.SandboxError,
  SandboxExecutionError: errors.SandboxExecutionError,
  SandboxTimeoutError: errors.SandboxTimeoutError,
  SandboxNotReadyError: errors.SandboxNotReadyError,
  IsolationUnavailableError: errors.IsolationUnavailableError,
  MountError: errors.MountError,
  MountNotSupportedError: errors.MountNotSupportedError,
  FilesystemNotMountableError: errors.FilesystemNotMountableError,
  SandboxOptionError: errors.SandboxOptionError,
  UnsupportedStdinCloseError: errors.UnsupportedStdinCloseError,
  WorkspaceError: errors.WorkspaceError,
  WorkspaceNotAvailableError: errors.WorkspaceNotAvailableError,
  FilesystemNotAvailableError: errors.FilesystemNotAvailableError,
  SandboxNotAvailableError: errors.SandboxNotAvailableError,
  SandboxFeatureNotSupportedError: errors.SandboxFeatureNotSupportedError,
  WorkspaceNotReadyError: errors.WorkspaceNotReadyError,
  WorkspaceReadOnlyError: errors.WorkspaceReadOnlyError,
}
