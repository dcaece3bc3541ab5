//! Isolation detection: `detectIsolation()` and `isIsolationAvailable()`.

use napi_derive::napi;
use native_workspace_core::isolation::{self, Isolation};

#[napi(object)]
pub struct SandboxDetectionResult {
  #[napi(ts_type = "'seatbelt' | 'bwrap' | 'none'")]
  pub backend: String,
  pub available: bool,
  pub message: String,
}

/// The isolation backend native to this platform, and whether it works here (probed by
/// running it, not by finding a binary).
#[napi]
pub fn detect_isolation() -> SandboxDetectionResult {
  let d = isolation::detect();
  SandboxDetectionResult {
    backend: d.backend.as_str().to_owned(),
    available: d.available,
    message: d.message,
  }
}

/// Whether `backend` can be used on this machine; `'none'` always can.
#[napi]
pub fn is_isolation_available(
  #[napi(ts_arg_type = "'seatbelt' | 'bwrap' | 'none'")] backend: String,
) -> bool {
  Isolation::parse(&backend).is_some_and(isolation::is_available)
}
