//! The core's error type. Every variant maps to one stable `code` string, which the
//! binding turns into the matching JavaScript error class.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
  /// An option has the wrong type or value; the message names the option.
  #[error("{0}")]
  InvalidOption(String),
  /// `maxRetainedBytes` is not a non-negative integer or Infinity (a RangeError in JS).
  #[error("maxRetainedBytes must be a non-negative integer or Infinity")]
  InvalidRetention,
  #[error("Sandbox is not ready: {0}")]
  NotReady(String),
  #[error("Cannot start a destroyed sandbox")]
  Destroyed,
  #[error("Sandbox '{id}' {hook} hook failed: {message}")]
  HookFailed {
    id: String,
    hook: &'static str,
    message: String,
  },
  /// A provider's own start, stop or destroy failed (its message).
  #[error("{0}")]
  ProviderFailed(String),
  /// The container engine cannot be reached (the engine's or the system's message).
  #[error("{0}")]
  EngineUnreachable(String),
  /// The container engine refused or failed a call (its message).
  #[error("{0}")]
  Engine(String),
  /// The engine lacks the image and could not pull it (the engine's message).
  #[error("Failed to pull Docker image '{image}': {message}")]
  ImagePullFailed { image: String, message: String },
  #[error("Isolation backend '{backend}' is not available: {reason}")]
  IsolationUnavailable { backend: String, reason: String },
  #[error("Working directory does not exist: {}", .0.display())]
  CwdNotFound(PathBuf),
  #[error("Working directory is not a directory: {}", .0.display())]
  CwdNotDirectory(PathBuf),
  #[error("Process {pid} has already exited with code {code}")]
  AlreadyExited { pid: String, code: i32 },
  #[error("Process {0} does not have stdin available")]
  NoStdin(String),
  #[error("File not found: {0}")]
  FileNotFound(String),
  #[error("Directory not found: {0}")]
  DirectoryNotFound(String),
  #[error("Path is a directory: {0}")]
  IsDirectory(String),
  #[error("Path is not a directory: {0}")]
  NotDirectory(String),
  #[error("Directory not empty: {0}")]
  DirectoryNotEmpty(String),
  #[error("File already exists: {0}")]
  FileExists(String),
  #[error("File too large: {path} ({size} bytes; at most {limit} bytes can be read at once)")]
  FileTooLarge { path: String, size: u64, limit: u64 },
  #[error("Permission denied: {operation} on {path}")]
  PermissionDenied { path: String, operation: String },
  #[error("Workspace is in read-only mode. Cannot perform: {0}")]
  ReadOnly(String),
  #[error("Failed to start the command: {0}")]
  Spawn(#[source] std::io::Error),
  /// The look at the command's working directory still held its supervisor (a file system
  /// that stopped answering) when the caller gave up on it.
  #[error("The command did not start: its working directory {} did not answer {why}", .cwd.display())]
  NotStarted { cwd: PathBuf, why: GaveUp },
  /// A copy (a checkpoint's capture or seed) stopped at a limit; the message names it.
  #[error("{0}")]
  LimitExceeded(String),
  #[error("{context}: {source}")]
  Io {
    context: String,
    #[source]
    source: std::io::Error,
  },
}

/// Why a command's start was given up before the command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GaveUp {
  /// Its timeout came.
  Timeout(std::time::Duration),
  /// Its abort signal fired, and the command had not started within `grace` after it.
  Abort { grace: std::time::Duration },
}

impl std::fmt::Display for GaveUp {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match self {
      GaveUp::Timeout(timeout) => write!(f, "within its timeout of {} ms", timeout.as_millis()),
      GaveUp::Abort { grace } if grace.is_zero() => f.write_str("before its abort"),
      GaveUp::Abort { grace } => write!(f, "within {} ms of its abort", grace.as_millis()),
    }
  }
}

impl CoreError {
  /// The stable code exposed to JavaScript as `error.code`.
  pub fn code(&self) -> &'static str {
    match self {
      CoreError::InvalidOption(_) => "INVALID_OPTION",
      CoreError::InvalidRetention => "INVALID_RETENTION",
      CoreError::NotReady(_) | CoreError::Destroyed => "NOT_READY",
      CoreError::HookFailed { .. } => "HOOK_FAILED",
      CoreError::ProviderFailed(_) => "PROVIDER_FAILED",
      CoreError::EngineUnreachable(_) => "ENGINE_UNREACHABLE",
      CoreError::Engine(_) => "ENGINE_ERROR",
      CoreError::ImagePullFailed { .. } => "IMAGE_NOT_FOUND",
      CoreError::IsolationUnavailable { .. } => "ISOLATION_UNAVAILABLE",
      CoreError::CwdNotFound(_) => "CWD_NOT_FOUND",
      CoreError::CwdNotDirectory(_) => "CWD_NOT_DIRECTORY",
      CoreError::AlreadyExited { .. } => "PROCESS_EXITED",
      CoreError::NoStdin(_) => "NO_STDIN",
      CoreError::FileNotFound(_) => "FILE_NOT_FOUND",
      CoreError::DirectoryNotFound(_) => "DIRECTORY_NOT_FOUND",
      CoreError::IsDirectory(_) => "IS_DIRECTORY",
      CoreError::NotDirectory(_) => "NOT_DIRECTORY",
      CoreError::DirectoryNotEmpty(_) => "DIRECTORY_NOT_EMPTY",
      CoreError::FileExists(_) => "FILE_EXISTS",
      CoreError::PermissionDenied { .. } => "PERMISSION_DENIED",
      CoreError::FileTooLarge { .. } => "FILE_TOO_LARGE",
      CoreError::ReadOnly(_) => "READ_ONLY",
      CoreError::Spawn(_) | CoreError::NotStarted { .. } => "SPAWN_FAILED",
      CoreError::LimitExceeded(_) => "LIMIT_EXCEEDED",
      CoreError::Io { .. } => "IO_ERROR",
    }
  }

  /// The path a filesystem error is about.
  pub fn path(&self) -> Option<&str> {
    match self {
      CoreError::FileNotFound(p)
      | CoreError::DirectoryNotFound(p)
      | CoreError::IsDirectory(p)
      | CoreError::NotDirectory(p)
      | CoreError::DirectoryNotEmpty(p)
      | CoreError::FileExists(p)
      | CoreError::FileTooLarge { path: p, .. }
      | CoreError::PermissionDenied { path: p, .. } => Some(p),
      _ => None,
    }
  }

  pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
    CoreError::Io {
      context: context.into(),
      source,
    }
  }
}

pub type Result<T, E = CoreError> = std::result::Result<T, E>;
