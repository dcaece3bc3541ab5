'use strict'
// Error classes of the public API. Native errors arrive as plain Errors with a `code`;
// `fromNative` (translate.js) re-creates them as the class that code stands for. Every
// export here is public: `index.js` spreads this module into the package's exports.
const { STANDS_FOR } = require('./stands-for')

class SandboxError extends Error {
  constructor(message, code, details) {
    super(message)
    this.name = new.target.name
    this.code = code
    if (details !== undefined) this.details = details
  }
}

class SandboxExecutionError extends SandboxError {
  constructor(message, exitCode, stdout, stderr) {
    super(message, 'EXECUTION_FAILED', { exitCode, stdout, stderr })
    this.exitCode = exitCode
    this.stdout = stdout
    this.stderr = stderr
  }
}

class SandboxTimeoutError extends SandboxError {
  constructor(timeoutMs, operation) {
    super(`Execution timed out after ${timeoutMs}ms`, 'TIMEOUT', { timeoutMs, operation })
    this.timeoutMs = timeoutMs
    this.operation = operation
  }
}

class SandboxNotReadyError extends SandboxError {
  constructor(idOrStatus) {
    super(`Sandbox is not ready: ${idOrStatus}`, 'NOT_READY', { id: idOrStatus })
  }
}

/** A feature the sandbox cannot honour (e.g. a per-file mode its uploads cannot set). */
class SandboxUnsupportedFeatureError extends SandboxError {
  constructor(message, details) {
    super(message, 'UNSUPPORTED_FEATURE', details)
  }
}

/** An operation cancelled through its AbortSignal; `cause` is the signal's reason. */
class SandboxAbortError extends SandboxError {
  constructor(operation = 'operation', reason) {
    super(`Sandbox operation aborted: ${operation}`, 'ABORTED', { operation, reason })
    this.cause = reason
  }
}

class IsolationUnavailableError extends SandboxError {
  constructor(backend, reason) {
    super(`Isolation backend '${backend}' is not available: ${reason}`, 'ISOLATION_UNAVAILABLE', { backend, reason })
    this.backend = backend
    this.reason = reason
  }
}

class MountError extends SandboxError {
  constructor(message, mountPath, details) {
    super(message, 'MOUNT_ERROR', { ...details, mountPath })
    this.mountPath = mountPath
  }
}

class MountNotSupportedError extends SandboxError {
  constructor(sandboxProvider) {
    super(`Sandbox provider '${sandboxProvider}' does not support mounting`, 'MOUNT_NOT_SUPPORTED', { sandboxProvider })
  }
}

class FilesystemNotMountableError extends SandboxError {
  constructor(filesystemProvider, reason) {
    super(
      reason
        ? `Filesystem '${filesystemProvider}' cannot be mounted: ${reason}`
        : `Filesystem '${filesystemProvider}' does not support mounting`,
      'FILESYSTEM_NOT_MOUNTABLE',
      { filesystemProvider, reason },
    )
  }
}

/** An option of the wrong type or value; the message names the option. */
class SandboxOptionError extends SandboxError {
  /** `options.cause`: what made the option unreadable (a throwing getter…), if anything. */
  constructor(message, options) {
    super(message, 'INVALID_OPTION')
    if (options?.cause !== undefined) this.cause = options.cause
  }
}

class UnsupportedStdinCloseError extends Error {
  constructor(message = 'This process handle does not support closing stdin') {
    super(message)
    this.name = 'UnsupportedStdinCloseError'
  }
}

class WorkspaceError extends Error {
  constructor(message, code, workspaceId) {
    super(message)
    this.name = new.target.name
    this.code = code
    if (workspaceId !== undefined) this.workspaceId = workspaceId
  }
}

class WorkspaceNotAvailableError extends WorkspaceError {
  constructor() {
    super('Workspace not available. Ensure the agent has a workspace configured.', 'NO_WORKSPACE')
  }
}

class FilesystemNotAvailableError extends WorkspaceError {
  constructor() {
    super('Workspace does not have a filesystem configured', 'NO_FILESYSTEM')
  }
}

class SandboxNotAvailableError extends WorkspaceError {
  constructor(message) {
    super(message ?? 'Workspace does not have a sandbox configured', 'NO_SANDBOX')
  }
}

