import { createRequire } from 'node:module'

const api = createRequire(import.meta.url)('./index.js')

export const {
  LocalSandbox,
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
} = api
export default api
