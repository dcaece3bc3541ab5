'use strict'
// Error classes of the public API. Native errors arrive as plain Errors with a `code`;
// `fromNative` (translate.js) re-creates them as the class that code stands for.

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
  }
}

class SandboxTimeoutError extends SandboxError {
  constructor(timeoutMs, operation) {
    super(`Execution timed out after ${timeoutMs}ms`, 'TIMEOUT', { timeoutMs, operation })
  }
}

class SandboxNotReadyError extends SandboxError {
  constructor(idOrStatus) {
    super(`Sandbox is not ready: ${idOrStatus}`, 'NOT_READY', { id: idOrStatus })
  }
}

/** An operation this sandbox cannot do (the caller may fall back to another way). */
class SandboxUnsupportedFeatureError extends SandboxError {
  constructor(message, details) {
    super(message, 'UNSUPPORTED_FEATURE', details)
  }
}

/** An operation stopped by its AbortSignal; `cause` is the signal's reason. */
class SandboxAbortError extends SandboxError {
  constructor(operation = 'operation', reason) {
    super(`Sandbox operation aborted: ${operation}`, 'ABORTED', { operation, reason })
    this.cause = reason
  }
}

class IsolationUnavailableError extends SandboxError {
  constructor(backend, reason) {
    super(`Isolation backend '${backend}' is not available: ${reason}`, 'ISOLATION_UNAVAILABLE')
  }
}

class MountError extends SandboxError {
  constructor(message, mountPath, details) {
    super(message, 'MOUNT_ERROR', { mountPath, ...details })
  }
}

class MountNotSupportedError extends SandboxError {
  constructor(provider) {
    super(`Sandbox provider '${provider}' does not support mounting`, 'MOUNT_NOT_SUPPORTED')
  }
}

class FilesystemNotMountableError extends SandboxError {
  constructor(provider, reason) {
    super(
      reason ? `Filesystem '${provider}' cannot be mounted: ${reason}` : `Filesystem '${provider}' does not support mounting`,
      'FILESYSTEM_NOT_MOUNTABLE',
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
  constructor(message = 'Workspace does not have a sandbox configured') {
    super(message, 'NO_SANDBOX')
  }
}

class SandboxFeatureNotSupportedError extends WorkspaceError {
  constructor(feature) {
    super(`Sandbox does not support ${feature}`, 'FEATURE_NOT_SUPPORTED')
    this.feature = feature
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

/** Marks an error made by `@mastra/core` to stand for one of these classes (see local-filesystem.js). */
const STANDS_FOR = Symbol.for('native-workspace.standsFor')

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

module.exports = {
  STANDS_FOR,
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
