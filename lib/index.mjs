import { createRequire } from 'node:module'

const api = createRequire(import.meta.url)('./index.js')

export const {
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
} = api
export default api
