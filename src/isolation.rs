//! Isolation detection: `detectIsolation()` and `isIsolationAvailable()`.

use napi_derive::napi;
use std::path::PathBuf;

use native_workspace_core::CoreError;
use native_workspace_core::isolation::{self, Isolation};

use crate::errors::{ErrorCode, sync_error};

/// What the kernel offers for building sandboxes.
#[napi(object)]
pub struct IsolationCapabilities {
  pub user_namespaces: bool,
  pub seccomp: bool,
  /// Landlock ABI version, when Landlock is enabled.
  pub landlock_abi: Option<u32>,
  #[napi(ts_type = "'v2' | 'hybrid' | 'v1' | 'none'")]
  pub cgroup: String,
}

#[napi(object)]
pub struct SandboxDetectionResult {
  #[napi(ts_type = "'seatbelt' | 'bwrap' | 'none'")]
  pub backend: String,
  pub available: bool,
  pub message: String,
  pub capabilities: IsolationCapabilities,
}

/// The isolation backend native to this platform, and whether it works here (probed by
/// running it, not by finding a binary).
#[napi(catch_unwind)]
pub fn detect_isolation() -> SandboxDetectionResult {
  let d = isolation::detect();
  let c = d.capabilities;
  SandboxDetectionResult {
    backend: d.backend.as_str().to_owned(),
    available: d.available,
    message: d.message,
    capabilities: IsolationCapabilities {
      user_namespaces: c.user_namespaces,
      seccomp: c.seccomp,
      landlock_abi: c.landlock_abi,
      cgroup: c.cgroup.to_owned(),
    },
  }
}

/// Whether `backend` can be used on this machine; `'none'` always can.
#[napi(catch_unwind)]
pub fn is_isolation_available(
  #[napi(ts_arg_type = "'seatbelt' | 'bwrap' | 'none'")] backend: String,
) -> bool {
  Isolation::parse(&backend).is_some_and(isolation::is_available)
}

/// The host uid (and gid) an isolated sandbox's commands run as on a root host: one no
/// account of the host has.
#[napi]
pub const SANDBOX_HOST_UID: u32 = native_workspace_core::isolation::SANDBOX_UID;

/// The workspace paths an isolated sandbox keeps read-only unless told otherwise.
#[napi(catch_unwind)]
pub fn default_protected_paths() -> Vec<String> {
  native_workspace_core::isolation::protect::DEFAULT_PROTECTED_PATHS
    .iter()
    .map(|p| (*p).to_owned())
    .collect()
}

/// Checks a `protectedPaths` list (relative, inside the workspace) and returns it normalised.
#[napi(catch_unwind)]
pub fn check_protected_paths(paths: Vec<String>) -> napi::Result<Vec<String>, ErrorCode> {
  Ok(
    protected_paths_of(&paths)
      .map_err(sync_error)?
      .iter()
      .map(|p| p.to_string_lossy().into_owned())
      .collect(),
  )
}

/// The one reading of a `protectedPaths` option, for sandboxes and filesystems alike.
pub fn protected_paths_of(paths: &[String]) -> Result<Vec<PathBuf>, CoreError> {
  paths
    .iter()
    .map(|p| {
      native_workspace_core::isolation::protect::check_relative(p).map_err(CoreError::InvalidOption)
    })
    .collect()
}
