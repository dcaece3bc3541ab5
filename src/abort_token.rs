//! `NativeAbortToken`: the native end of an `AbortSignal` (the wrapper raises it from the
//! signal's `abort` event), so a command is killed even before its handle reaches JS.

use napi_derive::napi;
use native_workspace_core::process::abort::AbortToken;

#[napi]
#[derive(Default)]
pub struct NativeAbortToken {
  pub(crate) inner: AbortToken,
}

#[napi]
impl NativeAbortToken {
  #[napi(constructor, catch_unwind)]
  pub fn new() -> Self {
    Self::default()
  }

  #[napi(catch_unwind)]
  pub fn abort(&self) {
    self.inner.abort();
  }
}