class SandboxFeatureNotSupportedError extends WorkspaceError {
  constructor(feature) {
    super(`Sandbox does not support ${feature}`, 'FEATURE_NOT_SUPPORTED')
    this.feature = feature
  }
}

/** The workspace has no search configured (neither `bm25` nor `vectorStore` with `embedder`). */
class SearchNotAvailableError extends WorkspaceError {
  constructor() {
    super('Workspace does not have search configured (enable bm25 or provide vectorStore + embedder)', 'NO_SEARCH')
  }
}

class WorkspaceNotReadyError extends WorkspaceError {
  constructor(workspaceId, status) {
    super(`Workspace is not ready (status: ${status})`, 'NOT_READY', workspaceId)
  }
}

class WorkspaceReadOnlyError extends WorkspaceError {
  constructor(operation) {
    super(`Workspace is in read-only mode. Cannot perform: ${operation}`, 'READ_ONLY')
  }
}

class FilesystemError extends Error {
  constructor(message, code, path) {
    super(message)
    this.name = new.target.name
    this.code = code
    this.path = path
  }

  static [Symbol.hasInstance](value) {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true
    const standsFor = value?.[STANDS_FOR]
    return typeof standsFor === 'function' && (standsFor === this || standsFor.prototype instanceof this)
  }
}

class FileNotFoundError extends FilesystemError {
  constructor(path) {
    super(`File not found: ${path}`, 'ENOENT', path)
  }
}
class DirectoryNotFoundError extends FilesystemError {
  constructor(path) {
    super(`Directory not found: ${path}`, 'ENOENT', path)
  }
}
class FileExistsError extends FilesystemError {
  constructor(path) {
    super(`File already exists: ${path}`, 'EEXIST', path)
  }
}
class IsDirectoryError extends FilesystemError {
  constructor(path) {
    super(`Path is a directory: ${path}`, 'EISDIR', path)
  }
}
class NotDirectoryError extends FilesystemError {
  constructor(path) {
    super(`Path is not a directory: ${path}`, 'ENOTDIR', path)
  }
}
/** A grep pattern a filesystem's own search cannot run (callers fall back to reading the files). */
class UnsupportedGrepPatternError extends FilesystemError {
  constructor(pattern, reason) {
    super(`Unsupported grep pattern: ${pattern}${reason ? ` (${reason})` : ''}`, 'EUNSUPPORTED_PATTERN', pattern)
  }
}
class DirectoryNotEmptyError extends FilesystemError {
  constructor(path) {
    super(`Directory not empty: ${path}`, 'ENOTEMPTY', path)
  }
}
class PermissionError extends FilesystemError {
  constructor(path, operation) {
    super(`Permission denied: ${operation} on ${path}`, 'EACCES', path)
    this.operation = operation
  }
}

/** A write refused because the file was not read first (or changed since); the message is `reason`. */
class FileReadRequiredError extends FilesystemError {
  constructor(path, reason) {
    super(reason, 'EREAD_REQUIRED', path)
  }
}
/** A write refused because the file changed since it was read. */
class StaleFileError extends FilesystemError {
  constructor(path, expectedMtime, actualMtime) {
    super(
      `File was modified externally: ${path} (expected mtime ${expectedMtime.toISOString()}, actual ${actualMtime.toISOString()})`,
      'ESTALE',
      path,
    )
    this.expectedMtime = expectedMtime
    this.actualMtime = actualMtime
  }
}
/** An operation on a filesystem that did not reach `ready`; `path` holds the filesystem's id. */
class FilesystemNotReadyError extends FilesystemError {
  constructor(id) {
    super(`Filesystem "${id}" is not ready. Call init() first or use ensureReady().`, 'ENOTREADY', id)
  }
}

module.exports = {
  SandboxError,
  SandboxExecutionError,
  SandboxTimeoutError,
  SandboxNotReadyError,
  SandboxUnsupportedFeatureError,
  SandboxAbortError,
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
  SearchNotAvailableError,
  WorkspaceNotReadyError,
  WorkspaceReadOnlyError,
  FilesystemError,
  FileNotFoundError,
  DirectoryNotFoundError,
  FileExistsError,
  IsDirectoryError,
  NotDirectoryError,
  UnsupportedGrepPatternError,
  DirectoryNotEmptyError,
  PermissionError,
  FileReadRequiredError,
  StaleFileError,
  FilesystemNotReadyError,
}
