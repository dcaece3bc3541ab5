'use strict'
// Public entry of native-workspace (CommonJS). `index.mjs` re-exports it for ESM, which
// finds the names because `module.exports` below lists plain identifiers only.
const native = require('../index.js')
const {
  SandboxError,
  SandboxExecutionError,
  SandboxTimeoutError,
  SandboxNotReadyError,
  IsolationUnavailableError,
  MountError,
  MountNotSupportedError,
  FilesystemNotMountableError,
  SandboxOptionError,
  UnsupportedStdinCloseError,
  WorkspaceError,
  WorkspaceNotAvailableError,
  FilesystemNotAvailableError,
  SandboxNotAvailableError,
  SandboxFeatureNotSupportedError,
  WorkspaceNotReadyError,
  WorkspaceReadOnlyError,
  FilesystemError,
  FileNotFoundError,
  DirectoryNotFoundError,
  FileExistsError,
  IsDirectoryError,
  NotDirectoryError,
  DirectoryNotEmptyError,
  PermissionError,
} = require('./errors')
const { LocalSandbox } = require('./local-sandbox')
const { LocalProcessManager } = require('./process-manager')
const { ProcessHandle } = require('./process-handle')
const { Workspace, callLifecycle } = require('./workspace')
const { MastraSandbox } = require('./mastra-sandbox')
const { LocalFilesystem } = require('./local-filesystem')
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
  LocalFilesystem,
  MastraSandbox,
  LocalProcessManager,
  ProcessHandle,
  DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES,
  detectIsolation,
  isIsolationAvailable,
  getRecommendedIsolation,
  SandboxError,
  SandboxExecutionError,
  SandboxTimeoutError,
  SandboxNotReadyError,
  IsolationUnavailableError,
  MountError,
  MountNotSupportedError,
  FilesystemNotMountableError,
  SandboxOptionError,
  UnsupportedStdinCloseError,
  WorkspaceError,
  WorkspaceNotAvailableError,
  FilesystemNotAvailableError,
  SandboxNotAvailableError,
  SandboxFeatureNotSupportedError,
  WorkspaceNotReadyError,
  WorkspaceReadOnlyError,
  FilesystemError,
  FileNotFoundError,
  DirectoryNotFoundError,
  FileExistsError,
  IsDirectoryError,
  NotDirectoryError,
  DirectoryNotEmptyError,
  PermissionError,
}
