'use strict'
// Native errors arrive as plain Errors with a `code`; these helpers re-create them as the
// public class that code stands for.
const {
  SandboxError,
  SandboxNotReadyError,
  IsolationUnavailableError,
  SandboxOptionError,
  WorkspaceError,
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
const { ModuleLoadError, NativeAddonError } = require('./lazy')

const RETENTION_MESSAGE = 'maxRetainedBytes must be a non-negative integer or Infinity'

/** A bad `maxRetainedBytes` is a RangeError (as in Mastra), with the native code. */
function retentionError() {
  return Object.assign(new RangeError(RETENTION_MESSAGE), { code: 'INVALID_RETENTION' })
}

/**
 * Native codes and the public error each stands for, built from the error's `path` and
 * message. The native message is kept (it already reads like the public class's).
 */
const FROM_CODE = {
  NOT_READY: () => new SandboxNotReadyError(''),
  ISOLATION_UNAVAILABLE: (_path, message) => {
    // The native message names both (see crates/core/src/error.rs); the fields carry them too.
    const [, backend = '', reason = message] = /^Isolation backend '([^']*)' is not available: ([\s\S]*)$/.exec(message) ?? []
    return new IsolationUnavailableError(backend, reason)
  },
  INVALID_OPTION: () => new SandboxOptionError(''),
  READ_ONLY: () => new WorkspaceReadOnlyError(''),
  FILE_NOT_FOUND: (path) => new FileNotFoundError(path),
  DIRECTORY_NOT_FOUND: (path) => new DirectoryNotFoundError(path),
  FILE_EXISTS: (path) => new FileExistsError(path),
  IS_DIRECTORY: (path) => new IsDirectoryError(path),
  NOT_DIRECTORY: (path) => new NotDirectoryError(path),
  DIRECTORY_NOT_EMPTY: (path) => new DirectoryNotEmptyError(path),
  PERMISSION_DENIED: (path) => new PermissionError(path, 'access'),
  FILE_TOO_LARGE: (path) => new FilesystemError('', 'FILE_TOO_LARGE', path),
  // A missing image that could not be pulled: the details `@mastra/docker` gives.
  IMAGE_NOT_FOUND: (_path, message) => {
    const [, image = ''] = /^Failed to pull Docker image '([^']*)'/.exec(message) ?? []
    return new SandboxError('', 'IMAGE_NOT_FOUND', { image, reason: 'image_pull_failed' })
  },
}
// napi's own codes: a value of the wrong type (which argument, napi does not say) …
const NAPI_TYPE_CODES = [
  'InvalidArg', 'ObjectExpected', 'StringExpected', 'NameExpected', 'FunctionExpected', 'NumberExpected',
  'BooleanExpected', 'ArrayExpected', 'BigintExpected', 'DateExpected', 'ArrayBufferExpected',
  'DetachableArraybufferExpected',
]
for (const code of NAPI_TYPE_CODES) FROM_CODE[code] = FROM_CODE.INVALID_OPTION
// … or a failure of the addon itself: a panic caught at its boundary, a failed engine call.
const NAPI_FAILURE_CODES = [
  'GenericFailure', 'PendingException', 'Cancelled', 'EscapeCalledTwice', 'HandleScopeMismatch',
  'CallbackScopeMismatch', 'QueueFull', 'Closing', 'WouldDeadlock', 'NoExternalBuffersAllowed', 'Unknown',
]
for (const code of NAPI_FAILURE_CODES) FROM_CODE[code] = () => new SandboxError('', 'INTERNAL')

/**
 * Whether `err` is one of this package's typed errors, or the error of a part of it that
 * could not be loaded (false for a hostile value).
 */
function isTyped(err) {
  try {
    return (
      [SandboxError, WorkspaceError, FilesystemError, ModuleLoadError, NativeAddonError].some((type) => err instanceof type) ||
      (err instanceof RangeError && err.code === 'INVALID_RETENTION')
    )
  } catch {
    return false
  }
}

/** Maps an error thrown by the native module to the public class for its code. */
function fromNative(err) {
  if (!(err instanceof Error) || typeof err.code !== 'string' || isTyped(err)) return err
  if (err.code === 'INVALID_RETENTION') return retentionError()
  const typed = FROM_CODE[err.code]?.(err.path, err.message) ?? new SandboxError('', err.code)
  typed.message = typed.code === 'INTERNAL' ? `Internal error in native-workspace: ${err.message}` : err.message
  typed.cause = err
  return typed
}

/** Runs `fn` and rethrows native errors as their public classes. */
async function translating(fn) {
  try {
    return await fn()
  } catch (err) {
    throw fromNative(err)
  }
}

function translatingSync(fn) {
  try {
    return fn()
  } catch (err) {
    throw fromNative(err)
  }
}

module.exports = { isTyped, retentionError, fromNative, translating, translatingSync }
