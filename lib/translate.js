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

const RETENTION_MESSAGE = 'maxRetainedBytes must be a non-negative integer or Infinity'

/**
 * Native codes and the public error each stands for. The native message is kept (it
 * already reads like the public class's), so each builder only picks the class and code.
 */
const FROM_CODE = {
  NOT_READY: () => new SandboxNotReadyError(''),
  ISOLATION_UNAVAILABLE: () => new IsolationUnavailableError('', ''),
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
}
// napi's own codes for arguments of the wrong type.
for (const code of ['InvalidArg', 'NumberExpected', 'StringExpected', 'ObjectExpected', 'FunctionExpected', 'ArrayExpected']) {
  FROM_CODE[code] = FROM_CODE.INVALID_OPTION
}

/** Maps an error thrown by the native module to the public class for its code. */
function fromNative(err) {
  const own = err instanceof SandboxError || err instanceof WorkspaceError || err instanceof FilesystemError
  if (!(err instanceof Error) || typeof err.code !== 'string' || own) return err
  if (err.code === 'INVALID_RETENTION') return new RangeError(RETENTION_MESSAGE)
  const typed = FROM_CODE[err.code]?.(err.path) ?? new SandboxError('', err.code)
  typed.message = err.message
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

module.exports = { RETENTION_MESSAGE, fromNative, translating, translatingSync }
